"""`cascade prepare-data`: a source -> `OUT/data.jsonl` (+ `OUT/heldout.jsonl`) + `OUT/data_card.json`.

Reads `tiny:DOMAIN`, local json/jsonl/parquet files or a hub dataset, applies the field mapping, normalises
every row to the canonical row, holds out rows for evaluation (disjoint from the training rows by prompt),
and writes a data card (source, counts per domain and mode, lengths, a fingerprint) and a stage manifest.
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path
from typing import Any

from cascade_cli.config.build import build_stage_config
from cascade_cli.config.data import PrepareDataConfig
from cascade_cli.console import print_warning
from cascade_cli.data import constraints, tiny_tasks
from cascade_cli.data.card import data_card, fingerprint_files, print_summary
from cascade_cli.data.columns import check_map_targets, empty_answer_column, text_columns_as_text
from cascade_cli.data.decontaminate import FilterResult, NgramIndex, build_index, filter_rows
from cascade_cli.data.formats import FormatError, check_format, convert_rows
from cascade_cli.data.io import CARD_FILE, DATA_FILE, HELDOUT_FILE, pref_pair
from cascade_cli.data.normalize import normalize_row
from cascade_cli.data.preferences import normalize_preferences
from cascade_cli.data.prompt_filters import drop_math_and_code
from cascade_cli.data.rejections import REJECTED_FILE, Rejections, reason_of
from cascade_cli.data.select_ids import included_rows, keep_rows
from cascade_cli.data.sources import (
    RowUnreadable,
    Source,
    apply_field_map,
    count_file_rows,
    iter_hub_rows,
    iter_source_rows,
    parse_source,
)
from cascade_cli.data.tiny import tools as tiny_tools
from cascade_cli.errors import CascadeRunError, CascadeUsageError
from cascade_cli.jsonl import write_jsonl
from cascade_cli.manifest import StageManifest
from cascade_cli.progress import Progress

REMOVED_FILE = "removed.jsonl"
PREFERENCE_FORMATS: tuple[str, ...] = ("helpsteer", "ultrafeedback")  # data/preferences.py
PROGRESS_MIN_ROWS = 5000  # smaller inputs finish before a bar is worth drawing


def build_prepare_config(values: dict[str, Any], overrides: list[str] | None = None) -> PrepareDataConfig:
    """CLI flags (None = not given) + `key=value` overrides -> a validated PrepareDataConfig."""
    return build_stage_config(PrepareDataConfig, values, list(overrides or []), where="prepare-data")


def check_config(config: PrepareDataConfig) -> None:
    """What the config class cannot check itself: `format` is a name in this package's format registry. The
    stage table runs this for `recipe validate` and before a run (stages.py, `registry_check`). `map` targets
    must be names prepare-data reads (a typo would leave the column unread)."""
    check_map_targets(config.map)
    if config.format not in PREFERENCE_FORMATS:
        try:
            check_format(config.format, also=PREFERENCE_FORMATS)
        except ValueError as error:
            raise CascadeUsageError(str(error)) from None


def prompt_key(row: dict[str, Any]) -> str:
    """The row's prompt text, whitespace- and case-normalised (what train/held-out disjointness compares)."""
    if row.get("domain") == "pref":
        messages, _, _ = pref_pair(row)
    elif "messages" in row:
        messages = [m for m in row["messages"] if m.get("role") != "assistant"]
    else:
        prompt = row.get("prompt")
        messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt or [])
    text = "\n".join(str(m.get("content", "")) for m in messages if m.get("role") in ("user", "system"))
    return " ".join(text.lower().split())


# ---------------------------------------------------------------------------------------------------------
# reading
# ---------------------------------------------------------------------------------------------------------


