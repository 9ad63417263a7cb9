"""Evaluation settings, declared once: `cascade eval` flags, `recipe plan`'s argv, the recipe runner and
`evaluation/run.py` all read `EvalSettings`; a recipe's `eval` block (`EvalConfig`) adds when and what."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from cascade_cli.chat import RENDER_MODES
from cascade_cli.config.checks import Bound, Range, at_least, one_of, validate
from cascade_cli.template_choice import TEMPLATE_CHOICES
from cascade_cli.trackers import DEFAULT_REPORT_TO, TRACKERS

BACKENDS = ("auto", "vllm", "hf")


@dataclass
class EvalSettings:
    """How each benchmark is sampled and scored (`cascade eval --k 4 --max-tokens 512 ...`)."""

    # Samples per problem (unset: the benchmark's own: 64 AIME, 8 IF/code/multiple choice, 1 gsm8k/mbpp).
    k: int | None = None
    # think | no_think | none (no flag) (unset: the benchmark's own, e.g. no_think for IFEval). Flags only
    # render under cascade's template: a model's own template gets none.
    mode: str | None = None
    # auto (a checkpoint cascade trained: cascade's ChatML + mode flags; any other model: its own template,
    # its system prompt included, no flag, as lm-eval's --apply_chat_template) | model | cascade.
    chat_template: str = "auto"
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
    # Experiment trackers for the scores and a table of samples (with --out): tensorboard, wandb, mlflow
    # (see a training stage's report_to); [] for results.json alone.
    report_to: list[str] = field(default_factory=lambda: list(DEFAULT_REPORT_TO))

    BOUNDS: ClassVar[dict[str, Bound]] = {
        "report_to": one_of(*TRACKERS),
        "k": at_least(1), "mode": one_of(*RENDER_MODES), "chat_template": one_of(*TEMPLATE_CHOICES), "limit": at_least(1), "max_tokens": at_least(1),
        "temperature": at_least(0), "top_p": Range(0, 1, low_open=True), "backend": one_of(*BACKENDS),
        "seed": at_least(0), "workers": at_least(1),
    }

    def __post_init__(self) -> None:
        validate(self)  # also built directly (EvalSettings(k=8)), not only through config/structure.py


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

    BOUNDS: ClassVar[dict[str, Bound]] = {"max_regression": at_least(0)}
