"""A user's own reward function: `--reward-func FILE.py:NAME` (NAME defaults to `reward_func`).

The signature is OpenRLHF's `reward_func`, batched: `NAME(queries, prompts, labels) -> rewards`, where
`queries[i]` is the prompt as the model saw it (chat template included) followed by the response, `prompts[i]`
that prompt alone, and `labels[i]` the row's label as OpenRLHF's data carries it (a string stays a string; an
object becomes its JSON text with the row's `domain` added). It returns either OpenRLHF's dict
(`{"rewards": ..., "scores": ..., "extra_logs": ...}`, rewards a tensor or list) or the rewards themselves (a
list or 1-D tensor of n numbers). A response counts as passed (`pass_rate`, the rollouts' verdict) where
the dict's `extra_logs["passed"]` says so, else when its reward is above 0.

Where it runs: the local engine calls it every step (rl_rewards.FuncReward); the reward service serves it
(`cascade verify --serve --reward-func FILE.py:NAME`) for the OpenRLHF engine. `isolation`:
  none     in the trainer's process (fast; the function is the user's own, trusted code);
  process  in a worker process with a per-call timeout: a function that hangs or crashes the interpreter
           scores its batch 0 with a warning and the worker is replaced, the run goes on (the protection the
           verifiers get in the reward service).
  sandbox  in the code verifier's bubblewrap sandbox (verifiers/code/reward_sandbox.py): no network, none of
           the host's files but the runtime, site-packages and the reward file (bound read-only), an
           address-space limit (`memory_mb`) and the per-call timeout; imported once in a warm sandbox, the
           rewards come back as JSON and are checked here. No bwrap: an error, never a fallback.
"""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from collections.abc import Callable, Sequence
from typing import Any

from cascade_cli.config.grpo import parse_reward_func as parse_spec
from cascade_cli.errors import CascadeUsageError

ISOLATIONS = ("none", "process", "sandbox")
_loaded: dict[str, Callable[..., Any]] = {}  # spec -> function, per process


def load(spec: str) -> Callable[..., Any]:
    """The function `spec` names, imported from its file once per process; a missing file, a file that fails
    to import or a name that is not a function is one line (exit 2)."""
    if spec in _loaded:
        return _loaded[spec]
    path, name = parse_spec(spec)
    if not path.is_file():
        raise CascadeUsageError(f"reward_func: {path}: file not found")
    module_name = f"cascade_user_reward_{abs(hash(str(path.resolve())))}"
    module_spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(module_spec)  # type: ignore[arg-type]
    sys.path.insert(0, str(path.resolve().parent))  # the file may import its neighbours
    try:
        module_spec.loader.exec_module(module)  # type: ignore[union-attr]
    except Exception as error:
        raise CascadeUsageError(
            f"reward_func: {path}: failed to import ({type(error).__name__}: {error})"
        ) from None
    finally:
        sys.path.remove(str(path.resolve().parent))
    function = getattr(module, name, None)
    if not callable(function):
        found = (
            ", ".join(n for n, v in vars(module).items() if callable(v) and not n.startswith("_")) or "none"
        )
        raise CascadeUsageError(f"reward_func: {path}: no function {name!r} (functions there: {found})")
    _loaded[spec] = function
    return function


def as_list(values: Any) -> Any:
    return values.tolist() if hasattr(values, "tolist") else values  # a tensor or an array


def as_scores(result: Any, n: int, spec: str) -> tuple[list[float], list[bool]]:
    """The n rewards and verdicts of a call's result: OpenRLHF's dict (its "rewards"; the verdicts from
    extra_logs["passed"] when it has them) or the rewards themselves; a verdict is otherwise reward > 0."""
    rewards = as_list(result.get("rewards") if isinstance(result, dict) else result)
    if not isinstance(rewards, Sequence) or isinstance(rewards, str) or len(rewards) != n:
        found = f"{len(rewards)} values" if isinstance(rewards, Sequence) else type(rewards).__name__
        raise ValueError(
            f"{spec} returned {found} for {n} queries; expected {n} numbers (or {{'rewards': [...]}})"
        )
    try:
        rewards = [float(value) for value in rewards]
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{spec} returned a reward that is not a number: {rewards[:3]!r}") from None
    if not all(math.isfinite(reward) for reward in rewards):
        bad = next(reward for reward in rewards if not math.isfinite(reward))
        raise ValueError(f"{spec} returned a reward that is not finite: {bad!r}")
    logs = result.get("extra_logs") if isinstance(result, dict) else None
    passed = as_list(logs.get("passed")) if isinstance(logs, dict) else None
    if not isinstance(passed, Sequence) or len(passed) != n:
        passed = [reward > 0 for reward in rewards]
    return rewards, [bool(value) for value in passed]


