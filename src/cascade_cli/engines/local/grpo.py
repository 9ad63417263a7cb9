"""GRPO on the local engine (Nemotron-Cascade §1.1): `cascade rlvr --domain DOMAIN` and, via the reward hook,
RLHF.

Each step, top to bottom:
  1. rollouts   take prompts from the sampler, render them in the stage's mode, sample G responses each
                (hf loop over the policy itself, or in-process vLLM synced after every step);
  2. rewards    score them through the reward hook (the verifier registry for RLVR), chunk by chunk in a
                background thread while the next chunk generates; truncated responses are either masked
                out of the loss (overlong filtering) or get reward 0;
  3. filter     (optional) drop groups whose rewards are all equal and refill from the data (DAPO);
  4. advantages A = (r - mean(group)) / (std(group) + eps);
  5. update     one AdamW step on the token-level policy-gradient loss (strictly on-policy: the
                importance ratio is exactly 1, so there is nothing to clip), then sync the rollout engine.
"""

from __future__ import annotations

import copy
import os
import shutil
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf

from cascade_cli.checkpoint import (
    TRAINER_STATE_DIR,
    MetricsLog,
    fingerprint_path,
    require_model_dir,
    write_manifest,
)
from cascade_cli.config.grpo import DOMAIN_MODES, PROMPT_MODES, GRPOConfig, PhaseConfig, RLVRConfig
from cascade_cli.console import console, print_warning
from cascade_cli.engines.local.generation import Completion, Generator
from cascade_cli.engines.local.model_io import configure_threads, quiet_transformers
from cascade_cli.engines.local.rl_data import PromptSampler, check_rows, load_rows, prompt_mode, render_row
from cascade_cli.engines.local.rl_rewards import RewardHook, VerifierReward
from cascade_cli.errors import CascadeUsageError
from cascade_cli.tiny import resolve_model
from cascade_cli.verifiers import Score, get_verifier, known_domains

# ---------------------------------------------------------------------------------------------------------
# The loss
# ---------------------------------------------------------------------------------------------------------


def grpo_loss(
    logits: torch.Tensor,  # [B, T, V] at the positions that predict each response token
    tokens: torch.Tensor,  # [B, T] response tokens
    mask: torch.Tensor,  # [B, T] 1 for tokens that carry loss
    advantages: torch.Tensor,  # [B]
    total_tokens: int,  # token level: response tokens in the whole step; sequence level: responses in it
    ref_logprobs: torch.Tensor | None = None,
    kl_coef: float = 0.0,
    entropy_coef: float = 0.0,
    aggregation: str = "token",
) -> tuple[torch.Tensor, dict[str, float]]:
    def reduce(values: torch.Tensor) -> torch.Tensor:
        if aggregation == "sequence":  # each response's token mean, then a sum over responses
            return ((values * mask).sum(-1) / mask.sum(-1).clamp(min=1)).sum() / total_tokens
        return (values * mask).sum() / total_tokens

    logprobs_all = logits.float().log_softmax(-1)
    logprobs = logprobs_all.gather(-1, tokens[..., None]).squeeze(-1)
    ratio = torch.exp(logprobs - logprobs.detach())  # == 1 on-policy; its gradient is grad(logprobs)
    loss = -reduce(advantages[:, None] * ratio)
    entropy = -(logprobs_all.exp() * logprobs_all).sum(-1)
    if entropy_coef:
        loss = loss - entropy_coef * reduce(entropy)
    kl = torch.zeros(())
    if kl_coef and ref_logprobs is not None:
        log_ratio = ref_logprobs - logprobs
        kl = torch.exp(log_ratio) - log_ratio - 1  # k3 estimator of KL(policy || reference)
        loss = loss + kl_coef * reduce(kl)
        kl = (kl * mask).sum()
    return loss, {"entropy_sum": float((entropy.detach() * mask).sum()), "kl_sum": float(kl.detach())}


