"""`cascade verify`: score rollouts with the verifiers, or serve rewards to OpenRLHF over HTTP."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from cascade_cli import files
from cascade_cli.cli.base import COMMAND
from cascade_cli.console import console, labelled, stdout
from cascade_cli.errors import CascadeUsageError


def _verify_options(option: list[str], domain: str | None, unsafe_no_sandbox: bool, all_tests: bool):
    from cascade_cli.verifiers.file_scoring import parse_options

    options = parse_options(option, domain)
    if unsafe_no_sandbox:
        options.setdefault("code", {})["unsafe_no_sandbox"] = True
    if all_tests:
        options.setdefault("code", {})["all_tests"] = True
    return options


def verify_command(
    input: Annotated[
        Path | None, typer.Option("--input", "-i", help="Rollout records (JSONL): id, prompt, response, label, domain.")
    ] = None,
    domain: Annotated[
        str | None, typer.Option("--domain", "-d", help="Score every record as this domain (else each record's own).")
    ] = None,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write the records with reward, passed, details, latency.")
    ] = None,
    workers: Annotated[
        int | None, typer.Option("--workers", "-w", min=1, help="Worker processes (default 1; reward_func: min(4, CPUs)).")
    ] = None,
    json_summary: Annotated[bool, typer.Option("--json", help="Print the summary as JSON on stdout.")] = False,
    strict: Annotated[bool, typer.Option("--strict", help="Exit 2 when any row is bad (missing field, bad label).")] = False,
    option: Annotated[
        list[str] | None,
        typer.Option("--option", "-O", help="Verifier option key=value (or domain.key=value); repeatable."),
    ] = None,
    unsafe_no_sandbox: Annotated[
        bool, typer.Option("--unsafe-no-sandbox", help="code: run tests without the sandbox (trusted code only).")
    ] = False,
    all_tests: Annotated[bool, typer.Option("--all-tests", help="code: run every test, not stop at the first failure.")] = False,
    serve: Annotated[
        bool, typer.Option("--serve", help="Run the HTTP reward service (OpenRLHF --reward.remote_url) instead.")
    ] = False,
    host: Annotated[str, typer.Option("--host", help="--serve: address to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="--serve: port (0 picks a free one).")] = 5000,
    token: Annotated[
        str | None,
        typer.Option(
            "--token", envvar="CASCADE_REWARD_TOKEN", show_envvar=True,
            help="--serve: shared token every request must carry (URL path segment, ?token= or Bearer header); "
            "required when --host is not loopback (prefer the variable: a flag shows in ps).",
        ),
    ] = None,
    max_body_mb: Annotated[
        float, typer.Option("--max-body-mb", min=0.001, help="--serve: largest request body (MiB) before 413.")
    ] = 512.0,
    max_samples: Annotated[
        int, typer.Option("--max-samples", min=1, help="--serve: most samples in one request before 413.")
    ] = 1024,
    timeout: Annotated[
        float, typer.Option("--timeout", min=0.1, help="--serve / reward_func: seconds per request before reward 0.")
    ] = 60.0,
    reward_model: Annotated[
        str | None,
        typer.Option(
            "--reward-model",
            help="--serve: score RLHF rows (domain general) and IF-RL's RM bonus with this reward-model "
            "checkpoint, or forward them to OpenRLHF's serve_rm at this http(s) URL.",
        ),
    ] = None,
    serve_reward_func: Annotated[
        str | None,
        typer.Option(
            "--reward-func",
            help="--serve: score every request with your function FILE.py:NAME (OpenRLHF's reward_func "
            "signature, batched) instead of the verifiers.",
        ),
    ] = None,
    reward_func_isolation: Annotated[
        str,
        typer.Option(
            "--reward-func-isolation",
            help="--reward-func: none (in the service) | process (a worker process; a hang past --timeout or a "
            "crash scores the request 0) | sandbox (the code verifier's bubblewrap sandbox: no network, no host "
            "files but the runtime, site-packages and the reward file; --timeout and --reward-func-memory-mb).",
        ),
    ] = "none",
    reward_func_memory_mb: Annotated[
        int,
        typer.Option(
            "--reward-func-memory-mb", min=64,
            help="--reward-func-isolation sandbox: the sandboxed function's memory (address space, MiB).",
        ),
    ] = 4096,
    export_agent: Annotated[
        Path | None,
        typer.Option(
            "--export-agent",
            help="Write an OpenRLHF agent file (--train.agent_func_path) to PATH: top-k/top-p on every vLLM call, "
            "the overlong loss mask, one reward request per prompt group to --reward-url.",
        ),
    ] = None,
    reward_url: Annotated[
        list[str] | None, typer.Option("--reward-url", help="--export-agent: reward service URL; repeatable.")
    ] = None,
    top_k: Annotated[int, typer.Option("--top-k", help="--export-agent: rollout top-k (-1: off).")] = -1,
    top_p: Annotated[
        float | None, typer.Option("--top-p", help="--export-agent: rollout top-p (default: OpenRLHF's --rollout.top_p).")
    ] = None,
    overlong_filter: Annotated[
        bool, typer.Option("--overlong-filter", help="--export-agent: keep truncated responses out of the loss.")
    ] = False,
    print_reward_func_path: Annotated[
        bool, typer.Option("--print-reward-func-path", help="Print the path of the OpenRLHF reward_func file.")
    ] = False,
    export_reward_func: Annotated[
        Path | None, typer.Option("--export-reward-func", help="Write an OpenRLHF reward_func file to PATH.")
    ] = None,
) -> None:
    """Score rollouts with the verifiers, or serve rewards to OpenRLHF over HTTP.

    Example: [bold]cascade verify --input examples/data/rollouts.jsonl --output runs/scored.jsonl --workers 2[/]

    Example: [bold]cascade verify --serve --port 5000 --workers 2[/]  (then OpenRLHF
    --reward.remote_url http://HOST:5000/get_reward)

    Off loopback the service needs a token in CASCADE_REWARD_TOKEN (e.g. `export
    CASCADE_REWARD_TOKEN=$(openssl rand -hex 24)`), then OpenRLHF uses --reward.remote_url
    http://HOST:5000/$CASCADE_REWARD_TOKEN/get_reward:

    Example: [bold]cascade verify --serve --host 0.0.0.0 --port 5000[/]

    Example: [bold]cascade verify --serve --reward-model runs/tiny/rm --port 5000[/]  (RLHF rewards)

    Example: [bold]cascade verify --serve --reward-func examples/data/my_reward.py:score --port 5000[/]  (your reward)

    Example: [bold]cascade verify --serve --reward-func examples/data/my_reward.py:score --reward-func-isolation
    sandbox --port 5000[/]  (your reward in the code verifier's sandbox: no network, no host files)

    Example: [bold]cascade verify --export-reward-func reward.py[/]  (then --reward.remote_url reward.py)

    Example: [bold]cascade verify --export-agent agent.py --reward-url http://HOST:5000/get_reward --top-k 20
    --overlong-filter[/]  (then --train.agent_func_path agent.py)
    """
    from cascade_cli.serve import reward_func
    from cascade_cli.verifiers import file_scoring

    options = _verify_options(option or [], domain, unsafe_no_sandbox, all_tests)
    if print_reward_func_path:
        typer.echo(reward_func.module_path())
        return
    if export_reward_func is not None:
        path = reward_func.export(export_reward_func, domain=domain, options=options, workers=workers, timeout_s=timeout)
        console.print(f"wrote {path}; pass it to OpenRLHF as --reward.remote_url {path}")
        return
    if export_agent is not None:
        from cascade_cli.engines.openrlhf import agent_file

        if not reward_url:
            raise CascadeUsageError("--export-agent: give the reward service with --reward-url http://HOST:PORT/get_reward")
        settings = {"reward_urls": reward_url, "top_k": top_k, "top_p": top_p, "overlong_filter": overlong_filter}
        path = agent_file.export(export_agent, settings)
        console.print(f"wrote {path}; pass it to OpenRLHF as --train.agent_func_path {path}")
        return
    if serve:
        from cascade_cli.serve.server import run_server

        run_server(
            host=host, port=port, token=token, max_body_bytes=int(max_body_mb * 1024 * 1024),
            max_samples=max_samples, workers=workers or 1, timeout_s=timeout, domain=domain, options=options,
            reward_model=reward_model, reward_func=serve_reward_func, reward_func_isolation=reward_func_isolation,
            reward_func_memory_mb=reward_func_memory_mb,
        )
        return
    if serve_reward_func is not None:
        raise CascadeUsageError("--reward-func: only with --serve (`cascade rlvr --reward-func` trains on it locally)")
    if reward_model is not None:
        raise CascadeUsageError("--reward-model: only with --serve (the reward service hosts the reward model)")
    if input is None:
        raise CascadeUsageError("--input is required (a JSONL file of rollout records), unless --serve is given")
    if output is not None:
        files.output_file(output, "--output")

    from cascade_cli.progress import Progress

    with Progress("verifying", unit="record", transient=True, enabled=not json_summary) as progress:
        summary, rows = file_scoring.verify_file(
            input, output, domain=domain, options=options, workers=workers or 1,
            on_total=lambda total: progress.update(total=total),
            on_progress=lambda done: progress.advance(done),
        )
    bad = [row["error"] for row in rows if "error" in row]
    if json_summary:
        typer.echo(json.dumps(summary))
    else:
        stdout.print(file_scoring.summary_table(summary, title=f"cascade verify {input.name}"))
        for message in bad[:10]:
            console.print(labelled("bad row", "yellow", message), soft_wrap=True)
        if len(bad) > 10:
            console.print(f"... and {len(bad) - 10} more bad rows (see 'error' in the output)")
    if strict and bad:
        raise CascadeUsageError(f"{len(bad)} bad row(s) in {input}; first: {bad[0]}")



def register(app: typer.Typer) -> None:
    app.command("verify", **COMMAND)(verify_command)
