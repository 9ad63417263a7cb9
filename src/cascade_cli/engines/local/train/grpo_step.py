"""One GRPO step on the local engine (Nemotron-Cascade §1.1), and what a step trains with (`Run`, `Objective`).

`train_step` is one step, top to bottom:
  1. prompts    take prompts from the sampler, render them in the stage's mode;
  2. rollouts   sample G responses each (hf loop over the policy itself, or in-process vLLM synced after
                every step);
  3. rewards    score them through the reward hook (the verifier registry for RLVR), chunk by chunk in a
                background thread while the next chunk generates; a truncated response gets
                `truncated_reward` and, with overlong filtering, carries no loss;
  4. advantages A = (r - mean(group)) / (std(group) + eps); (optional) drop groups whose rewards are all
                equal and refill from the data (DAPO dynamic filtering), each round drawing the missing
                prompts over the recent fraction of groups kept (rl_data.KeepRate);
  5. update     one AdamW step on the objective's loss: GRPO's token-level policy-gradient loss (strictly
                on-policy: the importance ratio is exactly 1, so there is nothing to clip) over chunked
                per-token log-probs, or another objective's (distill.py: MOPD's);
  6. sync       the rollout engine gets the new weights; the step's metrics are returned for the log.
The math lives in ops/losses.py (pure functions) and ops/logprobs.py (memory-safe log-probs); the setup, the
loop and the entry points in grpo.py.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from cascade_cli.config.grpo import GRPOConfig, PhaseConfig
from cascade_cli.engines.local.ops import lora
from cascade_cli.engines.local.ops.logprobs import response_hidden, token_logprobs
from cascade_cli.engines.local.ops.losses import grpo_loss
from cascade_cli.engines.local.rollout.generation import Generator
from cascade_cli.engines.local.train import rl_data, rl_records, rl_rewards
from cascade_cli.engines.local.train.rl_data import KeepRate, prompt_mode, render_row
from cascade_cli.engines.local.train.rl_rewards import Group, RewardHook
from cascade_cli.models.bf16 import autocast
from cascade_cli.verifiers import Score


@dataclass
class TrainSequence:
    prompt_ids: list[int]  # shared (the same list object) by a group's responses
    response_ids: list[int]
    advantage: float
    keep: bool  # False: carries no loss (overlong-filtered)
    domain: str | None = None  # the row's domain (distill routes it to its teacher)
    rollout_logprobs: list[float] | None = None  # the rollout engine's per-token log-probs (vLLM), else None
    row_index: int | None = None  # the row of `Run.rows` it answers (distill renders it for each teacher)
    mode: str | None = None  # the mode the row's prompt was rendered in


@dataclass(frozen=True)
class Objective:
    """What the step optimises, passed in whole by the entry point: GRPO's by default; distill.py passes MOPD's
    (its loss over the teachers, rollout log-probs, a warm-up schedule, optionally a domain-mix sampler)."""

    # One micro-batch's loss and backward -> its stats; None: GRPO's `micro_step` (which lets a step skip
    # responses whose advantage is zero).
    loss_step: Callable[[Run, list[TrainSequence], int, float], dict[str, float]] | None = None
    rollout_logprobs: bool = False  # ask the rollout engine for per-token log-probs (TrainSequence)
    lr_schedule: Callable[[int], float] | None = None  # the lr of step i; None: config.lr throughout
    sampler: Callable[[list[dict[str, Any]]], Any] | None = None  # the prompt sampler over the rows; None: PromptSampler
    frozen: dict[str, Path] = field(default_factory=dict)  # frozen models the loss reads by name (MOPD's teachers)


@dataclass
class Run:
    """What a step trains with, built once by grpo.build_run and handed to every step."""

    config: GRPOConfig
    domain: str | None  # None: each row's own `domain` (distill)
    mode: str
    phases: list[PhaseConfig]
    rows: list[dict[str, Any]]
    reward: RewardHook
    tokenizer: Any
    pad_id: int
    device: str
    policy: Any
    reference: Any  # frozen initial policy (kl_coef > 0), else None
    optimizer: torch.optim.Optimizer
    sampler: Any  # rl_data.PromptSampler, or the objective's
    objective: Objective = field(default_factory=Objective)
    frozen: dict[str, Any] = field(default_factory=dict)  # the objective's frozen models, loaded, by name
    keep_rate: KeepRate = field(default_factory=KeepRate)  # dynamic filtering: sizes each generation round
    micro_batch: int = 32  # rows per forward/backward: train_micro_batch, or fewer (gradient_checkpointing: auto)
    generator: Generator | None = None
    bf16: bool = False  # training pass under bf16 autocast over fp32 weights (ops/precision.py: `dtype: auto`)
    pool: ThreadPoolExecutor = field(default_factory=lambda: ThreadPoolExecutor(1, thread_name_prefix="reward"))


# ---------------------------------------------------------------------------------------------------------
# One step
# ---------------------------------------------------------------------------------------------------------


def train_step(run: Run, step: int) -> tuple[dict[str, Any], list[Group]]:
    """Step `step + 1`: prompts -> rollouts -> rewards -> advantages and filters -> update -> sync -> metrics;
    returns the metrics and every group the step sampled (its logged rollouts)."""
    config, began = run.config, time.perf_counter()
    phase_index, phase = rl_data.phase_at(run.phases, step)
    if run.objective.lr_schedule is not None:
        for param_group in run.optimizer.param_groups:
            param_group["lr"] = run.objective.lr_schedule(step)
    timer = {"generate": 0.0, "verify": 0.0, "verify_wait": 0.0}
    sampled: list[Group] = []  # every group generated this step, filtered or not
    kept: list[Group] = []  # the groups trained on
    verify_errors = rounds = 0
    max_rounds = config.dynamic_filter_max_rounds if config.dynamic_filter else 1
    while rounds < max_rounds and len(kept) < config.prompts_per_step:
        rounds += 1
        # 1. prompts: a batch position decides the mode of `half`, so positions run on across refills;
        # dynamic filtering draws the missing count over the recent fraction of groups kept
        needed = config.prompts_per_step - len(kept)
        if config.dynamic_filter:
            needed = run.keep_rate.draws(needed, config.dynamic_filter_oversample)
        indices = [run.sampler.next() for _ in range(needed)]
        positions = list(range(len(sampled), len(sampled) + needed))
        # 2-3. rollouts, scored chunk by chunk on the reward thread while the next chunk generates
        groups, records, scores = rollout_round(run, indices, positions, phase, timer)
        verify_errors += rl_rewards.warn_verifier_errors(records, scores, step + 1)
        # 4. training rewards and advantages; dynamic filtering drops groups without signal
        rule = dict(overlong_filter=phase.overlong_filter, truncated_reward=config.truncated_reward)
        groups = rl_rewards.assign_scores(groups, scores, run.reward, **rule, adv_eps=config.adv_eps)
        for group in groups:
            run.sampler.record(group.row_index, sum(s.passed for s in group.scores), len(group.scores))
        signal = [g for g in groups if not (config.dynamic_filter and g.uniform)]
        run.keep_rate.record(len(groups), len(signal))
        sampled += groups
        kept += signal[: config.prompts_per_step - len(kept)]  # a surplus beyond the step's batch is dropped
    # 5. one optimizer step over every kept response
    train_began = time.perf_counter()
    update = {"verify_errors": verify_errors, **policy_update(run, kept, phase.temperature)}
    timer["train"] = time.perf_counter() - train_began
    # 6. weight sync (free for the hf backend: it shares the policy module)
    sync_began = time.perf_counter()
    lora.sync_weights(run.policy, run.generator)
    timer["sync"] = time.perf_counter() - sync_began
    metrics = rl_records.step_metrics(
        phase_index, phase, sampled, kept, rounds, update, timer, began, epoch=run.sampler.epoch,
        lr=run.optimizer.param_groups[0]["lr"], dynamic_filter=config.dynamic_filter,
    )
    return metrics, sampled


def generate_groups(run: Run, indices: list[int], positions: list[int], phase: PhaseConfig) -> list[Group]:
    modes = [prompt_mode(run.mode, run.rows[i], p) for i, p in zip(indices, positions, strict=True)]
    prompts = [render_row(run.rows[i], m, run.tokenizer) for i, m in zip(indices, modes, strict=True)]
    outputs = run.generator.generate(
        prompts, n=run.config.group_size, max_new_tokens=phase.max_response_len, temperature=phase.temperature,
        top_p=run.config.top_p, top_k=run.config.top_k, logprobs=run.objective.rollout_logprobs,
    )
    return [
        Group(i, m, run.tokenizer.encode(p, add_special_tokens=False), out)
        for i, m, p, out in zip(indices, modes, prompts, outputs, strict=True)
    ]


def rollout_round(
    run: Run, indices: list[int], positions: list[int], phase: PhaseConfig, timer: dict[str, float]
) -> tuple[list[Group], list[dict[str, Any]], list[Score]]:
    """Generate the prompts' groups chunk by chunk; each chunk is scored on the reward thread at once."""

    def timed_score(groups: list[Group]) -> list[Score]:
        began = time.perf_counter()
        try:
            return run.reward.score(rl_rewards.group_records(groups, run.rows, run.domain))
        finally:
            timer["verify"] += time.perf_counter() - began

    chunk = run.config.rollout.chunk_prompts if run.reward.overlap else 0
    chunk = chunk or len(indices)
    groups: list[Group] = []
    pending: list[Future[list[Score]]] = []
    for start in range(0, len(indices), chunk):
        began = time.perf_counter()
        part = slice(start, start + chunk)
        chunk_groups = generate_groups(run, indices[part], positions[part], phase)
        timer["generate"] += time.perf_counter() - began
        pending.append(run.pool.submit(timed_score, chunk_groups))
        groups.extend(chunk_groups)
    began = time.perf_counter()
    scores = [s for future in pending for s in future.result()]
    records = rl_rewards.group_records(groups, run.rows, run.domain)
    scores = run.reward.finalize(records, scores)  # batch-level rules (RLHF's code-switch penalty)
    timer["verify_wait"] += time.perf_counter() - began
    return groups, records, scores


