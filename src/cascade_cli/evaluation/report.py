"""`cascade report RUN_DIR`: the stage x benchmark table (paper Tables 2, 4-8) and a Figure-1 style plot.

Run directory layout read here:
    RUN_DIR/run.json                   stage order: `stage_order` (as `recipe run` writes it), else `stages`
                                       (a list of names, or a mapping name -> record, in run order)
    RUN_DIR/eval/<stage>/results.json  what `cascade eval --out RUN_DIR/eval/<stage>` writes
    RUN_DIR/eval/<stage>/samples.jsonl (optional) its answers and verdicts: the per-group tables of IFEval and
                                       IFBench and the flags on gains that look like a hack (hack_flags.py)
Stages with results but not listed in run.json come first when named `base`/`init`, else last (by time).
Without run.json the stages are ordered by their results' `evaluated_at`.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from cascade_cli.errors import CascadeUsageError
from cascade_cli.evaluation.hack_flags import hack_flags, render_flags
from cascade_cli.evaluation.instruction_groups import (
    SAMPLES_NAME,
    read_samples,
    render_group_tables,
    stage_breakdown,
)

RUN_MANIFEST = "run.json"
EVAL_DIR = "eval"
REPORT_MD = "report.md"
REPORT_PNG = "report.png"
LEADING_STAGES = ("base", "init")


def stage_eval_dir(run_dir: str | Path, stage: str) -> Path:
    return Path(run_dir) / EVAL_DIR / stage


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise CascadeUsageError(f"{path}: malformed JSON ({error.msg} at line {error.lineno})") from None


def _stage_names(manifest: Any, path: Path) -> list[str]:
    """Stage order from run.json: `stage_order` (what `recipe run` writes), else `stages` (a list, or a
    mapping name -> record in run order)."""
    if not isinstance(manifest, dict):
        raise CascadeUsageError(f"{path}: expected a JSON object; found {type(manifest).__name__}")
    entries = manifest.get("stage_order", manifest.get("stages", []))
    if isinstance(entries, dict):
        entries = list(entries)
    if not isinstance(entries, list):
        raise CascadeUsageError(
            f"{path}: 'stages' must be a list of stage names; found {type(entries).__name__}"
        )
    names = []
    for entry in entries:
        name = entry.get("name") if isinstance(entry, dict) else entry
        if not isinstance(name, str):
            raise CascadeUsageError(
                f"{path}: 'stages' entries must be names or {{'name': ...}}; found {entry!r}"
            )
        names.append(name)
    return names


def load_stage_results(run_dir: str | Path) -> tuple[list[str], dict[str, dict[str, Any]]]:
    """(stage order, stage -> results.json content) for every stage that has eval results."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise CascadeUsageError(f"run directory {run_dir}: not found")
    eval_root = run_dir / EVAL_DIR
    found = {}
    if eval_root.is_dir():
        for results_path in sorted(eval_root.glob(f"*/{'results.json'}")):
            results = _read_json(results_path)
            if not isinstance(results, dict) or not isinstance(results.get("benchmarks"), dict):
                raise CascadeUsageError(
                    f"{results_path}: expected an object with 'benchmarks' (from cascade eval)"
                )
            found[results_path.parent.name] = results
    if not found:
        raise CascadeUsageError(
            f"run directory {run_dir}: no evaluation results (expected {EVAL_DIR}/<stage>/results.json)"
        )
    manifest_path = run_dir / RUN_MANIFEST
    listed = _stage_names(_read_json(manifest_path), manifest_path) if manifest_path.is_file() else []
    unlisted = sorted(
        (s for s in found if s not in listed), key=lambda s: str(found[s].get("evaluated_at", ""))
    )
    leading = [s for s in unlisted if s in LEADING_STAGES]
    trailing = [s for s in unlisted if s not in LEADING_STAGES]
    order = leading + [s for s in listed if s in found] + trailing
    return order, found


def metric_label(summary: dict[str, Any]) -> str:
    """The metric a benchmark's score is, with its k: `avg@4`, `pass@8`, or `prompt_strict, k=4`."""
    primary = str(summary.get("primary", "score"))
    k = summary.get("k")
    return primary if primary.startswith(("avg@", "pass@")) or not k else f"{primary}, k={k}"


def shared_label(labels: dict[str, str]) -> str | None:
    """The one metric label of a benchmark across stages, or None when stages differ (e.g. k=1 and k=2)."""
    distinct = set(labels.values())
    return distinct.pop() if len(distinct) == 1 else None


