"""Every `Example:` of every `--help` runs on the embedded model, or plans where it would run a whole cascade.

The examples form one cascade on the tiny model under `runs/tiny`, the folders `recipes/tiny.yaml` writes:
data -> sft -> rlhf rm -> rlhf -> rlvr math -> rlvr code -> eval -> report -> push, verify, tts. They run in
that order in a fresh folder, word for word, with three kinds of change, all below: words that keep a
training, sampling or evaluation run to seconds are appended (later words win); `recipe run` is planned
(`recipe plan`, the same arguments) instead of run; a reward service listens on a free port instead of 5000
and is stopped once it says it serves. Inputs no example writes (the preference, chat, code and SWE data, a
prompts file) are prepared first."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import typer.main

from cascade_cli.cli import app

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = re.compile(r"Example: \[bold\](.*?)\[/\]", re.DOTALL)
# The order the cascade runs in (a command's examples keep their own order).
ORDER = ["prepare-data", "recipe", "sft", "rlhf rm", "rlhf", "rlvr", "distill", "prepare-data filter", "eval", "report",
         "push", "verify", "tts", "tts code", "tts swe", ""]
SMALL = {  # words appended so a run takes seconds
    "sft": ["max_steps=2", "batch_size=2", "max_seq_len=64"],
    "rlhf rm": ["max_steps=2", "batch_size=2", "micro_batch=2", "max_seq_len=64"],
    "rlhf": ["steps=1", "prompts_per_step=2", "group_size=2", "max_response_len=8", "rm_max_len=64"],
    "rlvr": ["steps=1", "prompts_per_step=2", "group_size=2", "max_response_len=8"],
    "distill": ["steps=1", "prompts_per_step=2", "group_size=2", "max_response_len=8", "eval_limit=1"],
    "prepare-data filter": ["--k", "2", "max_new_tokens=8", "limit=4"],
    "eval": ["--limit", "2", "--k", "1", "--max-tokens", "8", "--backend", "hf"],
    "tts code": ["--limit", "2", "--max-tokens", "16", "-N", "8", "--backend", "hf"],
    "tts swe": ["--limit", "2", "--max-tokens", "16", "-k", "2", "--backend", "hf"],
}
INPUTS = [  # what the examples read but no example writes
    ["prepare-data", "--source", "tiny:pref", "--out", "runs/tiny/data_pref", "--n", "16"],
    ["prepare-data", "--source", "tiny:general", "--out", "runs/tiny/data_chat", "--n", "16"],
    ["prepare-data", "--source", "tiny:code", "--out", "runs/tiny/data_code", "--n", "16", "--holdout", "4"],
    ["prepare-data", "--source", "tiny:swe", "--out", "runs/tiny/data_swe", "--n", "16", "--holdout", "4"],
    ["prepare-data", "--source", "tiny:if", "--out", "runs/tiny/data_if", "--n", "16", "--holdout", "4"],
    # distill's teachers and init, the recipe's IF-RL and SWE RL checkpoints (the examples train math and code)
    *(["rlvr", "--domain", domain, "--init", "tiny", "--data", f"runs/tiny/data_{domain}", "--out", f"runs/tiny/{domain}_rl",
       "steps=1", "prompts_per_step=2", "group_size=2", "max_response_len=8"] for domain in ("if", "swe")),
]


def commands() -> list[tuple[str, object]]:
    """(command words, click command) of every command and group, hidden ones included."""
    found = []

    def walk(words: list[str], command) -> None:
        found.append((" ".join(words), command))
        for name, sub in getattr(command, "commands", {}).items():
            walk([*words, name], sub)

    walk([], typer.main.get_command(app))
    return found


def command_words(example: str, known: set[str]) -> str:
    """The command an example runs: its longest run of leading words that names a command."""
    words = shlex.split(example)[1:]
    return max((" ".join(words[:n]) for n in range(len(words) + 1) if " ".join(words[:n]) in known), key=len)


def examples() -> list[tuple[str, str]]:
    """(command words, example) of every `Example: [bold]...[/]` in the help texts, in cascade order."""
    found = []
    known = {words for words, _ in commands()}
    for words, command in commands():
        text = command.help or ""
        written = [" ".join(example.split()) for example in EXAMPLE.findall(text)]
        assert text.count("Example:") == len(written), f"`cascade {words}`: write examples as Example: [bold]...[/]"
        found += [(command_words(example, known), example) for example in written]
    rank = {words: index for index, words in enumerate(ORDER)}
    return sorted(found, key=lambda item: rank.get(item[0], len(ORDER)))


def test_every_command_and_group_has_an_example():
    missing = [words or "(root)" for words, command in commands() if not getattr(command, "hidden", False)
               and "Example:" not in (command.help or "")]
    assert not missing, f"--help without an example: {missing}"


def serve(argv: list[str], env: dict[str, str]) -> None:
    """Start the reward service of an example on a free port; stop it once it serves."""
    argv = [word if previous != "--port" else "0" for previous, word in zip(["", *argv[:-1]], argv, strict=True)]
    process = subprocess.Popen([sys.executable, "-m", "cascade_cli", *argv], stderr=subprocess.PIPE, text=True,
                               env=env)
    try:
        for line in process.stderr:  # type: ignore[union-attr]
            if "cascade reward service on" in line:
                break
        else:
            raise AssertionError(f"`cascade {shlex.join(argv)}` stopped before it served")
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=120) == 0
    finally:
        process.kill()


def test_every_example_runs_or_plans_on_the_embedded_model(cli, tmp_path, monkeypatch, shared_data):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CASCADE_SHARED_DATA", str(shared_data))
    shutil.copytree(REPO / "examples" / "data", tmp_path / "examples" / "data")
    Path("prompts.jsonl").write_text('"Why is the sky blue?"\n"How do bees make honey?"\n"Name three rivers."\n')
    for args in INPUTS:
        assert cli(args).exit_code == 0
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "CASCADE_REWARD_TOKEN": "t" * 32}
    ran = []
    for words, example in examples():
        argv = shlex.split(example)
        assert argv[0] == "cascade", example
        argv = argv[1:]
        if argv[:2] == ["recipe", "run"]:
            argv[1] = "plan"
        if "--serve" in argv:
            serve(argv, env)
        else:
            result = cli([*argv, *SMALL.get(words, [])])
            assert result.exit_code == 0, f"{example}\n{result.output}"
        ran.append(example)
    assert Path("runs/tiny/code_rl/model.safetensors").is_file() and Path("runs/tiny/report.md").is_file()
    assert Path("runs/tiny/distill/model.safetensors").is_file()
    assert len(ran) >= 25