def policy_update(run: Run, groups: list[Group], temperature: float) -> dict[str, float]:
    """One optimizer step over every response of the step, micro-batched (gradient accumulation)."""
    config = run.config
    batch = [
        TrainSequence(
            g.prompt_ids, c.token_ids, a, m, run.rows[g.row_index].get("domain"), c.token_logprobs, g.row_index, g.mode
        )
        for g in groups
        for c, a, m in zip(g.completions, g.advantages, g.loss_mask, strict=True)
        if c.token_ids
    ]
    total_tokens = sum(len(s.response_ids) for s in batch if s.keep)
    normaliser = total_tokens if config.loss_aggregation != "sequence" else sum(s.keep for s in batch)
    run.optimizer.zero_grad(set_to_none=True)
    sums = dict.fromkeys(["entropy_sum"] + (["kl_sum"] if run.reference is not None else []), 0.0)
    if total_tokens:
        # GRPO's loss is advantage x log-prob alone unless a KL or entropy term is on: a response with a zero
        # advantage (its group all right or all wrong) or none kept has a zero gradient, so its forward and
        # backward passes are skipped (a weak model's step is mostly such groups). The normaliser still counts
        # it, so the update is the same.
        pure_policy_gradient = run.objective.loss_step is None and run.reference is None and not config.entropy_coef
        trained = [s for s in batch if s.keep and s.advantage != 0.0] if pure_policy_gradient else batch
        for start in range(0, len(trained), run.micro_batch):
            stats = (run.objective.loss_step or micro_step)(run, trained[start : start + run.micro_batch], normaliser, temperature)
            for key, value in stats.items():
                sums[key] = sums.get(key, 0.0) + value
        sums["entropy_tokens"] = sum(len(s.response_ids) for s in trained if s.keep)  # the entropy's own tokens
        if not trained:  # no backward ran: zero gradients, so AdamW steps (momentum, decay) as it would have
            for param in run.policy.parameters():
                if param.requires_grad:
                    param.grad = torch.zeros_like(param)
    grad_norm = torch.nn.utils.clip_grad_norm_(run.policy.parameters(), config.max_grad_norm)
    if total_tokens:
        run.optimizer.step()
    # A micro-step's X_sum is a mean over the step's tokens, or over X_tokens where it gives them (a subset).
    counts = {key.removesuffix("_tokens"): sums.pop(key) for key in [k for k in sums if k.endswith("_tokens")]}
    out = {}  # entropy[, kl, ...]
    for key, value in sums.items():
        name = key.removesuffix("_sum")
        if counts.get(name, total_tokens):  # a mean over no tokens (nothing trained) is left out
            out[name] = value / counts.get(name, total_tokens)
    return {**out, "grad_norm": float(grad_norm), "loss_tokens": total_tokens}


