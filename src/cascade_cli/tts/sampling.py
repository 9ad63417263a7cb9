"""The local engine's generator (engines/local/rollout/generation.py) as the TTS commands' sampler, and the inputs
they share: a problem file and another system's responses."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cascade_cli.engines.local.rollout.generation import Completion, Generator
from cascade_cli.errors import CascadeUsageError
from cascade_cli.records import load_rows


@dataclass(frozen=True)
class SamplingSettings:
    max_tokens: int = 1024
    temperature: float = 0.6  # the paper's evaluation sampling (§4)
    top_p: float = 0.95
    backend: str = "auto"  # auto | hf | vllm
    seed: int = 0


def open_generator(model: str, settings: SamplingSettings) -> Generator:
    from cascade_cli.manifest import require_model_dir
    from cascade_cli.models.resolve import resolve_model
    from cascade_cli.models.tiny import is_embedded_spec

    # `tiny`, `smollm2-135m`, `gguf:PATH`: built offline; anything else is a local checkpoint
    model_dir = resolve_model(model) if is_embedded_spec(model) else require_model_dir(model, "--model")
    return Generator(str(model_dir), backend=settings.backend, seed=settings.seed)


def sampler(generator: Generator, settings: SamplingSettings):
    """(prompts, counts) -> completions: one `generate` call per distinct count."""

    def sample(prompts: list[str], counts: list[int]) -> list[list[Completion]]:
        out: list[list[Completion] | None] = [None] * len(prompts)
        for n in sorted(set(counts)):
            indices = [i for i, c in enumerate(counts) if c == n]
            groups = generator.generate(
                [prompts[i] for i in indices], n=n, max_new_tokens=settings.max_tokens,
                temperature=settings.temperature, top_p=settings.top_p, logprobs=True,
            )
            for i, group in zip(indices, groups, strict=True):
                out[i] = group
        return out  # type: ignore[return-value]

    return sample


def load_problems(path: Path, domain: str, limit: int | None) -> list[dict[str, Any]]:
    """Rows of a problem file (or prepare-data folder) that carry a `label`; errors name the file and row."""
    rows = load_rows(path)
    for number, row in enumerate(rows, start=1):
        if not isinstance(row.get("label"), dict):
            raise CascadeUsageError(f"{path}: row {number}: expected a {domain} 'label' object; found {row.get('label')!r}")
        if "prompt" not in row and "messages" not in row:
            raise CascadeUsageError(f"{path}: row {number}: expected 'prompt' (or 'messages')")
        row.setdefault("id", f"row-{number}")
    if not rows:
        raise CascadeUsageError(f"{path}: no problems")
    return rows[:limit] if limit else rows
