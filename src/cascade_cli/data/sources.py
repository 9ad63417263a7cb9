"""Where rows come from: `tiny:DOMAIN`, local json/jsonl/parquet/csv/tsv files (or a folder of them, the
Hub's `data/train-00000-of-00002.parquet` shard layout included), hub datasets.

Every reader yields `(row number, raw row)` so that later errors can name the file and the row. The field
mapping (`--map prompt=question,answer=solution`) renames source columns to the names the normalizer reads;
its targets are checked against the names the normalizer and the formats read (data/columns.py).
"""

from __future__ import annotations

import csv
import json
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cascade_cli.data.shared_paths import resolve_shared
from cascade_cli.errors import CascadeUsageError
from cascade_cli.jsonl import iter_jsonl, non_blank_lines
from cascade_cli.records import iter_parquet

LOCAL_SUFFIXES: tuple[str, ...] = (".jsonl", ".json", ".parquet", ".csv", ".tsv")
SUFFIX_NAMES = ", ".join(LOCAL_SUFFIXES)
RawRows = Iterator[tuple[int, dict[str, Any]]]
# The Hub's shard names: `train-00000-of-00002.parquet`, `test-00000-of-00001-abc123.parquet`.
SHARD_NAME = re.compile(r"^(?P<split>[A-Za-z0-9_.]+?)-\d{5}-of-\d{5}")


class RowUnreadable(CascadeUsageError):
    """One source row that cannot be parsed (a malformed JSON line): prepare-data rejects it, naming the row."""

    def __init__(self, where: str, number: int, reason: str, raw: str) -> None:
        super().__init__(f"{where}: row {number}: {reason}")
        self.number, self.reason, self.raw = number, reason, raw


@dataclass
class Source:
    """A parsed `--source`: kind is tiny | file | dir | hub."""

    spec: str
    kind: str
    tiny_domain: str = ""
    path: Path | None = None
    files: list[Path] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.spec


def parse_source(spec: str, split: str = "train") -> Source:
    """`--source` -> a Source; a folder's files (its shards of `split` when the names follow the Hub's)."""
    spec = resolve_shared(spec.strip())  # shared:REL -> a file of the shared data folder
    if not spec:
        raise CascadeUsageError(f"--source: empty (expected tiny:DOMAIN, a {SUFFIX_NAMES} file or a hub id)")
    if spec.startswith("tiny:"):
        return Source(spec, "tiny", tiny_domain=spec.split(":", 1)[1])
    path = Path(spec).expanduser()
    if path.is_dir():
        return Source(spec, "dir", path=path, files=folder_files(path, split))
    if path.is_file():
        if path.suffix.lower() not in LOCAL_SUFFIXES:
            raise CascadeUsageError(
                f"{path}: unsupported file type '{path.suffix or 'no suffix'}' (expected {SUFFIX_NAMES})"
            )
        return Source(spec, "file", path=path, files=[path])
    if path.suffix.lower() in LOCAL_SUFFIXES or spec.startswith((".", "/", "~")) or spec.count("/") > 1:
        raise CascadeUsageError(f"{path}: file not found")
    return Source(spec, "hub")


# What prepare-data and the stages write beside the rows: never read as source rows of a folder.
OUTPUT_FILES = frozenset(
    {
        "data_card.json",
        "cascade_stage.json",
        "rejected.jsonl",
        "removed.jsonl",
        "dropped.jsonl",
        "pass_rate.json",
    }
)


def _is_data_file(path: Path) -> bool:
    return path.suffix.lower() in LOCAL_SUFFIXES and path.name not in OUTPUT_FILES and path.is_file()


def _hidden(path: Path, root: Path) -> bool:
    """Under a hidden folder of `root` (a Hub snapshot's .cache/, .git/)."""
    return any(part.startswith(".") for part in path.relative_to(root).parts)


def _data_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if _is_data_file(p))


