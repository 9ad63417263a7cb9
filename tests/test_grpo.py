"""GRPO trainer: the loss, advantages, sampler, filters, rewards, CLI, checkpoint and resume."""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path

import pytest
import torch

from cascade_cli.config.grpo import PhaseConfig, RLVRConfig
from cascade_cli.engines.local.ops.logprobs import response_hidden
from cascade_cli.engines.local.ops.losses import group_advantages, grpo_loss, is_uniform, training_rewards
from cascade_cli.engines.local.train import grpo_step
from cascade_cli.engines.local.train.grpo import run_rlvr
from cascade_cli.engines.local.train.rl_data import KeepRate, PromptSampler, prompt_mode
from cascade_cli.jsonl import write_jsonl
from cascade_cli.manifest import read_manifest, read_metrics

sys.path.insert(0, str(Path(__file__).parent))
from test_grpo_support import LetterVerifier, toy_rows, without_timings  # noqa: E402

# conftest.py: one torch thread for the module, `toy_verifier` (the dense toy verifier as `math`), `tiny_dir`.
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def toy_config(tmp_path: Path, tiny_dir: Path, **overrides) -> RLVRConfig:
    overrides.pop("kinds", None)
    train, heldout = tmp_path / "train.jsonl", tmp_path / "heldout.jsonl"
    write_jsonl(train, toy_rows(32, seed=0))
    write_jsonl(heldout, toy_rows(8, seed=1))
    values = dict(
        domain="math",
        init=str(tiny_dir),
        data=str(train),
        out=str(tmp_path / "out"),
        steps=2,
        prompts_per_step=4,
        group_size=4,
        max_response_len=8,
        truncated_reward=None,
        mode="no_think",
        lr=3e-3,
        seed=0,
    )
    values.update(overrides)
    return RLVRConfig(**values)


# ---- the loss --------------------------------------------------------------------------------------------


