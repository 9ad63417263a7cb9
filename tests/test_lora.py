"""LoRA in the local trainers: a step trains only the adapters (and the RM's score head), the merged
checkpoint is a plain HF model with the adapted model's logits, GRPO's KL reference is the base with adapters
off, the CLI trains with `lora.r=8` in every trainer, and a killed LoRA run resumes exactly."""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from cascade_cli.config.common import LoRAConfig
from cascade_cli.config.sft import SFTConfig
from cascade_cli.engines.local.ops import lora, optim
from cascade_cli.engines.local.train import trainer_state as checkpoint
from cascade_cli.engines.local.train.reward_model import bradley_terry_loss
from cascade_cli.engines.local.train.stage import prepare_for_training
from cascade_cli.manifest import read_manifest
from cascade_cli.models import loader
from cascade_cli.models.loader import SCORE_HEAD
from cascade_cli.models.resolve import resolve_model
from cascade_cli.verifiers.reward_model import load_reward_model, rewards_of

sys.path.insert(0, str(Path(__file__).parent))
from test_grpo_support import LetterVerifier, toy_rows  # noqa: E402,F401
from test_resume import cascade, commands, metrics, setup, weights  # noqa: E402,F401

SMOLLM2 = Path("/work/models/smollm2-135m")
ADAPTER_FILES = ("adapter_config.json", "adapter_model.safetensors", "adapter_model.bin")


def lora_model(init, r: int = 8):
    model = loader.load_model(init)
    return lora.apply(model, LoRAConfig(r=r, alpha=16))


def sft_step(model, lr: float = 1e-2) -> None:
    """One AdamW step on a next-token loss over a fixed batch (what the trainers do, minus the data)."""
    optimizer = optim.adamw(model, lr, (0.9, 0.95), 0.0)
    ids = torch.arange(3, 35).view(2, 16) % model.config.vocab_size
    loss = torch.nn.functional.cross_entropy(model(input_ids=ids).logits[:, :-1].flatten(0, 1), ids[:, 1:].flatten())
    loss.backward()
    optimizer.step()


def test_a_lora_step_changes_only_adapter_weights(tiny_dir):
    model = lora_model(tiny_dir)
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    trainable = {name for name, p in model.named_parameters() if p.requires_grad}
    assert trainable and all(".lora_A." in n or ".lora_B." in n for n in trainable)
    sft_step(model)
    for name, param in model.named_parameters():
        if name in trainable:
            continue
        assert torch.equal(param, before[name]), f"base weight {name} changed"
    changed = [n for n in trainable if not torch.equal(dict(model.named_parameters())[n], before[n])]
    assert any(".lora_B." in n for n in changed)  # B starts at zero: a step moves it


def test_merged_checkpoint_is_plain_hf_with_the_adapted_logits(tiny_dir, tmp_path):
    from transformers import AutoModelForCausalLM

    model = lora_model(tiny_dir)
    sft_step(model)
    ids = torch.arange(5, 25).view(1, 20)
    with torch.no_grad():
        adapted = model(input_ids=ids).logits
    checkpoint.save_final(tmp_path, model, loader.load_tokenizer(tiny_dir), safe_serialization=True)
    assert not any((tmp_path / name).exists() for name in ADAPTER_FILES)
    saved = load_file(tmp_path / "model.safetensors")
    assert not any("lora_" in k or "base_layer" in k for k in saved)
    plain = AutoModelForCausalLM.from_pretrained(tmp_path).eval()
    assert saved.keys() == load_file(Path(tiny_dir) / "model.safetensors").keys()
    with torch.no_grad():
        merged = plain(input_ids=ids).logits
    assert torch.allclose(merged, adapted, atol=1e-5)
    assert lora.has_lora(model)  # saving did not merge into (or unwrap) the training model


