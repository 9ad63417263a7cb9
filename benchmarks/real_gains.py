"""What every stage of a real cascade buys on the full real benchmarks, per seed, with 95% bootstrap intervals.

Runs `cascade recipe run RECIPE seed=S run_dir=OUT/seedS` once per seed, evaluating the starting model and
every stage's checkpoint on the whole of each benchmark (no limit), greedy (temperature 0, k = 1), then reads
the recipe's own outputs: RUN/eval/<stage>/samples.jsonl (one verdict per problem) and each stage's
cascade_stage.json (metrics and wall time). Prints and writes OUT/gains.md and OUT/gains.json, and plots OUT/gains.png:

- stage x benchmark: the median response length in words beside each score (a score can rise because
  answers shrank);
- stage x benchmark: the headline score (IFEval prompt-level strict; accuracy / pass@1 otherwise) with a 95%
  bootstrap interval over problems, and the change from the stage before with a paired bootstrap interval
  (the same resampled problems on both sides);
- the reward model's held-out pairwise accuracy (before -> after), RLHF's mean reward-model score on its
  held-out prompts (before -> after), each RL stage's greedy held-out accuracy on its own domain;
- the wall time of every stage and evaluation;
- gains that look like a hack (the score rose while the median answer halved, an instruction group fell by
  more than its interval, or more answers fell short of the length asked for: cascade's
  evaluation/hack_flags.py, the same flags as `cascade report`), and IFEval's and IFBench's per-group tables.

    python benchmarks/real_gains.py --recipe recipes/smol-if.yaml [--seeds 0 1] [--out runs/real_gains]
        [--max-tokens 512] [--report-only] [override ...]

Overrides are recipe dotlist overrides (`model=/work/models/smollm2-135m` until the `smollm2-135m` spec is
available, `stages.if_rl.steps=20`, `eval.limit=100` for a quick look). --report-only reads existing runs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from cascade_cli.evaluation.hack_flags import flag_line, hack_flags
from cascade_cli.evaluation.instruction_groups import median_words, render_group_tables, stage_breakdown
from cascade_cli.evaluation.intervals import bootstrap


def run_seed(recipe: str, seed: int, out: Path, max_tokens: int, overrides: list[str]) -> None:
    """`cascade recipe run` for one seed, its output copied line by line to OUT/seedS.log and to this
    terminal, so a run in the background shows its progress (`recipe run` prints a plain line per step and
    per evaluated benchmark when its output is not a terminal)."""
    argv = [sys.executable, "-m", "cascade_cli", "recipe", "run", recipe, *run_overrides(seed, out, max_tokens, overrides)]
    out.mkdir(parents=True, exist_ok=True)
    print(f"seed {seed}: {' '.join(argv[2:])}  (log: {out}/seed{seed}.log)", flush=True)
    with open(out / f"seed{seed}.log", "a") as log:
        process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=dict(os.environ))
        assert process.stdout is not None
        for line in process.stdout:
            log.write(line)
            log.flush()
            print(f"[seed {seed}] {line}", end="", flush=True)
        code = process.wait()
    if code != 0:
        sys.exit(f"seed {seed} failed (exit {code}); see {out}/seed{seed}.log")


def share_base_evaluation(sources: list[Path], run_dir: Path, evaluation: tuple[list[str], str]) -> None:
    """Give a seed's run the base model's evaluation from earlier runs of the same model (another seed of this
    recipe, or recipes whose benchmarks together cover this one's: smol-mopd takes IFEval from smol-if and
    GSM8K from smol-math), so `recipe run` skips it as done instead of generating the same answers again.
    Each benchmark comes from the first source that evaluated it. Nothing is shared when a source has no
    finished base evaluation, the sources' evaluation settings differ, they do not cover every benchmark, or
    the seed's run has one of its own. `evaluation`: this recipe's benchmarks and eval fingerprint."""
    benchmarks, fingerprint = evaluation
    manifest_path = run_dir / "run.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.is_file() else {"stages": {}}
    if manifest.get("base"):
        return
    first: dict[str, Any] | None = None  # the first source's model and settings (results.json)
    record: dict[str, Any] = {}  # and its run.json record of the base evaluation
    chosen: dict[str, Any] = {}  # benchmark -> its results, from the first source that has it
    samples: list[str] = []
    for source in sources:
        base = json.loads((source / "run.json").read_text()).get("base") if (source / "run.json").is_file() else None
        if not base or base.get("eval") != "completed":
            print(f"{run_dir}: base evaluation not shared ({source} has no finished one)", flush=True)
            return
        found = json.loads((source / "eval" / "base" / "results.json").read_text())
        settings = {k: v for k, v in found["settings"].items() if k not in ("backend_used", "seed", "workers")}
        if first is None:
            first, record = {"model": found["model"], "settings": settings}, base
        elif settings != first["settings"] or found["model"] != first["model"]:
            print(f"{run_dir}: base evaluation not shared ({source} evaluated {found['model']} with "
                  f"{settings}, not as {sources[0]})", flush=True)
            return
        new = {name: bench for name, bench in found["benchmarks"].items() if name in benchmarks and name not in chosen}
        chosen.update(new)
        samples += [line for line in (source / "eval" / "base" / "samples.jsonl").read_text().splitlines()
                    if line.strip() and json.loads(line)["benchmark"] in new]
    missing = sorted(set(benchmarks) - set(chosen))
    if first is None or missing:
        print(f"{run_dir}: base evaluation not shared (no source evaluated {', '.join(missing)})", flush=True)
        return
    target = run_dir / "eval" / "base"
    target.mkdir(parents=True, exist_ok=True)
    (target / "results.json").write_text(json.dumps({**first, "benchmarks": chosen}, indent=2) + "\n")
    (target / "samples.jsonl").write_text("\n".join(samples) + "\n")
    manifest["base"] = {**record, "eval_fingerprint": fingerprint, "shared_from": [str(source) for source in sources]}
    manifest_path.write_text(json.dumps(manifest, indent=2) + "\n")
    print(f"{run_dir}: base evaluation shared from {', '.join(map(str, sources))} (same model, same greedy "
          "evaluation)", flush=True)


def run_overrides(seed: int, out: Path, max_tokens: int, overrides: list[str]) -> list[str]:
    """What `recipe run` is given for one seed: the full benchmarks, greedy, after every stage."""
    return [f"seed={seed}", f"run_dir={out / f'seed{seed}'}", "eval.after_each_stage=true", "eval.limit=null",
            "eval.k=1", "eval.temperature=0.0", f"eval.max_tokens={max_tokens}", *overrides]


def recipe_eval(recipe: str, overrides: list[str]) -> tuple[list[str], str]:
    """The benchmarks the recipe's evaluations run and the fingerprint `recipe run` records for them."""
    from cascade_cli.config.structure import to_plain
    from cascade_cli.manifest import config_fingerprint
    from cascade_cli.recipe.loader import load_recipe

    evaluation = load_recipe(recipe, overrides).eval
    return list(evaluation.benchmarks), config_fingerprint(to_plain(evaluation))


