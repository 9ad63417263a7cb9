"""`cascade prepare-data filter` (a recipe's `pass_rate_filter` stage): keep the prompts a model solves neither
too often nor (optionally) never.

For every RL row (math, if, code, swe) the model samples `k` answers; the domain's verifier scores them; the
row's pass rate is passed / k. Rows with `min_pass <= pass_rate < max_pass` are kept; the rest go to
`dropped.jsonl` with the reason. Every written row carries `pass_rate` and `pass_rate_k`, so a later run
can re-band without sampling again (`reuse=true`). Paper (Nemotron-Cascade §2): drop math problems solved at
least 12 of 16 times (`k=16 max_pass=0.75`), and code problems the teacher solves 8/8 or 0/8
(`k=8 min_pass=0.1 max_pass=1.0`).

    OUT/data.jsonl      kept rows (+ pass_rate, pass_rate_k)
    OUT/dropped.jsonl   dropped rows (+ pass_rate, pass_rate_k, dropped: too_easy | too_hard)
    OUT/heldout.jsonl   copied from a prepare-data input folder (the band applies to training rows only)
    OUT/pass_rate.json  the band, counts per domain, the pass-rate histogram; OUT/cascade_stage.json
"""

from __future__ import annotations

import json
import shutil
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from omegaconf import MISSING
from rich.table import Table

from cascade_cli.chat import render_prompt
from cascade_cli.config.build import build_stage_config
from cascade_cli.config.checks import TEXT, Bound, Range, above, at_least, fraction, one_of, validate
from cascade_cli.config.common import StageConfig
from cascade_cli.console import console, print_warning
from cascade_cli.data.io import RL_DOMAINS, load_canonical
from cascade_cli.errors import CascadeRunError, CascadeUsageError
from cascade_cli.jsonl import write_jsonl
from cascade_cli.manifest import StageManifest, fingerprint_path
from cascade_cli.progress import Progress
from cascade_cli.records import DATA_FILE, HELDOUT_FILE, resolve_rows_path, rollout_record
from cascade_cli.verifiers import known_domains
from cascade_cli.verifiers.batch import score_records, verifier_problem

DROPPED_FILE = "dropped.jsonl"
SUMMARY_FILE = "pass_rate.json"
# (prompts, n) -> for each prompt, n (response text, finish_reason) samples.
Sampler = Callable[[list[str], int], list[list[tuple[str, str]]]]


@dataclass
class PassRateFilterConfig(StageConfig):
    # `init` (StageConfig; `--model` on the command line) is the checkpoint that samples: tiny / tiny:SEED, a
    # folder or a hub id. In a recipe it defaults to the previous stage's output, like a training stage's.
    kind: str = "pass_rate_filter"
    data: str = MISSING  # canonical RL rows: a .jsonl/.parquet file or a prepare-data folder
    k: int = 16  # samples per prompt; a prompt's pass rate is the share of them that pass
    max_pass: float = 0.75  # dropped when pass_rate >= max_pass (too easy)
    min_pass: float = 0.0  # dropped when pass_rate < min_pass (too hard)
    # Per-domain [min_pass, max_pass] for mixed files, e.g. `bands.code=[0.1,1.0]` next to math's defaults.
    bands: dict[str, list[float]] = field(default_factory=dict)
    reuse: bool = False  # rows already carrying pass_rate with pass_rate_k == k are not sampled again
    max_new_tokens: int = 1024  # response length limit of each sample
    temperature: float = 1.0  # sampling temperature
    top_p: float = 1.0  # nucleus sampling threshold
    backend: str = "auto"  # rollout backend: auto | hf | vllm
    batch_prompts: int = 64  # prompts per generation call (x k samples)
    workers: int = 1  # verifier processes
    limit: int | None = None  # first N rows only

    BOUNDS: ClassVar[dict[str, Bound]] = {
        "engine": one_of("local"), "data": TEXT, "k": at_least(1), "max_pass": above(0), "min_pass": fraction(),
        "max_new_tokens": at_least(1), "temperature": at_least(0), "top_p": Range(0, 1, low_open=True),
        "backend": one_of("auto", "hf", "vllm"), "batch_prompts": at_least(1), "workers": at_least(1),
        "limit": at_least(1),
    }

    def check(self) -> None:
        super().check()
        bands = {"": [self.min_pass, self.max_pass], **{f"bands.{d}": list(b) for d, b in self.bands.items()}}
        for name, band in bands.items():
            prefix = f"{name}: " if name else ""
            if len(band) != 2:
                raise CascadeUsageError(f"{name}: expected [min_pass, max_pass]; found {band}")
            low, high = band
            if not 0.0 <= low <= 1.0:
                raise CascadeUsageError(f"{prefix}min_pass: expected a number in [0, 1], found {low}")
            if high <= low:
                raise CascadeUsageError(f"{prefix}max_pass: expected a value above min_pass ({low}), found {high}")


