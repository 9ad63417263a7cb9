"""OpenRLHF 0.11.2's remote reward protocol, shared by the HTTP service (server.py) and the Python-file mode
(reward_func.py).

Request: `{"query": [prompt + response, ...], "prompts": [prompt, ...], "labels": [label, ...]}`; `query` is
`tokenizer.decode(prompt_ids + response_ids, skip_special_tokens=False)`, so it carries the chat template's
special tokens. Each label is our canonical row label as a JSON string with the row's `domain` added.

Reply: `{"rewards", "scores", "extra_logs": {name: value}}`. OpenRLHF 0.11.2's `SingleTurnAgentExecutor`
sends ONE sample per request and hands `reply["rewards"]` straight to `torch.tensor([reward])` in
`_process_response_into_experience`; an `Experience` holds rewards of shape (B,), so a one-sample reply
carries plain numbers (a list would make them (1, 1)). A batch of n > 1 samples gets lists of n.
`extra_logs` always has the same keys (OpenRLHF batches `info` by the first sample's keys).
"""

from __future__ import annotations

import json
import multiprocessing
import os
from concurrent.futures import Future, TimeoutError
from typing import Any

from cascade_cli import verifiers
from cascade_cli.chat import IM_END, IM_START
from cascade_cli.verifiers.batch import Options, RowResult, row_error, score_records

ASSISTANT_HEADER = f"{IM_START}assistant\n"
# Trailing tokens the decoded query may carry after the response (eos, pad; Qwen's pad is <|endoftext|>).
TRAILING_TOKENS = (IM_END, "<|endoftext|>", "<|end_of_text|>", "</s>", "<pad>", "<|eot_id|>")
EXTRA_LOG_KEYS = ("passed", "verify_error", "verify_timeout", "verify_latency_ms")


class ProtocolError(ValueError):
    """A request that does not follow the protocol: the service answers HTTP 400 with this message."""


def recover_response(query: str, prompt: str | None) -> str:
    """The model's response inside `query`: strip the prompt prefix when it matches, else split at the last
    assistant header; then drop trailing end-of-turn / pad tokens."""
    if prompt and query.startswith(prompt):
        response = query[len(prompt) :]
    elif ASSISTANT_HEADER in query:
        response = query[query.rindex(ASSISTANT_HEADER) + len(ASSISTANT_HEADER) :]
    else:
        response = query
    stripped = True
    while stripped:
        stripped = False
        trimmed = response.rstrip()
        for token in TRAILING_TOKENS:
            if trimmed.endswith(token):
                response = trimmed[: -len(token)]
                stripped = True
                break
    return response


def parse_service_label(
    label: Any, index: int, default_domain: str | None, extra_domains: tuple[str, ...] = ()
) -> tuple[str, Any]:
    """(domain, label object) from a label as OpenRLHF sends it: a JSON string of the canonical label with
    `domain` added (or the object itself). `extra_domains`: domains scored without a verifier (the reward
    model's `general`)."""
    if isinstance(label, str):
        try:
            label = json.loads(label)
        except json.JSONDecodeError as error:
            raise ProtocolError(
                f"labels[{index}]: expected a JSON object string with a 'domain' key (the canonical row label); "
                f"it is not JSON ({error.msg})"
            ) from None
    if not isinstance(label, dict):
        raise ProtocolError(
            f"labels[{index}]: expected a JSON object with a 'domain' key, found {type(label).__name__}"
        )
    domain = label.get("domain", default_domain)
    known = [*verifiers.known_domains(), *extra_domains]
    if not isinstance(domain, str) or not domain:
        raise ProtocolError(f"labels[{index}]: missing 'domain' (one of {', '.join(known)})")
    if domain not in known:
        hint = "; `general` (RLHF) needs a reward model: `cascade verify --serve --reward-model CKPT`" if domain == "general" else ""
        raise ProtocolError(f"labels[{index}]: unknown domain {domain!r}; known: {', '.join(known)}{hint}")
    return domain, label