@pytest.mark.slow  # ~50 s here: two SmolLM2 loads
@pytest.mark.skipif(not SMOLLM2.is_dir(), reason="SmolLM2 not converted at /work/models/smollm2-135m")
def test_merged_smollm2_gives_the_adapted_logits(tmp_path):
    model = lora_model(SMOLLM2, r=4)
    for layer in lora.lora_layers(model).values():  # a non-zero adapter without a (slow) training step
        torch.nn.init.normal_(layer.lora_B[lora.ADAPTER].weight, std=0.02)
    ids = torch.arange(100, 140).view(1, 40)
    plain = loader.load_model(SMOLLM2)
    with torch.no_grad():
        adapted, initial = model(input_ids=ids).logits, plain(input_ids=ids).logits
        plain.load_state_dict(lora.merged_state_dict(model))
        merged = plain(input_ids=ids).logits
    assert not torch.allclose(initial, adapted, atol=1e-3)
    assert torch.allclose(merged, adapted, atol=1e-4)


def test_reward_model_lora_trains_the_score_head_and_saves_it_merged(tiny_dir, tmp_path):
    from transformers import AutoModelForSequenceClassification

    model, tokenizer = load_reward_model(tiny_dir)
    head_before = getattr(model, SCORE_HEAD).weight.detach().clone()
    config = SFTConfig(data="-", lora=LoRAConfig(r=8), gradient_checkpointing="false")
    model = prepare_for_training(model, config, tokens=64, keep=(SCORE_HEAD,))
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert f"{SCORE_HEAD}.modules_to_save.default.weight" in trainable
    base_before = {n: p.detach().clone() for n, p in model.named_parameters() if n not in trainable}
    optimizer = optim.adamw(model, 1e-2, (0.9, 0.95), 0.0)
    seqs = [[5, 6, 7, 8], [5, 6, 9], [10, 11, 12], [10, 13]]
    rewards = rewards_of(model, seqs, tokenizer.pad_token_id)
    bradley_terry_loss(rewards[:2], rewards[2:]).backward()
    optimizer.step()
    assert all(torch.equal(p, base_before[n]) for n, p in model.named_parameters() if n in base_before)
    with torch.no_grad():
        scores = rewards_of(model.eval(), seqs, tokenizer.pad_token_id)
    checkpoint.save_final(tmp_path, model, tokenizer, safe_serialization=True)
    plain = AutoModelForSequenceClassification.from_pretrained(tmp_path, num_labels=1).eval()
    assert not torch.equal(plain.score.weight, head_before)  # the trained head, not the original
    with torch.no_grad():
        assert torch.allclose(rewards_of(plain, seqs, tokenizer.pad_token_id), scores, atol=1e-5)


def test_adapters_disabled_is_the_base_model_and_keeps_the_graph(tiny_dir):
    """GRPO's KL reference under LoRA: the policy with adapters off equals the initial model; toggling it
    between the policy's forward and backward leaves the adapters' gradients intact."""
    initial = loader.load_model(tiny_dir).eval()
    model = lora_model(tiny_dir)
    sft_step(model)
    model.train()
    ids = torch.arange(5, 21).view(1, 16)
    logits = model(input_ids=ids).logits
    with torch.no_grad(), lora.adapters_disabled(model):
        reference = model(input_ids=ids).logits
        assert not model.training
    assert model.training and lora.frozen_reference(model) is model
    with torch.no_grad():
        assert torch.allclose(reference, initial(input_ids=ids).logits, atol=1e-6)
        assert not torch.allclose(reference, logits, atol=1e-4)
    logits.sum().backward()
    grads = [p.grad for n, p in model.named_parameters() if ".lora_" in n]
    assert all(g is not None for g in grads) and any(g.abs().sum() > 0 for g in grads)


def test_lora_config_errors_name_the_key(tmp_path, cli):
    base = ["sft", "--init", "tiny", "--data", str(tmp_path / "x.jsonl"), "--out", str(tmp_path / "o")]
    for override, expected in (
        ("lora.r=-1", "lora.r: expected 0 (off) or a positive rank, found -1"),
        ("lora.dropout=1.5", "lora.dropout: expected a number in [0, 1)"),
        ("lora.rank=8", "lora.rank"),
    ):
        result = cli([*base, override])
        assert result.exit_code == 2, result.output
        assert expected in result.output, result.output


