"""Reward-model rewards in the reward service: `cascade verify --serve --reward-model CKPT|URL`.

The paper's (Nemotron-Cascade §2.2, §3) rewards that need a reward model, computed over one request's batch
(cascade's OpenRLHF agent sends the n samples of one prompt in one request; groups are the samples of the
same prompt within the request):

- RLHF (records of domain `general`): the RM's score of the prompt plus the text after `</think>` (the whole
  response when `</think>` is missing); a code-switching response (the `language` verifier) gets the lowest
  score in the request minus `code_switch_margin`; optional shaping `zscore_tanh` (each group z-scored,
  then tanh). RLHF's reward as the local engine's RLHF hook computes it: verifiers/reward_model.py.
- IF-RL of the thinking models (`if_rm: true`): R_IF + sigmoid(group z-score of the RM score) when the IF
  verifier passes (R_IF = 1), else 0. The reply's `scores` stay R_IF: OpenRLHF's dynamic filtering keeps a
  group by its mean score in (0, 1), which the bonus would push past 1 for a mostly-passing group.

The RM is the Bradley-Terry checkpoint of `cascade rlhf rm` / OpenRLHF's train_rm, loaded by models/loader.py
(the GPU when there is one) and scored in batches, or OpenRLHF's `serve_rm` at an http(s) URL
(`POST {"query": [text, ...]}` -> `{"rewards": [...]}`), which then receives the same texts.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any

from cascade_cli.config.rlhf import REWARD_SHAPINGS
from cascade_cli.serve.protocol import ProtocolError
from cascade_cli.verifiers.batch import RowResult
from cascade_cli.verifiers.reward_model import (
    RM_DOMAIN,
    RewardModelScorer,
    apply_code_switch_penalty,
    code_switch_checks,
    if_rm_rewards,
    needs_rm_score,
    rm_input,
    shape,
)

DEFAULT_OPTIONS = {"code_switch_penalty": True, "code_switch_margin": 10.0, "shaping": "none", "if_rm": False}
_CHATML_HEADER = re.compile(r"<\|im_start\|>(system|user|assistant|tool)\n|<\|im_end\|>|\s/(no_)?think\b")


def request_options(body: dict[str, Any]) -> dict[str, Any]:
    """The request's `cascade` field (reward settings of the stage), checked, over the defaults."""
    given = body.get("cascade") or {}
    if not isinstance(given, dict):
        raise ProtocolError(f"'cascade': expected an object of reward settings, found {type(given).__name__}")
    unknown = sorted(set(given) - set(DEFAULT_OPTIONS))
    if unknown:
        raise ProtocolError(f"'cascade': unknown setting(s) {', '.join(unknown)}; known: {', '.join(DEFAULT_OPTIONS)}")
    options = {**DEFAULT_OPTIONS, **given}
    if options["shaping"] not in REWARD_SHAPINGS:
        raise ProtocolError(f"'cascade.shaping': expected one of {', '.join(REWARD_SHAPINGS)}; found {options['shaping']!r}")
    if not isinstance(options["code_switch_margin"], int | float):
        raise ProtocolError("'cascade.code_switch_margin': expected a number")
    return options


def needs_rm(records: list[dict[str, Any]], options: dict[str, Any]) -> bool:
    return any(r["domain"] == RM_DOMAIN or (options["if_rm"] and r["domain"] == "if") for r in records)


def plain_prompt(prompt: str) -> str:
    """The prompt's own words (ChatML markup and mode flags removed), for the code-switch check."""
    return _CHATML_HEADER.sub(" ", prompt).strip()


def groups_of(records: list[dict[str, Any]]) -> list[list[int]]:
    """Indices of the samples of each prompt, in first-seen order."""
    groups: dict[str, list[int]] = {}
    for index, record in enumerate(records):
        groups.setdefault(record["prompt"], []).append(index)
    return list(groups.values())


def rlhf_results(records: list[dict[str, Any]], rm: list[float], options: dict[str, Any]) -> list[RowResult]:
    switched = [False] * len(records)
    if options["code_switch_penalty"]:
        checks = code_switch_checks([{**r, "prompt": plain_prompt(r["prompt"])} for r in records])
        switched = [bool(check.details.get("code_switch")) for check in checks]
    rewards = apply_code_switch_penalty(rm, switched, float(options["code_switch_margin"]))
    for group in groups_of(records):
        for index, value in zip(group, shape([rewards[i] for i in group], options["shaping"]), strict=True):
            rewards[index] = value
    return [
        RowResult(reward, not switch, {"rm_score": score, "code_switch": switch})
        for reward, score, switch in zip(rewards, rm, switched, strict=True)
    ]


def if_rm_results(records: list[dict[str, Any]], verified: list[RowResult], rm: list[float | None]) -> list[RowResult]:
    """R_IF + sigmoid(z) for passing responses, 0 otherwise; z within each prompt's group of RM scores (defined
    once: verifiers/reward_model.if_rm_rewards, which the local engine's IF-RL uses too)."""
    rewards = if_rm_rewards(
        [r.reward for r in verified], [r.passed for r in verified], rm, [r["prompt"] for r in records]
    )
    return [
        RowResult(reward, result.passed, {**result.details, "rm_score": score, "rm_z": zi, "score": result.reward},
                  result.latency_s, result.error)  # fmt: skip
        for result, score, (reward, zi) in zip(verified, rm, rewards, strict=True)
    ]


async def score_with_rm(
    records: list[dict[str, Any]],
    options: dict[str, Any],
    scorer: RewardModelScorer,
    verify: Callable[[list[dict[str, Any]]], Awaitable[list[RowResult]]],
) -> list[RowResult]:
    """One request's rewards: RLHF records by the RM, `if` records by the verifier (+ the RM bonus when
    `if_rm`), every other domain by its verifier as usual."""
    import asyncio

    results: list[RowResult | None] = [None] * len(records)
    rlhf = [i for i, r in enumerate(records) if r["domain"] == RM_DOMAIN]
    others = [i for i, r in enumerate(records) if r["domain"] != RM_DOMAIN]
    if others:
        for index, result in zip(others, await verify([records[i] for i in others]), strict=True):
            results[index] = result
    bonus = [i for i in others if options["if_rm"] and records[i]["domain"] == "if"]
    needed = needs_rm_score([results[i].reward for i in bonus], [results[i].passed for i in bonus],
                            [records[i]["prompt"] for i in bonus])  # fmt: skip
    wanted = rlhf + [i for i, need in zip(bonus, needed, strict=True) if need]
    texts = [rm_input(records[i]["prompt"], records[i]["response"]) for i in wanted]
    by_index = dict(zip(wanted, await asyncio.to_thread(scorer.scores, texts), strict=True)) if wanted else {}
    if rlhf:
        scored = rlhf_results([records[i] for i in rlhf], [by_index[i] for i in rlhf], options)
        for index, result in zip(rlhf, scored, strict=True):
            results[index] = result
    if bonus:
        verified = [results[i] for i in bonus]
        scored = if_rm_results([records[i] for i in bonus], verified, [by_index.get(i) for i in bonus])
        for index, result in zip(bonus, scored, strict=True):
            results[index] = result
    return [result for result in results if result is not None]