def call(
    spec: str, queries: list[str], prompts: list[str], labels: list[Any]
) -> tuple[list[float], list[bool]]:
    """One batched call in this process (also what a worker process runs): (rewards, verdicts)."""
    return as_scores(load(spec)(queries, prompts, labels), len(queries), label(spec))


def label(spec: str) -> str:
    """FILE.py:NAME, the name filled in: what messages call the function."""
    path, name = parse_spec(spec)
    return f"{path}:{name}"


def label_text(label: Any, domain: str | None) -> Any:
    """A row's label as OpenRLHF's data carries it (engines/openrlhf/data.py): an object as its JSON text
    with the domain added; a string as it is."""
    if isinstance(label, dict):
        return json.dumps({**label, **({"domain": domain} if domain else {})}, ensure_ascii=False)
    return label


class RewardFunction:
    """The user's function behind one interface, in this process, a worker process or the sandbox
    (`isolation`)."""

    def __init__(
        self, spec: str, isolation: str = "none", timeout_s: float = 60.0, memory_mb: int = 4096
    ) -> None:
        if isolation not in ISOLATIONS:
            raise CascadeUsageError(
                f"reward_func_isolation: expected one of {', '.join(ISOLATIONS)}, found {isolation!r}"
            )
        self.spec, self.isolation, self.timeout_s = spec, isolation, timeout_s
        self._pool: Any = None
        self._sandboxed: Any = None
        if isolation == "sandbox":  # the file is imported in the sandbox alone, never here
            from cascade_cli.verifiers.code.reward_sandbox import SandboxedFunction

            path, name = parse_spec(spec)
            if not path.is_file():
                raise CascadeUsageError(f"reward_func: {path}: file not found")
            self._sandboxed = SandboxedFunction(path, name, timeout_s=timeout_s, memory_mb=memory_mb)
        else:
            load(spec)  # a bad file or name fails here, before any work

    def __call__(
        self, queries: list[str], prompts: list[str], labels: list[Any]
    ) -> tuple[list[float], list[bool], str | None]:
        """(rewards, verdicts, error): a failing call scores every query 0 and says why, never raising."""
        try:
            if self.isolation == "none":
                return *call(self.spec, queries, prompts, labels), None
            if self.isolation == "sandbox":
                return *self._in_sandbox(queries, prompts, labels), None
            return *self._in_worker(queries, prompts, labels), None
        except Exception as error:  # the user's code: any failure scores 0, the run goes on
            from cascade_cli.verifiers.code.reward_sandbox import UserRewardError

            reason = str(error) if isinstance(error, UserRewardError) else f"{type(error).__name__}: {error}"
            return [0.0] * len(queries), [False] * len(queries), reason

    def _in_sandbox(
        self, queries: list[str], prompts: list[str], labels: list[Any]
    ) -> tuple[list[float], list[bool]]:
        """The sandbox answers with plain JSON values only; they are checked here like any result."""
        answer = self._sandboxed(queries, prompts, labels)
        name = label(self.spec)
        if answer.get("rewards") is None:
            raise ValueError(
                f"{name} returned {answer.get('found') or 'nothing'} for {len(queries)} queries; expected "
                f"{len(queries)} numbers (or {{'rewards': [...]}})"
            )
        passed = answer.get("passed")
        result = {"rewards": answer["rewards"], "extra_logs": {} if passed is None else {"passed": passed}}
        return as_scores(result, len(queries), name)

    def _in_worker(
        self, queries: list[str], prompts: list[str], labels: list[Any]
    ) -> tuple[list[float], list[bool]]:
        import multiprocessing

        from pebble import ProcessPool

        if self._pool is None:
            self._pool = ProcessPool(max_workers=1, context=multiprocessing.get_context("spawn"))
        future = self._pool.schedule(call, args=(self.spec, queries, prompts, labels), timeout=self.timeout_s)
        try:
            return future.result()
        except TimeoutError:
            raise TimeoutError(
                f"{self.spec} took over {self.timeout_s:g}s (the worker was replaced)"
            ) from None

    def close(self) -> None:
        if self._sandboxed is not None:
            self._sandboxed.close()
        if self._pool is not None:
            self._pool.stop()
            self._pool.join()
            self._pool = None
