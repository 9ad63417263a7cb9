"""The data card of a prepare-data output: counts per domain and mode, lengths, filters and a fingerprint."""

from __future__ import annotations

import hashlib
from collections import Counter
from pathlib import Path
from typing import Any

from rich.table import Table

from cascade_cli.chat import render_messages, render_prompt
from cascade_cli.config.data import PrepareDataConfig
from cascade_cli.config.structure import to_plain
from cascade_cli.console import console
from cascade_cli.data.io import DATA_FILE, HELDOUT_FILE, pref_pair
from cascade_cli.errors import CascadeUsageError


def rendered_text(row: dict[str, Any]) -> str:
    """What a model sees for this row (prompt plus the answer it trains on, when there is one)."""
    mode = row.get("mode", "think")
    if "messages" in row:
        return render_messages(row["messages"], mode=mode, tools=row.get("tools") or None)
    if row.get("domain") == "pref":
        messages, chosen, _ = pref_pair(row)
        return render_messages(messages, mode=mode, add_generation_prompt=True) + chosen
    return render_prompt(row["prompt"], mode=mode)


def _percentiles(values: list[int]) -> dict[str, int]:
    ordered = sorted(values)

    def at(q: float) -> int:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    return {"p50": at(0.5), "p90": at(0.9), "p99": at(0.99), "max": ordered[-1]}


def counts_by_domain_mode(rows: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    counts: dict[str, dict[str, int]] = {}
    for (domain, mode), count in sorted(Counter((r["domain"], r["mode"]) for r in rows).items()):
        counts.setdefault(domain, {})[mode] = count
    return counts


def length_stats(rows: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """Rendered-text length percentiles in characters per domain/mode (= tokens for the char-level tiny model)."""
    lengths: dict[str, list[int]] = {}
    for row in rows:
        lengths.setdefault(f"{row['domain']}/{row['mode']}", []).append(len(rendered_text(row)))
    return {key: _percentiles(values) for key, values in sorted(lengths.items())}


def load_tokenizer(spec: str) -> Any:
    from cascade_cli.models import tiny
    from cascade_cli.models.resolve import resolve_model

    if tiny.is_tiny_spec(spec):
        return tiny.build_tokenizer()
    if tiny.is_embedded_spec(spec):
        spec = str(resolve_model(spec))  # `smollm2-135m`, `gguf:PATH`: converted once
    try:
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(spec)
    except Exception as error:  # transformers raises OSError, ValueError, HF errors...
        first_line = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise CascadeUsageError(f"tokenizer {spec}: could not load ({first_line})") from None


def token_length_stats(rows: list[dict[str, Any]], tokenizer: Any) -> dict[str, dict[str, int]]:
    """Token-length percentiles of the rendered rows per domain/mode."""
    texts: dict[str, list[str]] = {}
    for row in rows:
        texts.setdefault(f"{row['domain']}/{row['mode']}", []).append(rendered_text(row))
    stats = {}
    for key, group in sorted(texts.items()):
        lengths: list[int] = []
        for start in range(0, len(group), 1024):
            encoded = tokenizer(group[start : start + 1024], add_special_tokens=False)["input_ids"]
            lengths += [len(ids) for ids in encoded]
        stats[key] = _percentiles(lengths)
    return stats


def fingerprint_files(paths: list[Path]) -> str:
    digest = hashlib.sha256()
    for path in paths:
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return "sha256:" + digest.hexdigest()


def print_summary(card: dict[str, Any], out: Path, dry_run: bool) -> None:
    table = Table(title=f"prepare-data -> {out}" + (" (dry run: nothing written)" if dry_run else ""))
    table.add_column("domain")
    table.add_column("mode")
    table.add_column("rows", justify="right")
    table.add_column("held out", justify="right")
    table.add_column("chars p50/p90/max", justify="right")
    heldout = card["heldout_by_domain_mode"]
    for domain, modes in card["by_domain_mode"].items():
        for mode, count in modes.items():
            stats = card["length_chars"].get(f"{domain}/{mode}", {})
            lengths = f"{stats.get('p50')}/{stats.get('p90')}/{stats.get('max')}" if stats else "-"
            table.add_row(domain, mode, str(count), str(heldout.get(domain, {}).get(mode, 0)), lengths)
    console.print(table)
    for report in card["filters"][1:]:
        by = ", ".join(f"{name} {count}" for name, count in report["removed_by"].items())
        console.print(
            f"{report['name']}" + (f" ({report['ngram_n']}-grams)" if "ngram_n" in report else "")
            + f": {report['in']} -> {report['out']} rows; removed by {by}",
            soft_wrap=True,
        )
    counts = card["counts"]
    console.print(
        f"source {card['source']}: read {counts['read']}, wrote {counts['written']} to {DATA_FILE}"
        + (f", {counts['heldout']} to {HELDOUT_FILE}" if counts["heldout"] else "")
        + (
            f"; dropped {counts['dropped_holdout_overlap']} sharing a held-out prompt"
            if counts["dropped_holdout_overlap"]
            else ""
        )
        + (f"; rejected {counts['rejected']}" if counts.get("rejected") else "")
        + (f"; skipped {counts['skipped']} (no preference)" if counts.get("skipped") else "")
        + f"\nfingerprint {card['fingerprint']}",
        soft_wrap=True,
    )


def data_card(
    config: PrepareDataConfig,
    source_kind: str,
    train: list[dict[str, Any]],
    heldout: list[dict[str, Any]],
    *,
    read: int,
    dropped: int,
    removed: list[dict[str, Any]],
    filters: list[dict[str, Any]],
    rejections: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The card of one prepare-data run (its `fingerprint` and `files.removed` are set once files are written)."""
    return {
        "source": config.source,
        "source_kind": source_kind,
        "files": {"data": DATA_FILE, **({"heldout": HELDOUT_FILE} if heldout else {})},
        "counts": {
            "read": read,
            "written": len(train),
            "heldout": len(heldout),
            "dropped_holdout_overlap": dropped,
            "removed_by_filters": len(removed),
            # Source rows that gave no row (data/rejections.py): rejected (malformed, not fitting) and
            # skipped (a preference tie), each per reason; the rows themselves are in rejected.jsonl.
            **(rejections or {"rejected": 0, "skipped": 0, "rejected_by_reason": {}, "skipped_by_reason": {}}),
        },
        "filters": filters,
        "by_domain_mode": counts_by_domain_mode(train),
        "heldout_by_domain_mode": counts_by_domain_mode(heldout),
        "length_chars": length_stats(train),
        **(
            {"length_tokens": token_length_stats(train, load_tokenizer(config.tokenizer))}
            if config.tokenizer and train
            else {}
        ),
        "config": to_plain(config),
    }
