"""Seeded synthetic tasks for the embedded tiny model (`--source tiny:DOMAIN`).

Sized for a ~2-5M-parameter character-level model with a ~512-character context: short prompts, short
answers, small numbers, a few templates. Every RL row's label is checkable by its domain's verifier
(math: boxed answer, if: IFEval instruction ids + kwargs, code: HumanEval-style assert tests, swe: a golden
patch and the original files).

Disjointness by construction: every problem has a key (its operation and numbers, its function template,
its topic and constraints) and a hash of that key puts the problem in exactly one pool: `sft` (the SFT mix),
`rl` (the per-domain RL prompts) or `heldout` (evaluation); code splits each function template's constants
across the pools (`stratified_pools`), so a held-out code problem is a known operation with a new constant
(swe reuses those pools for the function it repairs). A
`train` draw of `tiny:sft` reads only the sft pool, a `train` draw of any other domain only the rl pool, and
every `heldout` draw only the heldout pool, so SFT prompts, RL prompts and held-out prompts never share a
problem whatever the seeds (the paper keeps SFT and RL prompts strictly disjoint).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from cascade_cli.data.tiny.code import code_task
from cascade_cli.data.tiny.general import general_task
from cascade_cli.data.tiny.instructions import INSTRUCTION_IDS, if_task
from cascade_cli.data.tiny.math import MAX_OPERAND, math_task
from cascade_cli.data.tiny.pools import Task, pool_for, pool_of, stratified_pools
from cascade_cli.data.tiny.swe import swe_task

__all__ = [  # the task builders and pool helpers are re-exported: callers and tests read them from here
    "DEFAULT_MODES", "DEFAULT_SFT_MIX", "INSTRUCTION_IDS", "MAX_OPERAND", "PARALLEL_MODE_TASKS", "SPLITS",
    "TINY_DOMAINS", "Task", "code_task", "general_task", "generate", "if_task", "math_task", "pool_for",
    "pool_of", "stratified_pools", "swe_task",
]

TINY_DOMAINS: tuple[str, ...] = ("math", "code", "swe", "if", "pref", "general", "sft")
SPLITS: tuple[str, ...] = ("train", "heldout")
# The mode each domain's rows get when none is asked for (paper: IF-RL non-thinking, math/code/SWE thinking).
DEFAULT_MODES: dict[str, str] = {"math": "think", "code": "think", "swe": "think", "if": "no_think"}
# swe SFT rows only when a mix names them (`mix.swe=0.1`, as recipes/tiny.yaml does).
DEFAULT_SFT_MIX: dict[str, float] = {"math": 0.35, "code": 0.25, "if": 0.2, "general": 0.2}
# SFT tasks whose prompts get parallel thinking and non-thinking answers (paper §3.1.1: general domain).
PARALLEL_MODE_TASKS: tuple[str, ...] = ("if", "general")


_TASK_BUILDERS: dict[str, Callable[[random.Random], Task]] = {
    "math": math_task,
    "code": code_task,
    "swe": swe_task,
    "if": if_task,
    "general": general_task,
}


# ---------------------------------------------------------------------------------------------------------
# rows
# ---------------------------------------------------------------------------------------------------------


def _draw(
    builder: Callable[[random.Random], Task],
    rng: random.Random,
    pool: str,
    seen: set[str],
    exhausted: set[str],
) -> Task:
    """A task from `pool`; prefers prompts not drawn yet, and repeats once a small space looks exhausted.

    A builder is marked exhausted (in `exhausted`) after a draw that found only seen prompts for a while; from
    then on the first task of the right pool is taken, which keeps large `n` on small spaces fast.
    """
    fallback: Task | None = None
    misses = 0
    for _ in range(2000):
        task = builder(rng)
        if task.pool != pool:
            continue
        if builder.__name__ in exhausted:
            return task
        if task.prompt not in seen:
            seen.add(task.prompt)
            return task
        fallback = fallback or task
        misses += 1
        if misses >= 40:
            exhausted.add(builder.__name__)
            return fallback
    raise RuntimeError(f"no task of pool {pool!r} found in 2000 draws")


def _base_row(row_id: str, domain: str, mode: str, source: str, task: Task) -> dict[str, Any]:
    return {"id": row_id, "domain": domain, "mode": mode, "source": source, "task": task.task}


def _rl_row(row_id: str, domain: str, mode: str, source: str, task: Task) -> dict[str, Any]:
    row = _base_row(row_id, domain, mode, source, task)
    row.update(prompt=task.prompt, label=task.label, reference=task.response(mode))
    return row


def _sft_row(row_id: str, mode: str, source: str, task: Task, correct: bool) -> dict[str, Any]:
    row = _base_row(row_id, "sft", mode, source, task)
    messages = [
        {"role": "user", "content": task.prompt},
        {"role": "assistant", "content": task.response(mode, correct)},
    ]
    row.update(messages=messages, label=task.label, correct=correct or task.wrong_answer is None)
    return row


def _pref_row(row_id: str, mode: str, source: str, task: Task) -> dict[str, Any]:
    row = _base_row(row_id, "pref", mode, source, task)
    row.update(prompt=task.prompt, chosen=task.response(mode), rejected=task.response(mode, correct=False))
    return row


def _weighted_choice(rng: random.Random, weights: dict[str, float]) -> str:
    names = sorted(weights)
    return rng.choices(names, weights=[weights[name] for name in names], k=1)[0]


def generate(
    domain: str,
    n: int,
    seed: int = 0,
    split: str = "train",
    mode: str | None = None,
    wrong_fraction: float = 0.2,
    mix: dict[str, float] | None = None,
) -> list[dict[str, Any]]:
    """`n` canonical rows of `tiny:DOMAIN`, deterministic for (domain, n, seed, split, options).

    math/code/if/general rows carry `prompt`, `label` and a correct `reference` response; `sft` rows carry
    `messages` (a `wrong_fraction` of math/code/if answers are wrong, leaving RL headroom; `correct` says
    which); `pref` rows carry `prompt`, `chosen` (right, complete) and `rejected` (wrong or truncated).
    """
    if domain not in TINY_DOMAINS:
        raise ValueError(f"unknown tiny domain {domain!r}; expected one of {', '.join(TINY_DOMAINS)}")
    if split not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(SPLITS)}; found {split!r}")
    if not 0.0 <= wrong_fraction <= 1.0:
        raise ValueError(f"wrong_fraction must be within [0, 1]; found {wrong_fraction}")
    pool = pool_for(domain, split)
    source = f"tiny:{domain}"
    rng = random.Random(f"cascade-tiny:{domain}:{split}:{seed}")
    seen: set[str] = set()
    exhausted: set[str] = set()
    rows: list[dict[str, Any]] = []
    mix = dict(mix or DEFAULT_SFT_MIX)
    for name in mix:
        if name not in _TASK_BUILDERS:
            raise ValueError(f"mix: unknown task {name!r}; expected some of {', '.join(_TASK_BUILDERS)}")
    while len(rows) < n:
        row_id = f"tiny-{domain}-{split}-{seed}-{len(rows):06d}"
        if domain == "sft":
            task = _draw(_TASK_BUILDERS[_weighted_choice(rng, mix)], rng, pool, seen, exhausted)
            correct = rng.random() >= wrong_fraction
            if mode is None and task.task in PARALLEL_MODE_TASKS:
                # Parallel thinking and non-thinking answers to the same prompt (paper §3.1.1).
                rows.append(_sft_row(row_id, "think", source, task, correct))
                if len(rows) < n:
                    rows.append(
                        _sft_row(
                            f"tiny-{domain}-{split}-{seed}-{len(rows):06d}",
                            "no_think",
                            source,
                            task,
                            rng.random() >= wrong_fraction,
                        )
                    )
                continue
            rows.append(_sft_row(row_id, mode or "think", source, task, correct))
        elif domain == "pref":
            builder = _TASK_BUILDERS[rng.choice(("math", "if", "general", "general"))]
            task = _draw(builder, rng, pool, seen, exhausted)
            if task.wrong_answer is None:
                continue
            row_mode = mode or ("think" if len(rows) % 2 == 0 else "no_think")  # RLHF: half and half
            rows.append(_pref_row(row_id, row_mode, source, task))
        else:
            task = _draw(_TASK_BUILDERS[domain], rng, pool, seen, exhausted)
            row_mode = mode or DEFAULT_MODES.get(domain) or ("think" if len(rows) % 2 == 0 else "no_think")
            rows.append(_rl_row(row_id, domain, row_mode, source, task))
    return rows
