"""GRPO on the local engine (Nemotron-Cascade §1.1): `cascade rlvr --domain DOMAIN`; via the reward hook, RLHF;
via the objective, distill. The step itself is grpo_step.py; this module builds what it trains with and runs
the loop inside the stage lifecycle (stage.py).

An entry point reads, top to bottom:
    stage, rows, eval_rows = load_checked_rows(config, verifier)   # rows checked, then the stage opened
    if stage.completed is not None: return stage.completed          # once, here
    reward = ...                                                     # the entry point's reward hook
    return run_grpo(stage, reward, domain=..., mode=..., rows=rows, eval_rows=eval_rows[, objective=...])
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from cascade_cli.config.grpo import DOMAIN_MODES, GRPOConfig, RLVRConfig, resolve_phases
from cascade_cli.engines.local.ops import lora, optim, precision
from cascade_cli.engines.local.ops.grad_checkpointing import fitting_micro_batch
from cascade_cli.engines.local.rollout.generation import Generator
from cascade_cli.engines.local.train import heldout, rl_data, rl_records, rl_rewards
from cascade_cli.engines.local.train.grpo_step import Objective, Run, TrainSequence, train_step
from cascade_cli.engines.local.train.if_rm_bonus import with_rm_bonus
from cascade_cli.engines.local.train.rl_data import KeepRate, PromptSampler
from cascade_cli.engines.local.train.rl_rewards import RewardHook
from cascade_cli.engines.local.train.stage import Stage
from cascade_cli.errors import CascadeUsageError
from cascade_cli.models import loader
from cascade_cli.models.attention import use_gqa_sdpa
from cascade_cli.models.bf16 import bf16_supported
from cascade_cli.progress import Progress
from cascade_cli.records import load_rows, resolve_rows_path
from cascade_cli.verifiers.batch import load_verifier

__all__ = ["Objective", "Run", "TrainSequence", "build_run", "run_grpo", "run_rlvr", "train", "train_step"]

# ---------------------------------------------------------------------------------------------------------
# Setup (the lifecycle around it: stage.py)
# ---------------------------------------------------------------------------------------------------------


def build_run(
    stage: Stage,
    rows: list[dict[str, Any]],
    reward: RewardHook,
    *,
    domain: str | None,
    mode: str,
    eval_rows: list[dict[str, Any]] | None = None,
    objective: Objective | None = None,
) -> tuple[Run, list[dict[str, Any]]]:
    """Policy, frozen reference, optimizer, prompt sampler and the objective's frozen models, seeded by
    `config.seed` (no generator yet), in `stage` (its init, device and template); returns the run and the
    held-out rows fitted to the prompt length."""
    config, objective = stage.config, objective or Objective()
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
    frozen = load_frozen(objective.frozen, config.dtype, device)
    if frozen:
        use_gqa_sdpa(policy)  # the frozen models' attention kernel (load_model), whatever the rollout backend
    if objective.sampler is not None:
        sampler = objective.sampler(rows)
    run = Run(
        config=config, domain=domain, mode=mode, phases=resolve_phases(config), rows=rows, reward=reward,
        tokenizer=tokenizer, device=device, pad_id=tokenizer.pad_token_id, policy=policy, reference=reference,
        optimizer=optimizer, sampler=sampler, objective=objective, frozen=frozen, micro_batch=micro_batch,
        bf16=precision.autocast_bf16(config.dtype, device, params, bf16_supported(device)),
    )
    return run, eval_rows


def load_frozen(dirs: dict[str, Path], dtype: str, device: str) -> dict[str, Any]:
    """Name -> frozen model in eval mode (one per distinct checkpoint, shared by the names that give it), in
    the policy's weight dtype."""
    loaded: dict[Path, Any] = {}
    for path in dict.fromkeys(dirs.values()):
        weights = str(precision.weight_dtype(dtype, device)).removeprefix("torch.")
        loaded[path] = loader.load_model(path, dtype=weights, device=device).eval().requires_grad_(False)
    return {name: loaded[path] for name, path in dirs.items()}