def build_table(
    stages: list[str], results: dict[str, dict[str, Any]], max_regression: float
) -> tuple[list[str], dict[str, dict[str, float]], dict[str, dict[str, str]], list[dict[str, Any]]]:
    """(benchmarks, benchmark -> stage -> score, benchmark -> stage -> metric label, regressions)."""
    benchmarks: list[str] = []
    labels: dict[str, dict[str, str]] = {}
    table: dict[str, dict[str, float]] = {}
    for stage in stages:
        for name, summary in results[stage]["benchmarks"].items():
            if name not in table:
                benchmarks.append(name)
                table[name], labels[name] = {}, {}
            table[name][stage] = float(summary.get("score", 0.0))
            labels[name][stage] = metric_label(summary)
    regressions = []
    for name in benchmarks:
        previous = None
        for stage in stages:
            if stage not in table[name]:
                continue
            if previous is not None:
                delta = table[name][stage] - table[name][previous]
                if delta < -max_regression:
                    regressions.append(
                        {
                            "benchmark": name,
                            "stage": stage,
                            "previous_stage": previous,
                            "delta": round(delta, 2),
                        }
                    )
            previous = stage
    return benchmarks, table, labels, regressions


def best_stage(scores: dict[str, float], stages: list[str]) -> str | None:
    """The stage with the highest score among `stages` that have one; a tie goes to the later stage (the one
    trained on more of the cascade). What the report stars and what `best:BENCHMARK` resolves to."""
    scored = [stage for stage in stages if stage in scores]
    return max(reversed(scored), key=lambda stage: scores[stage]) if scored else None


def best_stage_of(run_dir: str | Path, benchmark: str) -> str:
    """The name of `benchmark`'s best stage in a run directory's evaluations (`cascade report --best`)."""
    stages, results = load_stage_results(run_dir)
    benchmarks, table, _, _ = build_table(stages, results, max_regression=0.0)
    if benchmark not in table:
        raise CascadeUsageError(
            f"run directory {run_dir}: no {benchmark!r} results (benchmarks: {', '.join(benchmarks)})"
        )
    return str(best_stage(table[benchmark], stages))


def _cell(
    name: str,
    stage: str,
    stages: list[str],
    table: dict[str, dict[str, float]],
    flagged: set,
    label: str | None,
    best: str | None,
) -> str:
    """`score (delta)`, with the stage's metric label when the stages' labels differ, ★ on the best stage."""
    if stage not in table[name]:
        return "–"
    value = table[name][stage]
    earlier = [s for s in stages[: stages.index(stage)] if s in table[name]]
    text = f"{value:.1f}"
    if earlier:
        text += f" ({value - table[name][earlier[-1]]:+.1f})"
    if label:
        text += f" [{label}]"
    if stage == best:
        text += " ★"
    return f"**{text}** ⚠" if (name, stage) in flagged else text


def render_markdown(
    run_dir: Path,
    stages: list[str],
    benchmarks: list[str],
    table: dict[str, dict[str, float]],
    labels: dict[str, dict[str, str]],
    regressions: list[dict[str, Any]],
    max_regression: float,
    answers: tuple[dict[str, dict[str, Any]], list[dict[str, Any]]] = ({}, []),
) -> str:
    """The report; `answers`: (instruction_groups.stage_breakdown, hack_flags) from the stages' samples."""
    breakdown, flags = answers
    flagged = {(r["benchmark"], r["stage"]) for r in regressions}
    lines = [
        f"# Cascade report: {run_dir.name}",
        "",
        "Score per benchmark after each stage (percent; in brackets the change from the previous stage; the "
        "metric and its k beside the benchmark, or in each cell where the stages sampled differently; ★ the "
        "benchmark's best stage, what `best:BENCHMARK` names in a recipe).",
        "",
        "| Benchmark (metric) | " + " | ".join(stages) + " |",
        "|---|" + "---|" * len(stages),
    ]
    for name in benchmarks:
        shared = shared_label(labels[name])
        best = best_stage(table[name], stages)
        cells = [
            _cell(name, stage, stages, table, flagged, None if shared else labels[name].get(stage), best)
            for stage in stages
        ]
        lines.append(f"| {name}{f' ({shared})' if shared else ''} | " + " | ".join(cells) + " |")
    lines += ["", "## Best stage per benchmark", ""]
    for name in benchmarks:
        best = best_stage(table[name], stages)
        lines.append(f"- **{name}**: `{best}` ({table[name][best]:.1f})")
    lines += ["", f"## Regressions (drop of more than {max_regression:g} points after a stage)", ""]
    if regressions:
        lines += [
            f"- **{r['benchmark']}** fell {-r['delta']:.1f} points after `{r['stage']}` (from `{r['previous_stage']}`)"
            for r in regressions
        ]
    else:
        lines.append("None.")
    lines += [""]
    if breakdown:
        lines += render_flags(flags)
        groups = render_group_tables(breakdown)
        if groups:
            lines += [
                "## Instruction groups (percent followed, strict; paired 95% interval of the change)",
                "",
            ]
            lines += groups
    lines += [f"![scores by stage]({REPORT_PNG})", ""]
    return "\n".join(lines)