def folder_files(path: Path, split: str = "train") -> list[Path]:
    """The data files of a folder: those of its `data/` folder (the Hub's layout, beside a root that may hold
    a dataset_info.json), else its own, else those anywhere below it (hidden folders skipped). Files named
    like Hub shards (`SPLIT-00000-of-00002.*`) are narrowed to `split`."""
    files = _data_files(path / "data") if (path / "data").is_dir() else []
    files = files or _data_files(path)
    if not files:
        files = sorted(p for p in path.rglob("*") if _is_data_file(p) and not _hidden(p, path))
    if not files:
        raise CascadeUsageError(f"{path}: directory holds no {SUFFIX_NAMES} files")
    splits = {file: match.group("split") for file in files if (match := SHARD_NAME.match(file.name))}
    if splits and len(splits) == len(files):
        chosen = [file for file in files if splits[file] == split]
        if not chosen:
            found = ", ".join(sorted(set(splits.values())))
            raise CascadeUsageError(
                f"{path}: no shards of split {split!r}; found splits {found} (choose with split=NAME)"
            )
        return chosen
    return files


def _iter_json_file(path: Path) -> SourceRows:
    """A .json file holding a list of objects (or {"data": [...]}) or, as many hub dumps do, JSON Lines."""
    text = path.read_text(encoding="utf-8")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        if error.msg == "Extra data":  # one object per line under a .json name
            yield from _iter_jsonl_rows(path)  # a malformed line rejects that row only
            return
        raise CascadeUsageError(
            f"{path}: malformed JSON ({error.msg} at line {error.lineno} column {error.colno})"
        ) from None
    if isinstance(data, dict):
        lists = [value for value in data.values() if isinstance(value, list)]
        if "data" in data and isinstance(data["data"], list):
            data = data["data"]
        elif len(lists) == 1:
            data = lists[0]
        else:
            data = [data]
    if not isinstance(data, list):
        raise CascadeUsageError(f"{path}: expected a list of JSON objects, found {type(data).__name__}")
    for number, row in enumerate(data, start=1):
        if not isinstance(row, dict):
            reason = f"expected a JSON object, found {type(row).__name__}"
            yield number, RowUnreadable(str(path), number, reason, json.dumps(row))
            continue
        yield number, row


SourceRows = Iterator[tuple[int, "dict[str, Any] | RowUnreadable"]]


def _iter_delimited(path: Path, delimiter: str) -> SourceRows:
    """CSV/TSV rows by the header: every cell as text (numbers and booleans as written), empty cells None
    (as `datasets` and pandas read them); a row with more cells than columns is a RowUnreadable."""
    csv.field_size_limit(sys.maxsize)
    with path.open(newline="", encoding="utf-8-sig") as handle:
        reader = csv.DictReader(handle, delimiter=delimiter)
        if not reader.fieldnames:
            raise CascadeUsageError(f"{path}: no header row (expected column names on the first line)")
        for number, row in enumerate(reader, start=1):
            extra = row.pop(None, None)  # type: ignore[call-overload]
            if extra:
                reason = f"{len(extra)} more cell(s) than the {len(reader.fieldnames)} columns of the header"
                yield number, RowUnreadable(str(path), number, reason, delimiter.join(extra))
                continue
            yield number, {key: (value if value != "" else None) for key, value in row.items()}


def _iter_jsonl_rows(path: Path) -> SourceRows:
    """JSON Lines; a malformed line is a RowUnreadable for that row (a bare string is a prompt row)."""
    for number, line in non_blank_lines(path):
        try:
            row = json.loads(line)
        except json.JSONDecodeError as error:
            reason = f"malformed JSON ({error.msg} at column {error.colno})"
            yield number, RowUnreadable(str(path), number, reason, line.rstrip("\n"))
            continue
        if isinstance(row, str):
            row = {"prompt": row}
        if not isinstance(row, dict):
            reason = f"expected a JSON object, found {type(row).__name__}"
            yield number, RowUnreadable(str(path), number, reason, line.rstrip("\n"))
            continue
        yield number, row


