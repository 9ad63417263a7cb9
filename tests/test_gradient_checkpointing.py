"""Gradient checkpointing gives the same gradients as a plain backward for the SFT loss, the reward model's
Bradley-Terry loss and the GRPO loss (chunked log-probs over the shared-prompt forward, which runs cache-free
under checkpointing), with and without LoRA; and the `true | false | auto` setting."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from cascade_cli.config.build import build_stage_config
from cascade_cli.config.common import LoRAConfig
from cascade_cli.config.grpo import RLVRConfig
from cascade_cli.config.sft import SFTConfig
from cascade_cli.engines.local.ops import grad_checkpointing, lora
from cascade_cli.engines.local.ops.logprobs import response_hidden, token_logprobs
from cascade_cli.engines.local.ops.losses import grpo_loss
from cascade_cli.engines.local.train import grpo
from cascade_cli.engines.local.train.reward_model import bradley_terry_loss
from cascade_cli.engines.local.train.rl_rewards import RewardHook
from cascade_cli.engines.local.train.sft import step_loss
from cascade_cli.engines.local.train.stage import prepare_for_training
from cascade_cli.errors import CascadeUsageError
from cascade_cli.models import loader
from cascade_cli.verifiers.base import Score
from cascade_cli.verifiers.reward_model import load_reward_model, rewards_of
from stage_helpers import bare_stage

SMOLLM2 = Path("/work/models/smollm2-135m")


def gradients(model, loss_fn) -> dict[str, torch.Tensor]:
    model.zero_grad(set_to_none=True)
    loss_fn(model).backward()
    return {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}


def same_gradients(model, loss_fn, atol: float = 1e-6) -> None:
    """The loss's gradients without, then with, checkpointing: equal (up to float reassociation)."""
    model.train()
    plain = gradients(model, loss_fn)
    assert grad_checkpointing.enable(model, "true", tokens=1, device="cpu") and grad_checkpointing.active(model)
    checkpointed = gradients(model, loss_fn)
    model.gradient_checkpointing_disable()
    assert plain.keys() == checkpointed.keys() and plain
    for name, grad in plain.items():
        assert torch.allclose(checkpointed[name], grad, rtol=1e-4, atol=atol), name
    assert any(g.abs().sum() > 0 for g in plain.values())


def sft_loss(model) -> torch.Tensor:
    ids = (torch.arange(48).view(3, 16) * 7 + 3) % model.config.vocab_size
    labels = ids.clone()
    labels[:, :6] = -100  # the prompt carries no loss
    batch = {"input_ids": ids, "labels": labels, "position_ids": None}
    return step_loss(model, batch, normalizer=int((labels[:, 1:] != -100).sum()), device="cpu", bf16=False)


def grpo_micro_batch_loss(model) -> torch.Tensor:
    """GRPO's micro-step: two groups, each prompt shared (one list object) by its responses."""
    short, long = [5, 6, 7], [8, 9, 10, 11, 12, 13]
    prompts = [short, short, short, long, long]
    responses = [[20, 21, 22, 1], [23], [24, 25, 26], [27, 28], [29, 30, 31, 32, 33]]
    hidden, tokens, present = response_hidden(model, prompts, responses, pad=0, device="cpu")
    logprobs, entropy = token_logprobs(hidden, model.get_output_embeddings(), tokens, 0.7, chunk_tokens=4)
    advantages = torch.tensor([1.0, -0.5, -0.5, 0.7, -0.7])
    mask = present.float()
    return grpo_loss(logprobs, mask, advantages, int(mask.sum()), entropy)[0]


@pytest.mark.parametrize("with_lora", [False, True])
def test_sft_loss_gradients_are_the_same(tiny_dir, with_lora):
    model = lora.apply(loader.load_model(tiny_dir), LoRAConfig(r=8 if with_lora else 0))
    same_gradients(model, sft_loss)


@pytest.mark.parametrize("with_lora", [False, True])
def test_reward_model_loss_gradients_are_the_same(tiny_dir, with_lora):
    model, tokenizer = load_reward_model(tiny_dir)
    model = lora.apply(model, LoRAConfig(r=8 if with_lora else 0), keep=("score",))
    seqs = [[5, 6, 7, 8, 9], [5, 6, 10], [11, 12, 13, 14], [11, 15]]

    def loss(m):
        rewards = rewards_of(m, seqs, tokenizer.pad_token_id)
        return bradley_terry_loss(rewards[:2], rewards[2:])

    same_gradients(model, loss)