def build_records(
    body: Any, default_domain: str | None = None, extra_domains: tuple[str, ...] = ()
) -> list[dict[str, Any]]:
    """Rollout records from a request body; ProtocolError names the field and what was expected."""
    if not isinstance(body, dict):
        raise ProtocolError(
            f"expected a JSON object with query, prompts, labels; found {type(body).__name__}"
        )
    queries = body.get("query", body.get("queries"))
    if queries is None:
        raise ProtocolError("missing field 'query' (a list of prompt + response strings)")
    if isinstance(queries, str):
        queries = [queries]
    if not isinstance(queries, list) or not all(isinstance(q, str) for q in queries):
        raise ProtocolError("'query' must be a list of strings")
    if not queries:
        raise ProtocolError("'query' is empty")
    if "labels" not in body:
        raise ProtocolError("missing field 'labels' (one JSON label string per query, with a 'domain' key)")
    labels = body["labels"]
    if not isinstance(labels, list):
        labels = [labels]
    prompts = body.get("prompts")
    if prompts is None:
        prompts = [None] * len(queries)
    if not isinstance(prompts, list) or not all(p is None or isinstance(p, str) for p in prompts):
        raise ProtocolError("'prompts' must be a list of strings")
    if not len(queries) == len(prompts) == len(labels):
        raise ProtocolError(
            f"query, prompts and labels must have the same length; found {len(queries)}, {len(prompts)}, "
            f"{len(labels)}"
        )
    records = []
    for index, (query, prompt, raw_label) in enumerate(zip(queries, prompts, labels, strict=True)):
        domain, label = parse_service_label(raw_label, index, default_domain, extra_domains)
        records.append(
            {
                "id": str(index),
                "prompt": prompt if prompt is not None else query,
                "response": recover_response(query, prompt),
                "label": label,
                "domain": domain,
            }
        )
    return records


def timeout_results(count: int, timeout_s: float) -> list[RowResult]:
    message = f"verification timed out after {timeout_s:g} s"
    return [row_error(message, timeout_s, timeout=True) for _ in range(count)]


def failed_results(count: int, message: str) -> list[RowResult]:
    return [row_error(message) for _ in range(count)]


def make_reply(
    results: list[RowResult], with_details: bool = False, scalar_when_single: bool = True
) -> dict[str, Any]:
    rewards = [result.reward for result in results]
    # `scores` drive OpenRLHF's dynamic filtering and pass@k logs: the verifier's own score where a reward adds
    # more to it (IF-RL's RM bonus sets details["score"] = R_IF), else the reward.
    scores = [float(result.details.get("score", result.reward)) for result in results]
    logs = {
        "passed": [float(result.passed) for result in results],
        "verify_error": [float(result.error is not None) for result in results],
        "verify_timeout": [float(bool(result.details.get("timeout"))) for result in results],
        "verify_latency_ms": [result.latency_s * 1000 for result in results],
    }
    single = scalar_when_single and len(results) == 1
    reply: dict[str, Any] = {
        "rewards": rewards[0] if single else rewards,
        "scores": scores[0] if single else scores,
        "extra_logs": {key: (values[0] if single else values) for key, values in logs.items()},
    }
    if with_details:
        reply["details"] = [result.details for result in results]
    return reply


# ---- worker pool with per-task timeouts (thread-safe: no signals; a stuck worker is killed) ---------------


def _init_worker(registrations: dict[str, str]) -> None:
    for domain, target in registrations.items():
        verifiers.register(domain, target)


def _score_task(records: list[dict[str, Any]], options: Options) -> list[dict[str, Any]]:
    return [result.to_dict() for result in score_records(records, None, options)]


class VerifierPool:
    """Verification in worker processes (pebble): each task has a timeout, after which its worker is killed
    and replaced, so neither an event loop nor OpenRLHF's reward threads ever wait on a stuck check.

    `registrations` (domain -> "module:Factory") are registered in every worker as well (verifiers that the
    host process registered at run time)."""

    def __init__(
        self,
        workers: int = 1,
        timeout_s: float = 60.0,
        options: Options | None = None,
        registrations: dict[str, str] | None = None,
    ) -> None:
        self.timeout_s = timeout_s
        self.options = options or {}
        self.workers = max(1, workers)
        self.registrations = dict(registrations or {})
        self._pool = self._new_pool()

    def _new_pool(self):
        from pebble import ProcessPool

        # spawn, not fork: the host may be a threaded server or an OpenRLHF actor holding CUDA state.
        return ProcessPool(
            max_workers=self.workers,
            initializer=_init_worker,
            initargs=(self.registrations,),
            context=multiprocessing.get_context("spawn"),
        )

    def submit(self, records: list[dict[str, Any]]) -> Future:
        try:
            return self._pool.schedule(_score_task, args=(records, self.options), timeout=self.timeout_s)
        except RuntimeError:  # the pool broke (its manager died): start a new one once
            self._pool.stop()
            self._pool = self._new_pool()
            return self._pool.schedule(_score_task, args=(records, self.options), timeout=self.timeout_s)

    def collect(self, future: Future, count: int) -> list[RowResult]:
        """The results of a finished future; a timeout or a dead worker becomes reward-0 rows."""
        try:
            return [RowResult(**row) for row in future.result()]
        except TimeoutError:
            return timeout_results(count, self.timeout_s)
        except Exception as error:  # ProcessExpired (worker died), pickling errors, ...
            return failed_results(count, f"verification failed: {type(error).__name__}: {error}")

    def score(self, records: list[dict[str, Any]]) -> list[RowResult]:
        return self.collect(self.submit(records), len(records))

    def close(self) -> None:
        self._pool.stop()
        self._pool.join(timeout=10)


def default_workers() -> int:
    return max(1, min(4, os.cpu_count() or 1))
