"""Evaluation: benchmark registry, generation + scoring (avg@k, pass@k), and the per-stage cascade report.

evaluate_checkpoint(model_dir, ["math500", "ifeval"], EvalSettings(k=8), out_dir=...) -> results dict
score_responses("responses.jsonl", ["aime24"]) -> results dict (no generation)
evaluate_stage(run_dir, stage, model_dir, EvalConfig(...)) -> writes RUN_DIR/eval/STAGE/results.json
write_report(run_dir, max_regression=3.0) -> report.md + report.png
"""

from __future__ import annotations

from cascade_cli.evaluation.benchmarks import BENCHMARKS, Benchmark, known_benchmarks, resolve_benchmarks
from cascade_cli.evaluation.report import stage_eval_dir, write_report
from cascade_cli.evaluation.run import evaluate_checkpoint, evaluate_stage, score_responses
from cascade_cli.evaluation.scoring import avg_at_k, pass_at_k

__all__ = [
    "BENCHMARKS",
    "Benchmark",
    "avg_at_k",
    "evaluate_checkpoint",
    "evaluate_stage",
    "known_benchmarks",
    "pass_at_k",
    "resolve_benchmarks",
    "score_responses",
    "stage_eval_dir",
    "write_report",
]
