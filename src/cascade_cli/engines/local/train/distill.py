"""Multi-domain on-policy distillation on the local engine (Nemotron-Cascade 2 §4.4, MOPD): `cascade distill`.

GRPO's step (grpo_step.train_step) with the reward replaced by teachers, passed to it as an explicit objective
(`mopd_objective`: the loss, rollout log-probs, the warm-up schedule, the domain-mix sampler and the teachers as
frozen models):
  1. prompts    rows of every domain, each rendered in its own mode;
  2. rollouts   the student samples G responses (hf loop over itself, or vLLM with per-token log-probs);
  3. rewards    each rollout scored by its domain's verifier: metrics, and the group advantage that
                `reward_weight` adds (the paper's 0: teachers only);
  4. teachers   each response is routed by its row's `domain` to that domain's teacher, which scores the
                sampled tokens only (chunked log-probs, never the vocabulary) after the prompt as it renders
                it: each teacher reads prompts in its own chat template (`TeacherPrompts`);
  5. update     a_t = sg[log pi_teacher - log pi_student], w_t = sg[r_t] 1[0.5 <= r_t <= 2];
                loss = -mean over tokens of w_t a_t log pi_student (losses.mopd_loss); lr warms up linearly;
  6. sync       as GRPO.
Every log-prob is under the models' own distributions (temperature 1), so a_t is the per-token reverse-KL
estimate. r_t = pi_train / pi_rollout: from vLLM's per-token log-probs; the hf loop samples from the training
module itself, so r_t = 1 there.

Memory: a teacher is its weights once, in the student's weight dtype (fp32 on a CPU: 4 bytes a parameter, bf16
on a GPU: 2), frozen (no gradients, no optimizer state: the student alone costs weights + gradients + AdamW's
two moments, 4x its weights in fp32), plus one micro-batch's forward without a graph while it scores.
Domains that name the same checkpoint share one loaded teacher.
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path
from typing import Any

import torch

from cascade_cli.config.distill import DistillConfig
from cascade_cli.config.grpo import DOMAIN_MODES
from cascade_cli.console import console
from cascade_cli.engines.local.ops.losses import mopd_loss
from cascade_cli.engines.local.ops.optim import linear_warmup
from cascade_cli.engines.local.train import rl_data, rl_rewards
from cascade_cli.engines.local.train.grpo import load_checked_rows, run_grpo
from cascade_cli.engines.local.train.grpo_step import Objective, Run, TrainSequence, sequence_logprobs
from cascade_cli.errors import CascadeUsageError
from cascade_cli.models import loader
from cascade_cli.models.resolve import resolve
from cascade_cli.template_choice import TemplateUse, choose_template
from cascade_cli.verifiers.batch import load_verifier

LINEAGE_PREFIX = "best:"
TEACHER_TEMPLATES_KEY = "teacher_chat_templates"  # in cascade_stage.json: each teacher's template and first prompt


# ---------------------------------------------------------------------------------------------------------
# The loss of one micro-batch
# ---------------------------------------------------------------------------------------------------------


def teacher_logprobs(
    teachers: dict[str, Any], micro: list[TrainSequence], run: Run, width: int, prompts: TeacherPrompts | None = None
) -> torch.Tensor:
    """[B, width] log-probs of each response's tokens under its domain's teacher (0 past a response's end),
    after the prompt as that teacher renders it (`prompts`; None: as the student did)."""
    out = torch.zeros((len(micro), width), dtype=torch.float32, device=run.device)
    for domain in dict.fromkeys(s.domain for s in micro):
        rows = [i for i, s in enumerate(micro) if s.domain == domain]
        sequences = [micro[i] for i in rows]
        if prompts is not None:
            sequences = [dataclasses.replace(s, prompt_ids=prompts.ids(domain, s, run.rows)) for s in sequences]
        logprobs = sequence_logprobs(teachers[domain], sequences, 1.0, run)[0]
        out[rows, : logprobs.shape[1]] = logprobs.float()
    return out


def rollout_logprobs(micro: list[TrainSequence], logprobs: torch.Tensor) -> torch.Tensor:
    """[B, T] the rollout engine's log-probs of the sampled tokens; the training pass's own where the engine
    gave none (the hf loop samples from the training module: r_t = 1)."""
    out = logprobs.detach().clone()
    for row, sequence in enumerate(micro):
        if sequence.rollout_logprobs is not None:
            values = torch.tensor(sequence.rollout_logprobs, dtype=out.dtype, device=out.device)
            out[row, : len(values)] = values
    return out


def mopd_step(
    run: Run, micro: list[TrainSequence], normaliser: int, temperature: float, *, reward_weight: float,
    gate: tuple[float, float], prompts: TeacherPrompts,
) -> dict[str, float]:
    """GRPO's micro_step with MOPD's loss: student, teacher (`run.frozen`, by domain, each after its own
    rendering of the prompt) and rollout log-probs of the sampled tokens."""
    del temperature  # every log-prob is at temperature 1 (the module docstring)
    teachers = run.frozen
    logprobs, entropy, present = sequence_logprobs(run.policy, micro, 1.0, run)
    keep = torch.tensor([float(s.keep) for s in micro], device=run.device)
    mask = present.float() * keep[:, None]
    with torch.no_grad():
        teacher = teacher_logprobs(teachers, micro, run, logprobs.shape[1], prompts)
    advantages = torch.tensor([s.advantage for s in micro], dtype=torch.float32, device=run.device)
    loss, stats = mopd_loss(
        logprobs, teacher, rollout_logprobs(micro, logprobs), mask, normaliser, advantages, reward_weight, gate
    )
    loss.backward()
    # Each teacher's own gap (minus its reverse KL on its domain's samples), averaged over that domain's tokens:
    # the overall mean hides a teacher the student is not getting closer to.
    gap = (teacher - logprobs.detach()) * mask
    for domain in dict.fromkeys(s.domain for s in micro):
        rows = [i for i, s in enumerate(micro) if s.domain == domain]
        stats[f"teacher_advantage_{domain}_sum"] = float(gap[rows].sum())
        stats[f"teacher_advantage_{domain}_tokens"] = float(mask[rows].sum())
    return {"entropy_sum": float((entropy.detach() * mask).sum()), **stats}


# ---------------------------------------------------------------------------------------------------------
# Teachers
# ---------------------------------------------------------------------------------------------------------


def teacher_dirs(config: DistillConfig) -> dict[str, Path]:
    """Domain -> the teacher's checkpoint directory, each checked to exist."""
    if not config.teachers:
        raise CascadeUsageError("teachers: expected at least one DOMAIN=CHECKPOINT, found none")
    dirs = {}
    for domain, spec in config.teachers.items():
        if str(spec).startswith(LINEAGE_PREFIX):
            raise CascadeUsageError(
                f"teachers.{domain}: {spec} names a stage of a recipe run; `cascade recipe run` resolves it "
                "from the run's evaluations (`cascade recipe plan` prints the path): give a checkpoint here"
            )
        dirs[domain] = resolve(str(spec), f"teachers.{domain}")
    return dirs


def check_tokenizers(student: str | Path, dirs: dict[str, Path], tokenizers: dict[str, Any]) -> None:
    """Every teacher (`tokenizers`: each domain's, loaded from `dirs`) reads the student's token ids the same
    way: the same vocabulary, else exit 2."""
    student_vocab = loader.load_tokenizer(student).get_vocab()
    for domain, path in dirs.items():
        vocab = tokenizers[domain].get_vocab()
        if vocab != student_vocab:
            raise CascadeUsageError(
                f"teachers.{domain}: {path} has another tokenizer than the student {student} ({len(vocab)} vs "
                f"{len(student_vocab)} tokens); MOPD compares both models' log-probs of the same token ids"
            )


class TeacherPrompts:
    """Each teacher reads a prompt in its own chat template, whatever the student renders with: the template
    `chat_template: auto` picks for the teacher's checkpoint (template_choice.py), so a teacher cascade trained
    sees cascade's ChatML with the row's mode flag and a stock model its own template and system prompt. A
    teacher's log-probs of the student's tokens are its judgement only in the context it learned in: a
    stock-model student (its own template) taught by a teacher cascade's SFT trained (cascade's) would else be
    scored by that teacher on prompts it never saw. Where a teacher renders as the student does, the ids are
    the student's own."""

    def __init__(self, dirs: dict[str, Path]) -> None:
        # one tokenizer per distinct checkpoint, as load_frozen loads one model per checkpoint
        self.dirs = dirs
        loaded = {path: loader.load_tokenizer(path) for path in dict.fromkeys(dirs.values())}
        self.tokenizers: dict[str, Any] = {domain: loaded[path] for domain, path in dirs.items()}
        self.templates: dict[str, TemplateUse] = {
            domain: choose_template(self.tokenizers[domain], "auto", model_dir=path) for domain, path in dirs.items()
        }
        # (domain, row, mode) -> ids: one list object per prompt, so a group's responses still share one
        # prompt forward (logprobs.response_hidden)
        self.cache: dict[tuple[str, int, str], list[int]] = {}

    def ids(self, domain: str, sequence: TrainSequence, rows: list[dict[str, Any]]) -> list[int]:
        """The prompt ids of `sequence`'s row as `domain`'s teacher renders it."""
        key = (domain, sequence.row_index, sequence.mode)
        if key not in self.cache:
            tokenizer = self.tokenizers[domain]
            text = rl_data.render_row(rows[sequence.row_index], sequence.mode, tokenizer)
            ids = tokenizer.encode(text, add_special_tokens=False)
            self.cache[key] = sequence.prompt_ids if ids == sequence.prompt_ids else ids
        return self.cache[key]

    def record(self, rows: list[dict[str, Any]]) -> dict[str, Any]:
        """cascade_stage.json's `teacher_chat_templates`: each teacher's template and how it reads the first
        row of its domain; each also printed as one line."""
        record = {}
        for domain, use in self.templates.items():
            row = next((r for r in rows if r["domain"] == domain), None)
            first = rl_data.render_row(row, row["mode"], self.tokenizers[domain]) if row else None
            record[domain] = {"teacher": str(self.dirs[domain]), **use.record(first)}
            console.print(f"teacher {domain}: {use.line(self.dirs[domain])}", soft_wrap=True)
        return record


# ---------------------------------------------------------------------------------------------------------
# Entry point
# ---------------------------------------------------------------------------------------------------------


def with_domain_modes(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A row without `mode` gets its domain's RL mode (if: no_think, else think)."""
    return [{**row, "mode": row.get("mode") or DOMAIN_MODES.get(row["domain"], "think")} for row in rows]


def mopd_objective(config: DistillConfig, prompts: TeacherPrompts) -> Objective:
    """MOPD's differences from GRPO, as the objective the step runs: the loss over the teachers (each domain's
    checkpoint, `prompts.dirs`, loaded frozen beside the student, reading prompts as `prompts` renders them), rollout log-probs
    for the importance weight, the lr's linear warm-up and, with `domain_weights`, the domain-mix sampler."""
    return Objective(
        loss_step=functools.partial(
            mopd_step, reward_weight=config.reward_weight, gate=(config.importance_low, config.importance_high),
            prompts=prompts,
        ),
        rollout_logprobs=True,
        lr_schedule=functools.partial(
            linear_warmup, lr=config.lr, start_lr=config.warmup_start_lr, warmup_steps=config.warmup_steps
        ),
        sampler=(
            functools.partial(domain_mix_sampler, weights=config.domain_weights, seed=config.seed)
            if config.domain_weights
            else None
        ),
        frozen=prompts.dirs,
    )


def domain_mix_sampler(rows: list[dict[str, Any]], *, weights: dict[str, float], seed: int) -> rl_data.DomainMixSampler:
    return rl_data.DomainMixSampler([row["domain"] for row in rows], weights, seed)


def run_distill(config: DistillConfig) -> dict[str, Any]:
    """`cascade distill`: the student (`init`) learns each domain from its teacher on its own samples, through
    the stage lifecycle (stage.py; the teachers are inputs like the init: retrained, they refuse a resume)."""
    dirs = teacher_dirs(config)
    options = {domain: dict(config.verifier_options.get(domain) or {}) for domain in dirs}
    try:
        verifiers = {domain: load_verifier(domain, options[domain]) for domain in dirs}
    except KeyError as error:
        raise CascadeUsageError(f"teachers: {error.args[0]}: no verifier for this domain") from None
    except (TypeError, ValueError) as error:
        raise CascadeUsageError(f"verifier_options: not accepted ({error})") from None
    stage, rows, eval_rows = load_checked_rows(config, verifiers)
    if stage.completed is not None:
        return stage.completed
    prompts = TeacherPrompts(dirs)  # each teacher's tokenizer, loaded once for the check and the rendering
    check_tokenizers(stage.init, dirs, prompts.tokenizers)
    rows = with_domain_modes(rows)
    stage.records[TEACHER_TEMPLATES_KEY] = prompts.record(rows)
    reward = rl_rewards.VerifierReward(None, workers=config.verify_workers, options=options)
    return run_grpo(
        stage, reward, domain=None, mode=config.mode or "row", rows=rows,
        eval_rows=with_domain_modes(eval_rows) if eval_rows else None, objective=mopd_objective(config, prompts),
    )
