"""cascade's agent for OpenRLHF 0.11.2 (`--train.agent_func_path FILE`): the rollout of one sample, as the
stage says. Loaded inside each vLLM actor from the file `agent_file.export` writes (which calls
`configure` with the stage's settings), so this module imports OpenRLHF and is never imported by the
planner.

OpenRLHF's contract (openrlhf/utils/agent.py, trainer/ray/vllm_engine.py, ppo_utils/samples_generator.py):
the file defines `AgentExecutor`, an `AgentExecutorBase` subclass built with no arguments; the actor calls
`execute(prompt, label, sampling_params, max_length, hf_tokenizer, llm_engine)` once per sample, the n
samples of one prompt together in one `asyncio.gather`. The result's `action_ranges` become the loss mask
(an empty list: no token of the sample is trained on) and `truncated` (finish_reason == "length") feeds
`--reward.stop_properly_penalty_coef`. With an agent, `--reward.remote_url` is replaced by "agent", so the
reward service URLs live here.

What this executor adds to OpenRLHF's own `MultiTurnAgentExecutor` (which does the tokenising,
generation and token bookkeeping, with one turn here):
- every vLLM call gets the stage's top-k and top-p, and at most the phase's max_new_tokens;
- the n samples of one prompt are scored in ONE request to the reward service, so group-level rewards
  (the RM's code-switch floor, z-score shaping, IF-RL's sigmoid(z(RM))) see the whole group;
- with overlong_filter a truncated sample gets no action range (out of the loss, as the local engine does);
- with an outcomes folder, each scored sample's (prompt_id, passed) is appended to this process's file
  there (epoch-level filtering reads them between jobs).
"""

from __future__ import annotations

import asyncio
import contextvars
import importlib.util
import itertools
import json
import os
import socket
import weakref
from copy import deepcopy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import torch
from openrlhf.utils.agent import AgentInstanceBase, MultiTurnAgentExecutor

from cascade_cli.serve.auth import TOKEN_ENV, TOKEN_REF

RETRIES = 5


@dataclass
class AgentSettings:
    reward_urls: list[str] = field(default_factory=list)  # http(s) reward services or a reward_func .py file
    top_k: int = -1
    top_p: float | None = None
    overlong_filter: bool = False
    reward_options: dict[str, Any] = field(default_factory=dict)  # sent as the request's "cascade" field
    outcomes_dir: str | None = None
    timeout_s: float = 600.0


_settings = AgentSettings()


def configure(**settings: Any) -> AgentSettings:
    """Set the stage's settings (the exported file calls this once at import)."""
    global _settings
    _settings = AgentSettings(**settings)
    return _settings


@dataclass
class _Sample:
    """One execute() call: what the reward step needs that OpenRLHF does not hand it."""

    key: str
    prompt: str
    label: Any
    max_new_tokens: int | None = None  # the phase's limit (OpenRLHF's --rollout.max_new_tokens)
    truncated: bool = False
    in_group: bool = True  # counted in its group until it reaches the reward step


_current: contextvars.ContextVar[_Sample] = contextvars.ContextVar("cascade_sample")


class _SamplingEngine:
    """The vLLM engine with the stage's sampling settings applied to every call; records truncation."""

    def __init__(self, engine: Any, sample: _Sample) -> None:
        self.engine, self.sample = engine, sample

    async def generate(self, prompt_token_ids, sampling_params, multi_modal_data=None):
        if _settings.top_k > 0:
            sampling_params.top_k = _settings.top_k
        if _settings.top_p is not None:
            sampling_params.top_p = _settings.top_p
        if self.sample.max_new_tokens and sampling_params.max_tokens:
            # MultiTurnAgentExecutor budgets max_length - prompt; the phase's limit is max_new_tokens.
            sampling_params.max_tokens = min(sampling_params.max_tokens, self.sample.max_new_tokens)
        output = await self.engine.generate(prompt_token_ids, sampling_params, multi_modal_data=multi_modal_data)
        self.sample.truncated = output.outputs[0].finish_reason == "length"
        return output


class _Group:
    def __init__(self) -> None:
        self.entered = 0
        self.waiting: list[tuple[dict[str, Any], asyncio.Future]] = []