def per_token(logits: torch.Tensor, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(log-probs, entropy) [B, T] of `tokens` under full [B, T, V] logits: the loss's inputs."""
    logprobs_all = logits.float().log_softmax(-1)
    entropy = -(logprobs_all.exp() * logprobs_all).sum(-1)
    return logprobs_all.gather(-1, tokens[..., None]).squeeze(-1), entropy


def test_loss_is_token_level_reinforce_with_ratio_one():
    torch.manual_seed(0)
    logits = torch.randn(2, 3, 5, requires_grad=True)
    tokens = torch.tensor([[1, 2, 3], [4, 0, 0]])
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    advantages = torch.tensor([0.5, -2.0])
    logprobs, entropy = per_token(logits, tokens)
    loss, stats = grpo_loss(logprobs, mask, advantages, 4, entropy=entropy)
    expected = -(advantages[:, None] * logprobs * mask).sum() / 4  # REINFORCE; every token weighs the same
    assert float(loss.detach()) == pytest.approx(float(-(advantages[:, None] * mask).sum() / 4))  # ratio == 1
    (grad,) = torch.autograd.grad(loss, logits, retain_graph=True)
    (expected_grad,) = torch.autograd.grad(expected, logits)
    assert torch.allclose(grad, expected_grad)
    assert grad[1, 1:].abs().sum() == 0  # masked tokens carry no gradient
    assert stats["entropy_sum"] > 0


def test_loss_k3_kl_and_entropy_bonus():
    torch.manual_seed(1)
    logits = torch.randn(1, 4, 6)
    tokens = torch.tensor([[0, 1, 2, 3]])
    mask = torch.ones(1, 4)
    logprobs, entropy = per_token(logits, tokens)
    base, _ = grpo_loss(logprobs, mask, torch.zeros(1), 4)
    same, stats = grpo_loss(logprobs, mask, torch.zeros(1), 4, ref_logprobs=logprobs, kl_coef=0.5)
    assert float(same) == pytest.approx(float(base)) and stats["kl_sum"] == pytest.approx(0.0, abs=1e-6)
    shifted, stats = grpo_loss(logprobs, mask, torch.zeros(1), 4, ref_logprobs=logprobs - 1.0, kl_coef=0.5)
    k3 = torch.exp(torch.tensor(-1.0)) + 1.0 - 1.0  # exp(r) - r - 1 at r = -1
    assert float(shifted) == pytest.approx(0.5 * float(k3), rel=1e-5)
    with_bonus, _ = grpo_loss(logprobs, mask, torch.zeros(1), 4, entropy=entropy, entropy_coef=0.1)
    entropy = -(logits.log_softmax(-1).exp() * logits.log_softmax(-1)).sum(-1).mean()
    assert float(with_bonus) == pytest.approx(-0.1 * float(entropy), rel=1e-5)


def test_group_advantages_z_score_and_masking():
    advantages = group_advantages([1.0, 0.0, 0.0, 1.0], [True] * 4, eps=1e-6)
    rewards = torch.tensor([1.0, 0.0, 0.0, 1.0])
    expected = (rewards - rewards.mean()) / (rewards.std() + 1e-6)
    assert advantages == pytest.approx(expected.tolist())
    assert group_advantages([1.0, 1.0, 1.0], [True] * 3, 1e-6) == [0.0, 0.0, 0.0]
    masked = group_advantages([1.0, 0.0, 5.0], [True, True, False], 1e-6)
    assert masked[2] == 0.0 and masked[0] == pytest.approx(-masked[1])


def test_truncation_rule_and_dynamic_filter_test():
    truncated = [False, True, False]
    # overlong filtering: the truncated response carries no loss (and gets truncated_reward in the metrics)
    assert training_rewards([0.5, 0.9, 0.1], truncated, True, 0.0) == ([0.5, 0.0, 0.1], [True, False, True])
    # no filtering: it gets truncated_reward (0, a wrong answer), or its score when that is unset
    assert training_rewards([0.5, 0.9, 0.1], truncated, False, 0.0) == ([0.5, 0.0, 0.1], [True, True, True])
    assert training_rewards([0.5, 0.9, 0.1], truncated, False, None)[0] == [0.5, 0.9, 0.1]
    assert is_uniform([1.0, 1.0], [True, True]) and is_uniform([1.0, 0.0], [True, False])
    assert not is_uniform([1.0, 0.0, 1.0], [True, True, False])


def test_shared_prompt_hidden_states_equal_full_sequence_forward_with_gradients(tiny_dir):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_dir, dtype=torch.float32)
    short, long = [5, 6, 7], [8, 9, 10, 11, 12, 13]
    prompts, responses, keep = [short, short, long], [[20, 21, 22, 1], [23], [24, 25]], [1.0, 1.0, 0.0]
    hidden, tokens, present = response_hidden(model, prompts, responses, pad=0, device="cpu")
    logits = model.lm_head(hidden) / 0.7
    mask = present * torch.tensor(keep)[:, None]
    assert mask.tolist() == [[1, 1, 1, 1], [1, 0, 0, 0], [0, 0, 0, 0]]
    (logits * mask[..., None]).sum().backward()
    shared_grad = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad()
    total = 0
    for row, (prompt, response) in enumerate(zip(prompts, responses, strict=True)):
        full = model(input_ids=torch.tensor([prompt + response])).logits[0, len(prompt) - 1 : -1] / 0.7
        assert torch.allclose(logits[row, : len(response)], full, atol=1e-4)
        total = total + full.sum() * keep[row]
    total.backward()
    for name, param in model.named_parameters():
        if name in shared_grad:
            assert torch.allclose(shared_grad[name], param.grad, atol=1e-4), name


def test_responses_with_no_advantage_skip_the_backward_and_leave_the_update_unchanged(tiny_dir, monkeypatch):
    """A group whose answers all scored alike has zero advantages: policy_update does not forward it, and
    the step moves the weights exactly as the full batch would (the normaliser still counts its tokens)."""
    from types import SimpleNamespace

    from transformers import AutoModelForCausalLM

    def completion(ids):
        return SimpleNamespace(token_ids=ids, token_logprobs=None)

    groups = [  # one group with signal, one without
        SimpleNamespace(prompt_ids=[5, 6, 7], row_index=0, mode="think",
                        completions=[completion([20, 21]), completion([22, 23, 24])], advantages=[1.0, -1.0],
                        loss_mask=[True, True]),
        SimpleNamespace(prompt_ids=[8, 9], row_index=1, mode="think", completions=[completion([25]), completion([26, 27])],
                        advantages=[0.0, 0.0], loss_mask=[True, True]),
    ]  # fmt: skip

    original = grpo_step.micro_step

    def update(entropy_coef: float) -> tuple[dict[str, torch.Tensor], list[int]]:
        model = AutoModelForCausalLM.from_pretrained(tiny_dir, dtype=torch.float32)
        before = {n: p.detach().clone() for n, p in model.named_parameters()}
        config = SimpleNamespace(loss_aggregation="token", entropy_coef=entropy_coef, kl_coef=0.0, max_grad_norm=1e9,
                                 logprob_chunk_tokens=0)  # fmt: skip
        run = SimpleNamespace(config=config, policy=model, optimizer=torch.optim.SGD(model.parameters(), lr=1.0),
                              reference=None, objective=grpo_step.Objective(), micro_batch=2, rows=[{"domain": "math"}] * 2,
                              device="cpu", bf16=False, pad_id=0)  # fmt: skip
        seen: list[int] = []
        monkeypatch.setattr(grpo_step, "micro_step", lambda r, micro, *a: seen.extend(len(s.response_ids) for s in micro) or original(r, micro, *a))
        grpo_step.policy_update(run, groups, 1.0)
        return {n: p.detach() - before[n] for n, p in model.named_parameters()}, seen

    skipped, trained_rows = update(entropy_coef=0.0)
    full, all_rows = update(entropy_coef=1e-30)  # an entropy term (negligible) turns the skipping off
    assert trained_rows == [2, 3] and all_rows == [2, 3, 1, 2]
    for name, delta in full.items():
        assert torch.allclose(skipped[name], delta, atol=1e-6), name
    assert any(delta.abs().max() > 0 for delta in skipped.values())