# ---------------------------------------------------------------------------------------------------------
# Rollouts and rewards
# ---------------------------------------------------------------------------------------------------------


@dataclass
class Group:
    row_index: int
    mode: str
    prompt_ids: list[int]
    completions: list[Completion]
    scores: list[Score] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    loss_mask: list[bool] = field(default_factory=list)  # False: truncated and overlong-filtered
    advantages: list[float] = field(default_factory=list)

    @property
    def uniform(self) -> bool:
        """All rewards that count are equal (all correct / all wrong): no learning signal."""
        kept = [r for r, m in zip(self.rewards, self.loss_mask, strict=True) if m]
        return len(kept) < 2 or max(kept) == min(kept)


def rollout_records(group: Group, row: dict[str, Any], domain: str) -> list[dict[str, Any]]:
    return [
        {
            "id": f"{row.get('id', group.row_index)}#{j}",
            "prompt": row.get("prompt", row.get("messages")),
            "response": completion.text,
            "label": row.get("label"),
            "domain": domain,
            "mode": group.mode,
            "finish_reason": completion.finish_reason,
        }
        for j, completion in enumerate(group.completions)
    ]


def group_advantages(rewards: list[float], mask: list[bool], eps: float) -> list[float]:
    kept = torch.tensor([r for r, m in zip(rewards, mask, strict=True) if m], dtype=torch.float64)
    if len(kept) < 2:
        return [0.0] * len(rewards)
    mean, std = kept.mean(), kept.std()
    return [float((r - mean) / (std + eps)) if m else 0.0 for r, m in zip(rewards, mask, strict=True)]


