"""`cascade tts code` and `cascade tts swe`: test-time scaling of a checkpoint (or of given responses)."""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Annotated, Any

import typer

from cascade_cli.cli.base import COMMAND, make_typer, with_parameters
from cascade_cli.console import console, stdout
from cascade_cli.errors import CascadeUsageError
from cascade_cli.progress import Progress

ProblemsArg = Annotated[Path, typer.Option("--problems", help="Problem rows (JSONL/parquet or a prepare-data folder).")]
ModelOpt = Annotated[str | None, typer.Option("--model", help="Checkpoint directory, or `tiny` / `tiny:SEED` / `smollm2-135m` / `gguf:PATH`.")]
OutOpt = Annotated[Path | None, typer.Option("--out", help="Where tts.json goes (default runs/tts/<kind>-<file>).")]
LimitOpt = Annotated[int | None, typer.Option("--limit", min=1, help="Only the first N problems.")]
MaxTokensOpt = Annotated[int, typer.Option("--max-tokens", min=1, help="Max new tokens per generation.")]
TemperatureOpt = Annotated[float, typer.Option("--temperature", min=0.0, help="Sampling temperature.")]
TopPOpt = Annotated[float, typer.Option("--top-p", min=0.0, max=1.0, help="Nucleus sampling mass.")]
BackendOpt = Annotated[str, typer.Option("--backend", help="Rollout backend: auto | hf | vllm.")]
SeedOpt = Annotated[int, typer.Option("--seed", help="Sampling seed.")]
PublicTestsOpt = Annotated[
    int, typer.Option("--public-tests", min=0, help="Tests that are public (the first K) when a row gives no `public_tests`.")
]
FeedbackOpt = Annotated[
    bool, typer.Option("--feedback/--no-feedback", help="Add failed submissions and sibling code to later prompts.")
]


# Options both commands take (added to their signatures by `with_parameters`): name -> (type, default).
SHARED_OPTIONS: dict[str, tuple[Any, Any]] = {
    "limit": (LimitOpt, None),
    "max_tokens": (MaxTokensOpt, 1024),
    "temperature": (TemperatureOpt, 0.6),
    "top_p": (TopPOpt, 0.95),
    "backend": (BackendOpt, "auto"),
    "seed": (SeedOpt, 0),
    "out": (OutOpt, None),
}
SHARED_PARAMETERS = [
    inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)
    for name, (annotation, default) in SHARED_OPTIONS.items()
]


def _sampling(shared: dict[str, Any]):
    from cascade_cli.tts.sampling import SamplingSettings

    keys = ("max_tokens", "temperature", "top_p", "backend", "seed")
    return SamplingSettings(*(shared[key] for key in keys))


def _write(out: Path, result: dict[str, Any]) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    path = out / "tts.json"
    path.write_text(json.dumps(result, indent=2, default=str) + "\n")
    return path


def code_command(
    problems: ProblemsArg,
    model: ModelOpt = None,
    rounds: Annotated[int, typer.Option("--rounds", "-R", min=1, help="Rounds at most (paper: 50).")] = 50,
    generations: Annotated[
        int, typer.Option("--generations", "-G", min=1, help="Generations per problem per round (paper: 20).")
    ] = 20,
    max_generations: Annotated[
        int, typer.Option("--max-generations", "-N", min=1, help="Generations in all, every round and problem (paper: 1000).")
    ] = 1000,
    public_tests: PublicTestsOpt = 1,
    feedback: FeedbackOpt = True,
    workers: Annotated[int | None, typer.Option("--workers", min=1, help="Code sandboxes run at once.")] = None,
    unsafe_no_sandbox: Annotated[
        bool, typer.Option("--unsafe-no-sandbox", help="Run tests without the sandbox (trusted code only).")
    ] = False,
    **shared: Any,
) -> None:
    """Multi-round test-time scaling for code (paper §5.1, App. C.3): per round G generations per unsolved
    problem; responses without code or failing the public tests are dropped; one submission is picked by
    Tail-10 (the top 10% of candidates by confidence, the mean token log-prob of the response, which is
    DeepConf's tail confidence for responses up to 2,048 tokens; then a confidence-weighted vote over
    identical code) and judged on the hidden tests; the next round's prompt adds the last <= 5 failed
    submissions with their verdicts and accepted code of solved sibling subtasks (rows sharing a `problem`). Public tests: a row's `public_tests` (K or a code label), else the
    first --public-tests tests; hidden tests: the whole label. Prints the score per round and writes tts.json.

    Example: [bold]cascade tts code --model runs/tiny/code_rl --problems runs/tiny/data_code/heldout.jsonl -R 3 -G 4
    -N 200[/]
    """
    from cascade_cli.tts.code import CodeTTSSettings, run_code_tts
    from cascade_cli.tts.sampling import load_problems, open_generator, sampler

    if model is None:
        raise CascadeUsageError("--model CKPT is required (a checkpoint directory or `tiny`)")
    rows = load_problems(problems, "code", shared["limit"])
    options: dict[str, Any] = {"workers": workers} if workers else {}
    if unsafe_no_sandbox:
        options["unsafe_no_sandbox"] = True
    settings = CodeTTSSettings(rounds, generations, max_generations, public_tests, feedback=feedback, options=options)
    sampling = _sampling(shared)
    with Progress("tts code", rounds, unit="round", note=f"loading {model}", transient=True) as bar:
        generator = open_generator(model, sampling)
        bar.update(note=f"round 1 ({len(rows)} problems)")

        def on_round(report: dict[str, Any]) -> None:
            bar.update(done=report["round"] + 1, note=(
                f"{report['solved']}/{len(rows)} solved, {report['generations_total']}/{max_generations} generations"
            ))

        try:
            result = run_code_tts(rows, sampler(generator, sampling), settings, on_round)
        finally:
            generator.close()
    result.update(model=model, problems_file=str(problems), sampling=vars(sampling))
    from rich.table import Table

    baseline = f"round-1 pass@1 {result['pass_at_1']:.1f}, pass@{generations} {result['pass_at_g']:.1f}"
    table = Table(title=f"tts code: {model} on {problems} ({baseline})")
    for column in ("round", "generations", "with code", "passed public", "submitted", "accepted", "solved", "score"):
        table.add_column(column, justify="right")
    for r in result["rounds"]:
        table.add_row(*(str(r[k]) for k in ("round", "generations_total", "with_code", "passed_public",
                                             "submitted", "accepted", "solved")), f"{r['score']:.1f}")
    stdout.print(table)
    path = _write(shared["out"] or Path("runs") / "tts" / f"code-{problems.stem}", result)
    console.print(f"score {result['score']:.1f} (pass@1 {result['pass_at_1']:.1f}); results: {path}")


