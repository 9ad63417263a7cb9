"""One table and one plot for several real-model results: what each recipe's whole run did to each benchmark.

Reads the runs `benchmarks/real_gains.py` wrote (OUT/seedS, one OUT per recipe) and, per seed and benchmark,
compares the starting model with the run's last evaluated stage: both scores and the paired change with its
95% bootstrap interval over problems (the same computation as real_gains.py's stage-to-stage changes, but
start to end, so a recipe with an SFT in front is judged as a whole). Also the training time (every stage
but data preparation) and, for an RLHF stage, the reward model's mean score on its held-out prompts.

    python benchmarks/real_summary.py ~/cascade-runs/real/smol-if ~/cascade-runs/real/smol-math \\
        --goal smol-if:ifeval=5 --goal smol-math:gsm8k=3 --plot docs/results/real-summary.png

A goal (`RECIPE:BENCHMARK=POINTS`; a negative POINTS is the most a benchmark may lose) is drawn on the plot and
judged in the table on the change's point estimate. The recipe name is the OUT folder's name. Each row shows the
median answer at the start and the end beside its change: a score can rise because answers shrank.

`--json FILE` writes the table's rows; `--rows FILE` reads such rows back and merges them with the OUT folders' (a
row of the same recipe, seed and benchmark from an OUT folder replaces it), so a table outlives its runs: the
docs keep each table's rows (docs/results/*.json) and a new run is added to them without the old runs at hand:

    python benchmarks/real_summary.py ~/cascade-runs/real/smol-mopd --rows docs/results/real-summary-own-template.json \
        --json docs/results/real-summary-own-template.json --plot docs/results/real-summary-own-template.png

`--other-start BENCHMARK=SCORE` gives the starting model's score measured another way (the README's starts under
cascade's chat template, before `chat_template: auto`): the table then also counts each end from the better of
the two starts (unpaired, as the other start's answers are not in the run).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
from pathlib import Path
from typing import Any

_spec = importlib.util.spec_from_file_location("real_gains", Path(__file__).with_name("real_gains.py"))
real_gains = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(real_gains)

LABELS = {"ifeval": "IFEval", "ifbench": "IFBench", "gsm8k": "GSM8K", "math500": "MATH-500", "mbpp": "MBPP",
          "humaneval": "HumanEval"}  # fmt: skip
NOT_A_POLICY = ("prepare_data", "reward_model")


def seed_dirs(out: Path) -> list[tuple[int, Path]]:
    """(seed, run dir) of every seed real_gains.py ran into OUT whose last stage has been evaluated."""
    found = []
    for path in sorted(out.glob("seed*")):
        if path.is_dir() and path.name[4:].isdigit() and (path / "run.json").is_file():
            every, evaluated = real_gains.stage_order(path)
            records = json.loads((path / "run.json").read_text())["stages"]
            # the stages that give a policy to evaluate (not data preparation, not a reward model)
            policies = [stage for stage in every if records.get(stage, {}).get("kind") not in NOT_A_POLICY]
            if policies and evaluated[-1:] == policies[-1:] and evaluated[0] == "base":
                found.append((int(path.name[4:]), path))
    return found


def training_seconds(run_dir: Path) -> float | None:
    """Every training stage's seconds. A stage that a run older than `timings.elapsed_s` cut off and resumed
    recorded only its last segment: its steps' own seconds (metrics.jsonl `time_step`) are the floor."""
    stages = json.loads((run_dir / "run.json").read_text())["stages"]
    total = 0.0
    for name, record in stages.items():
        if record.get("kind") == "prepare_data":
            continue
        if not isinstance(record.get("seconds"), (int, float)):
            return None
        metrics = run_dir / name / "metrics.jsonl"
        steps = [json.loads(line).get("time_step", 0.0) for line in metrics.read_text().splitlines()
                 if line.strip()] if metrics.is_file() else []  # fmt: skip
        total += max(record["seconds"], sum(steps))
    return total or None


def run_rows(recipe: str, seed: int, run_dir: Path) -> list[dict[str, Any]]:
    """One row per benchmark: start and end scores with intervals, the paired start-to-end change and the median
    answer in words at each end."""
    _, evaluated = real_gains.stage_order(run_dir)
    start, end = evaluated[0], evaluated[-1]
    samples = {stage: real_gains.read_samples(run_dir / "eval" / stage / "samples.jsonl") for stage in (start, end)}
    scores = {stage: real_gains.per_problem(rows) for stage, rows in samples.items()}
    words = {stage: real_gains.median_words(rows) for stage, rows in samples.items()}
    rows = []
    for benchmark in sorted(scores[end]):
        before, after = scores[start].get(benchmark, {}), scores[end][benchmark]
        shared = sorted(set(before) & set(after))
        if not shared:
            continue
        row: dict[str, Any] = {"recipe": recipe, "seed": seed, "benchmark": benchmark, "end_stage": end,
                               "n": len(shared), "training_s": training_seconds(run_dir)}  # fmt: skip
        for side, problems in (("start", before), ("end", after)):
            mean, low, high = real_gains.bootstrap([problems[i] for i in shared])
            row[side] = [mean, low, high]
        row["change"] = list(real_gains.bootstrap([after[i] for i in shared], [before[i] for i in shared]))
        row["words"] = [words[start].get(benchmark), words[end].get(benchmark)]
        rows.append(row)
    return rows