def _tiny_rows(
    config: PrepareDataConfig, source: Source
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    if config.format not in (None, "auto"):
        raise CascadeUsageError(
            f"--format {config.format}: applies to files and hub datasets, not {source.spec}"
        )
    known = (*tiny_tasks.TINY_DOMAINS, tiny_tools.NAME)
    if source.tiny_domain not in known:
        raise CascadeUsageError(
            f"--source {source.spec}: unknown tiny domain {source.tiny_domain!r}; "
            f"expected one of {', '.join('tiny:' + d for d in known)}"
        )
    if source.tiny_domain == tiny_tools.NAME:  # tool-use sft conversations (data/tiny/tools.py)
        try:
            train = tiny_tools.generate(config.n, seed=config.seed, split="train", mode=config.mode)
            heldout = tiny_tools.generate(config.holdout, seed=config.seed, split="heldout", mode=config.mode)
        except ValueError as error:
            raise CascadeUsageError(f"--source {source.spec}: {error}") from None
        return train, heldout
    options = {"mode": config.mode, "wrong_fraction": config.wrong_fraction, "mix": dict(config.mix) or None}
    try:
        train = tiny_tasks.generate(source.tiny_domain, config.n, seed=config.seed, split="train", **options)
        heldout = tiny_tasks.generate(
            source.tiny_domain, config.holdout, seed=config.seed, split="heldout", **options
        )
    except ValueError as error:
        raise CascadeUsageError(f"--source {source.spec}: {error}") from None
    if config.domain is not None and train and config.domain != train[0]["domain"]:
        raise CascadeUsageError(
            f"--domain {config.domain}: tiny:{source.tiny_domain} rows are {train[0]['domain']} rows"
        )
    return train, heldout


def _raw_rows(config: PrepareDataConfig, source: Source):
    """(where, number, raw row or RowUnreadable) for every source row, up to `limit`; plus the expected total
    when known."""
    if source.kind == "hub":
        total = config.limit
        files: list[tuple[str, Any]] = [
            (
                source.spec,
                iter_hub_rows(source.spec, config.split, config.subset, list(config.data_files) or None),
            )
        ]
    else:
        counts = [count_file_rows(path) for path in source.files]
        total = None if any(c is None for c in counts) else sum(counts)  # type: ignore[arg-type]
        if total is not None:
            total = max(0, total - config.offset)
            total = total if config.limit is None else min(total, config.limit)
        files = [(str(path), iter_source_rows(path)) for path in source.files]

    def generate():
        read = skipped = 0
        for where, rows in files:
            for number, row in rows:
                if skipped < config.offset:
                    skipped += 1
                    continue
                if config.limit is not None and read >= config.limit:
                    return
                read += 1
                yield where, number, row

    return generate(), total


def preference_row(row: dict[str, Any], fmt: str, where: str) -> dict[str, Any] | None:
    """A HelpSteer/UltraFeedback row as a pref pair; None for a tie (no preference)."""
    pairs, _ = normalize_preferences([row], fmt, where=where)
    if not pairs:
        return None
    pair = {key: value for key, value in pairs[0].items() if key not in ("id", "source")}
    return {**pair, "id": row["id"]} if "id" in row else pair


NO_PAIR = "no preference pair (a tie, or no two ranked answers): nothing to train on"


def _convert(
    config: PrepareDataConfig, raw: dict[str, Any], where: str, number: int
) -> tuple[list, str | None]:
    """(rows for normalize_row, the format's domain) of one raw row; FormatError/CascadeUsageError when it
    does not fit."""
    mapped = text_columns_as_text(apply_field_map(raw, dict(config.map), f"{where}: row {number}"))
    empty = empty_answer_column(mapped)
    if empty:  # else the row would pass as a bare prompt, its missing answer unnoticed
        raise FormatError(f"column '{empty}' is empty (the answer this row trains on)")
    if config.format in PREFERENCE_FORMATS:  # a preference source: raw rows -> pairs first
        pair = preference_row(mapped, config.format, f"{where}: row {number}")
        return ([] if pair is None else [pair]), None
    return convert_rows(mapped, config.format)  # one row, several (an OASST tree's pairs) or none (a tie)


def _read_rows(
    config: PrepareDataConfig, source: Source, rejections: Rejections
) -> tuple[list[dict[str, Any]], int]:
    """(canonical rows, source rows read); every source row that gives no row is in `rejections`."""
    rows_iter, total = _raw_rows(config, source)
    # With --add-constraints the source holds base prompts: they become `if` rows once the constraints are
    # attached (after decontamination), so `--domain if` must not demand their IF labels now.
    row_domain = None if config.add_constraints else config.domain
    rows: list[dict[str, Any]] = []
    read = 0
    show = total is None or total >= PROGRESS_MIN_ROWS
    with Progress(f"reading {Path(source.spec).name}", total, unit="row", transient=True, enabled=show) as progress:
        for where, number, raw in rows_iter:
            read += 1
            progress.advance()
            if isinstance(raw, RowUnreadable):
                rejections.reject(where, number, raw.reason, raw.raw)
                continue
            try:
                converted, format_domain = _convert(config, raw, where, number)
                if not converted:
                    rejections.skip(where, number, NO_PAIR, raw)
                    continue
                rows += [
                    normalize_row(
                        mapped,
                        number=number,
                        where=where,
                        source=source.spec,
                        domain=row_domain or format_domain,
                        mode=config.mode,
                        id_prefix=Path(where).stem or "row",
                    )
                    for mapped in converted
                ]
            except (FormatError, CascadeUsageError) as error:
                rejections.reject(where, number, reason_of(error, where, number), raw)
    if not read:
        raise CascadeUsageError(f"{source.spec}: no rows")
    return rows, read


def _report_rejections(rejections: Rejections, read: int, config: PrepareDataConfig, out: Path) -> None:
    """Print the count per reason, write OUT/rejected.jsonl, then exit 2 when more than max_rejected of the
    rows read were rejected (the file stays for the user to read)."""
    if not config.dry_run:
        out.mkdir(parents=True, exist_ok=True)
        rejections.write(out)
    rejections.check_share(read, config.max_rejected, None if config.dry_run else out)
    rejections.print_counts()  # (a failed check says the counts in its one line)


def split_holdout(
    rows: list[dict[str, Any]], holdout: int, seed: int
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], int]:
    """(train, heldout, train rows dropped for sharing a prompt with a held-out row)."""
    if holdout <= 0:
        return rows, [], 0
    if holdout >= len(rows):
        raise CascadeUsageError(f"holdout: {holdout} rows requested but the source has only {len(rows)}")
    chosen = set(random.Random(f"holdout:{seed}").sample(range(len(rows)), holdout))
    heldout = [row for index, row in enumerate(rows) if index in chosen]
    heldout_prompts = {prompt_key(row) for row in heldout}
    train = [row for index, row in enumerate(rows) if index not in chosen]
    kept = [row for row in train if prompt_key(row) not in heldout_prompts]
    return kept, heldout, len(train) - len(kept)


