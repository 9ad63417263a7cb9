"""Rollout generation for GRPO, eval and pass-rate filtering: one API over two backends.

    gen = Generator("ckpt/sft", backend="auto", seed=0)
    groups = gen.generate(prompts, n=8, max_new_tokens=256, temperature=1.0, top_p=1.0)
    groups[i][j].text, .token_ids, .finish_reason            # "stop" | "length"
    gen.update_weights(policy.state_dict())                  # after each optimizer step
    gen.close()

Backends:
- `hf`: a batched sampling loop over a transformers model with a KV cache (left padding, temperature /
  top-p / top-k, stop tokens; engines/local/rollout/hf_decode.py, sampling in token_sampling.py), seeded by its own
  `torch.Generator`, so a run is reproducible and its RNG state can be checkpointed.
  `Generator.from_model(model, tokenizer)` shares the trainer's torch module: weight updates are then free.
- `vllm`: vLLM's offline `LLM` in this process (`VLLM_ENABLE_V1_MULTIPROCESSING=0`) so that weights can be
  reloaded in place after each step. One engine serves every generator of the process (vllm_engine.py: the
  evaluations and RL stages of a recipe run reload their weights into it instead of starting another).
  Per-request seeds break the CPU engine, so the in-process engine samples from the global RNGs (torch,
  python, numpy); the generator keeps their state as its own (swapped in around each `generate`, starting from `seed`),
  which makes vLLM rollouts independent of the trainer's RNG use and their state checkpointable too.

`auto` rule (engines/local/rollout/rollout_backend.py, backed by benchmarks/eval_generation.py): `hf` for models
under AUTO_VLLM_MIN_PARAMS or without vLLM; on a GPU `vllm`; on a CPU `vllm` only when the tokens the stage
will generate (`planned_tokens`) pay back the engine start, else `hf`.

Contract of a `Completion`: `token_ids` are the generated ids and include the stop token when
`finish_reason == "stop"` (so a trainer learns to emit it); `text` is their decoding with the stop string
and special tokens removed; `logprob_sum` is the sum of the sampled tokens' log-probabilities under the
model's unscaled distribution when `logprobs=True` was asked for, else None; the vLLM backend also gives
them token by token (`token_logprobs`, for an importance weight between the rollout and training engines).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import torch

from cascade_cli.chat import IM_END
from cascade_cli.engines.local.ops.lora import merged_state_dict
from cascade_cli.engines.local.ops.rng import rng_state as global_rng_state
from cascade_cli.engines.local.ops.rng import set_rng_state as set_global_rng_state
from cascade_cli.engines.local.rollout import vllm_engine
from cascade_cli.engines.local.rollout.completion import Completion, FinishReason, Sampling, _stop_token_ids  # noqa: F401  (the API)
from cascade_cli.engines.local.rollout.hf_decode import generate_hf
from cascade_cli.engines.local.rollout.rollout_backend import (  # noqa: F401  (re-exported: the backend API)
    AUTO_VLLM_MIN_PARAMS,
    BACKENDS,
    count_parameters,
    resolve_backend,
    vllm_available,
)
from cascade_cli.errors import CascadeUsageError
from cascade_cli.models.attention import use_gqa_sdpa
from cascade_cli.models.loader import load_model, load_tokenizer, pick_device

DEFAULT_STOP: tuple[str, ...] = (IM_END,)

class Generator:
    """Batched sampling from a causal LM. See the module docstring for the backends and the `auto` rule."""

    def __init__(
        self,
        model_dir: str | Path | None = None,
        *,
        backend: str = "auto",
        seed: int = 0,
        device: str | None = None,
        dtype: str = "auto",
        max_batch_size: int = 512,
        max_model_len: int | None = None,
        model: Any = None,
        tokenizer: Any = None,
        vllm_kwargs: dict[str, Any] | None = None,
        bf16: bool = False,
        planned_tokens: int | None = None,
        share_prompt: bool = True,
    ) -> None:
        self.device = pick_device(device)
        self.seed = seed
        self.share_prompt = share_prompt  # hf loop: n samples attend to one copy of the prompt's cache
        self.bf16 = bf16  # hf loop: bf16 autocast over fp32 weights (the trainer's precision choice)
        self.max_batch_size = max_batch_size
        self.model_dir = str(model_dir) if model_dir is not None else None
        if model is not None:
            backend = "hf" if backend == "auto" else backend
            if backend != "hf":
                raise CascadeUsageError(
                    "Generator.from_model shares a torch module: only backend 'hf' applies"
                )
        self.backend = resolve_backend(backend, model_dir, self.device, planned_tokens)
        self._llm: Any = None
        self.model: Any = None
        if self.backend == "hf":
            self._init_hf(model, tokenizer, dtype)
        else:
            self._init_vllm(dtype, max_model_len, vllm_kwargs or {})

    @classmethod
    def from_model(
        cls, model: Any, tokenizer: Any, *, seed: int = 0, max_batch_size: int = 512, bf16: bool = False
    ) -> Generator:
        """An hf generator over an existing module (the trainer's policy): no copy, no sync needed."""
        device = str(next(model.parameters()).device)
        return cls(
            None,
            backend="hf",
            seed=seed,
            device=device,
            model=model,
            tokenizer=tokenizer,
            max_batch_size=max_batch_size,
            bf16=bf16,
        )

    @classmethod
    def for_policy(
        cls, policy: Any, tokenizer: Any, model_dir: str, *, backend: str, seed: int, max_batch_size: int,
        bf16: bool = False, planned_tokens: int | None = None, vllm_dtype: str = "auto",
    ) -> Generator:
        """A trainer's rollout engine: hf shares `policy` (bf16: under autocast); vLLM is the process's engine
        (vllm_engine.py) in `vllm_dtype` (auto: bf16 where the device has it natively), given the policy's
        current weights. `auto` decides by the rule in rollout_backend.py with the stage's `planned_tokens`."""
        device = str(next(policy.parameters()).device)
        if resolve_backend(backend, model_dir, device, planned_tokens) == "hf":
            return cls.from_model(policy, tokenizer, seed=seed, max_batch_size=max_batch_size, bf16=bf16)
        generator = cls(
            model_dir, backend="vllm", seed=seed, device=device, dtype=vllm_dtype, max_batch_size=max_batch_size
        )
        generator.update_weights(merged_state_dict(policy))  # plain HF names, LoRA folded in
        return generator

    # ---- backends -------------------------------------------------------------------------------------

    def _init_hf(self, model: Any, tokenizer: Any, dtype: str) -> None:
        if model is None:
            if self.model_dir is None:
                raise CascadeUsageError("Generator needs a model directory or a model")
            model = load_model(self.model_dir, dtype=dtype, device=self.device).eval()
        if tokenizer is None:
            tokenizer = load_tokenizer(self.model_dir)
        use_gqa_sdpa(model)
        self.model = model
        self.tokenizer = tokenizer
        self.rng = torch.Generator(device=self.device)
        self.rng.manual_seed(self.seed)
        pad = tokenizer.pad_token_id
        self.pad_id = pad if pad is not None else (tokenizer.eos_token_id or 0)

    def _init_vllm(self, dtype: str, max_model_len: int | None, extra: dict[str, Any]) -> None:
        outer = global_rng_state()
        self._llm = vllm_engine.acquire(
            self.model_dir, dtype=vllm_engine.resolve_dtype(dtype, self.device), max_model_len=max_model_len, device=self.device, seed=self.seed,
            options=extra,
        )
        self.tokenizer = load_tokenizer(self.model_dir)
        torch.manual_seed(self.seed)  # vLLM seeds at start-up too; this makes the state ours, whatever it does
        self._engine_rng = global_rng_state()
        set_global_rng_state(outer)

    @contextlib.contextmanager
    def _engine_rng_swapped_in(self) -> Iterator[None]:
        """Run the in-process vLLM engine on this generator's RNG state and give the caller's back after."""
        outer = global_rng_state()
        set_global_rng_state(self._engine_rng)
        try:
            yield
        finally:
            self._engine_rng = global_rng_state()
            set_global_rng_state(outer)

    # ---- public API -----------------------------------------------------------------------------------

    def generate(
        self,
        prompts: list[str],
        n: int = 1,
        max_new_tokens: int = 256,
        temperature: float = 1.0,
        top_p: float = 1.0,
        top_k: int = -1,
        stop: Sequence[str] | None = DEFAULT_STOP,
        logprobs: bool = False,
    ) -> list[list[Completion]]:
        """`n` completions for each prompt (already rendered text), in prompt order."""
        if not prompts:
            return []
        spec = Sampling(n, max_new_tokens, temperature, top_p, top_k, list(stop or ()), logprobs)
        if self.backend == "vllm":
            return self._generate_vllm(prompts, spec)
        per_chunk = max(1, self.max_batch_size // n)
        results: list[Completion] = []
        # One autocast region for the whole call: the bf16 copies of the weights are cast once and cached.
        with torch.autocast(self.device.split(":")[0], dtype=torch.bfloat16, enabled=self.bf16):
            for start in range(0, len(prompts), per_chunk):
                results.extend(self._generate_hf(prompts[start : start + per_chunk], spec))
        return [results[i * n : (i + 1) * n] for i in range(len(prompts))]

    def update_weights(
        self, state_dict: dict[str, torch.Tensor] | Iterable[tuple[str, torch.Tensor]]
    ) -> None:
        """Load new policy weights (HF parameter names). A shared hf module needs no copy."""
        items = list(state_dict.items()) if isinstance(state_dict, dict) else list(state_dict)
        if self.backend == "hf":
            own = self.model.state_dict()
            if all(name in own and own[name].data_ptr() == tensor.data_ptr() for name, tensor in items):
                return  # the same tensors: the generator shares the trainer's module
            self.model.load_state_dict(dict(items), strict=False)
            return
        vllm_engine.reload_weights(self._llm, [(name, t.detach()) for name, t in items])
        vllm_engine.weights_pushed(self._llm)

    def rng_state(self) -> Any:
        """The sampler's RNG state, for exact resume (hf: its `torch.Generator`; vLLM: the engine's)."""
        return self.rng.get_state() if self.backend == "hf" else dict(self._engine_rng)

    def set_rng_state(self, state: Any) -> None:
        if state is None:
            return
        if self.backend == "hf":
            self.rng.set_state(state)
        elif isinstance(state, dict):
            self._engine_rng = dict(state)

    def close(self) -> None:
        """Drop this generator's hold on its model; the process's vLLM engine stays for the next generator
        (vllm_engine.py), and is shut down when one needs another architecture or the process ends."""
        self._llm = None
        self.model = None

    def __enter__(self) -> Generator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- hf loop --------------------------------------------------------------------------------------

    def _generate_hf(self, prompts: list[str], spec: Sampling) -> list[Completion]:
        """`n` samples of each prompt, flattened in prompt order (the loop: engines/local/rollout/hf_decode.py)."""
        return generate_hf(self, prompts, spec)

    # ---- vLLM ----------------------------------------------------------------------------------------

    def _generate_vllm(self, prompts: list[str], spec: Sampling) -> list[list[Completion]]:
        from vllm import SamplingParams

        n, logprobs = spec.n, spec.logprobs
        stop_ids, stop_strings = _stop_token_ids(self.tokenizer, spec.stop)
        if spec.temperature <= 0 and n > 1:  # vLLM refuses n > 1 when greedy: repeat the prompts instead
            flat = self._generate_vllm([p for p in prompts for _ in range(n)], dataclasses.replace(spec, n=1))
            return [[group[0] for group in flat[i * n : (i + 1) * n]] for i in range(len(prompts))]
        params = SamplingParams(
            n=n,
            max_tokens=spec.max_new_tokens,
            temperature=spec.temperature,
            top_p=spec.top_p,
            top_k=spec.top_k if spec.top_k > 0 else -1,
            stop=stop_strings or None,
            stop_token_ids=stop_ids or None,
            logprobs=0 if logprobs else None,
        )
        token_prompts = [
            {"prompt_token_ids": self.tokenizer.encode(p, add_special_tokens=False)} for p in prompts
        ]
        with self._engine_rng_swapped_in():
            outputs = self._llm.generate(token_prompts, params, use_tqdm=False)
        groups: list[list[Completion]] = []
        for output in outputs:
            group = []
            for sample in output.outputs:
                token_logprobs = None
                if logprobs and sample.logprobs is not None:
                    token_logprobs = [
                        float(entry[tok].logprob) for entry, tok in zip(sample.logprobs, sample.token_ids, strict=True)
                    ]
                group.append(
                    Completion(
                        text=sample.text,
                        token_ids=list(sample.token_ids),
                        finish_reason="stop" if sample.finish_reason == "stop" else "length",
                        logprob_sum=None if token_logprobs is None else float(sum(token_logprobs)),
                        token_logprobs=token_logprobs,
                    )
                )
            groups.append(group)
        return groups