# ---- prompt sampling -------------------------------------------------------------------------------------


def test_sampler_covers_each_epoch_and_resumes_exactly():
    sampler = PromptSampler(10, seed=3)
    first_epoch = [sampler.next() for _ in range(10)]
    assert sorted(first_epoch) == list(range(10))
    state = json.loads(json.dumps(sampler.state()))
    ahead = [sampler.next() for _ in range(15)]
    restored = PromptSampler(10, seed=3)
    restored.load_state(state)
    assert [restored.next() for _ in range(15)] == ahead


def test_epoch_filter_drops_solved_and_unsolved_prompts_and_readds_at_their_rates():
    n = 3000
    sampler = PromptSampler(n, seed=0, epoch_filter=True, hard_p=0.1, easy_p=0.01)
    for _ in range(n):
        index = sampler.next()
        passed = {0: 0, 1: 8}.get(index % 3, 4)  # a third unsolved, a third solved, a third informative
        sampler.record(index, passed, 8)
    sampler.next()  # starts epoch 1
    pool = set(sampler.order)
    hard = sum(1 for i in pool if i % 3 == 0) / (n / 3)
    easy = sum(1 for i in pool if i % 3 == 1) / (n / 3)
    assert sum(1 for i in pool if i % 3 == 2) == n // 3
    assert 0.06 < hard < 0.14 and easy < 0.03
    assert sampler.dropped[str(0)] == "hard" and sampler.dropped[str(1)] == "easy"


def test_prompt_modes():
    row = {"mode": "no_think"}
    assert [prompt_mode("half", row, i) for i in range(4)] == ["think", "no_think", "think", "no_think"]
    assert prompt_mode("row", row, 0) == "no_think" and prompt_mode("think", row, 1) == "think"


# ---- training runs ---------------------------------------------------------------------------------------


def test_rlvr_cli_trains_logs_and_writes_a_checkpoint(tmp_path, tiny_dir, toy_verifier, cli):
    config = toy_config(tmp_path, tiny_dir)
    result = cli(
        [
            "rlvr",
            "--domain",
            "math",
            "--init",
            tiny_dir,
            "--data",
            config.data,
            "--out",
            config.out,
            "--eval-data",
            tmp_path / "heldout.jsonl",
            "steps=2",
            "prompts_per_step=4",
            "group_size=4",
            "max_response_len=8",
            "truncated_reward=null",
            "mode=no_think",
        ]
    )
    assert result.exit_code == 0, result.output
    out = Path(config.out)
    metrics = read_metrics(out)
    assert [m["step"] for m in metrics] == [1, 2]
    for key in (
        "reward_mean",
        "reward_std",
        "pass_rate",
        "groups_filtered_frac",
        "response_len_mean",
        "response_len_max",
        "truncation_ratio",
        "entropy",
        "grad_norm",
        "tokens_per_s",
        "time_generate",
        "time_verify",
        "time_train",
        "time_sync",
    ):
        assert key in metrics[0], key
    assert metrics[0]["grad_norm"] > 0 and 0 < metrics[0]["reward_mean"] < 1
    manifest = read_manifest(out)
    assert manifest["kind"] == "rlvr" and manifest["status"] == "completed"
    assert manifest["config"]["domain"] == "math" and manifest["init"] == str(tiny_dir)
    assert set(manifest["data_fingerprints"]) == {"data", "eval_data"}
    assert {"heldout_accuracy_before", "heldout_accuracy_after"} <= set(manifest["metrics"])
    # each held-out row's before/after beside the checkpoint: the manifest's means are their means
    rows = [json.loads(line) for line in (out / "heldout_rows.jsonl").read_text().splitlines()]
    assert len(rows) == manifest["metrics"]["heldout_n"]
    for key in ("reward_before", "reward_after"):
        mean = sum(row[key] for row in rows) / len(rows)
        assert mean == pytest.approx(manifest["metrics"][f"heldout_reward_{key.split('_')[1]}"])
    assert sum(row["passed_after"] for row in rows) / len(rows) == manifest["metrics"]["heldout_accuracy_after"]
    from transformers import AutoModelForCausalLM

    trained = AutoModelForCausalLM.from_pretrained(out)
    initial = AutoModelForCausalLM.from_pretrained(tiny_dir)
    assert any(not torch.equal(a, b) for a, b in zip(trained.parameters(), initial.parameters(), strict=True))