def check_disjoint(train: list[dict[str, Any]], heldout: list[dict[str, Any]]) -> None:
    shared = {prompt_key(row) for row in train} & {prompt_key(row) for row in heldout}
    if shared:
        raise CascadeRunError(
            f"held-out rows share {len(shared)} prompt(s) with training rows, e.g. {sorted(shared)[0]!r}"
        )


# ---------------------------------------------------------------------------------------------------------
# filters
# ---------------------------------------------------------------------------------------------------------


def _filter_with_progress(rows: list[dict[str, Any]], index: NgramIndex, name: str) -> FilterResult:
    chunk = 20_000
    total = FilterResult([], [], dict.fromkeys(index.names, 0))
    enabled = len(rows) >= PROGRESS_MIN_ROWS
    with Progress(name, len(rows), unit="row", transient=True, enabled=enabled) as progress:
        for start in range(0, len(rows), chunk):
            part = filter_rows(rows[start : start + chunk], index, name)
            total.kept += part.kept
            total.removed += part.removed
            for key, count in part.removed_by.items():
                total.removed_by[key] += count
            progress.advance(min(chunk, len(rows) - start))
    return total


def apply_overlap_filters(
    config: PrepareDataConfig, rows: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """(kept rows, removed records, filter reports) after --exclude-prompts-from and --decontaminate-against."""
    removed: list[dict[str, Any]] = []
    reports: list[dict[str, Any]] = []
    for name, specs in (
        ("exclude_prompts", config.exclude_prompts_from),
        ("decontaminate", config.decontaminate_against),
    ):
        if not specs:
            continue
        index = build_index(list(specs), config.ngram_n)
        result = _filter_with_progress(rows, index, name)
        reports.append(
            {
                "name": name,
                "ngram_n": config.ngram_n,
                "against": dict(index.sizes),
                "in": len(rows),
                "out": len(result.kept),
                "removed_by": result.removed_by,
            }
        )
        rows = result.kept
        removed += result.removed
    return rows, removed, reports


# ---------------------------------------------------------------------------------------------------------
# runner (the data card is data/card.py)
# ---------------------------------------------------------------------------------------------------------


def run_prepare_data(config: PrepareDataConfig) -> dict[str, Any]:
    """Prepare one source into `config.out`; returns the metrics stored in the manifest."""
    check_config(config)
    started = time.time()
    out = Path(config.out)  # type: ignore[arg-type]
    source = parse_source(config.source, config.split)
    dropped = 0
    rejections = Rejections()
    kept_by_id: list[dict[str, Any]] = []
    if source.kind == "tiny":
        train, heldout = _tiny_rows(config, source)
        read = len(train) + len(heldout)
    else:
        rows, read = _read_rows(config, source, rejections)
        _report_rejections(rejections, read, config, out)
        if config.keep_ids:
            before = len(rows)
            rows = keep_rows(rows, list(config.keep_ids))
            if not rows:
                raise CascadeUsageError(f"{source.spec}: no row has an id in keep_ids {list(config.keep_ids)}")
            removed_by = {"keep_ids": before - len(rows)}
            kept_by_id = [{"name": "keep_ids", "in": before, "out": len(rows), "removed_by": removed_by}]
        rows += [row for spec in config.include for row in included_rows(spec)]
        train, heldout, dropped = split_holdout(rows, config.holdout, config.seed)
    check_disjoint(train, heldout)
    filters: list[dict[str, Any]] = [
        {
            "name": "holdout_overlap",
            "in": len(train) + dropped,
            "out": len(train),
            "removed_by": {"holdout": dropped},
        },
        *kept_by_id,
    ]
    if config.add_constraints and config.constraints_decontaminate:  # IF-RL prompts: never a benchmark's
        config = constraints.with_benchmark_decontamination(config)
    train, removed, reports = apply_overlap_filters(config, train)
    filters += reports
    if config.add_constraints:  # after the filters: the base prompts are what decontamination compares
        train = constraints.attach_constraints(train, config.add_constraints, config.constraints_per_prompt, config.seed)
        heldout = constraints.attach_constraints(
            heldout, config.add_constraints, config.constraints_per_prompt, config.seed + 1
        )
    if config.drop_math_code:
        before = len(train)
        train, report = drop_math_and_code(train)
        filters.append({"name": "drop_math_code", "in": before, "out": len(train), "removed_by": report["dropped"],
                        "examples": report["dropped_examples"]})
        heldout, _ = drop_math_and_code(heldout)  # the held-out split measures the same kind of data
    if config.drop_code_switch:
        from cascade_cli.data.code_switch_filter import drop_code_switched

        before = len(train)
        train, report = drop_code_switched(train)
        filters.append({"name": "drop_code_switch", "in": before, "out": len(train), "removed_by": report["dropped"],
                        "examples": report["dropped_examples"]})
    card = data_card(
        config, source.kind, train, heldout, read=read, dropped=dropped, removed=removed, filters=filters,
        rejections=rejections.counts(),
    )
    if rejections.records:
        card["files"]["rejected"] = REJECTED_FILE
    written = [out / DATA_FILE] + ([out / HELDOUT_FILE] if heldout else [])
    if not config.dry_run:
        out.mkdir(parents=True, exist_ok=True)
        write_jsonl(out / DATA_FILE, train)
        if heldout:
            write_jsonl(out / HELDOUT_FILE, heldout)
        elif (out / HELDOUT_FILE).exists():
            (out / HELDOUT_FILE).unlink()  # a stale file from an earlier run with holdout > 0
        if removed:
            write_jsonl(out / REMOVED_FILE, removed)
            card["files"]["removed"] = REMOVED_FILE
        elif (out / REMOVED_FILE).exists():
            (out / REMOVED_FILE).unlink()
        card["fingerprint"] = fingerprint_files(written)
    else:
        card["fingerprint"] = None
    metrics = {
        "rows": len(train),
        "heldout": len(heldout),
        "read": read,
        "dropped_holdout_overlap": dropped,
        "removed_by_filters": len(removed),
        "rejected": len(rejections.rejected),
        "skipped": len(rejections.skipped),
        "fingerprint": card["fingerprint"],
    }
    if not config.dry_run:
        (out / CARD_FILE).write_text(json.dumps(card, indent=2, ensure_ascii=False) + "\n")
        record = StageManifest(out, config, init=None, inputs={"output": card["fingerprint"]})
        record.write("completed", metrics, timings={"seconds": round(time.time() - started, 3)})
    print_summary(card, out, config.dry_run)
    if not train:
        print_warning(f"{out / DATA_FILE}: no rows left after the filters; later stages cannot read it")
    return metrics