def iter_source_rows(path: Path) -> SourceRows:
    """Every row of a local file; one that cannot be parsed comes as a RowUnreadable (prepare-data rejects
    it, naming the row, and reads on) instead of ending the read."""
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        return _iter_jsonl_rows(path)
    if suffix in (".csv", ".tsv"):
        return _iter_delimited(path, "," if suffix == ".csv" else "\t")
    if suffix == ".json":
        return _iter_json_file(path)
    return iter_parquet(path)  # type: ignore[return-value]


def _strict(rows: SourceRows) -> RawRows:
    for number, row in rows:
        if isinstance(row, RowUnreadable):
            raise row
        yield number, row


def iter_file_rows(path: Path) -> RawRows:
    """Every row of a local file; the first that cannot be parsed ends the read with a usage error."""
    if path.suffix.lower() == ".jsonl":
        return iter_jsonl(path, strings_as="prompt")  # a plain prompt list's bare strings: {"prompt": text}
    return _strict(iter_source_rows(path))


def count_file_rows(path: Path) -> int | None:
    """Rows in a local file without parsing them (for the progress bar); None when unknown cheaply."""
    if path.suffix == ".parquet":
        try:
            import pyarrow.parquet as pq

            return pq.ParquetFile(path).metadata.num_rows
        except Exception:
            return None
    if path.suffix == ".jsonl":
        with path.open("rb") as handle:
            return sum(1 for line in handle if line.strip())
    return None


def iter_hub_rows(
    path: str,
    split: str = "train",
    subset: str | None = None,
    data_files: list[str] | None = None,
) -> RawRows:
    """Rows of `datasets.load_dataset(path, subset, split=split, data_files=...)`.

    `path` is a hub dataset id, or one of the `datasets` builders ("json", "parquet", "csv") with
    `data_files`. Errors (not found, no network, bad split) become one usage line.
    """
    try:
        import datasets
    except ImportError as error:  # pragma: no cover - datasets is a core dependency
        raise CascadeUsageError("hub sources need the `datasets` package (pip install datasets)") from error
    try:
        dataset = datasets.load_dataset(path, subset, split=split, data_files=data_files or None)
    except Exception as error:  # datasets raises many unrelated types (FileNotFoundError, ConnectionError...)
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise CascadeUsageError(f"{path}: could not load dataset (split {split!r}): {first_line}") from None
    if isinstance(dataset, datasets.DatasetDict):  # pragma: no cover - split is always given
        raise CascadeUsageError(f"{path}: several splits ({', '.join(dataset)}); choose one with split=NAME")
    for number, row in enumerate(dataset, start=1):
        yield number, dict(row)


def parse_field_map(text: str | None) -> dict[str, str]:
    """`prompt=question,answer=solution` -> {"prompt": "question", "answer": "solution"} (canonical=source)."""
    if not text:
        return {}
    mapping: dict[str, str] = {}
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        target, sep, column = item.partition("=")
        if not sep or not target.strip() or not column.strip():
            raise CascadeUsageError(f"--map: expected NAME=COLUMN pairs separated by commas; found {item!r}")
        mapping[target.strip()] = column.strip()
    return mapping


def apply_field_map(row: dict[str, Any], mapping: dict[str, str], where: str) -> dict[str, Any]:
    """Copy each mapped source column to its canonical name; a missing column names itself and the row.

    A column may be a dotted path into nested objects (`answer=meta.final`).
    """
    if not mapping:
        return row
    mapped = dict(row)
    for target, column in mapping.items():
        value: Any = row
        for part in column.split("."):
            if not isinstance(value, dict) or part not in value:
                columns = ", ".join(sorted(row)) or "none"
                raise CascadeUsageError(
                    f"{where}: column '{column}' (mapped to '{target}') not found; columns: {columns}"
                )
            value = value[part]
        if column in mapped and column != target and "." not in column:
            del mapped[column]
        mapped[target] = value
    return mapped
