"""A training stage's `--data` when it is not a prepared folder: prepared on the fly into `OUT/data`.

sft, rlhf rm, rlhf, rlvr and distill read canonical rows (a prepare-data folder or file). A user has a CSV, a
TRL-layout JSONL, a folder of Hub shards or a hub id: those go through prepare-data (its formats, its
rejection report and data card) into `OUT/data`, and the stage reads that. A file the stage already reads
as it is (canonical rows, or the raw shapes its loader accepts: `messages` or `prompt` + `response` for SFT,
`chosen` + `rejected` for the reward model, a `prompt` with its `label` for RL) is left alone, unless the
stage's `data_map` / `data_prepare` (prepare-data's --map and keys: split, limit, format, ...) ask for a
preparation. When preparing fails (a hub id offline, rows that do not fit), the error says the exact
`cascade prepare-data` command to run.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from cascade_cli.console import console
from cascade_cli.errors import CascadeUsageError
from cascade_cli.records import DATA_FILE, ROW_SUFFIXES, iter_rows

PREPARED_DIR = "data"  # OUT/data
SOURCE_SUFFIXES = (".jsonl", ".json", ".parquet", ".csv", ".tsv")  # what prepare-data reads (data/sources.py)
# Stage kind -> the domain its rows are prepared as (None: read from each row).
KIND_DOMAINS: dict[str, str | None] = {
    "sft": "sft",
    "reward_model": "pref",
    "rlhf": None,
    "rlvr": None,
    "distill": None,
}
SFT_RESPONSES = (
    "response",
    "completion",
    "reference",
)  # engines/local/train/sft_data.py reads these beside a prompt


def stage_reads_as_is(kind: str, row: dict[str, Any]) -> bool:
    """Whether the stage's own loader reads this row shape without prepare-data."""
    if isinstance(row.get("domain"), str) and isinstance(row.get("id"), str):  # a canonical row
        return True
    if kind == "sft":
        return isinstance(row.get("messages"), list) or (
            isinstance(row.get("prompt"), (str, list))
            and any(isinstance(row.get(k), str) for k in SFT_RESPONSES)
        )
    if kind == "reward_model":
        return "chosen" in row and "rejected" in row
    if kind == "rlhf":
        return "prompt" in row or "messages" in row
    return ("prompt" in row or "messages" in row) and "label" in row  # rlvr, distill: the verifier's label


def _first_row(path: Path) -> dict[str, Any] | None:
    try:
        return next((row for _, row in iter_rows(path)), None)
    except CascadeUsageError:
        return None  # unreadable as canonical rows (a malformed line): prepare-data names the row


def _holds_data_files(folder: Path) -> bool:
    return any(p.suffix.lower() in SOURCE_SUFFIXES and p.is_file() for p in folder.rglob("*"))


def looks_like_hub_id(data: str) -> bool:
    """`NAME` or `OWNER/NAME` with no file suffix, whose OWNER is not a local folder."""
    path = Path(data)
    if path.suffix.lower() in SOURCE_SUFFIXES or data.startswith((".", "/", "~")) or data.count("/") > 1:
        return False
    return data.count("/") == 0 or not path.parent.is_dir()


def needs_preparing(kind: str, data: str) -> bool:
    """True when `data` is not a prepared folder nor a file the stage reads as it is: a raw file, a folder of
    data files (Hub shards) or a hub id. Anything else (a missing local path, an empty folder) is left to the
    stage's loader, which says what is wrong (and a dry run does not read it at all)."""
    path = Path(data).expanduser()
    if path.is_dir():
        prepared = (path / DATA_FILE).is_file() or (path / "data.parquet").is_file()
        return not prepared and _holds_data_files(path)
    if path.is_file():
        if path.suffix not in ROW_SUFFIXES:
            return path.suffix.lower() in SOURCE_SUFFIXES  # .csv, .tsv
        row = _first_row(path)
        return row is None or not stage_reads_as_is(kind, row)
    return looks_like_hub_id(data)


def is_prepared_folder(data: str) -> bool:
    path = Path(data).expanduser()
    return path.is_dir() and ((path / DATA_FILE).is_file() or (path / "data.parquet").is_file())


def can_prepare(data: str) -> bool:
    """Whether prepare-data could read `data` as a source (a data file, a folder of them, a hub id)."""
    path = Path(data).expanduser()
    if path.is_dir():
        return not is_prepared_folder(data) and _holds_data_files(path)
    if path.is_file():
        return path.suffix.lower() in SOURCE_SUFFIXES
    return looks_like_hub_id(data)


def prepare_settings(config: Any) -> dict[str, Any]:
    """The stage's prepare-data keys for its on-the-fly preparation: `data_prepare`, with `data_map` as map."""
    settings = dict(getattr(config, "data_prepare", None) or {})
    fixed = sorted(set(settings) & {"source", "out", "domain", "map"})
    if fixed:
        raise CascadeUsageError(
            f"data_prepare: {', '.join(fixed)} set by the stage (its data, OUT/data, its domain; map: data_map)"
        )
    if getattr(config, "data_map", None):
        settings["map"] = dict(config.data_map)
    return settings


def prepare_command(data: str, out: Path, domain: str | None, settings: dict[str, Any] | None = None) -> str:
    words = ["cascade", "prepare-data", "--source", data, "--out", str(out)]
    words += ["--domain", domain] if domain else []
    settings = dict(settings or {})
    if settings.get("map"):
        words += ["--map", ",".join(f"{name}={column}" for name, column in settings.pop("map").items())]
    return shlex.join(words + [f"{key}={value}" for key, value in settings.items()])


def domain_of(config: Any) -> str | None:
    if config.kind == "rlvr":
        return str(config.domain)
    return KIND_DOMAINS.get(config.kind)


def prepared_stage_data(config: Any) -> Any:
    """The stage's `data` as it should be read: as given, or prepared into OUT/data (its path returned). A
    list (distill's data, one source per domain) has each item that needs it prepared into OUT/data/K."""
    if config.kind not in KIND_DOMAINS:
        return config.data
    if isinstance(config.data, str):
        return _prepared(config, config.data, PREPARED_DIR)
    return [_prepared(config, str(item), f"{PREPARED_DIR}/{index}") for index, item in enumerate(config.data)]


def _prepared(config: Any, data: str, folder: str) -> str:
    settings = prepare_settings(config)
    if settings and is_prepared_folder(data):
        raise CascadeUsageError(
            f"data {data}: a prepared folder, read as it is; data_map / data_prepare apply to a raw file, a "
            "folder of data files or a hub id"
        )
    if not needs_preparing(config.kind, data) and not (settings and can_prepare(data)):
        return data
    domain = domain_of(config)
    if not config.out:
        raise CascadeUsageError(
            f"data {data}: not a prepared folder; run {prepare_command(data, Path('DIR'), domain, settings)}"
        )
    out = Path(config.out) / folder
    command = prepare_command(data, out, domain, settings)
    if config.dry_run:
        console.print(f"data {data}: would be prepared into {out}: {command}", soft_wrap=True, markup=False)
        return str(out)
    # (prepare-data's own summary says what was prepared where; a failure is one error line)
    from cascade_cli.data.prepare import build_prepare_config, run_prepare_data

    try:
        values = {**settings, "source": data, "out": str(out), "domain": domain}
        run_prepare_data(build_prepare_config(values))
    except CascadeUsageError as error:
        raise CascadeUsageError(f"data {data}: {error} (to prepare it yourself: {command})") from None
    return str(out)