def swe_command(
    problems: ProblemsArg,
    model: ModelOpt = None,
    responses: Annotated[
        Path | None, typer.Option("--responses", help="Candidate patches to score instead of generating (JSONL: id + response/responses).")
    ] = None,
    k: Annotated[int, typer.Option("--k", "-k", min=1, help="Candidate patches per instance (with --model).")] = 8,
    threshold: Annotated[
        float, typer.Option("--threshold", help="A patch counts as resolving at this swe reward (1.0: equals the golden patch).")
    ] = 1.0,
    **shared: Any,
) -> None:
    """best@k for SWE repair (paper §7.4): k patches per instance; execution-free filter (no patch,
    unparsable, not applicable or no-op patches dropped); majority vote over identical normalised patches;
    ties to the shortest patch. Reports best@k (the selected patch reaches --threshold), pass@k (any of
    the k does) and pass@1, for k = 1, 2, 4, ..., against the golden patch (the swe verifier's reward).

    Example: [bold]cascade tts swe --model runs/tiny/code_rl --problems runs/tiny/data_swe/heldout.jsonl -k 8[/]
    """
    from cascade_cli.chat import render_prompt
    from cascade_cli.records import row_prompt
    from cascade_cli.tts.sampling import load_problems, open_generator, sampler
    from cascade_cli.tts.swe import Instance, run_swe_tts

    if (model is None) == (responses is None):
        raise CascadeUsageError("give either --model CKPT (generate k patches) or --responses FILE (score them)")
    rows = load_problems(problems, "swe", shared["limit"])
    sampling = _sampling(shared)
    if responses is not None:
        from cascade_cli.evaluation.responses import match_responses

        matched = match_responses(responses, {"problems": rows})["problems"]
        by_id: dict[str, list[str]] = {}
        for record in matched:
            by_id.setdefault(str(record["id"]), []).append(record["response"])
        instances = [Instance(row, by_id[str(row["id"])]) for row in rows if str(row["id"]) in by_id]
    else:
        note = f"generating {k} patches for each of {len(rows)} instances with {model}"
        with Progress("tts swe", note=note, transient=True):
            generator = open_generator(model, sampling)
            try:
                prompts = [render_prompt(row_prompt(row), row.get("mode", "think")) for row in rows]
                groups = sampler(generator, sampling)(prompts, [k] * len(rows))
            finally:
                generator.close()
        instances = [Instance(row, [c.text for c in group]) for row, group in zip(rows, groups, strict=True)]
    with Progress("tts swe", note=f"scoring {sum(len(i.responses) for i in instances)} patches", transient=True):
        result = run_swe_tts(instances, threshold)
    result.update(model=model, responses=str(responses) if responses else None, problems_file=str(problems))
    from rich.table import Table

    table = Table(title=f"tts swe: {model or responses} on {problems} ({len(instances)} instances)")
    for column in ("k", "best@k", "pass@k", "pass@1", "selected reward"):
        table.add_column(column, justify="right")
    for row in result["curve"]:
        table.add_row(str(row["k"]), f"{row['best_at_k']:.1f}", f"{row['pass_at_k']:.1f}",
                      f"{row['pass_at_1']:.1f}", f"{row['selected_reward']:.3f}")
    stdout.print(table)
    name = f"swe-{problems.stem}"
    path = _write(shared["out"] or Path("runs") / "tts" / name, result)
    console.print(f"results: {path}")


def register(app: typer.Typer) -> None:
    group = make_typer("tts", "Test-time scaling: multi-round code submissions, best@k for SWE.\n\n"
                       "Example: [bold]cascade tts code --model runs/tiny/code_rl --problems "
                       "runs/tiny/data_code/heldout.jsonl -R 2 -G 4[/]")
    group.command("code", **COMMAND, short_help="Multi-round test-time scaling for competitive programming.")(with_parameters(code_command, SHARED_PARAMETERS))
    group.command("swe", **COMMAND, short_help="best@k for SWE: filter, majority vote, shortest patch.")(with_parameters(swe_command, SHARED_PARAMETERS))
    app.add_typer(group, name="tts")