# ---- the CLI, every trainer --------------------------------------------------------------------------------


def assert_plain_checkpoint(out: Path, reference: Path, auto_class: str = "AutoModelForCausalLM") -> None:
    import transformers

    assert read_manifest(out)["status"] == "completed"
    assert read_manifest(out)["config"]["lora"]["r"] == 8
    assert not any((out / name).exists() for name in ADAPTER_FILES)
    saved, initial = load_file(out / "model.safetensors"), load_file(reference / "model.safetensors")
    assert not any("lora_" in k or "base_layer" in k or "modules_to_save" in k for k in saved)
    assert any(not torch.equal(saved[k], initial[k]) for k in initial if k in saved)
    getattr(transformers, auto_class).from_pretrained(out)


def test_cli_sft_rm_rlhf_rlvr_distill_train_with_lora_and_write_plain_checkpoints(tmp_path, cli, monkeypatch):
    from cascade_cli import verifiers
    from cascade_cli.data.tiny_tasks import generate
    from cascade_cli.jsonl import write_jsonl

    model = resolve_model("tiny", tmp_path / "models")
    write_jsonl(tmp_path / "sft.jsonl", generate("sft", 16, seed=0))
    write_jsonl(tmp_path / "pref.jsonl", generate("pref", 16, seed=0))
    write_jsonl(tmp_path / "rl.jsonl", toy_rows(16, seed=0))
    monkeypatch.setitem(verifiers._REGISTRY, "math", "test_grpo_support:LetterVerifier")
    monkeypatch.setenv("CASCADE_THREADS", "1")
    common = ["lora.r=8", "lr=1e-2", "gradient_checkpointing=true"]
    grpo = ["steps=2", "prompts_per_step=2", "group_size=4", "max_response_len=8", "kl_coef=0.1", *common]
    runs = {  # (command and options, key=value overrides)
        "sft": (["sft", "--data", tmp_path / "sft.jsonl"], ["max_steps=2", "batch_size=4", *common]),
        "rm": (["rlhf", "rm", "--data", tmp_path / "pref.jsonl"], ["max_steps=2", "batch_size=4", "micro_batch=4",
                                                                    *common]),
        "rlvr": (["rlvr", "--domain", "math", "--data", tmp_path / "rl.jsonl"], ["mode=no_think", *grpo]),
        "rlhf": (["rlhf", "--data", tmp_path / "rl.jsonl", "--reward-model", tmp_path / "rm"], grpo),
        # the SFT output teaches (same tokenizer, other weights); log-probs in chunks of 3 positions
        "distill": (["distill", "--data", tmp_path / "rl.jsonl", "--teachers", f"math={tmp_path / 'sft'}"],
                    ["mode=no_think", "warmup_steps=0", "logprob_chunk_tokens=3", *grpo[:4], *common]),
    }
    for name, (command, overrides) in runs.items():
        result = cli([*map(str, command), "--init", str(model), "--out", str(tmp_path / name), *overrides])
        assert result.exit_code == 0, f"{name}: {result.output}"
        auto_class = "AutoModelForSequenceClassification" if name == "rm" else "AutoModelForCausalLM"
        assert_plain_checkpoint(tmp_path / name, model, auto_class)
    kl = [json.loads(line)["kl"] for line in (tmp_path / "rlvr" / "metrics.jsonl").read_text().splitlines()]
    assert kl[0] == pytest.approx(0.0, abs=1e-6) and kl[1] > 0  # the reference is the base: KL grows from 0
    distilled = [json.loads(line) for line in (tmp_path / "distill" / "metrics.jsonl").read_text().splitlines()]
    assert all(m["teacher_advantage"] != 0 and m["grad_norm"] > 0 for m in distilled)