class GroupScorer:
    """Scores the samples of one prompt together: a group is sent when every execute() that entered it has
    either arrived at the reward step or failed (all n start in the same gather, before any generates)."""

    def __init__(self) -> None:
        self.groups: dict[str, _Group] = {}
        self._sent = itertools.count()  # rotates requests across the reward URLs
        self._reward_func = None
        self._tasks: set[asyncio.Task] = set()  # in-flight requests (the loop keeps only weak references)

    def enter(self, key: str) -> None:
        self.groups.setdefault(key, _Group()).entered += 1

    def leave(self, key: str) -> None:
        group = self.groups.get(key)
        if group is not None:
            group.entered -= 1
            self._maybe_send(key)

    async def score(self, key: str, item: dict[str, Any]) -> dict[str, Any]:
        future = asyncio.get_running_loop().create_future()
        self.groups[key].waiting.append((item, future))
        self.groups[key].entered -= 1
        self._maybe_send(key)
        return await future

    def _maybe_send(self, key: str) -> None:
        group = self.groups[key]
        if group.entered > 0:
            return
        del self.groups[key]
        if group.waiting:
            task = asyncio.ensure_future(self._send(group.waiting))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _send(self, waiting: list[tuple[dict[str, Any], asyncio.Future]]) -> None:
        items = [item for item, _ in waiting]
        try:
            reply = await self._request(items)
            for index, (item, future) in enumerate(waiting):
                result = {
                    "reward": float(_at(reply["rewards"], index)),
                    "score": float(_at(reply.get("scores", reply["rewards"]), index)),
                    "extra_logs": {k: float(_at(v, index)) for k, v in (reply.get("extra_logs") or {}).items()},
                }
                record_outcome(item, result)
                future.set_result(result)
        except Exception as error:  # every waiting sample fails with the request
            for _, future in waiting:
                if not future.done():
                    future.set_exception(error)

    async def _request(self, items: list[dict[str, Any]]) -> dict[str, Any]:
        body = {
            "query": [item["query"] for item in items],
            "prompts": [item["prompt"] for item in items],
            "labels": [item["label"] for item in items],
            "finish_reasons": ["length" if item["truncated"] else "stop" for item in items],
        }
        if _settings.reward_options:
            body["cascade"] = _settings.reward_options
        url = _settings.reward_urls[next(self._sent) % len(_settings.reward_urls)]
        if TOKEN_REF in url:  # the token never sits in the file: the job's environment carries it
            if not os.environ.get(TOKEN_ENV):
                raise RuntimeError(f"reward service {url}: {TOKEN_ENV} is not set in this job's environment")
            url = url.replace(TOKEN_REF, os.environ[TOKEN_ENV])
        if url.endswith(".py"):
            return await asyncio.to_thread(self._load_reward_func(url), body["query"], body["prompts"], body["labels"])
        timeout = aiohttp.ClientTimeout(total=_settings.timeout_s)
        last: Exception | None = None
        for attempt in range(RETRIES):
            try:
                async with aiohttp.ClientSession(timeout=timeout) as session, session.post(url, json=body) as response:
                    if response.status == 400:  # our protocol error: retrying cannot help
                        raise ValueError(f"reward service {url}: {await response.text()}")
                    response.raise_for_status()
                    return await response.json()
            except (aiohttp.ClientError, asyncio.TimeoutError) as error:
                last = error
                await asyncio.sleep(min(2**attempt, 10))
        raise RuntimeError(f"reward service {url}: no reply after {RETRIES} tries: {last}")

    def _load_reward_func(self, path: str):
        if self._reward_func is None:
            spec = importlib.util.spec_from_file_location("cascade_reward_func", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            self._reward_func = module.reward_func
        return self._reward_func


def _at(value: Any, index: int) -> Any:
    if isinstance(value, torch.Tensor):
        value = value.flatten().tolist()
    return value[index] if isinstance(value, list | tuple) else value


def record_outcome(item: dict[str, Any], result: dict[str, Any]) -> None:
    """Append (prompt_id, passed, reward) to this process's outcomes file (one per host and pid, so that
    the many vLLM actors never share a file)."""
    if not _settings.outcomes_dir:
        return
    try:
        prompt_id = json.loads(item["label"]).get("prompt_id")
    except (TypeError, ValueError, AttributeError):
        prompt_id = None
    if prompt_id is None:
        return
    passed = result["extra_logs"].get("passed", float(result["reward"] > 0))
    line = {"prompt_id": prompt_id, "passed": bool(passed), "reward": result["reward"], "truncated": item["truncated"]}
    folder = Path(_settings.outcomes_dir)
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / f"{socket.gethostname()}-{os.getpid()}.jsonl").open("a", encoding="utf-8") as sink:
        sink.write(json.dumps(line) + "\n")


class RewardStep(AgentInstanceBase):
    """One turn: the response is done; its reward comes from the group's request to the reward service."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    async def step(self, state_dict: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        sample = _current.get()
        item = {
            "query": state_dict["observation_text"] + state_dict["action_text"],
            "prompt": sample.prompt,
            "label": sample.label,
            "truncated": sample.truncated,
        }
        sample.in_group = False
        result = await _scorer().score(sample.key, item)
        return {
            "rewards": torch.tensor(result["reward"]),
            "scores": torch.tensor(result["score"]),
            "environment_feedback": "",
            "done": True,
            "extra_logs": result["extra_logs"],
        }


_scorers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, GroupScorer] = weakref.WeakKeyDictionary()


def _scorer() -> GroupScorer:
    """One scorer per event loop (its futures belong to that loop)."""
    loop = asyncio.get_running_loop()
    if loop not in _scorers:
        _scorers[loop] = GroupScorer()
    return _scorers[loop]


class AgentExecutor(MultiTurnAgentExecutor):
    """What OpenRLHF loads from the agent file (see the module docstring)."""

    def __init__(self) -> None:
        super().__init__(RewardStep)

    async def execute(self, prompt, label, sampling_params, max_length: int, hf_tokenizer, llm_engine, images=None):
        # A copy: the n samples share one SamplingParams and MultiTurnAgentExecutor rewrites max_tokens.
        sampling_params = deepcopy(sampling_params)
        sample = _Sample(f"{label}\x00{prompt}", prompt, label, sampling_params.max_tokens)
        _current.set(sample)  # this task's own context (gather runs each execute in its own task)
        scorer = _scorer()
        scorer.enter(sample.key)
        try:
            await asyncio.sleep(0)  # let the other samples of this prompt enter the group first
            engine = _SamplingEngine(llm_engine, sample)
            output = await super().execute(prompt, label, sampling_params, max_length, hf_tokenizer, engine, images)
        finally:
            if sample.in_group:
                scorer.leave(sample.key)  # failed before the reward step: the group must not wait for it
        if _settings.overlong_filter and output["truncated"]:
            output["action_ranges"] = []  # OpenRLHF's loss mask: this sample trains no token
        return output
