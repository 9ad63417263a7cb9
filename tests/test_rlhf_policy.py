"""`cascade rlhf`: GRPO on reward-model scores (answer after </think>, code-switch penalty, Half-Half modes,
stabiliser keys) through the real GRPO trainer, the real tiny model and a real reward-model checkpoint."""

from __future__ import annotations

import math

import pytest
import torch

from cascade_cli.config.rlhf import RLHFConfig
from cascade_cli.config.structure import structure
from cascade_cli.engines.local.ops.losses import grpo_loss
from cascade_cli.engines.local.train.rlhf import RewardModelReward
from cascade_cli.jsonl import write_jsonl
from cascade_cli.manifest import read_manifest, read_metrics
from cascade_cli.verifiers import reward_model as scoring
from cascade_cli.verifiers.reward_model import apply_code_switch_penalty, zscore_tanh


@pytest.fixture(scope="module")
def rm_dir(tmp_path_factory):
    """A reward-model checkpoint: the tiny model with a fresh `score` head, saved as `rlhf rm` saves it."""
    out = tmp_path_factory.mktemp("rm") / "rm"
    torch.manual_seed(0)
    model, tokenizer = scoring.load_reward_model("tiny", device="cpu")
    torch.nn.init.normal_(model.score.weight, std=1.0)  # spread the scores so differences are visible
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def hook(rm_dir):
    return RewardModelReward(rm_dir, device="cpu")


def record(response: str, prompt: str = "Say hello to Mia.", mode: str = "think") -> dict:
    return {"id": "r", "prompt": prompt, "response": response, "label": None, "domain": "general", "mode": mode,
            "finish_reason": "stop"}


def test_reward_is_rm_score_of_text_after_think(hook):
    scores = hook.score(
        [
            record("<think>\nGreet Mia.\n</think>\n\nHello, Mia!"),
            record("<think>\nSomething else entirely, and longer.\n</think>\n\nHello, Mia!"),
            record("<think>\nGreet Mia.\n</think>\n\nGo away."),
            record("<think>\nGreet Mia. Hello, Mia!"),  # unfinished thinking: the whole response is scored
        ]
    )
    values = [s.reward for s in scores]
    assert values[0] == pytest.approx(values[1], abs=1e-5)  # the thinking does not count
    assert values[0] != pytest.approx(values[2], abs=1e-3)  # the answer does
    model, tokenizer = hook.scorer.model, hook.scorer.tokenizer
    prompt = [{"role": "user", "content": "Say hello to Mia."}]
    whole = scoring.score_texts(model, tokenizer, [scoring.rm_text(prompt, "<think>\nGreet Mia. Hello, Mia!", "think")])[0]
    assert values[3] == pytest.approx(whole, abs=1e-5) and values[3] != pytest.approx(values[0], abs=1e-3)


def test_code_switch_penalty_is_batch_minimum_minus_ten(hook):
    records = [record("Hello, Mia!"), record("Hi Mia."), record("Hello, Mia! 你好米娅，很高兴见到你"),
               record("Go away.")]
    raw = hook.score(records)
    assert [s.details["code_switch"] for s in raw] == [False, False, True, False]
    final = hook.finalize(records, raw)
    lowest = min(s.reward for s in raw)
    assert final[2].reward == pytest.approx(lowest - 10.0)
    assert [s.reward for i, s in enumerate(final) if i != 2] == [s.reward for i, s in enumerate(raw) if i != 2]
    assert apply_code_switch_penalty([1.0, 5.0, 3.0], [False, False, False], 10.0) == [1.0, 5.0, 3.0]
    assert apply_code_switch_penalty([1.0, 5.0, 3.0], [False, True, False], 10.0) == [1.0, -9.0, 3.0]


def test_reward_shaping_key_changes_group_rewards(rm_dir, hook):
    assert hook.shape([1.0, 2.0, 4.0]) == [1.0, 2.0, 4.0]  # default: off
    shaped = RewardModelReward(rm_dir, shaping="zscore_tanh", device="cpu").shape([1.0, 2.0, 4.0])
    z = torch.tensor([1.0, 2.0, 4.0], dtype=torch.float64)
    expected = [math.tanh(float(v)) for v in (z - z.mean()) / (z.std() + 1e-6)]
    assert shaped == pytest.approx(expected) and all(-1 < v < 1 for v in shaped)
    assert zscore_tanh([3.0, 3.0]) == [0.0, 0.0]