@pytest.mark.parametrize("with_lora", [False, True])
def test_grpo_loss_gradients_are_the_same_over_the_shared_prompt_forward(tiny_dir, with_lora):
    """Without checkpointing the prompt runs once per group (KV cache); with it, transformers' layers drop the
    cache, so `response_hidden` runs each row whole: the same log-probs and gradients either way."""
    model = lora.apply(loader.load_model(tiny_dir), LoRAConfig(r=8 if with_lora else 0))
    if with_lora:
        for layer in lora.lora_layers(model).values():  # adapters that change the output
            torch.nn.init.normal_(layer.lora_B[lora.ADAPTER].weight, std=0.05)
    same_gradients(model, grpo_micro_batch_loss, atol=1e-5)


@pytest.mark.slow  # ~1 min here: SmolLM2's forward and backward three times
@pytest.mark.skipif(not SMOLLM2.is_dir(), reason="SmolLM2 not converted at /work/models/smollm2-135m")
def test_smollm2_grpo_loss_gradients_are_the_same():
    same_gradients(loader.load_model(SMOLLM2), grpo_micro_batch_loss, atol=1e-5)


def test_auto_turns_on_only_when_activations_would_crowd_the_memory(tiny_dir, capsys):
    model = loader.load_model(tiny_dir)
    memory = grad_checkpointing.memory_bytes("cpu")
    small = 1024
    huge = int(memory / grad_checkpointing.activation_bytes(model, 1)) + 1  # activations over all the memory
    assert not grad_checkpointing.wanted("auto", model, small, "cpu")
    assert grad_checkpointing.wanted("auto", model, huge, "cpu")
    assert "gradient checkpointing on (auto)" in capsys.readouterr().err
    assert grad_checkpointing.wanted("true", model, small, "cpu")
    assert not grad_checkpointing.wanted("false", model, huge, "cpu")
    config = SFTConfig(data="-", gradient_checkpointing="auto")
    prepared = prepare_for_training(model, config, tokens=small)
    assert not prepared.is_gradient_checkpointing
    config = SFTConfig(data="-", gradient_checkpointing="true")
    assert prepare_for_training(model, config, tokens=small).is_gradient_checkpointing


class LetterShare(RewardHook):
    def score(self, records):
        return [Score(reward=sum(c.isalpha() for c in r["response"]) / 10, passed=False) for r in records]


def test_auto_splits_a_grpo_step_into_micro_batches_before_checkpointing(tiny_dir, tmp_path, capsys):
    """Under `auto` the micro-batch halves until its activations fit; only a single row that does not fit
    turns checkpointing on. A GRPO run trains with the micro-batch found (the same gradient, accumulated)."""
    model = loader.load_model(tiny_dir)
    budget = grad_checkpointing.MEMORY_SHARE * grad_checkpointing.memory_bytes("cpu")
    row_tokens = int(budget / grad_checkpointing.activation_bytes(model, 1) / 10)  # 10 such rows fit, 11 not
    assert grad_checkpointing.fitting_micro_batch(model, "auto", 8, row_tokens, "cpu") == 8
    assert grad_checkpointing.fitting_micro_batch(model, "auto", 64, row_tokens, "cpu") == 8
    assert "micro-batches of 8 rows instead of 64" in capsys.readouterr().err
    assert grad_checkpointing.fitting_micro_batch(model, "auto", 64, row_tokens * 100, "cpu") == 1
    assert grad_checkpointing.wanted("auto", model, row_tokens * 100, "cpu")  # one row too big: checkpointing
    assert grad_checkpointing.fitting_micro_batch(model, "false", 64, row_tokens, "cpu") == 64
    assert grad_checkpointing.fitting_micro_batch(model, "true", 64, row_tokens, "cpu") == 64

    rows = [{"id": str(i), "prompt": "Write letters.", "label": None} for i in range(4)]
    config = RLVRConfig(
        domain="math", init=str(tiny_dir), data="-", out=str(tmp_path / "out"), steps=1, prompts_per_step=2,
        group_size=2, max_response_len=row_tokens - 64, max_prompt_len=64, train_micro_batch=64,
    )  # fmt: skip
    run, _ = grpo.build_run(bare_stage(config), rows, LetterShare(), domain="math", mode="no_think")
    run.pool.shutdown()
    assert run.micro_batch == 8 and not run.policy.is_gradient_checkpointing  # the 8 rows fit: no recompute


def test_setting_accepts_yaml_booleans_and_rejects_other_values():
    build = lambda value: build_stage_config(SFTConfig, {"data": "x"}, [f"gradient_checkpointing={value}"])  # noqa: E731
    assert build("true").gradient_checkpointing == "true"
    assert build("False").gradient_checkpointing == "false"
    assert build("auto").gradient_checkpointing == "auto"
    with pytest.raises(CascadeUsageError, match="gradient_checkpointing: expected one of true, false, auto; found 'maybe'"):
        build("maybe")
