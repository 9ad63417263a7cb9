"""Evaluation settings, declared once: `cascade eval` flags, `recipe plan`'s argv, the recipe runner and
`evaluation/run.py` all read `EvalSettings`; a recipe's `eval` block (`EvalConfig`) adds when and what."""

from __future__ import annotations

from dataclasses import dataclass, field

from cascade_cli.errors import CascadeUsageError

BACKENDS = ("auto", "vllm", "hf")


@dataclass
class EvalSettings:
    """How each benchmark is sampled and scored (`cascade eval --k 4 --max-tokens 512 ...`)."""

    # Samples per problem (unset: the benchmark's own: 64 AIME, 8 IF/code/GPQA).
    k: int | None = None
    # think | no_think (unset: the benchmark's own, e.g. no_think for IFEval).
    mode: str | None = None
    # Only the first N problems of each benchmark.
    limit: int | None = None
    # Max new tokens per sample (unset: the benchmark's own: 1024, 512 for gsm8k / mbpp).
    max_tokens: int | None = None
    # Sampling temperature (unset: the benchmark's own: the paper's 0.6, greedy 0 for gsm8k / mbpp).
    temperature: float | None = None
    top_p: float = 0.95  # nucleus sampling (1.0: off)
    backend: str = "auto"  # auto | vllm | hf
    seed: int = 0  # sampling seed
    workers: int = 1  # verifier processes

    def __post_init__(self) -> None:
        if self.k is not None and self.k < 1:
            raise CascadeUsageError(f"--k must be at least 1; found {self.k}")
        if self.mode is not None and self.mode not in ("think", "no_think"):
            raise CascadeUsageError(f"--mode must be think or no_think; found {self.mode!r}")
        if self.backend not in BACKENDS:
            raise CascadeUsageError(f"--backend must be one of {', '.join(BACKENDS)}; found {self.backend!r}")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise CascadeUsageError(f"--max-tokens must be at least 1; found {self.max_tokens}")
        if self.limit is not None and self.limit < 1:
            raise CascadeUsageError(f"--limit must be at least 1; found {self.limit}")
        if self.temperature is not None and self.temperature < 0:
            raise CascadeUsageError(f"--temperature must be at least 0; found {self.temperature}")
        if self.workers < 1:
            raise CascadeUsageError(f"--workers must be at least 1; found {self.workers}")


@dataclass
class EvalConfig(EvalSettings):
    """`eval: {after_each_stage: true, benchmarks: [...]}` in a recipe, with the `EvalSettings` keys.

    `max_regression`: a benchmark that falls by more than this many points after a stage is flagged.
    """

    after_each_stage: bool = False  # evaluate every stage that produces a model
    include_base: bool = True  # also evaluate the recipe's starting model, as stage `base`
    # Benchmark names (as `cascade eval --benchmarks`).
    benchmarks: list[str] = field(default_factory=lambda: ["tiny_math", "tiny_code", "tiny_if"])
    max_regression: float = 3.0  # points a benchmark may fall after a stage before it is flagged