def test_sequence_level_aggregation_and_kl_change_the_loss():
    torch.manual_seed(0)
    logits = torch.randn(2, 4, 11, requires_grad=True)
    tokens = torch.randint(0, 11, (2, 4))
    mask = torch.tensor([[1.0, 1, 1, 1], [1, 0, 0, 0]])  # a long and a short response
    advantages = torch.tensor([1.0, -1.0])
    logprobs = logits.log_softmax(-1).gather(-1, tokens[..., None]).squeeze(-1)
    token, _ = grpo_loss(logprobs, mask, advantages, 5)
    sequence, _ = grpo_loss(logprobs, mask, advantages, 2, aggregation="sequence")
    token.backward(retain_graph=True)
    token_grad = logits.grad.clone()
    logits.grad = None
    sequence.backward()
    # Token level: every token weighs 1/5. Sequence level: the short response's one token weighs 1/2.
    assert not torch.allclose(token_grad, logits.grad)
    assert logits.grad[1, 0].abs().sum() > token_grad[1, 0].abs().sum()
    reference = torch.log_softmax(torch.randn(2, 4, 11), -1).gather(-1, tokens[..., None]).squeeze(-1)
    with_kl, stats = grpo_loss(logprobs, mask, advantages, 5, ref_logprobs=reference, kl_coef=1e-3)
    assert stats["kl_sum"] > 0 and float(with_kl.detach()) != pytest.approx(float(token.detach()), abs=1e-9)


def test_rlhf_defaults_follow_the_paper():
    config = RLHFConfig(reward_model="x", data="y")
    assert config.mode == "half" and config.overlong_filter is False and config.truncated_reward is None
    assert config.kl_coef == 0.0 and config.loss_aggregation == "token" and config.reward_shaping == "none"
    assert config.code_switch_penalty and config.code_switch_margin == 10.0


PROMPTS = [{"id": f"g{i}", "domain": "general", "prompt": f"Say hello to {name}.", "mode": "think", "source": "test"}
           for i, name in enumerate(["Mia", "Leo", "Ava", "Noah", "Zoe", "Eli"])]


class RecordingHook(RewardModelReward):
    """The real hook, also keeping what it scored (to check the modes the trainer rendered)."""

    seen: list[dict]

    def score(self, records):
        self.seen.extend(records)
        return super().score(records)


def test_half_half_split_in_a_real_grpo_step(tmp_path, rm_dir):
    from cascade_cli.engines.local.train.grpo import run_grpo
    from cascade_cli.engines.local.train.stage import Stage

    write_jsonl(tmp_path / "prompts.jsonl", PROMPTS)
    config = structure(
        RLHFConfig,
        {"init": "tiny", "reward_model": str(rm_dir), "data": str(tmp_path / "prompts.jsonl"),
         "out": str(tmp_path / "out"), "steps": 1, "prompts_per_step": 4, "group_size": 2,
         "max_response_len": 6},
    )
    hook = RecordingHook(rm_dir, device="cpu")
    hook.seen = []
    run_grpo(Stage.open(config), hook, domain="general", mode=config.mode, rows=PROMPTS)
    modes = [r["mode"] for r in hook.seen]
    assert len(modes) == 8 and modes.count("think") == modes.count("no_think") == 4


def test_cli_rlhf_end_to_end(tmp_path, cli, rm_dir):
    write_jsonl(tmp_path / "prompts.jsonl", PROMPTS[:4])
    write_jsonl(tmp_path / "heldout.jsonl", PROMPTS[4:])
    args = ["rlhf", "--init", "tiny", "--reward-model", rm_dir, "--data", tmp_path / "prompts.jsonl",
            "--eval-data", tmp_path / "heldout.jsonl", "--out", tmp_path / "out", "steps=2",
            "prompts_per_step=2", "group_size=2", "max_response_len=6", "reward_shaping=zscore_tanh",
            "loss_aggregation=sequence", "kl_coef=1e-3"]
    result = cli(args)
    assert result.exit_code == 0, result.output
    manifest = read_manifest(tmp_path / "out")
    assert manifest["kind"] == "rlhf" and manifest["config"]["reward_model"] == str(rm_dir)
    assert manifest["config"]["kl_coef"] == 1e-3 and manifest["config"]["loss_aggregation"] == "sequence"
    metrics = read_metrics(tmp_path / "out")
    assert len(metrics) == 2 and "kl" in metrics[-1]
    assert {"heldout_reward_before", "heldout_reward_after"} <= set(manifest["metrics"])
    from transformers import AutoModelForCausalLM

    AutoModelForCausalLM.from_pretrained(tmp_path / "out")  # the policy is a plain HF checkpoint

    bad = cli([*args[:9], "--out", tmp_path / "bad", "reward_shaping=sigmoid"])
    assert bad.exit_code == 2 and "reward_shaping" in bad.output
    missing = cli(["rlhf", "--init", "tiny", "--data", tmp_path / "prompts.jsonl", "--out", tmp_path / "m"])
    assert missing.exit_code == 2 and "reward_model" in missing.output