def test_bad_label_fails_before_training_naming_the_row(tmp_path, tiny_dir, cli):
    rows = [
        {"id": "ok", "domain": "math", "prompt": "1+1?", "label": {"answer": "2"}},
        {"id": "broken", "domain": "math", "prompt": "2+2?", "label": {"solution": 4}},
    ]
    data = tmp_path / "bad.jsonl"
    write_jsonl(data, rows)
    result = cli(["rlvr", "--domain", "math", "--init", tiny_dir, "--data", data, "--out", tmp_path / "out"])
    assert result.exit_code == 2
    assert "bad.jsonl: row 2" in result.output and "broken" in result.output
    assert not (tmp_path / "out" / "metrics.jsonl").exists()


def test_unknown_key_and_domain_are_usage_errors(tmp_path, tiny_dir, cli):
    data = tmp_path / "d.jsonl"
    write_jsonl(data, toy_rows(2))
    result = cli(
        [
            "rlvr",
            "--domain",
            "math",
            "--init",
            tiny_dir,
            "--data",
            data,
            "--out",
            tmp_path / "o",
            "group_sizes=4",
        ]
    )
    assert result.exit_code == 2 and "group_sizes" in result.output
    result = cli(["rlvr", "--domain", "poetry", "--init", tiny_dir, "--data", data, "--out", tmp_path / "o"])
    assert result.exit_code == 2 and "poetry" in result.output


def test_verifier_error_scores_zero_and_the_run_continues(tmp_path, tiny_dir, toy_verifier, capsys):
    config = toy_config(tmp_path, tiny_dir, steps=1)
    rows = toy_rows(4) + [{"id": "explodes", "prompt": "Write boom.", "label": {"answer": "boom"}}]
    write_jsonl(config.data, rows)
    config.prompts_per_step = 5
    summary = run_rlvr(config)
    assert summary["steps"] == 1
    assert read_metrics(config.out)[0]["verify_errors"] == 4  # one group of 4 rollouts
    assert "explodes#0" in capsys.readouterr().err.replace("\n", "")


# The unpatched functions, wrapped by the timing test below (which patches twice).
_GENERATE_GROUPS, _LETTER_VERIFY = grpo_step.generate_groups, LetterVerifier.verify_one


def _generation_and_verification_intervals(config: RLVRConfig, monkeypatch) -> tuple[list, list]:
    """Run `config`, recording the wall-clock interval of every generation chunk and every verifier call."""
    generating, verifying = [], []

    def timed_generate(*args):
        began = time.perf_counter()
        try:
            return _GENERATE_GROUPS(*args)
        finally:
            generating.append((began, time.perf_counter()))

    def slow_verify(self, record):
        began = time.perf_counter()
        time.sleep(0.02)  # a code test's sandbox run, in miniature
        try:
            return _LETTER_VERIFY(self, record)
        finally:
            verifying.append((began, time.perf_counter()))

    monkeypatch.setattr(grpo_step, "generate_groups", timed_generate)
    monkeypatch.setattr(LetterVerifier, "verify_one", slow_verify)
    run_rlvr(config)
    return generating, verifying


def _overlapping(a: list, b: list) -> bool:
    return any(start_a < end_b and start_b < end_a for start_a, end_a in a for start_b, end_b in b)