def build_filter_config(values: dict[str, Any], overrides: list[str] | None = None) -> PassRateFilterConfig:
    return build_stage_config(PassRateFilterConfig, values, list(overrides or []), where="prepare-data filter")


def check_required(config: PassRateFilterConfig) -> None:
    """The keys a run needs that the config class leaves optional (a recipe fills both: stages.py)."""
    if not config.out:
        raise CascadeUsageError("out: missing required value (--out DIR)")
    if not config.init:
        raise CascadeUsageError("init: missing required value (--model CKPT)")


def check_config(config: PassRateFilterConfig) -> None:
    """The bounds and checks of the config class (config/checks.py), and the keys a run needs."""
    try:
        validate(config)
        check_required(config)
    except CascadeUsageError as error:
        raise CascadeUsageError(f"prepare-data filter: {error}") from None


def band_verdict(rate: float, min_pass: float, max_pass: float) -> str | None:
    """None when kept; `too_easy` (rate >= max_pass) or `too_hard` (rate < min_pass) when dropped."""
    if rate >= max_pass:
        return "too_easy"
    if rate < min_pass:
        return "too_hard"
    return None


def estimate_pass_rates(
    rows: Sequence[dict[str, Any]],
    sample: Sampler,
    k: int,
    *,
    batch_prompts: int = 64,
    workers: int = 1,
    on_batch: Callable[[int], None] | None = None,
) -> list[float]:
    """Pass rate of each row: k samples from `sample`, scored by the row's domain verifier."""
    rates: list[float] = []
    for start in range(0, len(rows), batch_prompts):
        batch = rows[start : start + batch_prompts]
        outputs = sample([render_prompt(row["prompt"], row["mode"]) for row in batch], k)
        records = [
            rollout_record(row, text, domain=row["domain"], mode=row["mode"], finish_reason=finish)
            for row, samples in zip(batch, outputs, strict=True)
            for text, finish in samples
        ]
        results = score_records(records, workers=workers)
        for index in range(len(batch)):
            passed = sum(result.passed for result in results[index * k : (index + 1) * k])
            rates.append(passed / k)
        if on_batch:
            on_batch(len(batch))
    return rates