def read_samples(samples: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in samples.read_text().splitlines() if line.strip()]


def per_problem(rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """benchmark -> problem id -> score in [0, 1] (the mean over its samples; IFEval: prompt-level strict)."""
    scores: dict[str, dict[str, list[float]]] = {}
    for row in rows:
        details = row.get("details") or {}
        passed = details.get("prompt_strict", row.get("passed"))
        scores.setdefault(row["benchmark"], {}).setdefault(str(row["id"]), []).append(float(bool(passed)))
    return {name: {pid: sum(v) / len(v) for pid, v in problems.items()} for name, problems in scores.items()}


def stage_order(run_dir: Path) -> tuple[list[str], list[str]]:
    """(every stage in run order, the evaluated ones: `base` and each stage that produced a model)."""
    stages = json.loads((run_dir / "run.json").read_text())["stage_order"]
    evaluated = [name for name in ["base", *stages] if (run_dir / "eval" / name / "samples.jsonl").is_file()]
    return stages, evaluated


def stage_facts(run_dir: Path, stage: str) -> dict[str, Any]:
    path = run_dir / stage / "cascade_stage.json"
    if not path.is_file():
        return {}
    manifest = json.loads(path.read_text())
    metrics, facts = manifest.get("metrics") or {}, {}
    facts["kind"] = manifest.get("kind")
    timings = manifest.get("timings") or {}
    # elapsed_s first: it counts every segment of a stage that was cut off and resumed
    facts["seconds"] = next((timings[k] for k in ("elapsed_s", "wall_s", "seconds", "total_s") if k in timings), None)
    facts.update({key: value for key, value in metrics.items() if key.startswith("heldout_") and value is not None})
    rows_path = run_dir / stage / "heldout_rows.jsonl"  # each held-out row before and after (RL stages)
    if rows_path.is_file():
        rows = [json.loads(line) for line in rows_path.read_text().splitlines() if line.strip()]
        change, low, high = bootstrap([r["reward_after"] for r in rows], [r["reward_before"] for r in rows], scale=1)
        facts["heldout_reward_change"] = f"{change:+.3f} [{low:+.3f}, {high:+.3f}]"
    return facts


def seed_table(run_dir: Path) -> dict[str, Any]:
    every, stages = stage_order(run_dir)
    samples = {stage: read_samples(run_dir / "eval" / stage / "samples.jsonl") for stage in stages}
    scores = {stage: per_problem(rows) for stage, rows in samples.items()}
    words = {stage: median_words(rows) for stage, rows in samples.items()}
    table: dict[str, Any] = {"stages": stages, "benchmarks": {}, "eval_seconds": {},
                             "facts": {stage: stage_facts(run_dir, stage) for stage in every}}  # fmt: skip
    for stage in stages:
        results = json.loads((run_dir / "eval" / stage / "results.json").read_text())
        table["eval_seconds"][stage] = results.get("seconds")
    for name in sorted({name for per in scores.values() for name in per}):
        rows = []
        for index, stage in enumerate(stages):
            problems = scores[stage].get(name, {})
            ids = sorted(problems)
            mean, low, high = bootstrap([problems[i] for i in ids])
            row = {"stage": stage, "n": len(ids), "score": mean, "ci": [low, high], "words": words[stage].get(name)}
            if index:
                before = scores[stages[index - 1]].get(name, {})
                shared = [i for i in ids if i in before]
                if shared:
                    delta, dlow, dhigh = bootstrap([problems[i] for i in shared], [before[i] for i in shared])
                    row.update(delta=delta, delta_ci=[dlow, dhigh])
            rows.append(row)
        table["benchmarks"][name] = rows
    table["groups"] = stage_breakdown(stages, samples)
    headline = {name: {row["stage"]: row["score"] for row in rows} for name, rows in table["benchmarks"].items()}
    table["hack_flags"] = hack_flags(table["groups"], headline)
    return table


def whole_seconds(seconds: Any) -> str:
    """A table cell: whole seconds, or "-" where none were recorded (a base evaluation shared from another run)."""
    return f"{seconds:.0f}" if isinstance(seconds, (int, float)) else "-"


def render(tables: dict[int, dict[str, Any]]) -> str:
    lines = []
    for seed, table in tables.items():
        names = [f"{name} (n={rows[0]['n']})" for name, rows in table["benchmarks"].items()]
        lines += [f"## seed {seed}", "", "| stage | " + " | ".join(names) + " | stage s | eval s |",
                  "|---|" + "---|" * (len(table["benchmarks"]) + 2)]  # fmt: skip
        for index, stage in enumerate(table["stages"]):
            cells = []
            for rows in table["benchmarks"].values():
                row = rows[index]
                cell = f"{row['score']:.1f} [{row['ci'][0]:.1f}, {row['ci'][1]:.1f}]"
                if "delta" in row:
                    cell += f" ({row['delta']:+.1f} [{row['delta_ci'][0]:+.1f}, {row['delta_ci'][1]:+.1f}])"
                if row.get("words") is not None:
                    cell += f", {row['words']:.0f} words"
                cells.append(cell)
            facts = table["facts"].get(stage, {})
            seconds = facts.get("seconds")
            lines.append(f"| {stage} | " + " | ".join(cells) + f" | {whole_seconds(seconds)} | "
                         f"{whole_seconds(table['eval_seconds'].get(stage))} |")
        lines.append("")
        for stage, facts in table["facts"].items():
            shown = {k: v for k, v in facts.items() if k.startswith("heldout_") or k == "seconds"}
            if shown:
                text = ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in shown.items())
                lines.append(f"- {stage} ({facts.get('kind')}): {text}")
        lines.append("")
        flags = table.get("hack_flags", [])
        lines += [f"- ⚠ gain that looks like a hack: {flag_line(flag)}" for flag in flags] + ([""] if flags else [])
        lines += render_group_tables(table.get("groups", {}))
    return "\n".join(lines)