def response_logits(
    model: Any,
    micro: list[tuple[list[int], list[int], float, bool]],
    temperature: float,
    pad: int,
    device: str,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Logits [B, R, V] that predict each response token, with the tokens, loss mask and advantages.

    The G responses of a group share their prompt: it runs through the model once (with gradients) and
    its KV cache is gathered for every response, then the responses run on top of it.
    """
    from transformers import DynamicCache

    prompts: list[list[int]] = []
    prompt_of: list[int] = []
    for prompt, *_ in micro:
        if not prompts or prompts[-1] is not prompt:
            prompts.append(prompt)
        prompt_of.append(len(prompts) - 1)
    prompt_width = max(len(p) for p in prompts)
    response_width = max(len(r) for _, r, *_ in micro)
    prompt_ids = torch.full((len(prompts), prompt_width), pad, dtype=torch.long)
    prompt_mask = torch.zeros_like(prompt_ids)
    for row, prompt in enumerate(prompts):  # left padding
        prompt_ids[row, prompt_width - len(prompt) :] = torch.tensor(prompt)
        prompt_mask[row, prompt_width - len(prompt) :] = 1
    tokens = torch.full((len(micro), response_width), pad, dtype=torch.long)
    mask = torch.zeros((len(micro), response_width), dtype=torch.float32)
    response_mask = torch.zeros((len(micro), response_width), dtype=torch.long)
    for row, (_, response, _, keep) in enumerate(micro):  # right padding
        tokens[row, : len(response)] = torch.tensor(response)
        response_mask[row, : len(response)] = 1
        mask[row, : len(response)] = float(keep)
    advantages = torch.tensor([a for *_, a, _ in micro], dtype=torch.float32, device=device)
    index = torch.tensor(prompt_of, device=device)
    prompt_ids, prompt_mask = prompt_ids.to(device), prompt_mask.to(device)
    tokens, mask, response_mask = tokens.to(device), mask.to(device), response_mask.to(device)

    cache = DynamicCache()
    prompt_positions = (prompt_mask.cumsum(-1) - 1).clamp(min=0)
    last = model(
        input_ids=prompt_ids,
        attention_mask=prompt_mask,
        position_ids=prompt_positions,
        past_key_values=cache,
        use_cache=True,
        logits_to_keep=1,
    ).logits
    cache.batch_select_indices(index)
    attention = torch.cat([prompt_mask[index], response_mask], dim=1)
    positions = prompt_positions[index, -1:] + 1 + torch.arange(response_width, device=device)
    if response_width == 1:
        return last[index] / temperature, tokens, mask, advantages
    rest = model(
        input_ids=tokens[:, :-1],
        attention_mask=attention[:, :-1],
        position_ids=positions[:, :-1],
        past_key_values=cache,
        use_cache=True,
    ).logits
    logits = torch.cat([last[index], rest], dim=1) / temperature  # the sampling distribution's logits
    return logits, tokens, mask, advantages


# ---------------------------------------------------------------------------------------------------------
# The trainer
# ---------------------------------------------------------------------------------------------------------


def resolve_phases(config: GRPOConfig) -> list[PhaseConfig]:
    if not config.phases:
        return [
            PhaseConfig(config.steps, config.max_response_len, config.temperature, config.overlong_filter)
        ]
    phases = []
    for index, phase in enumerate(config.phases):
        if phase.steps is None or phase.steps < 1:
            raise CascadeUsageError(
                f"phases[{index}].steps: expected a positive integer, found {phase.steps!r}"
            )
        phases.append(
            PhaseConfig(
                phase.steps,
                phase.max_response_len if phase.max_response_len is not None else config.max_response_len,
                phase.temperature if phase.temperature is not None else config.temperature,
                phase.overlong_filter if phase.overlong_filter is not None else config.overlong_filter,
            )
        )
    return phases


def phase_at(phases: list[PhaseConfig], step: int) -> tuple[int, PhaseConfig]:
    end = 0
    for index, phase in enumerate(phases):
        end += phase.steps
        if step < end:
            return index, phase
    return len(phases) - 1, phases[-1]


def _device_and_dtype(config: GRPOConfig) -> tuple[str, torch.dtype]:
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if config.dtype == "auto":
        return device, torch.bfloat16 if device == "cuda" else torch.float32
    if config.dtype not in ("float32", "bfloat16", "float16"):
        raise CascadeUsageError(f"dtype: expected auto, float32, bfloat16 or float16; found {config.dtype!r}")
    return device, getattr(torch, config.dtype)


class GRPOTrainer:
    """Owns the policy, optimizer, rollout engine, sampler and reward hook of one GRPO stage."""

    def __init__(
        self,
        config: GRPOConfig,
        rows: list[dict[str, Any]],
        reward: RewardHook,
        *,
        domain: str,
        mode: str,
        eval_rows: list[dict[str, Any]] | None = None,
    ) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if mode not in PROMPT_MODES:
            raise CascadeUsageError(f"mode: expected one of {', '.join(PROMPT_MODES)}; found {mode!r}")
        if config.group_size < 2:
            raise CascadeUsageError(f"group_size: expected at least 2, found {config.group_size}")
        if config.loss_aggregation not in ("token", "sequence"):
            raise CascadeUsageError(
                f"loss_aggregation: expected token or sequence; found {config.loss_aggregation!r}"
            )
        if config.prompts_per_step < 1:
            raise CascadeUsageError(f"prompts_per_step: expected at least 1, found {config.prompts_per_step}")
        self.config, self.reward, self.domain, self.mode = config, reward, domain, mode
        self.init = str(require_model_dir(resolve_model(config.init or ""), "init checkpoint"))
        self.out = Path(config.out or "")
        self.phases = resolve_phases(config)
        self.total_steps = sum(phase.steps for phase in self.phases)
        self.device, self.dtype = _device_and_dtype(config)

        configure_threads()
        quiet_transformers()
        torch.manual_seed(config.seed)
        self.tokenizer = AutoTokenizer.from_pretrained(self.init)
        pad = self.tokenizer.pad_token_id
        self.pad_id = pad if pad is not None else (self.tokenizer.eos_token_id or 0)
        self.policy = AutoModelForCausalLM.from_pretrained(self.init, dtype=self.dtype).to(self.device)
        self.policy.train()
        self.reference = None
        if config.kl_coef > 0:
            self.reference = copy.deepcopy(self.policy).eval().requires_grad_(False)
        self.optimizer = torch.optim.AdamW(
            self.policy.parameters(),
            lr=config.lr,
            betas=(config.beta1, config.beta2),
            weight_decay=config.weight_decay,
        )

        self.rows = self._fit_prompts(rows, config.data)
        self.eval_rows = self._fit_prompts(eval_rows, config.eval_data) if eval_rows else []
        self.sampler = PromptSampler(
            len(self.rows),
            config.seed,
            config.epoch_filter,
            config.epoch_filter_hard_p,
            config.epoch_filter_easy_p,
        )
        self.step = 0
        self.eval_before: dict[str, float] | None = None
        if config.resume and (self.out / TRAINER_STATE_DIR / "state.pt").exists():
            self._load_state()

        backend = config.rollout.backend
        if backend in ("auto", "hf"):
            self.generator = Generator.from_model(
                self.policy, self.tokenizer, seed=config.seed, max_batch_size=config.rollout.max_batch_size
            )
        else:
            self.generator = Generator(
                self.init,
                backend=backend,
                seed=config.seed,
                device=self.device,
                max_batch_size=config.rollout.max_batch_size,
            )
            self.generator.update_weights(self.policy.state_dict())
        if self._resumed_rng is not None:
            self.generator.set_rng_state(self._resumed_rng)
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="reward")

    _resumed_rng: torch.Tensor | None = None

    def _fit_prompts(self, rows: list[dict[str, Any]], path: str | None) -> list[dict[str, Any]]:
        """Drop rows whose rendered prompt exceeds max_prompt_len (with a warning); keep their order."""
        kept = []
        for index, row in enumerate(rows):
            mode = prompt_mode(self.mode, row, index)
            if (
                len(self.tokenizer.encode(render_row(row, mode), add_special_tokens=False))
                <= self.config.max_prompt_len
            ):
                kept.append(row)
        if len(kept) < len(rows):
            print_warning(f"{path}: {len(rows) - len(kept)} rows longer than max_prompt_len are skipped")
        if not kept:
            raise CascadeUsageError(
                f"{path}: every prompt is longer than max_prompt_len={self.config.max_prompt_len}"
            )
        return kept

    # ---- rollouts ------------------------------------------------------------------------------------

    def _generate_groups(self, indices: list[int], positions: list[int], phase: PhaseConfig) -> list[Group]:
        modes = [prompt_mode(self.mode, self.rows[i], p) for i, p in zip(indices, positions, strict=True)]
        prompts = [render_row(self.rows[i], m) for i, m in zip(indices, modes, strict=True)]
        outputs = self.generator.generate(
            prompts,
            n=self.config.group_size,
            max_new_tokens=phase.max_response_len,
            temperature=phase.temperature,
            top_p=self.config.top_p,
            top_k=self.config.top_k,
        )
        return [
            Group(i, m, self.tokenizer.encode(p, add_special_tokens=False), out)
            for i, m, p, out in zip(indices, modes, prompts, outputs, strict=True)
        ]

    def _score(self, groups: list[Group]) -> list[Score]:
        records = [r for g in groups for r in rollout_records(g, self.rows[g.row_index], self.domain)]
        return self.reward.score(records)

    def collect(self, phase: PhaseConfig, timer: dict[str, float]) -> tuple[list[Group], dict[str, float]]:
        """Generate, score and (optionally) filter groups until the step's batch is full."""
        config = self.config
        kept: list[Group] = []
        self._generated_groups: list[Group] = []  # everything sampled this step, filtered or not
        generated = filtered = 0
        position = 0
        for _round in range(config.dynamic_filter_max_rounds if config.dynamic_filter else 1):
            needed = config.prompts_per_step - len(kept)
            indices = [self.sampler.next() for _ in range(needed)]
            positions = list(range(position, position + needed))
            position += needed
            chunk = (
                config.rollout.chunk_prompts
                if self.reward.overlap and config.rollout.chunk_prompts
                else needed
            )
            groups: list[Group] = []
            pending: list[tuple[list[Group], Future[list[Score]]]] = []
            for start in range(0, needed, chunk):
                began = time.perf_counter()
                chunk_groups = self._generate_groups(
                    indices[start : start + chunk], positions[start : start + chunk], phase
                )
                timer["generate"] += time.perf_counter() - began
                pending.append((chunk_groups, self.pool.submit(self._timed_score, chunk_groups, timer)))
                groups.extend(chunk_groups)
            began = time.perf_counter()
            scores = [s for _, future in pending for s in future.result()]
            records = [r for g in groups for r in rollout_records(g, self.rows[g.row_index], self.domain)]
            scores = self.reward.finalize(records, scores)
            timer["verify_wait"] += time.perf_counter() - began
            self._apply_scores(groups, scores, records, phase)
            for group in groups:
                passed = sum(s.passed for s in group.scores)
                self.sampler.record(group.row_index, passed, len(group.scores))
                generated += 1
                self._generated_groups.append(group)
                if config.dynamic_filter and group.uniform:
                    filtered += 1
                else:
                    kept.append(group)
            if len(kept) >= config.prompts_per_step:
                break
        return kept, {"groups_generated": generated, "groups_filtered": filtered}

    def _timed_score(self, groups: list[Group], timer: dict[str, float]) -> list[Score]:
        began = time.perf_counter()
        try:
            return self._score(groups)
        finally:
            timer["verify"] += time.perf_counter() - began

    def _apply_scores(
        self, groups: list[Group], scores: list[Score], records: list[dict[str, Any]], phase: PhaseConfig
    ) -> None:
        errors = [
            (r["id"], s.details["error"])
            for r, s in zip(records, scores, strict=True)
            if "error" in s.details
        ]
        if errors:
            self._verify_errors += len(errors)
            print_warning(
                f"step {self.step + 1}: {len(errors)} rollouts scored 0 after a verifier error; first: "
                f"{errors[0][0]}: {errors[0][1]}"
            )
        at = 0
        for group in groups:
            group.scores = scores[at : at + len(group.completions)]
            at += len(group.completions)
            truncated = [c.finish_reason == "length" for c in group.completions]
            group.loss_mask = [not (t and phase.overlong_filter) for t in truncated]
            # Without overlong filtering a truncated response gets `truncated_reward` (0: a wrong one).
            fixed = self.config.truncated_reward
            group.rewards = [
                fixed if t and fixed is not None else float(s.reward)
                for t, s in zip(truncated, group.scores, strict=True)
            ]
            group.rewards = self.reward.shape(group.rewards)
            group.advantages = group_advantages(group.rewards, group.loss_mask, self.config.adv_eps)

    # ---- update --------------------------------------------------------------------------------------

    def _batch(self, groups: list[Group]) -> list[tuple[list[int], list[int], float, bool]]:
        return [
            (g.prompt_ids, c.token_ids, a, m)
            for g in groups
            for c, a, m in zip(g.completions, g.advantages, g.loss_mask, strict=True)
            if c.token_ids
        ]

    def update(self, groups: list[Group], temperature: float) -> dict[str, float]:
        """One optimizer step over every response of the step (micro-batched), token-level loss."""
        sequences = self._batch(groups)
        total_tokens = sum(len(resp) for _, resp, _, keep in sequences if keep)
        normaliser = total_tokens
        if self.config.loss_aggregation == "sequence":
            normaliser = sum(1 for _, _, _, keep in sequences if keep)
        self.optimizer.zero_grad(set_to_none=True)
        entropy_sum = kl_sum = 0.0
        if total_tokens:
            for start in range(0, len(sequences), self.config.train_micro_batch):
                micro = sequences[start : start + self.config.train_micro_batch]
                stats = self._micro_step(micro, normaliser, temperature)
                entropy_sum += stats["entropy_sum"]
                kl_sum += stats["kl_sum"]
        grad_norm = torch.nn.utils.clip_grad_norm_(self.policy.parameters(), self.config.max_grad_norm)
        if total_tokens:
            self.optimizer.step()
        denominator = max(total_tokens, 1)
        out = {
            "entropy": entropy_sum / denominator,
            "grad_norm": float(grad_norm),
            "loss_tokens": total_tokens,
        }
        if self.reference is not None:
            out["kl"] = kl_sum / denominator
        return out

    def _micro_step(
        self, micro: list[tuple[list[int], list[int], float, bool]], total_tokens: int, temperature: float
    ) -> dict[str, float]:
        logits, tokens, mask, advantages = response_logits(
            self.policy, micro, temperature, self.pad_id, self.device
        )
        ref_logprobs = None
        if self.reference is not None:
            with torch.no_grad():
                ref_logits = response_logits(self.reference, micro, temperature, self.pad_id, self.device)[0]
                ref_logprobs = ref_logits.float().log_softmax(-1).gather(-1, tokens[..., None]).squeeze(-1)
        loss, stats = grpo_loss(
            logits,
            tokens,
            mask,
            advantages,
            total_tokens,
            ref_logprobs,
            self.config.kl_coef,
            self.config.entropy_coef,
            self.config.loss_aggregation,
        )
        loss.backward()
        return stats

    # ---- evaluation ----------------------------------------------------------------------------------

    def evaluate(self) -> dict[str, float]:
        """Greedy held-out accuracy (pass rate) and mean reward of the current policy."""
        rows = self.eval_rows[: self.config.eval_limit] if self.config.eval_limit else self.eval_rows
        max_new = self.config.eval_max_new_tokens or self.phases[-1].max_response_len
        modes = [prompt_mode(self.mode, row, i) for i, row in enumerate(rows)]
        prompts = [render_row(row, m) for row, m in zip(rows, modes, strict=True)]
        outputs = self.generator.generate(prompts, n=1, max_new_tokens=max_new, temperature=0.0)
        records = []
        for index, (row, mode, group) in enumerate(zip(rows, modes, outputs, strict=True)):
            records.append(
                {
                    "id": row.get("id", index),
                    "prompt": row.get("prompt", row.get("messages")),
                    "response": group[0].text,
                    "label": row.get("label"),
                    "domain": self.domain,
                    "mode": mode,
                    "finish_reason": group[0].finish_reason,
                }
            )
        scores = self.reward.finalize(records, self.reward.score(records))
        return {
            "accuracy": sum(s.passed for s in scores) / len(scores),
            "reward": sum(s.reward for s in scores) / len(scores),
            "n": len(scores),
        }

    # ---- checkpoints ---------------------------------------------------------------------------------

    def save(self, final: bool = False) -> None:
        self.policy.save_pretrained(self.out, safe_serialization=True)
        self.tokenizer.save_pretrained(self.out)
        if final:
            return
        state_dir = self.out / TRAINER_STATE_DIR
        tmp = self.out / (TRAINER_STATE_DIR + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        torch.save({k: v.detach().cpu() for k, v in self.policy.state_dict().items()}, tmp / "policy.pt")
        torch.save(
            {
                "step": self.step,
                "optimizer": self.optimizer.state_dict(),
                "torch_rng": torch.get_rng_state(),
                "generator_rng": self.generator.rng_state(),
                "sampler": self.sampler.state(),
                "eval_before": self.eval_before,
            },
            tmp / "state.pt",
        )
        old = self.out / (TRAINER_STATE_DIR + ".old")
        if state_dir.exists():
            os.replace(state_dir, old)
        os.replace(tmp, state_dir)
        shutil.rmtree(old, ignore_errors=True)

    def _load_state(self) -> None:
        state_dir = self.out / TRAINER_STATE_DIR
        self.policy.load_state_dict(torch.load(state_dir / "policy.pt", map_location=self.device))
        state = torch.load(state_dir / "state.pt", map_location="cpu", weights_only=False)
        self.optimizer.load_state_dict(state["optimizer"])
        torch.set_rng_state(state["torch_rng"])
        self._resumed_rng = state["generator_rng"]
        self.sampler.load_state(state["sampler"])
        self.step = state["step"]
        self.eval_before = state["eval_before"]
        console.print(f"resuming {self.out} from step {self.step}")

    # ---- the loop ------------------------------------------------------------------------------------

    def train(self) -> dict[str, Any]:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        config = self.config
        started = time.perf_counter()
        if self.eval_rows and self.eval_before is None:
            self.eval_before = self.evaluate()
        metrics_log = MetricsLog(
            self.out, tensorboard=config.tensorboard, truncate_after_step=self.step if self.step else None
        )
        last: dict[str, Any] = {}
        progress = Progress(
            TextColumn("[bold]grpo[/]"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            TextColumn("{task.description}"),
            console=console,
            transient=False,
        )
        with progress:
            task = progress.add_task("", total=self.total_steps, completed=self.step)
            while self.step < self.total_steps:
                last = self.train_step()
                metrics_log.log(self.step, last)
                progress.update(
                    task,
                    completed=self.step,
                    description=(
                        f"reward {last['reward_mean']:.3f} pass {last['pass_rate']:.2f} "
                        f"len {last['response_len_mean']:.0f} trunc {last['truncation_ratio']:.2f} "
                        f"filtered {last['groups_filtered_frac']:.2f} {last['tokens_per_s']:.0f} tok/s"
                    ),
                )
                if config.save_every and self.step % config.save_every == 0 and self.step < self.total_steps:
                    self.save()
        metrics_log.close()
        self.pool.shutdown(wait=True)
        self.save(final=True)
        summary: dict[str, Any] = {"steps": self.step, **{f"final_{k}": v for k, v in last.items()}}
        if self.eval_rows:
            after = self.evaluate()
            summary.update(
                {
                    "heldout_accuracy_before": self.eval_before["accuracy"],
                    "heldout_accuracy_after": after["accuracy"],
                    "heldout_reward_before": self.eval_before["reward"],
                    "heldout_reward_after": after["reward"],
                    "heldout_n": after["n"],
                }
            )
        summary["wall_s"] = time.perf_counter() - started
        self.generator.close()
        self.reward.close()
        return summary

    _verify_errors = 0

    def train_step(self) -> dict[str, Any]:
        began = time.perf_counter()
        phase_index, phase = phase_at(self.phases, self.step)
        timer = {"generate": 0.0, "verify": 0.0, "verify_wait": 0.0}
        self._verify_errors = 0
        groups, counts = self.collect(phase, timer)

        train_began = time.perf_counter()
        update = self.update(groups, phase.temperature)
        train_s = time.perf_counter() - train_began
        sync_began = time.perf_counter()
        self.generator.update_weights(self.policy.state_dict())
        sync_s = time.perf_counter() - sync_began
        self.step += 1

        # Rollout statistics cover every group sampled this step, including those dynamic filtering dropped.
        sampled = self._generated_groups
        rewards = [r for g in sampled for r in g.rewards]
        lengths = [len(c.token_ids) for g in sampled for c in g.completions]
        truncated = [c.finish_reason == "length" for g in sampled for c in g.completions]
        passed = [s.passed for g in sampled for s in g.scores]
        reward_t = torch.tensor(rewards or [0.0], dtype=torch.float64)
        wall = time.perf_counter() - began
        return {
            "phase": phase_index,
            "epoch": self.sampler.epoch,
            "reward_mean": float(reward_t.mean()),
            "reward_std": float(reward_t.std()) if len(rewards) > 1 else 0.0,
            "pass_rate": sum(passed) / max(len(passed), 1),
            "groups": len(groups),  # trained on
            "groups_sampled": len(sampled),
            "groups_filtered_frac": counts["groups_filtered"] / max(counts["groups_generated"], 1),
            "zero_std_groups_frac": sum(g.uniform for g in groups) / max(len(groups), 1),
            "response_len_mean": sum(lengths) / max(len(lengths), 1),
            "response_len_max": max(lengths, default=0),
            "truncation_ratio": sum(truncated) / max(len(truncated), 1),
            "verify_errors": self._verify_errors,
            **update,
            "lr": self.optimizer.param_groups[0]["lr"],
            "temperature": phase.temperature,
            "max_response_len": phase.max_response_len,
            "tokens_per_s": sum(lengths) / wall,
            "time_generate": timer["generate"],
            "time_verify": timer["verify"],
            "time_verify_wait": timer["verify_wait"],
            "time_train": train_s,
            "time_sync": sync_s,
            "time_step": wall,
        }


# ---------------------------------------------------------------------------------------------------------
# Entry points
# ---------------------------------------------------------------------------------------------------------


def stage_manifest(config: Any, summary: dict[str, Any], paths: dict[str, str | None]) -> None:
    resolved = config if isinstance(config, DictConfig) else OmegaConf.structured(config)
    write_manifest(
        config.out or "",
        stage=config.name or config.kind,
        kind=config.kind,
        config=OmegaConf.to_container(resolved, resolve=True),  # type: ignore[arg-type]
        init=config.init,
        data_fingerprints={name: fingerprint_path(p) for name, p in paths.items() if p},
        metrics=summary,
        timings={"wall_s": summary.get("wall_s", 0.0)},
    )


def run_grpo(
    config: GRPOConfig,
    reward: RewardHook,
    *,
    domain: str,
    mode: str,
    rows: list[dict[str, Any]],
    eval_rows: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Train one GRPO stage with any reward hook and write the checkpoint directory + manifest."""
    if not config.out:
        raise CascadeUsageError("out: expected an output directory, found none")
    trainer = GRPOTrainer(config, rows, reward, domain=domain, mode=mode, eval_rows=eval_rows)
    summary = trainer.train()
    stage_manifest(config, summary, {"data": config.data, "eval_data": config.eval_data})
    return summary


def run_rlvr(config: RLVRConfig) -> dict[str, Any]:
    """`cascade rlvr --domain DOMAIN`: GRPO with the domain's verifier as the reward."""
    if config.domain not in DOMAIN_MODES or config.domain not in known_domains():
        raise CascadeUsageError(f"domain: expected one of {', '.join(DOMAIN_MODES)}; found {config.domain!r}")
    mode = config.mode or DOMAIN_MODES[config.domain]
    options = dict(config.verifier_options)
    try:
        verifier = get_verifier(config.domain, **options)
    except TypeError as error:
        raise CascadeUsageError(
            f"verifier_options: not accepted by the {config.domain} verifier ({error})"
        ) from None
    rows = load_rows(config.data)
    check_rows(rows, verifier, config.data)
    eval_rows = None
    if config.eval_data:
        eval_rows = load_rows(config.eval_data, default_name="heldout.jsonl")
        check_rows(eval_rows, verifier, config.eval_data)
    require_model_dir(resolve_model(config.init or ""), "init checkpoint")
    reward = VerifierReward(config.domain, workers=config.verify_workers, options=options)
    return run_grpo(config, reward, domain=config.domain, mode=mode, rows=rows, eval_rows=eval_rows)
