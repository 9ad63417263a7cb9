"""File-system mistakes end with one line naming the path and what was wrong, never a traceback: exit 2 for a
path the user gave (unreadable input, an `--out` that cannot be written or is a file), exit 1 for a write that
fails during a run (a full disk, simulated with a file-size limit or /dev/full).

Root reads and writes anything, so an unreadable file or a read-only folder is made real by running the
command as root without the capabilities that bypass file modes (`setpriv`), or as the user it is."""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

CASCADE = [sys.executable, "-m", "cascade_cli"]
DROP_OVERRIDE = ["setpriv", "--bounding-set=-dac_override,-dac_read_search"]


def unprivileged() -> list[str]:
    """A command prefix under which file modes bite: none for an ordinary user, setpriv for root."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: file modes cannot be made to bite")
    return DROP_OVERRIDE


def run(args: list, prefix: list[str] | None = None, file_size_limit: int | None = None) -> subprocess.CompletedProcess:
    def limit() -> None:  # Python ignores SIGXFSZ, so a write past the limit fails with EFBIG like a full disk
        if file_size_limit is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (file_size_limit, file_size_limit))

    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    return subprocess.run(
        [*(prefix or []), *CASCADE, *map(str, args)], capture_output=True, text=True, timeout=600, env=env,
        preexec_fn=limit,
    )


def assert_one_line(result: subprocess.CompletedProcess, code: int, *parts: str) -> None:
    output = result.stdout + result.stderr
    assert result.returncode == code, output
    assert "Traceback" not in output, output
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, output
    for part in parts:
        assert part in errors[0], output


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> dict[str, Path]:
    from typer.testing import CliRunner

    from cascade_cli.cli import app

    root = tmp_path_factory.mktemp("data")
    for domain in ("sft", "math"):
        result = CliRunner().invoke(app, ["prepare-data", "--source", f"tiny:{domain}", "--out", str(root / domain), "--n", "16"])
        assert result.exit_code == 0, result.output
    return {"sft": root / "sft", "math": root / "math"}


def unreadable_copy(folder: Path, tmp_path: Path) -> Path:
    target = tmp_path / "locked"
    shutil.copytree(folder, target)
    (target / "data.jsonl").chmod(0)
    return target


@pytest.mark.parametrize(
    "command",
    [
        ["sft", "--init", "tiny", "--data", "{data}", "max_steps=1"],
        ["rlvr", "--domain", "math", "--init", "tiny", "--data", "{data}", "steps=1"],
        ["prepare-data", "--source", "{data}/data.jsonl"],
    ],
    ids=["sft", "rlvr", "prepare-data"],
)
def test_an_unreadable_input_is_one_line_exit_2(data, tmp_path, command):
    prefix = unprivileged()
    folder = unreadable_copy(data["math" if "rlvr" in command else "sft"], tmp_path)
    args = [word.replace("{data}", str(folder)) for word in command]
    result = run([*args, "--out", tmp_path / "out"], prefix)
    assert_one_line(result, 2, str(folder / "data.jsonl"), "permission denied")


@pytest.mark.parametrize(
    "command",
    [
        ["sft", "--init", "tiny", "--data", "{sft}", "max_steps=1"],
        ["prepare-data", "--source", "tiny:math", "--n", "4"],
    ],
    ids=["sft", "prepare-data"],
)
def test_an_out_folder_that_cannot_be_written_is_one_line_exit_2(data, tmp_path, command):
    prefix = unprivileged()
    locked = tmp_path / "read_only"
    locked.mkdir()
    locked.chmod(0o555)
    args = [word.replace("{sft}", str(data["sft"])) for word in command]
    result = run([*args, "--out", locked / "out"], prefix)
    assert_one_line(result, 2, "out", str(locked / "out"), "permission denied")


@pytest.mark.parametrize(
    "command",
    [
        ["sft", "--init", "tiny", "--data", "{sft}", "max_steps=1", "--out", "{file}"],
        ["rlvr", "--domain", "math", "--init", "tiny", "--data", "{math}", "steps=1", "--out", "{file}"],
        ["prepare-data", "--source", "tiny:math", "--out", "{file}"],
        ["eval", "--model", "tiny", "--benchmarks", "tiny_math", "--limit", "1", "--out", "{file}"],
        ["recipe", "run", "tiny", "run_dir={file}"],
    ],
    ids=["sft", "rlvr", "prepare-data", "eval", "recipe-run"],
)
def test_an_out_that_names_a_file_is_one_line_exit_2(cli, data, tmp_path, command):
    existing = tmp_path / "a_file"
    existing.write_text("not a folder\n")
    values = {"{sft}": str(data["sft"]), "{math}": str(data["math"]), "{file}": str(existing)}
    args = [next((word.replace(k, v) for k, v in values.items() if k in word), word) for word in command]
    result = cli(args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert str(existing) in result.output and "names an existing file; expected a folder" in result.output
    assert existing.read_text() == "not a folder\n"


def test_a_full_disk_while_saving_a_checkpoint_is_one_line_exit_1(data, tmp_path):
    # The 1.5M-parameter model's weights are 6 MB: a 1 MB limit fails the first checkpoint write.
    result = run(["sft", "--init", "tiny", "--data", data["sft"], "--out", tmp_path / "out", "max_steps=1"],
                 file_size_limit=1_000_000)
    assert_one_line(result, 1, "could not write the", str(tmp_path / "out"), "disk full")


def test_a_full_disk_while_writing_rows_is_one_line_exit_1(tmp_path):
    result = run(["prepare-data", "--source", "tiny:math", "--n", "400", "--out", tmp_path / "out"],
                 file_size_limit=20_000)
    assert_one_line(result, 1, str(tmp_path / "out"), "file too large", "free some space")


def test_verify_output_on_a_full_device_is_one_line_exit_1(tmp_path):
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full")
    rollouts = Path(__file__).resolve().parents[1] / "examples" / "data" / "rollouts.jsonl"
    result = run(["verify", "--input", rollouts, "--output", "/dev/full"])
    assert_one_line(result, 1, "/dev/full", "no space left on the device")