# ---- exact resume --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("trainer", ["sft", pytest.param("rm", marks=pytest.mark.slow)])
def test_killed_lora_run_resumes_exactly(setup, tmp_path, trainer):  # noqa: F811
    args = [*commands(setup)[trainer], "lora.r=8"]
    straight = cascade(args, tmp_path / "straight")
    assert straight.returncode == 0, straight.stderr[-2000:]
    killed = cascade(args, tmp_path / "killed", kill_at="4")
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    resumed = cascade(args, tmp_path / "killed")
    assert resumed.returncode == 0 and "resuming" in resumed.stderr, resumed.stderr[-2000:]
    assert metrics(tmp_path / "killed") == metrics(tmp_path / "straight")
    expected, found = weights(tmp_path / "straight"), weights(tmp_path / "killed")
    assert expected.keys() == found.keys() and all(found[k].equal(expected[k]) for k in expected)


def test_recipe_defaults_and_overrides_set_nested_lora_keys(tmp_path):
    from cascade_cli.errors import CascadeUsageError
    from cascade_cli.recipe.loader import load_recipe

    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        "model: tiny\n"
        f"run_dir: {tmp_path}/run\n"
        "defaults:\n  lora: {r: 8, alpha: 32}\n  gradient_checkpointing: true\n"
        "stages:\n  a: {kind: sft, data: x.jsonl}\n  b: {kind: reward_model, data: p.jsonl}\n"
    )
    a, b = load_recipe(str(recipe), ["stages.a.lora.r=4"]).stages
    assert (a.config.lora.r, a.config.lora.alpha, b.config.lora.r) == (4, 32, 8)
    assert a.config.gradient_checkpointing == b.config.gradient_checkpointing == "true"
    with pytest.raises(CascadeUsageError, match=r"stages.b.lora.r: expected 0 \(off\) or a positive rank"):
        load_recipe(str(recipe), ["stages.b.lora.r=-2"])


VLLM_SYNC = """
import json, sys
import torch
from cascade_cli.config.common import LoRAConfig
from cascade_cli.engines.local.ops import lora
from cascade_cli.models import loader
from cascade_cli.engines.local.rollout.generation import Generator

if __name__ == "__main__":
    model_dir, prompts = sys.argv[1], ["What is 2+3?", "Name a colour.", "Count to four."]
    torch.manual_seed(0)
    model = lora.apply(loader.load_model(model_dir), LoRAConfig(r=8))
    tokenizer = loader.load_tokenizer(model_dir)

    def perturb():
        for layer in lora.lora_layers(model).values():
            torch.nn.init.normal_(layer.lora_B[lora.ADAPTER].weight, std=0.2)

    def greedy(generator):
        return [g[0].token_ids for g in generator.generate(prompts, max_new_tokens=12, temperature=0.0)]

    hf = Generator.from_model(model, tokenizer)
    perturb()
    engine = Generator.for_policy(model, tokenizer, model_dir, backend="vllm", seed=0, max_batch_size=8)
    first = (greedy(engine), greedy(hf))
    perturb()
    lora.sync_weights(model, engine)  # what every GRPO step does
    second = (greedy(engine), greedy(hf))
    engine.close()
    print(json.dumps({"first": first, "second": second}))
"""


@pytest.mark.slow
@pytest.mark.vllm
def test_vllm_gets_merged_lora_weights_at_start_and_every_sync(tiny_dir, tmp_path):
    import os
    import subprocess
    import textwrap

    from cascade_cli.engines.local.rollout.generation import vllm_available

    if not vllm_available():
        pytest.skip("vllm not installed")
    script = tmp_path / "sync.py"
    script.write_text(textwrap.dedent(VLLM_SYNC))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[1] / "src"),
                                                        os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, str(script), str(tiny_dir)], capture_output=True, text=True, env=env,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    (engine_first, hf_first), (engine_second, hf_second) = got["first"], got["second"]
    prefix = lambda groups: [tokens[:6] for tokens in groups]  # noqa: E731 - later greedy ties may break apart
    assert prefix(engine_first) == prefix(hf_first) and prefix(engine_second) == prefix(hf_second)
    assert prefix(hf_first) != prefix(hf_second)  # the adapters changed what the model says