def plot(tables: dict[int, dict[str, Any]], path: Path, title: str) -> None:
    """One panel per benchmark: each seed's score after each evaluated stage, with its 95% interval."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = sorted({name for table in tables.values() for name in table["benchmarks"]})
    figure, axes = plt.subplots(1, len(names) + 1, figsize=(4.2 * (len(names) + 1), 3.4), squeeze=False)
    stages = max((table["stages"] for table in tables.values()), key=len)
    words_axis = axes[0][-1]
    for offset, (seed, table) in enumerate(tables.items()):
        for name in names:
            rows = table["benchmarks"].get(name, [])
            x = [index + 0.08 * offset for index in range(len(rows))]
            words_axis.plot(x, [row.get("words") or 0 for row in rows], marker="o", label=f"{name}, seed {seed}")
    words_axis.set_xticks(range(len(stages)), stages)
    words_axis.set_title("median response length")
    words_axis.set_ylabel("words")
    words_axis.legend(fontsize=7)
    for axis, name in zip(axes[0], names, strict=False):
        for offset, (seed, table) in enumerate(tables.items()):
            rows = table["benchmarks"].get(name, [])
            x = [index + 0.08 * offset for index in range(len(rows))]
            y = [row["score"] for row in rows]
            errors = [[row["score"] - row["ci"][0] for row in rows], [row["ci"][1] - row["score"] for row in rows]]
            axis.errorbar(x, y, yerr=errors, marker="o", capsize=3, label=f"seed {seed}")
        axis.set_xticks(range(len(stages)), stages)
        axis.set_title(name)
        axis.set_ylabel("score (%)")
        axis.grid(axis="y", alpha=0.3)
    axes[0][0].legend(fontsize=8)
    figure.suptitle(title, fontsize=10)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--recipe", default="recipes/smol.yaml")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--out", type=Path, default=Path("runs/real_gains"))
    parser.add_argument("--max-tokens", type=int, default=512)
    parser.add_argument("--report-only", action="store_true", help="read the runs already in --out")
    parser.add_argument("--no-shared-base", action="store_true",
                        help="evaluate the base model in every seed's run (default: once, in the first seed's)")
    parser.add_argument("--base-from", type=Path, action="append", metavar="RUN_DIR",
                        help="share the base evaluation of another run of this model with the same eval settings; "
                             "repeat it to take each benchmark from the first run that has it (a variant of the "
                             "recipe: `--out runs/variant --base-from runs/real/seed0`; smol-mopd: `--base-from "
                             "SMOL_IF_RUN --base-from SMOL_MATH_RUN`)")
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args()
    began = time.perf_counter()
    first = args.seeds[0]
    for seed in args.seeds:
        sources = args.base_from if seed == first else None if args.no_shared_base else [args.out / f"seed{first}"]
        # --report-only shares too: a variant trained with `recipe run --only` has no base evaluation of its own.
        if sources and (not args.report_only or (args.out / f"seed{seed}" / "run.json").is_file()):
            evaluation = recipe_eval(args.recipe, run_overrides(seed, args.out, args.max_tokens, args.overrides))
            share_base_evaluation(sources, args.out / f"seed{seed}", evaluation)
        if not args.report_only:
            run_seed(args.recipe, seed, args.out, args.max_tokens, args.overrides)
    # A seed whose run has not started yet (--report-only while it runs) is left out.
    tables = {seed: seed_table(args.out / f"seed{seed}") for seed in args.seeds
              if (args.out / f"seed{seed}" / "run.json").is_file()}
    text = f"# {args.recipe}: greedy (k = 1), 95% bootstrap intervals over problems\n\n" + render(tables)
    (args.out / "gains.md").write_text(text)
    (args.out / "gains.json").write_text(json.dumps(tables, indent=2) + "\n")
    plot(tables, args.out / "gains.png", f"{args.recipe}: greedy, 95% bootstrap intervals over problems")
    print(text)
    print(f"wrote {args.out}/gains.md, gains.json and gains.png ({time.perf_counter() - began:.0f} s)")


if __name__ == "__main__":
    main()