def apply_band(
    rows: list[dict[str, Any]],
    rates: list[float],
    k: int,
    min_pass: float,
    max_pass: float,
    bands: dict[str, list[float]] | None = None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(kept, dropped) with `pass_rate`, `pass_rate_k` (and `dropped` on dropped rows) written on each.

    `bands` maps a domain to its own [min_pass, max_pass]; other domains use min_pass / max_pass.
    """
    kept, dropped = [], []
    for row, rate in zip(rows, rates, strict=True):
        low, high = (bands or {}).get(row.get("domain", ""), (min_pass, max_pass))
        row = {**row, "pass_rate": round(rate, 6), "pass_rate_k": k}
        verdict = band_verdict(rate, low, high)
        if verdict is None:
            kept.append(row)
        else:
            dropped.append({**row, "dropped": verdict})
    return kept, dropped


def _check_rows(rows: list[dict[str, Any]], where: Path) -> None:
    verifiable = set(known_domains())
    for number, row in enumerate(rows, start=1):
        if row["domain"] not in RL_DOMAINS or row["domain"] not in verifiable:
            raise CascadeUsageError(
                f"{where}: row {number}: domain {row['domain']!r} has no verifier to compute a pass rate "
                f"(expected one of {', '.join(sorted(set(RL_DOMAINS) & verifiable))})"
            )
    for domain in sorted({row["domain"] for row in rows}):  # e.g. code without a usable sandbox: fail now
        problem = verifier_problem(domain, {})
        if problem:
            raise CascadeRunError(f"{where}: {problem}")


def histogram(rates: list[float], k: int) -> dict[str, int]:
    """Rows per number of passing samples: {"0/16": 12, "1/16": 3, ...}."""
    counts = Counter(round(rate * k) for rate in rates)
    return {f"{passed}/{k}": counts[passed] for passed in range(k + 1) if counts[passed]}


def _print_summary(summary: dict[str, Any], out: Path) -> None:
    table = Table(title=f"prepare-data filter -> {out}")
    for column in ("domain", "rows", "kept", "too easy", "too hard", "mean pass"):
        table.add_column(column, justify="left" if column == "domain" else "right")
    for domain, counts in summary["by_domain"].items():
        table.add_row(
            domain,
            str(counts["in"]),
            str(counts["kept"]),
            str(counts["too_easy"]),
            str(counts["too_hard"]),
            f"{counts['mean_pass_rate']:.3f}",
        )
    console.print(table)
    console.print(
        f"kept {summary['kept']} of {summary['in']} rows with {summary['min_pass']} <= pass rate < "
        f"{summary['max_pass']} (k={summary['k']}; sampled {summary['sampled']}, reused {summary['reused']})",
        soft_wrap=True,
    )


SamplerFactory = Callable[[PassRateFilterConfig], tuple[Sampler, Callable[[], None]]]


def run_pass_rate_filter(
    config: PassRateFilterConfig,
    sampler: Sampler | None = None,
    make_sampler: SamplerFactory | None = None,
) -> dict[str, Any]:
    """Sample, score, band and write `config.out`; returns the metrics stored in the manifest.

    `sampler` answers prompts directly (a caller that already holds a model); otherwise `make_sampler` builds
    one from the config (the CLI passes `engines.local.rollout.pass_rate_runner.generator_sampler`: data never imports
    engines).
    """
    check_config(config)
    started = time.time()
    data_file = resolve_rows_path(config.data)
    rows = load_canonical(data_file)[: config.limit]
    _check_rows(rows, data_file)
    out = Path(config.out)  # type: ignore[arg-type]

    def reusable(row: dict[str, Any]) -> bool:
        return (
            config.reuse
            and isinstance(row.get("pass_rate"), (int, float))
            and row.get("pass_rate_k") == config.k
        )

    todo = [row for row in rows if not reusable(row)]
    rates_by_index: dict[int, float] = {
        i: float(row["pass_rate"]) for i, row in enumerate(rows) if reusable(row)
    }
    if todo:
        close: Callable[[], None] = lambda: None  # noqa: E731
        if sampler is None:
            if make_sampler is None:
                raise ValueError("run_pass_rate_filter needs `sampler` or `make_sampler` to sample answers")
            sampler, close = make_sampler(config)
        try:
            with Progress(f"sampling k={config.k}", len(todo), unit="prompt", transient=True) as bar:
                fresh = estimate_pass_rates(
                    todo,
                    sampler,
                    config.k,
                    batch_prompts=config.batch_prompts,
                    workers=config.workers,
                    on_batch=lambda count: bar.advance(count),
                )
        finally:
            close()
        fresh_iter = iter(fresh)
        for index, row in enumerate(rows):
            if not reusable(row):
                rates_by_index[index] = next(fresh_iter)
    rates = [rates_by_index[index] for index in range(len(rows))]
    bands = {domain: list(band) for domain, band in config.bands.items()}
    kept, dropped = apply_band(rows, rates, config.k, config.min_pass, config.max_pass, bands)

    by_domain: dict[str, dict[str, Any]] = {}
    for row in [*kept, *dropped]:
        counts = by_domain.setdefault(
            row["domain"], {"in": 0, "kept": 0, "too_easy": 0, "too_hard": 0, "mean_pass_rate": 0.0}
        )
        counts["in"] += 1
        counts[row.get("dropped", "kept")] += 1
        counts["mean_pass_rate"] += row["pass_rate"]
    for counts in by_domain.values():
        counts["mean_pass_rate"] = round(counts["mean_pass_rate"] / counts["in"], 6)
    summary = {
        "model": config.init,
        "data": str(data_file),
        "k": config.k,
        "min_pass": config.min_pass,
        "max_pass": config.max_pass,
        "bands": bands,
        "in": len(rows),
        "kept": len(kept),
        "too_easy": sum(row["dropped"] == "too_easy" for row in dropped),
        "too_hard": sum(row["dropped"] == "too_hard" for row in dropped),
        "sampled": len(todo),
        "reused": len(rows) - len(todo),
        "by_domain": dict(sorted(by_domain.items())),
        "histogram": histogram(rates, config.k),
    }
    out.mkdir(parents=True, exist_ok=True)
    write_jsonl(out / DATA_FILE, kept)
    write_jsonl(out / DROPPED_FILE, dropped)
    heldout = data_file.parent / HELDOUT_FILE if data_file.name == DATA_FILE else None
    if heldout is not None and heldout.is_file() and heldout.resolve() != (out / HELDOUT_FILE).resolve():
        shutil.copyfile(heldout, out / HELDOUT_FILE)
    (out / SUMMARY_FILE).write_text(json.dumps(summary, indent=2) + "\n")
    metrics = {key: summary[key] for key in ("in", "kept", "too_easy", "too_hard", "sampled", "reused")}
    metrics["fingerprint"] = fingerprint_path(out / DATA_FILE)
    inputs = {"input": fingerprint_path(data_file), "output": metrics["fingerprint"]}
    record = StageManifest(out, config, init=config.init, inputs=inputs)
    record.write("completed", metrics, timings={"seconds": round(time.time() - started, 3)})
    _print_summary(summary, out)
    if not kept:
        print_warning(f"{out / DATA_FILE}: no row inside the pass-rate band; later stages cannot read it")
    return metrics
