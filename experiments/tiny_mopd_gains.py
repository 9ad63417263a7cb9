"""What the tiny recipe's MOPD stage (`distill`) recovers, over several seeds.

Runs `cascade recipe run recipes/tiny.yaml seed=S` once per seed, as tiny_rl_gains.py does (every stage
reseeded; the evaluations after each stage stay on: the distill stage's teachers are `best:tiny_*`, the best
stage on each domain's benchmark). Then scores every policy stage's checkpoint on each domain's 128 held-out
prompts, greedy (the RL stages' own held-out evaluation), and prints per domain and seed the last RL stage
(swe_rl), the domain's best stage before distill on these prompts, the teacher distill used, and distill;
then, over the seeds, distill minus the last stage, minus the best stage and minus its teacher, each with a
95% paired bootstrap interval (prompts resampled within each seed). The best stage is the maximum of seven
scores on the very prompts it is compared on, so its lead carries their noise (biased upward); the teacher
was chosen by the recipe's own evaluations, on other problems, and carries no such bias. IF, math and code score accuracy; SWE the mean held-out
reward (the paper's Eq. 2), its exact-patch accuracy alongside.

    python experiments/tiny_mopd_gains.py [--seeds 0 1 2] [--parallel 3] [--out runs/mopd_gains] [--no-run] [override ...]

`--no-run` scores the run directories already under --out. Scores are cached in RUN_DIR/heldout/STAGE/.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))  # tiny_rl_gains
from tiny_rl_gains import run_seeds  # noqa: E402

DOMAINS = ("if", "math", "code", "swe")
STAGES = ("sft", "rlhf", "if_rl", "math_rl", "code_rl", "swe_rl", "distill")  # base (random init) scores ~0
LAST_RL, MOPD = "swe_rl", "distill"
METRIC = {"swe": "reward"}  # the others: passed (accuracy)
BOOTSTRAP = 2000


def heldout_scores(run_dir: Path, stage: str) -> dict[str, dict[str, list[float]]]:
    """domain -> {"passed": [...], "reward": [...]} per held-out prompt of the stage's checkpoint (cached)."""
    cache = run_dir / "heldout" / stage / "scores.json"
    manifest = (run_dir / stage / "cascade_stage.json").read_text()
    if cache.is_file():
        cached = json.loads(cache.read_text())
        if cached.get("manifest") == manifest:
            return cached["scores"]
    from cascade_cli.config.eval import EvalSettings
    from cascade_cli.evaluation import evaluate_checkpoint
    from cascade_cli.evaluation.benchmarks import file_benchmark

    benchmarks = [file_benchmark(run_dir / f"data_{d}" / "heldout.jsonl", d, name=f"heldout_{d}") for d in DOMAINS]
    settings = EvalSettings(k=1, temperature=0.0, max_tokens=160, backend="hf")
    out = cache.parent
    evaluate_checkpoint(run_dir / stage, benchmarks, settings, out_dir=out)
    scores: dict[str, dict[str, list[float]]] = {d: {"passed": [], "reward": []} for d in DOMAINS}
    for line in (out / "samples.jsonl").read_text().splitlines():
        sample = json.loads(line)
        domain = sample["benchmark"].removeprefix("heldout_")
        scores[domain]["passed"].append(float(sample["passed"]))
        scores[domain]["reward"].append(float(sample["reward"]))
    cache.write_text(json.dumps({"manifest": manifest, "scores": scores}))
    return scores


def mean(values: list[float]) -> float:
    return sum(values) / len(values)


def paired_interval(pairs: list[tuple[list[float], list[float]]], rng: random.Random) -> tuple[float, float, float]:
    """Mean over seeds of mean(a - b), with a 95% bootstrap interval resampling prompts within each seed."""
    diffs = [[x - y for x, y in zip(a, b, strict=True)] for a, b in pairs]
    point = mean([mean(d) for d in diffs])
    draws = sorted(
        mean([mean([d[rng.randrange(len(d))] for _ in d]) for d in diffs]) for _ in range(BOOTSTRAP)
    )
    return point, draws[int(0.025 * BOOTSTRAP)], draws[int(0.975 * BOOTSTRAP) - 1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--parallel", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path("runs/mopd_gains"))
    parser.add_argument("--no-run", action="store_true", help="score the run directories already under --out")
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    began = time.perf_counter()
    if not args.no_run:
        run_seeds(args.seeds, args.out, args.overrides, args.parallel)

    from cascade_cli.engines.local.ops.compute import configure_threads

    configure_threads()
    print(f"{'domain':6s} {'seed':>4s} {'last (swe_rl)':>14s} {'best stage':>20s} {'teacher':>10s} {'distill':>8s}")
    pairs: dict[str, dict[str, list]] = {d: {"last": [], "best": [], "teacher": []} for d in DOMAINS}
    for seed in args.seeds:
        run_dir = args.out / f"seed{seed}"
        scores = {stage: heldout_scores(run_dir, stage) for stage in STAGES}
        teachers = json.loads((run_dir / MOPD / "cascade_stage.json").read_text())["config"]["teachers"]
        for domain in DOMAINS:
            metric = METRIC.get(domain, "passed")
            value = {stage: mean(scores[stage][domain][metric]) for stage in STAGES}
            best = max(reversed(STAGES[:-1]), key=lambda stage: value[stage])  # a tie: the later stage
            pairs[domain]["last"].append((scores[MOPD][domain][metric], scores[LAST_RL][domain][metric]))
            pairs[domain]["best"].append((scores[MOPD][domain][metric], scores[best][domain][metric]))
            teacher = Path(teachers[domain]).name
            pairs[domain]["teacher"].append((scores[MOPD][domain][metric], scores[teacher][domain][metric]))
            line = (f"{domain:6s} {seed:4d} {value[LAST_RL]:14.3f} {best + f' {value[best]:.3f}':>20s} "
                    f"{teacher:>10s} {value[MOPD]:8.3f}")
            if domain == "swe":
                line += "  exact patches " + " / ".join(f"{mean(scores[s][domain]['passed']):.3f}" for s in (LAST_RL, best, MOPD))
            print(line)
    print()
    rng = random.Random(0)
    for domain in DOMAINS:
        over = {key: paired_interval(pairs[domain][key], rng) for key in ("last", "best", "teacher")}
        spread = statistics.stdev([mean(a) - mean(b) for a, b in pairs[domain]["best"]]) if len(args.seeds) > 1 else 0.0
        print(f"{domain:6s} distill - last {over['last'][0]:+.3f} [{over['last'][1]:+.3f}, {over['last'][2]:+.3f}]   "
              f"distill - best {over['best'][0]:+.3f} [{over['best'][1]:+.3f}, {over['best'][2]:+.3f}] "
              f"(sd over seeds {spread:.3f})   distill - teacher {over['teacher'][0]:+.3f} [{over['teacher'][1]:+.3f}, "
              f"{over['teacher'][2]:+.3f}] in held-out {METRIC.get(domain, 'accuracy')}, {len(args.seeds)} seeds")
    print(f"wall {time.perf_counter() - began:.0f} s")


if __name__ == "__main__":
    main()