def test_chunked_rollouts_are_verified_while_the_next_chunk_generates(
    tmp_path, tiny_dir, toy_verifier, monkeypatch
):
    """The paper's asynchronous reward: with `rollout.chunk_prompts`, a chunk's rollouts are scored on the
    reward thread while the next chunk generates; without it, a step generates everything, then scores."""
    chunked = toy_config(tmp_path / "chunked", tiny_dir, steps=1, max_response_len=16)
    chunked.rollout.chunk_prompts = 1
    generating, verifying = _generation_and_verification_intervals(chunked, monkeypatch)
    assert len(generating) == 4 and len(verifying) == 16  # 4 chunks of one prompt x 4 rollouts
    assert _overlapping(generating, verifying)
    assert read_metrics(chunked.out)[0]["time_verify_wait"] < read_metrics(chunked.out)[0]["time_verify"]

    whole = toy_config(tmp_path / "whole", tiny_dir, steps=1, max_response_len=16)
    generating, verifying = _generation_and_verification_intervals(whole, monkeypatch)
    assert len(generating) == 1 and not _overlapping(generating, verifying)


def test_dynamic_filter_drops_uniform_groups_and_refills(tmp_path, tiny_dir, toy_verifier):
    # Half the prompts ask for a letter the tokenizer cannot produce: their groups are all-zero.
    config = toy_config(tmp_path, tiny_dir, steps=1, dynamic_filter=True, dynamic_filter_max_rounds=3)
    rows = toy_rows(16) + [
        {"id": f"never-{i}", "prompt": "Write ☃.", "label": {"answer": "☃"}} for i in range(16)
    ]
    write_jsonl(config.data, rows)
    run_rlvr(config)
    metrics = read_metrics(config.out)[0]
    assert metrics["groups_filtered_frac"] > 0
    assert metrics["zero_std_groups_frac"] == 0.0  # what is trained on carries signal
    # Rollout statistics cover every sampled group, the dropped ones included.
    assert metrics["groups_sampled"] > metrics["groups"] == config.prompts_per_step
    assert metrics["generation_rounds"] > 1
    with_signal = metrics["groups_sampled"] * (1 - metrics["groups_filtered_frac"])
    assert with_signal >= metrics["groups"] - 1e-9  # a surplus of groups with signal is not trained on
    assert metrics["response_len_mean"] > 0


def test_keep_rate_sizes_each_round():
    rate = KeepRate()
    assert rate.draws(8, 4.0) == 8  # nothing seen yet: exactly what is missing
    rate.record(16, 4)  # a quarter kept
    assert rate.draws(8, 4.0) == math.ceil(8 * 17 / 5)
    assert rate.draws(8, 1.0) == 8  # oversampling off
    rate.record(16, 16)  # the policy changed: the last round weighs twice the one before
    assert rate.draws(8, 4.0) == math.ceil(8 / ((2 + 16 + 1) / (8 + 16 + 1)))
    rate.record(100, 0)
    assert rate.draws(8, 4.0) == 32  # capped at 4 x missing
    assert rate.draws(1, 1.5) == 1  # never fewer than missing


def test_dynamic_filter_oversampling_needs_fewer_rounds(tmp_path, tiny_dir, toy_verifier):
    rows = toy_rows(16) + [
        {"id": f"never-{i}", "prompt": "Write ☃.", "label": {"answer": "☃"}} for i in range(16)
    ]
    runs = {}
    for factor in (1.0, 4.0):
        config = toy_config(
            tmp_path / str(factor), tiny_dir, steps=4, dynamic_filter=True, dynamic_filter_oversample=factor
        )
        write_jsonl(config.data, rows)
        run_rlvr(config)
        runs[factor] = read_metrics(config.out)
    exact, oversampled = runs[1.0], runs[4.0]
    # Without oversampling a round draws only what is missing, so with over half the groups uniform a step
    # takes several rounds (and may end unfilled after the last); drawing by the kept fraction takes fewer.
    assert [m["groups"] for m in oversampled] == [4] * 4
    assert sum(m["generation_rounds"] for m in oversampled) < sum(m["generation_rounds"] for m in exact)
    assert max(m["groups_sampled"] for m in oversampled[1:]) > 4  # later steps draw more than the batch


