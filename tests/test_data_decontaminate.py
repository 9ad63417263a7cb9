"""Decontamination and prompt disjointness: the n-gram index, and prepare-data's filters and data card."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cascade_cli.data import decontaminate
from cascade_cli.data.decontaminate import NgramIndex, filter_rows
from cascade_cli.data.io import load_canonical
from cascade_cli.data.prepare import build_prepare_config, run_prepare_data

REFERENCE = "Find the number of ordered pairs of positive integers whose sum is twelve and product is odd."


def _index(n: int = 9, **sets: list[str]) -> NgramIndex:
    index = NgramIndex(n=n)
    for name, texts in sets.items():
        index.add(name, texts)
    return index


def test_nine_gram_overlap_is_found_eight_is_not():
    index = _index(bench=[REFERENCE])
    words = REFERENCE.split()
    nine = "Please help: " + " ".join(words[3:12]) + " -- thanks"
    eight = "Please help: " + " ".join(words[3:11]) + " -- thanks"
    assert index.match(nine) == ["bench"]
    assert index.match(eight) == []
    assert index.match(REFERENCE.upper().replace(" ", "  ,")) == [
        "bench"
    ]  # case and punctuation do not matter
    assert _index(n=5, bench=[REFERENCE]).match("x " + " ".join(words[:5])) == ["bench"]


def test_short_prompts_match_only_exactly_after_normalisation():
    index = _index(tiny=["What is 3+4?"], other=["what is 3 + 4"])
    assert index.match("  WHAT is 3+4 ?") == ["tiny", "other"]
    assert index.match("What is 3+5?") == []
    assert index.match("So, what is 3+4?") == []
    eight = " ".join(REFERENCE.split()[:8])  # n - 1 words: still an exact match
    assert _index(bench=[eight]).match(eight.upper()) == ["bench"]


def test_every_benchmark_a_row_overlaps_is_reported():
    index = _index(
        a=[REFERENCE], b=["Unrelated text about the ordered pairs of positive integers whose sum is twelve"]
    )
    row = {"id": "r1", "prompt": REFERENCE}
    result = filter_rows([row, {"id": "r2", "prompt": "clean prompt"}], index, "decontaminate")
    assert [r["id"] for r in result.kept] == ["r2"]
    assert result.removed == [{"id": "r1", "filter": "decontaminate", "matches": ["a", "b"]}]
    assert result.removed_by == {"a": 1, "b": 1}


@settings(max_examples=60, deadline=None)
@given(
    references=st.lists(
        st.lists(
            st.sampled_from(["a", "b", "c", "d", "e", "f", "g", "H.", "i,", "j"]), min_size=1, max_size=14
        ),
        min_size=1,
        max_size=6,
    ),
    rows=st.lists(
        st.lists(
            st.sampled_from(["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k"]), min_size=0, max_size=30
        ),
        max_size=40,
    ),
    n=st.integers(min_value=1, max_value=6),
)
def test_batched_masks_equal_the_plain_computation(references, rows, n):
    """Vectorised batches (with row boundaries, short rows and a tiny batch size) == the plain per-row loop."""
    index = _index(
        n=n, first=[" ".join(r) for r in references[::2]], second=[" ".join(r) for r in references[1::2]]
    )
    texts = [" ".join(r) for r in rows]
    # exact copies and prefixes of the references too, so that short exact matches and boundaries get exercised
    texts += [" ".join(r[:cut]) for r in references for cut in (len(r), n - 1, n)]
    random.Random(len(texts)).shuffle(texts)
    original = decontaminate.BATCH_ROWS
    decontaminate.BATCH_ROWS = 7
    try:
        assert index.masks(texts) == [index.simple_mask(text) for text in texts]
    finally:
        decontaminate.BATCH_ROWS = original


def test_random_contamination_is_found_in_a_large_batch():
    rng = random.Random(0)
    vocab = [f"w{i}" for i in range(300)] + REFERENCE.lower().split()
    texts = [" ".join(rng.choices(vocab, k=rng.randint(5, 40))) for _ in range(20_000)]
    dirty = set(rng.sample(range(len(texts)), 50))
    for row in dirty:
        texts[row] += " " + " ".join(REFERENCE.split()[2:11])
    index = _index(bench=[REFERENCE])
    flagged = {row for row, mask in enumerate(index.masks(texts)) if mask}
    assert dirty <= flagged
    assert flagged == {row for row, text in enumerate(texts) if index.simple_mask(text)}


# ---------------------------------------------------------------------------------------------------------
# prepare-data with --decontaminate-against and --exclude-prompts-from
# ---------------------------------------------------------------------------------------------------------


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_prepare_data_decontaminates_against_named_benchmarks(tmp_path, shared_data, cli):
    math500 = [json.loads(line) for line in (shared_data / "math500" / "test.jsonl").read_text().splitlines()]
    ifeval = [
        json.loads(line) for line in (shared_data / "ifeval" / "input_data.jsonl").read_text().splitlines()
    ]
    rows = [{"id": f"clean{i}", "prompt": f"What is {i}+{i}?", "answer": str(2 * i)} for i in range(20)]
    rows += [{"id": "leak-math", "prompt": "Solve this. " + math500[7]["problem"], "answer": "1"}]
    rows += [{"id": "leak-if", "prompt": ifeval[3]["prompt"][:200] + " And more.", "answer": "1"}]
    source = _jsonl(tmp_path / "mixed.jsonl", rows)
    out = tmp_path / "out"
    result = cli(
        ["prepare-data", "--source", source, "--out", out, "--decontaminate-against", "math500,aime24,ifeval"]
    )
    assert result.exit_code == 0, result.output
    assert [r["id"] for r in load_canonical(out)] == [f"clean{i}" for i in range(20)]
    removed = [json.loads(line) for line in (out / "removed.jsonl").read_text().splitlines()]
    assert {(r["id"], tuple(r["matches"])) for r in removed} == {
        ("leak-math", ("math500",)),
        ("leak-if", ("ifeval",)),
    }
    card = json.loads((out / "data_card.json").read_text())
    report = card["filters"][-1]
    assert report["name"] == "decontaminate" and report["ngram_n"] == 9
    assert (report["in"], report["out"]) == (22, 20)
    assert report["removed_by"] == {"math500": 1, "aime24": 0, "ifeval": 1}
    assert report["against"] == {"math500": 500, "aime24": 30, "ifeval": 541}
    assert card["counts"]["removed_by_filters"] == 2 and card["files"]["removed"] == "removed.jsonl"


def test_exclude_prompts_keeps_sft_and_rl_prompts_disjoint(tmp_path):
    rl = tmp_path / "rl"
    run_prepare_data(build_prepare_config({"source": "tiny:math", "out": str(rl), "n": 200}))
    rl_prompts = [row["prompt"] for row in load_canonical(rl)]
    rows = [
        {"id": f"sft{i}", "messages": [{"role": "user", "content": p}, {"role": "assistant", "content": "x"}]}
        for i, p in enumerate(rl_prompts[:5])
    ]
    rows += [
        {
            "id": "fresh",
            "messages": [
                {"role": "user", "content": "Name a color."},
                {"role": "assistant", "content": "Red"},
            ],
        }
    ]
    source = _jsonl(tmp_path / "sft.jsonl", rows)
    out = tmp_path / "sft"
    metrics = run_prepare_data(
        build_prepare_config({"source": str(source), "out": str(out), "exclude_prompts_from": [str(rl)]})
    )
    assert [r["id"] for r in load_canonical(out)] == ["fresh"]
    assert metrics["removed_by_filters"] == 5
    card = json.loads((out / "data_card.json").read_text())
    assert card["filters"][-1]["name"] == "exclude_prompts" and card["filters"][-1]["against"] == {
        str(rl): 200
    }
    # a rerun without the filter leaves no stale removed.jsonl behind
    run_prepare_data(build_prepare_config({"source": str(source), "out": str(out)}))
    assert not (out / "removed.jsonl").exists()


def test_unknown_benchmark_is_a_usage_error(tmp_path, cli):
    result = cli(
        ["prepare-data", "--source", "tiny:math", "--out", tmp_path / "o", "--decontaminate-against", "mmlu9"]
    )
    assert result.exit_code == 2 and "unknown benchmark 'mmlu9'" in result.output


@pytest.mark.parametrize("n", [0, -1])
def test_bad_ngram_size_is_a_usage_error(tmp_path, cli, n):
    result = cli(
        [
            "prepare-data",
            "--source",
            "tiny:math",
            "--out",
            tmp_path / "o",
            f"ngram_n={n}",
            "decontaminate_against=[math500]",
        ]
    )
    assert result.exit_code == 2 and "ngram_n" in result.output