def plot_series(
    stages: list[str], benchmarks: list[str], table: dict[str, dict[str, float]]
) -> dict[str, list[float]]:
    """Each benchmark's scores at every stage; a stage without a score is NaN, where matplotlib breaks the
    line instead of bridging the stage."""
    return {name: [table[name].get(stage, math.nan) for stage in stages] for name in benchmarks}


def render_plot(
    path: Path,
    stages: list[str],
    benchmarks: list[str],
    table: dict[str, dict[str, float]],
    regressions: list[dict[str, Any]],
    title: str,
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(max(6.0, 1.4 * len(stages) + 3), 4.5))
    positions = {stage: i for i, stage in enumerate(stages)}
    for name, scores in plot_series(stages, benchmarks, table).items():
        axes.plot(range(len(stages)), scores, marker="o", label=_plain(name))
        for x, y in enumerate(scores):
            if not math.isnan(y):
                axes.annotate(
                    f"{y:.1f}", (x, y), textcoords="offset points", xytext=(0, 6), ha="center", fontsize=7
                )
    for r in regressions:
        axes.plot(
            positions[r["stage"]],
            table[r["benchmark"]][r["stage"]],
            "x",
            color="red",
            markersize=12,
            markeredgewidth=2,
        )
    axes.set_xticks(range(len(stages)), [_plain(stage) for stage in stages], rotation=20)
    axes.set_xlim(-0.5, len(stages) - 0.5)
    axes.set_ylim(*score_axis([value for per_stage in table.values() for value in per_stage.values()]))
    axes.set_ylabel("score (%)")
    axes.set_title(_plain(title))
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8, loc="best")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def score_axis(values: list[float], min_span: float = 10.0) -> tuple[float, float]:
    """Y limits that show every score with room for its label: at least `min_span` points wide (flat or
    all-zero scores get a readable 0-10 axis, not matplotlib's -0.04..0.04), never below 0 for
    non-negative scores (0 just above the axis line) nor above 100 when none exceeds it."""
    low, high = (min(values), max(values)) if values else (0.0, 0.0)
    pad = max(2.0, 0.1 * (high - low))
    low, high = low - pad, high + pad
    if high - low < min_span:
        middle = (low + high) / 2
        low, high = middle - min_span / 2, middle + min_span / 2
    if min(values or [0.0]) >= 0 and low < 0:
        low, high = 0.0, high - low
    if max(values or [0.0]) <= 100 and high > 100:
        low, high = max(0.0, low - (high - 100)), 100.0
    if low == 0.0:  # a score of 0 sits just above the axis line, not hidden under it
        low = -0.03 * high
    return low, high


def _plain(text: str) -> str:
    """Matplotlib reads `$...$` as math: user names are drawn as written."""
    return text.replace("$", r"\$")


def write_report(
    run_dir: str | Path, max_regression: float = 3.0, out_dir: str | Path | None = None
) -> dict[str, Any]:
    """Write report.md and report.png for a run directory; returns the table, regressions, the flags on gains
    that look like a hack, the per-stage answer breakdown (median length, instruction groups) and paths."""
    run_dir = Path(run_dir)
    stages, results = load_stage_results(run_dir)
    benchmarks, table, labels, regressions = build_table(stages, results, max_regression)
    samples = {
        stage: read_samples(stage_eval_dir(run_dir, stage) / SAMPLES_NAME)
        for stage in stages
        if (stage_eval_dir(run_dir, stage) / SAMPLES_NAME).is_file()
    }
    breakdown = stage_breakdown(stages, samples)
    flags = hack_flags(breakdown, table)
    out = Path(out_dir) if out_dir is not None else run_dir
    out.mkdir(parents=True, exist_ok=True)
    markdown_path, plot_path = out / REPORT_MD, out / REPORT_PNG
    markdown_path.write_text(
        render_markdown(
            run_dir, stages, benchmarks, table, labels, regressions, max_regression, (breakdown, flags)
        )
    )
    render_plot(plot_path, stages, benchmarks, table, regressions, f"Scores by stage: {run_dir.name}")
    return {
        "stages": stages,
        "benchmarks": benchmarks,
        "metric": {name: shared_label(per_stage) or "mixed" for name, per_stage in labels.items()},
        "labels": labels,
        "table": table,
        "best": {name: best_stage(table[name], stages) for name in benchmarks},
        "regressions": regressions,
        "hack_flags": flags,
        "groups": breakdown,
        "markdown": str(markdown_path),
        "plot": str(plot_path),
    }