def rlhf_rows(recipe: str, seed: int, run_dir: Path) -> list[dict[str, Any]]:
    """The reward model's held-out score before and after each RLHF stage (its own units, not points)."""
    rows = []
    for stage in real_gains.stage_order(run_dir)[0]:
        facts = real_gains.stage_facts(run_dir, stage)
        if facts.get("kind") == "rlhf" and "heldout_reward_before" in facts:
            rows.append({"recipe": recipe, "seed": seed, "stage": stage, "before": facts["heldout_reward_before"],
                         "after": facts["heldout_reward_after"], "change": facts.get("heldout_reward_change")})
    return rows


def key_and_points(value: str) -> tuple[str, float] | None:
    """`KEY=NUMBER` -> (KEY, NUMBER); None when there is no `=`, no key or no number after it."""
    key, sep, points = value.partition("=")
    try:
        return (key, float(points)) if sep and key else None
    except ValueError:
        return None


def parse_other_starts(values: list[str]) -> dict[str, float]:
    starts = {}
    for value in values:
        parsed = key_and_points(value)
        if parsed is None:
            raise ValueError(f"--other-start {value!r}: expected BENCHMARK=SCORE in points, e.g. ifeval=17.9")
        starts[parsed[0]] = parsed[1]
    return starts


def parse_goals(values: list[str]) -> dict[tuple[str, str], float]:
    goals = {}
    for value in values:
        parsed = key_and_points(value)
        recipe, colon, benchmark = parsed[0].partition(":") if parsed else ("", "", "")
        if not (parsed and colon and recipe and benchmark):
            raise ValueError(f"--goal {value!r}: expected RECIPE:BENCHMARK=POINTS, e.g. smol-if:ifeval=5")
        goals[(recipe, benchmark)] = parsed[1]
    return goals


def verdict(change: float, goal: float | None) -> str:
    if goal is None:
        return ""
    met = change >= goal
    return f"{'met' if met else 'missed'} ({'>=' if goal >= 0 else 'loses at most'} {abs(goal):g})"


def words_cell(words: list[float | None] | None) -> str:
    if not words or None in words:
        return "-"
    return f"{words[0]:g} -> {words[1]:g} words"


