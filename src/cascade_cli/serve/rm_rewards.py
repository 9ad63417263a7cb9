"""Reward-model rewards in the reward service: `cascade verify --serve --reward-model CKPT|URL`.

The paper's (Nemotron-Cascade §2.2, §3) rewards that need a reward model, computed over one request's batch
(cascade's OpenRLHF agent sends the n samples of one prompt in one request; groups are the samples of the
same prompt within the request):

- RLHF (records of domain `general`): the RM's score of the prompt plus the text after `</think>` (the whole
  response when `</think>` is missing); a code-switching response (the `language` verifier) gets the lowest
  score in the request minus `code_switch_margin`; optional shaping `zscore_tanh` (each group z-scored,
  then tanh). The same functions the local engine's RLHF hook uses (engines/local/rlhf.py).
- IF-RL of the thinking models (`if_rm: true`): R_IF + sigmoid(group z-score of the RM score) when the IF
  verifier passes (R_IF = 1), else 0. The reply's `scores` stay R_IF: OpenRLHF's dynamic filtering keeps a
  group by its mean score in (0, 1), which the bonus would push past 1 for a mostly-passing group.

The RM is the Bradley-Terry checkpoint of `cascade rlhf rm` / OpenRLHF's train_rm, loaded with transformers
(the GPU when there is one) and scored in batches, or OpenRLHF's `serve_rm` at an http(s) URL
(`POST {"query": [text, ...]}` -> `{"rewards": [...]}`), which then receives the same texts.
"""

from __future__ import annotations

import json
import math
import re
import threading
import urllib.request
from collections.abc import Awaitable, Callable
from typing import Any

from cascade_cli.chat import IM_END, answer_text
from cascade_cli.config.rlhf import REWARD_SHAPINGS
from cascade_cli.serve.protocol import ProtocolError
from cascade_cli.verifiers import verify_batch
from cascade_cli.verifiers.batch import RowResult

RM_DOMAIN = "general"  # RLHF prompts: no verifier, the reward model scores them
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


class RewardModelScorer:
    """Scores texts with the reward model in this process, or forwards them to OpenRLHF's serve_rm URL."""

    def __init__(self, source: str, batch_size: int = 32, max_len: int = 4096, device: str | None = None) -> None:
        self.source, self.batch_size, self.max_len = source, batch_size, max_len
        self.url = source if source.startswith(("http://", "https://")) else None
        self._lock = threading.Lock()  # one forward at a time; requests queue here, each batched
        if self.url is None:
            import torch

            from cascade_cli.engines.local.reward_model import load_reward_model

            device = device or ("cuda" if torch.cuda.is_available() else "cpu")
            self.model, self.tokenizer = load_reward_model(source, device=device)
            self.model.eval().requires_grad_(False)

    def scores(self, texts: list[str]) -> list[float]:
        if self.url is not None:
            request = urllib.request.Request(
                self.url, json.dumps({"query": texts}).encode(), {"Content-Type": "application/json"}
            )
            with urllib.request.urlopen(request, timeout=600) as reply:
                rewards = json.loads(reply.read())["rewards"]
            return [float(value) for value in (rewards if isinstance(rewards, list) else [rewards])]
        from cascade_cli.engines.local.reward_model import score_texts

        with self._lock:
            return score_texts(self.model, self.tokenizer, texts, self.max_len, self.batch_size)


def rm_input(record: dict[str, Any]) -> str:
    """What the RM reads: the rendered prompt (ending in the assistant header), the answer, `<|im_end|>`."""
    return f"{record['prompt']}{answer_text(record['response'])}{IM_END}"


def plain_prompt(prompt: str) -> str:
    """The prompt's own words (ChatML markup and mode flags removed), for the code-switch check."""
    return _CHATML_HEADER.sub(" ", prompt).strip()


def groups_of(records: list[dict[str, Any]]) -> list[list[int]]:
    """Indices of the samples of each prompt, in first-seen order."""
    groups: dict[str, list[int]] = {}
    for index, record in enumerate(records):
        groups.setdefault(record["prompt"], []).append(index)
    return list(groups.values())


def group_z(values: list[float], eps: float = 1e-6) -> list[float]:
    """z-scores within one group (sample std, as the local engine's shaping); a group of one scores 0."""
    if len(values) < 2:
        return [0.0] * len(values)
    mean = sum(values) / len(values)
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
    return [(v - mean) / (std + eps) for v in values]


def rlhf_results(records: list[dict[str, Any]], rm: list[float], options: dict[str, Any]) -> list[RowResult]:
    from cascade_cli.engines.local.rlhf import apply_code_switch_penalty, zscore_tanh

    switched = [False] * len(records)
    if options["code_switch_penalty"]:
        checks = verify_batch([{**r, "prompt": plain_prompt(r["prompt"])} for r in records], domain="language")
        switched = [bool(check.details.get("code_switch")) for check in checks]
    rewards = apply_code_switch_penalty(rm, switched, float(options["code_switch_margin"]))
    if options["shaping"] == "zscore_tanh":
        for group in groups_of(records):
            for index, value in zip(group, zscore_tanh([rewards[i] for i in group]), strict=True):
                rewards[index] = value
    return [
        RowResult(reward, not switch, {"rm_score": score, "code_switch": switch})
        for reward, score, switch in zip(rewards, rm, switched, strict=True)
    ]


def if_rm_results(records: list[dict[str, Any]], verified: list[RowResult], rm: list[float]) -> list[RowResult]:
    """R_IF + sigmoid(z) for passing responses, 0 otherwise; z within each prompt's group of RM scores."""
    z = [0.0] * len(records)
    for group in groups_of(records):
        for index, value in zip(group, group_z([rm[i] for i in group]), strict=True):
            z[index] = value
    out = []
    for result, score, zi in zip(verified, rm, z, strict=True):
        bonus = 1.0 / (1.0 + math.exp(-zi))
        reward = result.reward + bonus if result.passed and result.reward >= 1.0 else 0.0
        out.append(RowResult(reward, result.passed, {**result.details, "rm_score": score, "rm_z": zi, "score": result.reward},
                             result.latency_s, result.error))
    return out


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
    wanted = rlhf + bonus
    if wanted:
        rm = await asyncio.to_thread(scorer.scores, [rm_input(records[i]) for i in wanted])
        by_index = dict(zip(wanted, rm, strict=True))
        if rlhf:
            scored = rlhf_results([records[i] for i in rlhf], [by_index[i] for i in rlhf], options)
            for index, result in zip(rlhf, scored, strict=True):
                results[index] = result
        if bonus:
            verified = [results[i] for i in bonus]
            scored = if_rm_results([records[i] for i in bonus], verified, [by_index[i] for i in bonus])
            for index, result in zip(bonus, scored, strict=True):
                results[index] = result
    return [result for result in results if result is not None]
