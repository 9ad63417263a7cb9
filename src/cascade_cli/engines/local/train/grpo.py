"""GRPO on the local engine (Nemotron-Cascade §1.1): `cascade rlvr --domain DOMAIN`; via the reward hook, RLHF.

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
  5. update     one AdamW step on the token-level policy-gradient loss (strictly on-policy: the importance
                ratio is exactly 1, so there is nothing to clip) over chunked per-token log-probs;
  6. sync       the rollout engine gets the new weights; the step's metrics are returned for the log.
The math lives in losses.py (pure functions) and logprobs.py (memory-safe log-probs).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from cascade_cli.config.grpo import DOMAIN_MODES, GRPOConfig, PhaseConfig, RLVRConfig, resolve_phases
from cascade_cli.engines.local.ops import lora, optim, precision
from cascade_cli.engines.local.ops.compute import autocast, bf16_supported
from cascade_cli.engines.local.ops.grad_checkpointing import fitting_micro_batch
from cascade_cli.engines.local.ops.logprobs import response_hidden, token_logprobs
from cascade_cli.engines.local.ops.losses import grpo_loss
from cascade_cli.engines.local.rollout.generation import Generator
from cascade_cli.engines.local.train import heldout, rl_data, rl_records, rl_rewards
from cascade_cli.engines.local.train.if_rm_bonus import with_rm_bonus
from cascade_cli.engines.local.train.rl_data import KeepRate, PromptSampler, prompt_mode, render_row
from cascade_cli.engines.local.train.rl_rewards import Group, RewardHook
from cascade_cli.engines.local.train.stage import Stage
from cascade_cli.errors import CascadeUsageError
from cascade_cli.progress import Progress
from cascade_cli.records import load_rows, resolve_rows_path
from cascade_cli.verifiers import Score
from cascade_cli.verifiers.batch import load_verifier


@dataclass
class TrainSequence:
    prompt_ids: list[int]  # shared (the same list object) by a group's responses
    response_ids: list[int]
    advantage: float
    keep: bool  # False: carries no loss (overlong-filtered)
    domain: str | None = None  # the row's domain (distill routes it to its teacher)
    rollout_logprobs: list[float] | None = None  # the rollout engine's per-token log-probs (vLLM), else None


@dataclass
class Run:
    """What a GRPO stage trains with, built once by `build_run` and handed to every step."""

    config: GRPOConfig
    init: str  # the resolved init checkpoint directory
    domain: str | None  # None: each row's own `domain` (distill)
    mode: str
    phases: list[PhaseConfig]
    rows: list[dict[str, Any]]
    eval_rows: list[dict[str, Any]]
    reward: RewardHook
    tokenizer: Any
    pad_id: int
    device: str
    policy: Any
    reference: Any  # frozen initial policy (kl_coef > 0), else None
    optimizer: torch.optim.Optimizer
    sampler: PromptSampler
    keep_rate: KeepRate = field(default_factory=KeepRate)  # dynamic filtering: sizes each generation round
    micro_batch: int = 32  # rows per forward/backward: train_micro_batch, or fewer (gradient_checkpointing: auto)
    generator: Generator | None = None
    bf16: bool = False  # training pass under bf16 autocast over fp32 weights (precision.py: `dtype: auto`)
    # What another objective on this machinery plugs in (distill.py): the loss over one micro-batch
    # (None: GRPO's `micro_step`), per-token log-probs from the rollout engine, the lr of each step (None:
    # config.lr throughout).
    loss_step: Callable[[Run, list[TrainSequence], int, float], dict[str, float]] | None = None
    rollout_logprobs: bool = False
    lr_schedule: Callable[[int], float] | None = None
    pool: ThreadPoolExecutor = field(default_factory=lambda: ThreadPoolExecutor(1, thread_name_prefix="reward"))
    sampled: list[Group] = field(default_factory=list)  # the last step's groups (its logged rollouts)


# ---------------------------------------------------------------------------------------------------------
# One step
# ---------------------------------------------------------------------------------------------------------


def train_step(run: Run, step: int) -> dict[str, Any]:
    """Step `step + 1`: prompts -> rollouts -> rewards -> advantages and filters -> update -> sync -> metrics."""
    config, began = run.config, time.perf_counter()
    phase_index, phase = rl_data.phase_at(run.phases, step)
    if run.lr_schedule is not None:
        for param_group in run.optimizer.param_groups:
            param_group["lr"] = run.lr_schedule(step)
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
    run.sampled = sampled
    return rl_records.step_metrics(run, phase_index, phase, sampled, kept, rounds, update, timer, began)


def generate_groups(run: Run, indices: list[int], positions: list[int], phase: PhaseConfig) -> list[Group]:
    modes = [prompt_mode(run.mode, run.rows[i], p) for i, p in zip(indices, positions, strict=True)]
    prompts = [render_row(run.rows[i], m, run.tokenizer) for i, m in zip(indices, modes, strict=True)]
    outputs = run.generator.generate(
        prompts, n=run.config.group_size, max_new_tokens=phase.max_response_len, temperature=phase.temperature,
        top_p=run.config.top_p, top_k=run.config.top_k, logprobs=run.rollout_logprobs,
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
        TrainSequence(g.prompt_ids, c.token_ids, a, m, run.rows[g.row_index].get("domain"), c.token_logprobs)
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
        pure_policy_gradient = run.loss_step is None and run.reference is None and not config.entropy_coef
        trained = [s for s in batch if s.keep and s.advantage != 0.0] if pure_policy_gradient else batch
        for start in range(0, len(trained), run.micro_batch):
            stats = (run.loss_step or micro_step)(run, trained[start : start + run.micro_batch], normaliser, temperature)
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


# ---------------------------------------------------------------------------------------------------------
# Setup (the lifecycle around it: stage.py)
# ---------------------------------------------------------------------------------------------------------


def build_run(
    config: GRPOConfig,
    rows: list[dict[str, Any]],
    reward: RewardHook,
    *,
    domain: str | None,
    mode: str,
    eval_rows: list[dict[str, Any]] | None,
    stage: Stage | None = None,
) -> Run:
    """Policy, frozen reference, optimizer and prompt sampler, seeded by `config.seed` (no generator yet).
    `stage`: the lifecycle this run trains in (default: `Stage.bare`, an init and no OUT)."""
    stage = stage or Stage.bare(config)
    device = stage.setup()
    tokenizer = stage.load_tokenizer()
    policy = stage.load_model(dtype=precision.weight_dtype(config.dtype, device))
    params = sum(p.numel() for p in policy.parameters())  # the base model's size (before any adapters)
    limit = config.max_prompt_len
    rows, longest_prompt = rl_data.fit_prompts(rows, config.data, mode, tokenizer, limit)
    stage.rendered(rl_data.render_row(rows[0], rl_data.prompt_mode(mode, rows[0], 0), tokenizer))
    eval_rows = rl_data.fit_prompts(eval_rows, config.eval_data, mode, tokenizer, limit)[0] if eval_rows else []
    longest_response = max(p.max_response_len for p in resolve_phases(config))
    # a group's rows share one forward of its prompt (logprobs.response_hidden): a row's share of the tokens
    row_tokens = longest_response + -(-longest_prompt // config.group_size)
    micro_batch = fitting_micro_batch(policy, config.gradient_checkpointing, config.train_micro_batch, row_tokens, device)
    policy = stage.prepare_for_training(policy, tokens=micro_batch * row_tokens)  # LoRA, checkpointing
    policy.train()
    reference = lora.frozen_reference(policy) if config.kl_coef > 0 else None
    # no decay on norms and biases; under LoRA only the adapters train
    optimizer = optim.adamw(policy, config.lr, (config.beta1, config.beta2), config.weight_decay)
    sampler = PromptSampler(
        len(rows), config.seed, config.epoch_filter, config.epoch_filter_hard_p, config.epoch_filter_easy_p
    )
    return Run(
        config=config, init=str(stage.init), domain=domain, mode=mode, phases=resolve_phases(config), rows=rows,
        eval_rows=eval_rows, reward=reward, tokenizer=tokenizer, device=device, pad_id=tokenizer.pad_token_id,
        policy=policy, reference=reference, optimizer=optimizer, sampler=sampler, micro_batch=micro_batch,
        bf16=precision.autocast_bf16(config.dtype, device, params, bf16_supported(device)),
    )


def evaluate(run: Run) -> dict[str, Any]:
    """Greedy held-out accuracy and mean reward of the current policy (the one held-out path, heldout.py)."""
    config = run.config
    rows = heldout.limit_rows(run.eval_rows, config.eval_limit, run.domain)
    return heldout.evaluate(
        run.generator, run.tokenizer, rows, mode=run.mode, domain=run.domain, reward=run.reward,
        max_new_tokens=config.eval_max_new_tokens or run.phases[-1].max_response_len,
    )


# ---------------------------------------------------------------------------------------------------------
# The loop and the entry points
# ---------------------------------------------------------------------------------------------------------


def state_extra(run: Run, eval_before: dict | None) -> dict[str, Any]:
    """What trainer_state/ holds beside the policy, optimizer and global RNGs: the generator's RNG, the
    prompt sampler, the kept fraction and the held-out metrics before training."""
    return {
        "sampler": run.sampler.state(),
        "generator_rng": run.generator.rng_state(),
        "keep_rate": asdict(run.keep_rate),
        "eval_before": eval_before,
    }


def train(stage: Stage, run: Run) -> dict[str, Any]:
    """Steps from `stage.begin` to the end of the schedule; the final checkpoint; the summary."""
    config, step, eval_before = run.config, stage.begin.step, stage.begin.extra.get("eval_before")
    started, total_steps = time.perf_counter(), sum(phase.steps for phase in run.phases)
    if run.eval_rows and eval_before is None:
        eval_before = evaluate(run)
    metrics_log = stage.metrics_log()
    last: dict[str, Any] = {}
    with Progress(config.name or config.kind, total_steps, done=step, line_per_update=True) as progress:
        while step < total_steps:
            last = train_step(run, step)
            step += 1
            metrics_log.log(step, last)
            if config.log_rollouts:
                metrics_log.table(step, "rollouts", rl_records.sampled_rollouts(run, run.sampled, step))
            progress.update(
                done=step,
                note=(
                    f"reward {last['reward_mean']:.3f} pass {last['pass_rate']:.2f} "
                    f"len {last['response_len_mean']:.0f} trunc {last['truncation_ratio']:.2f} "
                    f"filtered {last['groups_filtered_frac']:.2f} {last['tokens_per_s']:.0f} tok/s"
                ),
            )
            if config.save_every and step % config.save_every == 0 and step < total_steps:
                stage.save_state(step, run.policy, run.optimizer, extra=state_extra(run, eval_before))
    metrics_log.close()
    run.pool.shutdown(wait=True)
    stage.save_last_state(step, total_steps, run.policy, run.optimizer, extra=state_extra(run, eval_before))
    stage.save_final(run.policy, run.tokenizer)
    summary: dict[str, Any] = {"steps": step, **{f"final_{k}": v for k, v in last.items()}}
    if run.eval_rows and eval_before is not None:
        after = evaluate(run)
        for key in (key for key in after if key not in ("n", "rows")):  # accuracy, reward[, accuracy_DOMAIN]
            summary[f"heldout_{key}_before"], summary[f"heldout_{key}_after"] = eval_before[key], after[key]
        summary["heldout_n"] = after["n"]
        if "rows" in eval_before:
            rl_records.write_heldout_rows(Path(config.out) / rl_records.HELDOUT_ROWS, eval_before["rows"], after["rows"])
    summary["wall_s"] = time.perf_counter() - started
    run.generator.close()
    return summary


def input_files(config: GRPOConfig) -> dict[str, Path]:
    """Every file the stage reads, by name (`data`, `eval_data`; a list of files, as distill takes: `data.0`,
    `data.1`, ...); held-out files by the one rule of heldout.py, never a file the stage trains on."""
    data = named_paths("data", config.data, resolve_rows_path)
    evals = named_paths("eval_data", config.eval_data, lambda path: heldout.heldout_file(path, "eval_data", *data.values()))
    return {**data, **evals}


def named_paths(key: str, value: Any, resolve: Callable[[Any], Any] = str) -> dict[str, Any]:
    if not value:
        return {}
    if isinstance(value, (str, Path)):
        return {key: resolve(value)}
    return {f"{key}.{index}": resolve(path) for index, path in enumerate(value)}


def load_checked_rows(config: GRPOConfig, verifier: Any) -> tuple[Stage, list[dict[str, Any]], list[dict[str, Any]] | None]:
    """Every training and held-out row, checked (`verifier`: the labels too; a dict: per domain) before OUT is
    touched; then the stage."""
    rows: dict[str, list[dict[str, Any]]] = {"data": [], "eval_data": []}
    for name, path in input_files(config).items():
        part = load_rows(path)
        rl_data.check_rows(part, verifier, path)
        rows[name.split(".")[0]] += part
    return open_stage(config), rows["data"], rows["eval_data"] or None


def open_stage(config: GRPOConfig) -> Stage:
    """The lifecycle on the inputs as the config names them (a folder's fingerprint covers its heldout.jsonl)."""
    return Stage.open(config, **named_paths("data", config.data), **named_paths("eval_data", config.eval_data))


def run_grpo(
    config: GRPOConfig,
    reward: RewardHook,
    *,
    domain: str | None,
    mode: str,
    rows: list[dict[str, Any]],
    eval_rows: list[dict[str, Any]] | None = None,
    stage: Stage | None = None,
    setup: Callable[[Run], None] | None = None,
) -> dict[str, Any]:
    """Train one GRPO stage with any reward hook and write the checkpoint directory + manifest, through the
    one stage lifecycle (stage.py; `stage`: already opened by the caller). `setup` adapts the built run
    before anything trains (distill.py: teachers, loss, lr schedule)."""
    stage = stage or open_stage(config)
    if stage.completed is not None:
        reward.close()
        return stage.completed
    try:
        run = build_run(config, rows, reward, domain=domain, mode=mode, eval_rows=eval_rows, stage=stage)
        if setup is not None:
            setup(run)
        if stage.begin.resumed:
            stage.load_state(run.policy, run.optimizer)
            run.sampler.load_state(stage.begin.extra["sampler"])
            run.keep_rate = KeepRate(**stage.begin.extra.get("keep_rate", {}))
        run.generator = Generator.for_policy(
            run.policy, run.tokenizer, run.init, backend=config.rollout.backend, seed=config.seed,
            max_batch_size=config.rollout.max_batch_size, vllm_dtype=config.rollout.dtype,
            planned_tokens=precision.planned_rollout_tokens(config, run.phases),
        )
        run.generator.set_rng_state(stage.begin.extra.get("generator_rng"))
        stage.record("running", wall_s=0.0)
        summary = train(stage, run)
    finally:
        reward.close()
    return stage.complete(summary, wall_s=summary["wall_s"])


def run_rlvr(config: RLVRConfig) -> dict[str, Any]:
    """`cascade rlvr --domain DOMAIN`: GRPO with the domain's verifier as the reward, or the user's function
    (`reward_func`: the rows need a prompt, their labels are its to read); the config's checks have run."""
    mode = config.mode or DOMAIN_MODES[config.domain]
    options = dict(config.verifier_options)
    try:
        verifier = None if config.reward_func else load_verifier(config.domain, options)  # the instance scoring uses
    except (TypeError, ValueError) as error:
        raise CascadeUsageError(f"verifier_options: not accepted by the {config.domain} verifier ({error})") from None
    stage, rows, eval_rows = load_checked_rows(config, verifier)
    if stage.completed is not None:
        return stage.completed
    reward: RewardHook = (
        rl_rewards.FuncReward(
            config.reward_func, stage.load_tokenizer(), config.reward_func_isolation, config.reward_func_timeout_s
        )
        if config.reward_func
        else rl_rewards.VerifierReward(config.domain, workers=config.verify_workers, options=options)
    )
    # IF-RL's reward-model bonus: the RLHF reward model on the policy's device (if_rm_bonus.py)
    hook, setup = with_rm_bonus(config, reward) if config.if_rm_bonus else (reward, None)
    return run_grpo(config, hook, domain=config.domain, mode=mode, rows=rows, eval_rows=eval_rows, stage=stage, setup=setup)