def sequence_logprobs(
    model: Any, micro: list[TrainSequence], temperature: float, run: Run
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(log-probs, entropy, present) [B, R] of the micro-batch's responses under `model`'s sampling law."""
    prompts, responses = [s.prompt_ids for s in micro], [s.response_ids for s in micro]
    chunk, bonus = run.config.logprob_chunk_tokens, bool(run.config.entropy_coef)
    with autocast(run.device, run.bf16):
        hidden, tokens, present = response_hidden(model, prompts, responses, run.pad_id, run.device)
        logprobs, entropy = token_logprobs(
            hidden, model.get_output_embeddings(), tokens, temperature, chunk, bonus, present=present
        )
    return logprobs, entropy, present


def micro_step(run: Run, micro: list[TrainSequence], normaliser: int, temperature: float) -> dict[str, float]:
    config = run.config
    logprobs, entropy, present = sequence_logprobs(run.policy, micro, temperature, run)
    keep = torch.tensor([float(s.keep) for s in micro], device=run.device)
    advantages = torch.tensor([s.advantage for s in micro], dtype=torch.float32, device=run.device)
    ref_logprobs = None
    if run.reference is not None:
        with torch.no_grad(), lora.adapters_disabled(run.reference):
            ref_logprobs = sequence_logprobs(run.reference, micro, temperature, run)[0]
    loss, stats = grpo_loss(
        logprobs, present.float() * keep[:, None], advantages, normaliser, entropy, ref_logprobs,
        kl_coef=config.kl_coef, entropy_coef=config.entropy_coef, aggregation=config.loss_aggregation,
    )
    loss.backward()
    if run.reference is None:
        del stats["kl_sum"]
    return stats