def start_generator(stage: Stage, run: Run) -> Generator:
    """The rollout engine over the policy (hf: the module itself; vLLM: a copy synced after every step)."""
    config = stage.config
    generator = Generator.for_policy(
        run.policy, run.tokenizer, str(stage.init), backend=config.rollout.backend, seed=config.seed,
        max_batch_size=config.rollout.max_batch_size, vllm_dtype=config.rollout.dtype,
        planned_tokens=precision.planned_rollout_tokens(config, run.phases),
    )
    generator.set_rng_state(stage.begin.extra.get("generator_rng"))
    return generator


def evaluate(run: Run, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Greedy held-out accuracy and mean reward of the current policy (heldout.py's path)."""
    config = run.config
    rows = heldout.limit_rows(rows, config.eval_limit, run.domain)
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


def train(stage: Stage, run: Run, eval_rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Steps from `stage.begin` to the end of the schedule; the final checkpoint; the summary."""
    config, step, eval_before = run.config, stage.begin.step, stage.begin.extra.get("eval_before")
    started, total_steps = time.perf_counter(), sum(phase.steps for phase in run.phases)
    if eval_rows and eval_before is None:
        eval_before = evaluate(run, eval_rows)
    metrics_log = stage.metrics_log()
    last: dict[str, Any] = {}
    with Progress(config.name or config.kind, total_steps, done=step, line_per_update=True) as progress:
        while step < total_steps:
            last, sampled = train_step(run, step)
            step += 1
            metrics_log.log(step, last)
            if config.log_rollouts:
                rollouts = rl_records.sampled_rollouts(
                    sampled, step, rows=run.rows, tokenizer=run.tokenizer, seed=config.seed, count=config.log_rollouts
                )
                metrics_log.table(step, "rollouts", rollouts)
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
    if eval_rows and eval_before is not None:
        after = evaluate(run, eval_rows)
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
    `data.1`, ...); held-out files by heldout.py's rule, never a file the stage trains on."""
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
    touched; then the stage, opened on the inputs as the config names them (a folder's fingerprint covers its
    heldout.jsonl)."""
    rows: dict[str, list[dict[str, Any]]] = {"data": [], "eval_data": []}
    for name, path in input_files(config).items():
        part = load_rows(path)
        rl_data.check_rows(part, verifier, path)
        rows[name.split(".")[0]] += part
    stage = Stage.open(config, **named_paths("data", config.data), **named_paths("eval_data", config.eval_data))
    return stage, rows["data"], rows["eval_data"] or None


def run_grpo(
    stage: Stage,
    reward: RewardHook,
    *,
    domain: str | None,
    mode: str,
    rows: list[dict[str, Any]],
    eval_rows: list[dict[str, Any]] | None = None,
    objective: Objective | None = None,
) -> dict[str, Any]:
    """Train one GRPO-shaped stage in `stage` (opened, and checked not completed, by the entry point) with
    any reward hook and objective; writes the checkpoint directory + manifest through the lifecycle."""
    try:
        run, eval_rows = build_run(stage, rows, reward, domain=domain, mode=mode, eval_rows=eval_rows, objective=objective)
        if stage.begin.resumed:
            stage.load_state(run.policy, run.optimizer)
            run.sampler.load_state(stage.begin.extra["sampler"])
            run.keep_rate = KeepRate(**stage.begin.extra.get("keep_rate", {}))
        run.generator = start_generator(stage, run)
        stage.record("running", wall_s=0.0)
        summary = train(stage, run, eval_rows)
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
            config.reward_func, stage.load_tokenizer(), config.reward_func_isolation, config.reward_func_timeout_s,
            config.reward_func_memory_mb,
        )
        if config.reward_func
        else rl_rewards.VerifierReward(config.domain, workers=config.verify_workers, options=options)
    )
    hook = reward
    if config.if_rm_bonus:  # IF-RL's reward-model bonus: the RLHF reward model on the policy's device
        try:
            hook = with_rm_bonus(config, reward, loader.pick_device())
        except BaseException:
            reward.close()
            raise
    return run_grpo(stage, hook, domain=config.domain, mode=mode, rows=rows, eval_rows=eval_rows)
