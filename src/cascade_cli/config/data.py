"""`cascade prepare-data`: sources -> canonical rows (+ data card)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import ClassVar

from omegaconf import MISSING

from cascade_cli.chat import MODES
from cascade_cli.config.checks import TEXT, Bound, at_least, fraction, one_of
from cascade_cli.config.common import StageConfig
from cascade_cli.errors import CascadeUsageError
from cascade_cli.records import ROW_DOMAINS

CONSTRAINT_SETS = ("ifeval", "ifbench")  # data/constraints.py: the constraints each set attaches
MAX_CONSTRAINTS = 6


def parse_sets(spec: str) -> list[str]:
    """`add_constraints`: `ifeval`, `ifbench` or both, comma-separated."""
    names = [name.strip() for name in spec.split(",") if name.strip()]
    if not names or any(name not in CONSTRAINT_SETS for name in names):
        raise CascadeUsageError(
            f"add_constraints: expected {' | '.join(CONSTRAINT_SETS)} (or both, comma-separated); found {spec!r}"
        )
    return names


def parse_count_range(spec: str) -> tuple[int, int]:
    """`constraints_per_prompt`: `1-3` -> (1, 3); `2` -> (2, 2)."""
    match = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", str(spec))
    low, high = (int(match.group(1)), int(match.group(2) or match.group(1))) if match else (0, 0)
    if not match or low < 1 or high < low or high > MAX_CONSTRAINTS:
        raise CascadeUsageError(
            f"constraints_per_prompt: expected a count or a range like 1-3 (1 to {MAX_CONSTRAINTS}); found {spec!r}"
        )
    return low, high


@dataclass
class PrepareDataConfig(StageConfig):
    kind: str = "prepare_data"
    # tiny:DOMAIN (math|code|if|pref|general|sft), a local json/jsonl/parquet file or folder (`shared:REL`: a
    # file of the shared data folder, $CASCADE_SHARED_DATA), or a hub dataset id (also a `datasets` builder
    # such as `json` / `parquet` together with `data_files`).
    source: str = MISSING
    domain: str | None = None  # force every row's domain (else read from the row or inferred from columns)
    split: str = "train"  # hub split
    subset: str | None = None  # hub configuration name
    data_files: list[str] = field(default_factory=list)  # for hub builders (json, parquet, csv)
    limit: int | None = None  # read at most this many source rows
    # Skip this many source rows first (with limit: a slice, e.g. GSM8K train rows 1,500+ for RL after SFT
    # took the first 1,500; templated prompts share 9-grams, so exclude_prompts_from cannot split them).
    offset: int = 0
    n: int = 1000  # rows for tiny:* sources
    mode: str | None = None  # think | no_think for every row (else the row's own or the domain default)
    map: dict[str, str] = field(default_factory=dict)  # canonical name -> source column
    holdout: int = 0  # rows written to heldout.jsonl instead of data.jsonl (for evaluation)
    # tiny:sft only: share of wrong math/code/if answers (headroom for RL) and the task mix.
    wrong_fraction: float = 0.2
    # tiny:sft task mix, task -> weight.
    mix: dict[str, float] = field(default_factory=dict)
    # Filters on the training rows: drop rows whose prompt shares a word n-gram with (or equals,
    # after normalisation) a benchmark prompt or a prompt of another data set (paper: 9-grams; SFT and RL
    # prompts strictly disjoint). Benchmarks by name (math500, aime24, aime25, ifeval, humaneval, ...) or file.
    decontaminate_against: list[str] = field(default_factory=list)
    # Data files or prepare-data folders whose prompts are dropped from these rows.
    exclude_prompts_from: list[str] = field(default_factory=list)
    # Word n-gram length of the overlap checks.
    ngram_n: int = 9
    # Token-length percentiles in the data card with this tokenizer: `tiny` (the embedded char-level one) or
    # a tokenizer folder / model id; without it the card reports character lengths only.
    tokenizer: str | None = None
    # Source format: auto reads it off each row's columns (rows no format claims take the generic column
    # rules), or a released / public format by name (nemotron-sft, nemotron-rl-math, openai, livecodebench,
    # apps, gsm8k, mbpp, ...; a wrong name lists them all); helpsteer | ultrafeedback turn raw rows into pref
    # pairs (ties dropped).
    format: str = "auto"
    # Drop math and competitive-programming prompts (for RLHF prompts).
    drop_math_code: bool = False
    # Drop rows whose answers (assistant turns, a pair's chosen side) switch language or script away from the
    # prompt's, as the paper filters its data.
    drop_code_switch: bool = False
    # Keep only the rows whose id is listed or in a listed range A-B of integer ids, e.g. MBPP's train +
    # validation tasks: [511-974].
    keep_ids: list[str] = field(default_factory=list)
    # Canonical rows of other prepare-data folders (or files) added to this source's rows: one data mix
    # for one stage (e.g. SFT on GSM8K + MBPP + HH answers).
    include: list[str] = field(default_factory=list)
    # IF-RL prompts from prompt rows: attach verifiable constraints of ifeval | ifbench (or both,
    # comma-separated), phrased in natural language, conflicting ones skipped.
    add_constraints: str | None = None
    # Constraints per prompt: a count or a range (drawn uniformly), e.g. 1-3.
    constraints_per_prompt: str = "1-3"
    # With add_constraints: also decontaminate the prompts against the set's benchmark (IFEval's 541 prompts).
    constraints_decontaminate: bool = True
    # Share of source rows that may be rejected (malformed, or not fitting the format) before the run fails
    # with exit 2; 0: none. Rejected rows, with reasons, go to OUT/rejected.jsonl either way.
    max_rejected: float = 0.0

    BOUNDS: ClassVar[dict[str, Bound]] = {
        "engine": one_of("local"),  # no OpenRLHF job prepares data
        "source": TEXT, "domain": one_of(*ROW_DOMAINS), "split": TEXT, "subset": TEXT,
        "limit": at_least(1), "offset": at_least(0), "n": at_least(0), "mode": one_of(*MODES), "holdout": at_least(0),
        "wrong_fraction": fraction(), "ngram_n": at_least(1), "tokenizer": TEXT, "format": TEXT,
        "add_constraints": TEXT, "constraints_per_prompt": TEXT, "max_rejected": fraction(),
    }

    def check(self) -> None:
        super().check()
        for task, weight in self.mix.items():
            if weight < 0:
                raise CascadeUsageError(f"mix.{task}: expected a weight >= 0, found {weight}")
        if self.add_constraints is not None:
            parse_sets(self.add_constraints)
            parse_count_range(self.constraints_per_prompt)
            if self.domain not in (None, "if"):
                raise CascadeUsageError(
                    f"domain: --add-constraints makes instruction-following rows, so expected if (or unset), "
                    f"found {self.domain!r}"
                )
