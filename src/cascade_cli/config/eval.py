"""The recipe's `eval` block: evaluate after every stage, then write the cascade report."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class EvalConfig:
    """`eval: {after_each_stage: true, benchmarks: [...]}` in a recipe; also what `cascade eval` flags set.

    `k` and `mode` default to each benchmark's own (k: 64 AIME, 8 IF/code/GPQA; mode: no_think for IFEval).
    `max_regression`: a benchmark that falls by more than this many points after a stage is flagged.
    """

    after_each_stage: bool = False
    include_base: bool = True  # also evaluate the recipe's starting model, as stage `base`
    benchmarks: list[str] = field(default_factory=lambda: ["tiny_math", "tiny_code", "tiny_if"])
    k: int | None = None
    mode: str | None = None
    max_tokens: int = 1024
    temperature: float = 0.6
    top_p: float = 0.95
    limit: int | None = None
    max_regression: float = 3.0
    backend: str = "auto"
    seed: int = 0
    workers: int = 1