def test_overlong_filter_masks_truncated_responses(tmp_path, tiny_dir, toy_verifier):
    # A random model rarely stops within 4 tokens. The same seed gives both runs the same first rollouts.
    masked = toy_config(tmp_path, tiny_dir, steps=1, max_response_len=4, overlong_filter=True)
    run_rlvr(masked)
    masked = read_metrics(masked.out)[0]
    zeroed = toy_config(
        tmp_path,
        tiny_dir,
        steps=1,
        max_response_len=4,
        overlong_filter=False,
        truncated_reward=0.0,
        out=str(tmp_path / "out2"),
    )
    run_rlvr(zeroed)
    zeroed = read_metrics(zeroed.out)[0]
    assert masked["truncation_ratio"] == zeroed["truncation_ratio"] > 0.5
    all_tokens = zeroed["response_len_mean"] * 16
    assert zeroed["loss_tokens"] == pytest.approx(all_tokens)
    assert masked["loss_tokens"] < all_tokens * (1 - masked["truncation_ratio"]) * 4 + 1e-9
    assert zeroed["reward_mean"] < masked["reward_mean"] or masked["reward_mean"] == 0


def test_phases_schedule_length_and_temperature(tmp_path, tiny_dir, toy_verifier):
    config = toy_config(
        tmp_path,
        tiny_dir,
        steps=99,
        phases=[
            PhaseConfig(steps=1, max_response_len=4, temperature=1.2, overlong_filter=True),
            PhaseConfig(steps=1, max_response_len=6, temperature=0.8),
        ],
    )
    run_rlvr(config)
    first, second = read_metrics(config.out)
    assert (first["max_response_len"], first["temperature"], first["phase"]) == (4, 1.2, 0)
    assert (second["max_response_len"], second["temperature"], second["phase"]) == (6, 0.8, 1)
    assert second["response_len_max"] <= 6
    assert first["loss_tokens"] < first["response_len_mean"] * 16  # phase 1 masks truncated responses
    assert second["loss_tokens"] == pytest.approx(second["response_len_mean"] * 16)  # phase 2 does not


def test_resume_after_a_crash_reproduces_the_uninterrupted_run(tmp_path, tiny_dir, toy_verifier, monkeypatch):
    from cascade_cli.engines.local.train import rl_rewards

    settings = dict(steps=4, save_every=2, epoch_filter=True)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    straight = toy_config(tmp_path / "a", tiny_dir, **settings)
    run_rlvr(straight)

    crashing = toy_config(tmp_path / "b", tiny_dir, **settings)
    calls = {"n": 0}
    real_score = rl_rewards.VerifierReward.score

    def score_then_die(self, records):
        calls["n"] += 1
        if calls["n"] == 4:  # during step 4, after the step-2 checkpoint and the step-3 metrics line
            raise KeyboardInterrupt
        return real_score(self, records)

    monkeypatch.setattr(rl_rewards.VerifierReward, "score", score_then_die)
    with pytest.raises(KeyboardInterrupt):
        run_rlvr(crashing)
    assert [m["step"] for m in read_metrics(crashing.out)] == [1, 2, 3]
    monkeypatch.setattr(rl_rewards.VerifierReward, "score", real_score)
    run_rlvr(crashing)

    assert without_timings(read_metrics(crashing.out)) == without_timings(read_metrics(straight.out))
    from transformers import AutoModelForCausalLM

    a = AutoModelForCausalLM.from_pretrained(straight.out).state_dict()
    b = AutoModelForCausalLM.from_pretrained(crashing.out).state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_rewards_rise_on_the_toy_task(tmp_path, tiny_dir, toy_verifier):
    """The learning signal works end to end: 8 steps on the dense toy reward raise it clearly."""
    config = toy_config(
        tmp_path, tiny_dir, steps=8, prompts_per_step=4, group_size=8, max_response_len=8, lr=1e-2, kinds=None
    )
    run_rlvr(config)
    rewards = [m["reward_mean"] for m in read_metrics(config.out)]
    assert sum(rewards[-2:]) / 2 > sum(rewards[:2]) / 2 + 0.15, rewards


def test_zero_advantage_skip_benchmark_compares_the_same_gradient(tmp_path):
    """benchmarks/zero_advantage_skip.py (the skip's performance claim) runs, and both of its sides compute the
    same gradient: the ratio it prints compares equal work."""
    import re
    import subprocess

    script = Path(__file__).resolve().parents[1] / "benchmarks" / "zero_advantage_skip.py"
    result = subprocess.run(
        [sys.executable, str(script), "--model", "tiny", "--prompts", "4", "--group-size", "4", "--response-len", "24",
         "--prompt-len", "12", "--repeats", "1", "--threads", "1"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    found = re.search(r"largest gradient difference (\S+) \(largest gradient (\S+)\)", result.stdout)
    assert found, result.stdout
    difference, largest = float(found.group(1)), float(found.group(2))
    assert largest > 0 and difference <= 1e-5 * largest