def render(rows: list[dict[str, Any]], rlhf: list[dict[str, Any]], goals: dict[tuple[str, str], float],
           other_starts: dict[str, float] | None = None) -> str:
    def cell(values: list[float]) -> str:
        return f"{values[0]:.1f} [{values[1]:.1f}, {values[2]:.1f}]"

    other_starts = other_starts or {}
    both = bool(other_starts)  # two starts: the other one, and each end counted from the better of the two
    header = ["recipe", "seed", "benchmark (n)", "start", *(["other start"] if both else []), "end",
              "change [95% CI]", *(["from the better start"] if both else []), "median answer", "goal", "training"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        change, other = row["change"], other_starts.get(row["benchmark"])
        better = row["start"][0] if other is None else max(row["start"][0], other)
        from_better = round(row["end"][0] - better, 1) + 0.0  # + 0.0 turns -0.0 into 0.0
        minutes = f"{row['training_s'] / 60:.0f} min" if row["training_s"] else "-"
        goal = goals.get((row["recipe"], row["benchmark"]))
        cells = [row["recipe"], str(row["seed"]), f"{LABELS.get(row['benchmark'], row['benchmark'])} ({row['n']})",
                 cell(row["start"]), *(["-" if other is None else f"{other:.1f}"] if both else []),
                 f"{cell(row['end'])} ({row['end_stage']})", f"{change[0]:+.1f} [{change[1]:+.1f}, {change[2]:+.1f}]",
                 *([f"{from_better:+.1f}"] if both else []), words_cell(row.get("words")), verdict(change[0], goal),
                 minutes]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    for row in rlhf:
        interval = f" {row['change'].split(' ', 1)[1]}" if row["change"] else ""
        cells = [row["recipe"], str(row["seed"]), f"held-out RM score ({row['stage']})", f"{row['before']:.3f}",
                 *([""] if both else []), f"{row['after']:.3f}", f"{row['after'] - row['before']:+.3f}{interval}",
                 *([""] if both else []), "", f"{'met' if row['after'] > row['before'] else 'missed'} (rises)", ""]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(rows: list[dict[str, Any]], goals: dict[tuple[str, str], float], path: Path) -> None:
    """A forest plot: each recipe x benchmark x seed's start-to-end change with its interval, goals as marks."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(7.5, 0.32 * len(rows) + 1.2))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    recipes = list(dict.fromkeys(row["recipe"] for row in rows))
    for y, row in enumerate(reversed(rows)):
        mean, low, high = row["change"]
        colour = colours[recipes.index(row["recipe"]) % len(colours)]
        axis.errorbar([mean], [y], xerr=[[mean - low], [high - mean]], fmt="o", color=colour, capsize=3)
        goal = goals.get((row["recipe"], row["benchmark"]))
        if goal is not None:
            axis.plot([goal], [y], marker="|", markersize=14, color="black")
    labels = [f"{row['recipe']} · {LABELS.get(row['benchmark'], row['benchmark'])} · seed {row['seed']}"
              for row in reversed(rows)]  # fmt: skip
    axis.set_yticks(range(len(rows)), labels, fontsize=8)
    axis.axvline(0, color="grey", linewidth=0.8)
    axis.set_xlabel("change from the starting model, points (95% paired interval; | goal)")
    axis.grid(axis="x", alpha=0.3)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)


def read_rows(path: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The (rows, rlhf rows) an earlier `--json` wrote to `path`; ValueError naming the file otherwise."""
    try:
        saved = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise ValueError(f"--rows {path}: expected a JSON file real_summary.py --json wrote; {error}") from None
    keys = ("recipe", "seed", "benchmark", "start", "end", "change")
    if not isinstance(saved, dict) or not isinstance(saved.get("rows"), list):
        raise ValueError(f"--rows {path}: expected an object with a list under 'rows'; found {type(saved).__name__}")
    for index, row in enumerate(saved["rows"]):
        missing = [key for key in keys if not isinstance(row, dict) or key not in row]
        if missing:
            raise ValueError(f"--rows {path}: rows[{index}]: expected keys {', '.join(keys)}; missing {', '.join(missing)}")
    return saved["rows"], saved.get("rlhf") or []


def merge(earlier: list[dict[str, Any]], new: list[dict[str, Any]], key: tuple[str, ...]) -> list[dict[str, Any]]:
    """`earlier` with the rows `new` measures again replaced by `new`'s, then `new`'s other rows."""
    fresh = {tuple(row[k] for k in key) for row in new}
    return [row for row in earlier if tuple(row[k] for k in key) not in fresh] + new


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("outs", type=Path, nargs="*", metavar="OUT", help="real_gains.py --out folders")
    parser.add_argument("--rows", type=Path, action="append", default=[], metavar="FILE",
                        help="rows an earlier --json wrote, merged with the OUT folders' (theirs replace a re-run row)")
    parser.add_argument("--goal", action="append", default=[], metavar="RECIPE:BENCHMARK=POINTS")
    parser.add_argument("--plot", type=Path, help="write the forest plot here (PNG)")
    parser.add_argument("--other-start", action="append", default=[], metavar="BENCHMARK=SCORE",
                        help="the starting model's score measured another way (e.g. under cascade's chat template)")
    parser.add_argument("--json", type=Path, help="write the rows here")
    args = parser.parse_args()
    try:
        goals = parse_goals(args.goal)
        other_starts = parse_other_starts(args.other_start)
        saved = [read_rows(path) for path in args.rows]
    except ValueError as error:
        parser.error(str(error))  # one line, exit 2
    if not args.outs and not args.rows:
        parser.error("expected at least one OUT folder or --rows FILE")
    rows: list[dict[str, Any]] = []
    rlhf: list[dict[str, Any]] = []
    for out in args.outs:
        seeds = seed_dirs(out)
        if not seeds:
            parser.error(f"{out}: no finished seed (expected OUT/seedS with run.json and its last stage evaluated)")
        for seed, run_dir in seeds:
            rows += run_rows(out.name, seed, run_dir)
            rlhf += rlhf_rows(out.name, seed, run_dir)
    for earlier, earlier_rlhf in reversed(saved):  # the first file's rows first; a later file's replace them
        rows = merge(earlier, rows, ("recipe", "seed", "benchmark"))
        rlhf = merge(earlier_rlhf, rlhf, ("recipe", "seed", "stage"))
    order = list(dict.fromkeys(row["recipe"] for row in rows))  # saved rows' recipes first, then the OUT folders'
    rlhf.sort(key=lambda row: (order.index(row["recipe"]) if row["recipe"] in order else len(order), row["seed"]))
    rows.sort(key=lambda row: (order.index(row["recipe"]), row["benchmark"], row["seed"]))
    print(render(rows, rlhf, goals, other_starts))
    if args.plot:
        plot(rows, goals, args.plot)
        print(f"plot: {args.plot}")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "rlhf": rlhf}, indent=1))


if __name__ == "__main__":
    main()
