"""The `pass_rate_filter` stage on the local engine: a checkpoint as the prompt sampler that `prepare-data filter`
uses to estimate pass rates (data/pass_rate.py bands the rows and writes the stage's manifest)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cascade_cli.data.pass_rate import PassRateFilterConfig, Sampler, run_pass_rate_filter


def generator_sampler(config: Any) -> tuple[Sampler, Callable[[], None]]:
    """(sample(prompts, n) -> [[(text, finish_reason), ...], ...], close) for the config's checkpoint."""
    from cascade_cli.data.io import load_canonical
    from cascade_cli.engines.local.rollout.generation import Generator
    from cascade_cli.models.resolve import resolve
    from cascade_cli.records import resolve_rows_path

    model = str(resolve(str(config.init), "init"))  # as a training stage resolves its init: once, here
    rows = len(load_canonical(resolve_rows_path(config.data))[: config.limit])
    # every sample at full length: what `auto` weighs against vLLM's engine start
    planned = rows * config.k * config.max_new_tokens
    generator = Generator(model, backend=config.backend, seed=config.seed, planned_tokens=planned)

    def sample(prompts: list[str], n: int) -> list[list[tuple[str, str]]]:
        groups = generator.generate(
            prompts,
            n=n,
            max_new_tokens=config.max_new_tokens,
            temperature=config.temperature,
            top_p=config.top_p,
        )
        return [[(c.text, c.finish_reason) for c in group] for group in groups]

    return sample, generator.close


def run_pass_rate_filter_stage(config: PassRateFilterConfig) -> dict[str, Any]:
    """The `pass_rate_filter` stage on the local engine: sample with the config's checkpoint, keep the band."""
    return run_pass_rate_filter(config, make_sampler=generator_sampler)
