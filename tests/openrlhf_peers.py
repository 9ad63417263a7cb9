"""What OpenRLHF 0.11.2's reward path talks to besides us, built for tests on CPU.

- `byte_tokenizer()`: a real HF fast tokenizer (byte-level, ChatML special tokens) so that
  `decode(prompt_ids + response_ids, skip_special_tokens=False)` gives the exact text, as Qwen's does.
- `ScriptedEngine`: the vLLM engine's `generate` interface returning a fixed continuation per prompt (the
  policy is not under test here; the reward service is).
- `process_response_into_experience`: OpenRLHF's own `SamplesGenerator._process_response_into_experience`,
  compiled from the installed source file. Its module imports ray at the top (not installed on CPU test
  machines), so the method is lifted out with `ast` and run with the real `Experience` class.
"""

from __future__ import annotations

import ast
import importlib.util
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch

SPECIAL = ["<|im_start|>", "<|im_end|>", "<|endoftext|>"]


def byte_tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {symbol: index for index, symbol in enumerate(alphabet)}
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tokenizer.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, eos_token="<|im_end|>", pad_token="<|endoftext|>"
    )
    fast.add_special_tokens({"additional_special_tokens": SPECIAL})
    return fast


@dataclass
class Sampling:
    """The two fields SingleTurnAgentExecutor reads from vLLM's SamplingParams."""

    max_tokens: int | None = None
    logprobs: int | None = None


@dataclass
class ScriptedEngine:
    tokenizer: Any
    responses: dict[str, str]  # prompt text -> response text (the response carries its own <|im_end|>)
    calls: list[str] = field(default_factory=list)

    async def generate(self, prompt_token_ids, sampling_params, multi_modal_data=None):
        prompt = self.tokenizer.decode(prompt_token_ids, skip_special_tokens=False)
        self.calls.append(prompt)
        text = self.responses[prompt]
        ids = self.tokenizer(text=text, add_special_tokens=False)["input_ids"]
        ids = ids[: sampling_params.max_tokens]
        output = SimpleNamespace(
            token_ids=ids,
            text=self.tokenizer.decode(ids, skip_special_tokens=False),
            finish_reason="stop"
            if len(ids) == len(self.tokenizer(text=text, add_special_tokens=False)["input_ids"])
            else "length",
            logprobs=None,
        )
        return SimpleNamespace(outputs=[output])


def _openrlhf_file(module: str) -> Path:
    spec = importlib.util.find_spec(module.split(".")[0])
    assert spec is not None and spec.submodule_search_locations, "openrlhf is not installed"
    return Path(spec.submodule_search_locations[0], *module.split(".")[1:]).with_suffix(".py")


def openrlhf_method(module: str, class_name: str, method_name: str, namespace: dict[str, Any]):
    """A method of an OpenRLHF class, compiled from the installed source file with `namespace` as globals
    (see the module doc: the modules themselves import ray at the top)."""
    path = _openrlhf_file(module)
    tree = ast.parse(path.read_text())
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and item.name == method_name:
                    item.decorator_list = []
                    scope = dict(namespace)
                    exec(compile(ast.Module(body=[item], type_ignores=[]), str(path), "exec"), scope)
                    return scope[method_name]
    raise AssertionError(f"{class_name}.{method_name} not found in {path}")


def process_response_into_experience():
    """`SamplesGenerator._process_response_into_experience(response, **generate_kwargs) -> Experience`."""
    from openrlhf.trainer.ppo_utils.experience import Experience

    method = openrlhf_method(
        "openrlhf.trainer.ppo_utils.samples_generator",
        "SamplesGenerator",
        "_process_response_into_experience",
        {"torch": torch, "Experience": Experience},
    )
    return lambda response, **kwargs: method(None, response, **kwargs)


def split_rollout_samples(micro_batch_size: int, pad_token_id: int):
    """`ExperienceMaker.split_rollout_samples(rollout_samples) -> list[Experience]` (no dynamic batching)."""
    from openrlhf.trainer.ppo_utils.experience import Experience

    method = openrlhf_method(
        "openrlhf.trainer.ppo_utils.experience_maker",
        "RemoteExperienceMaker",
        "split_rollout_samples",
        {"torch": torch, "Experience": Experience},
    )
    owner = SimpleNamespace(
        args=SimpleNamespace(
            train=SimpleNamespace(dynamic_batch_enable=False),
            rollout=SimpleNamespace(micro_batch_size=micro_batch_size),
        ),
        tokenizer=SimpleNamespace(pad_token_id=pad_token_id),
    )
    return lambda samples: method(owner, samples)


def run_executor(executor, cases: list[tuple[str, str, str]], max_len: int = 4096) -> list[dict]:
    """Drive an OpenRLHF executor over (prompt text, label string, response text) cases, like its vLLM actor
    does (one `execute` per sample, all in flight at once); returns the executor outputs in order."""
    import asyncio

    tokenizer = byte_tokenizer()
    engine = ScriptedEngine(tokenizer, {prompt: response for prompt, _, response in cases})
    assert len(engine.responses) == len(cases), "each case needs its own prompt text"

    async def main():
        return await asyncio.gather(
            *[
                executor.execute(prompt, label, Sampling(), max_len, tokenizer, engine)
                for prompt, label, _ in cases
            ]
        )

    return asyncio.run(main())


def check_rollout_batching(experiences: list, rewards: list[float], n_samples_per_prompt: int = 2) -> None:
    """What OpenRLHF 0.11.2 does next with per-sample experiences: `split_rollout_samples` (its own code)
    concatenates them into micro-batches; `compute_advantages_and_returns` then cats `rewards` along dim 0
    and reshapes to (-1, n_samples_per_prompt) (those two lines are repeated here). Rewards of shape (1,)
    per sample are what make both come out as (B,) and (prompts, n)."""
    batches = split_rollout_samples(micro_batch_size=2, pad_token_id=0)(experiences)
    assert [len(batch.sequences) for batch in batches] == [2] * (len(experiences) // 2)
    for batch in batches:
        assert batch.rewards.shape == (2,) and batch.scores.shape == (2,)
        assert all(value.shape == (2,) for value in batch.info.values()), batch.info
    raw_rewards = torch.cat([batch.rewards for batch in batches], dim=0)
    grouped = raw_rewards.reshape(-1, n_samples_per_prompt)
    assert grouped.shape == (len(experiences) // n_samples_per_prompt, n_samples_per_prompt)
    assert raw_rewards.tolist() == rewards
