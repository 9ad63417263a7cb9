"""tiny:swe: one-line repairs in the SWE row shape, scored by the real SWE verifier, pool-disjoint, and the
tiny_swe benchmark the tiny recipe evaluates after every stage."""

from __future__ import annotations

import functools
import json
import random
from collections import Counter

import pytest

from cascade_cli.data import tiny_tasks
from cascade_cli.data.tiny import code as tiny_code
from cascade_cli.data.tiny.swe import swe_task
from cascade_cli.evaluation.benchmarks import resolve_benchmark
from cascade_cli.evaluation.scoring import score_benchmark
from cascade_cli.models import tiny
from cascade_cli.verifiers import get_verifier
from cascade_cli.verifiers.swe import apply_patch

VERIFIER = get_verifier("swe")
MIN_SWE_RL_GAIN = 0.05  # the held-out reward gain the slow test asks for


def _run_ok(cli, *argv: str) -> None:
    result = cli(list(argv))
    assert result.exit_code == 0, result.output


def _score(row: dict, response: str):
    record = {"id": row["id"], "prompt": row.get("prompt", ""), "response": response, "label": row["label"]}
    return VERIFIER.score(record)


def test_rows_have_the_swe_label_shape_and_a_one_line_bug():
    rows = tiny_tasks.generate("swe", 300, seed=0) + tiny_tasks.generate("swe", 100, seed=3, split="heldout")
    for row in rows:
        label = row["label"]
        assert VERIFIER.check_label(label) is None
        assert set(label) == {"golden_patch", "original_files", "problem_statement"}
        (path, before), = label["original_files"].items()
        after = apply_patch(label["golden_patch"], label["original_files"])[path]
        assert before.splitlines()[0] == after.splitlines()[0] and len(before.splitlines()) == 2
        assert before.splitlines()[1] != after.splitlines()[1]  # the return line is the one fixed
        assert label["problem_statement"] in row["prompt"] and before in row["prompt"]
        assert row["domain"] == "swe" and row["mode"] == "think"


def test_every_bug_kind_occurs():
    kinds = Counter(swe_task(random.Random(seed)).extra["bug"] for seed in range(300))
    assert set(kinds) == {"operator", "constant", "name"} and min(kinds.values()) > 30


def test_references_score_one_and_wrong_sft_fixes_apply_but_score_below_one():
    for row in tiny_tasks.generate("swe", 120, seed=1) + tiny_tasks.generate("swe", 60, seed=1, split="heldout"):
        score = _score(row, row["reference"])
        assert score.passed and score.reward == 1.0, (row, score)
    sft = tiny_tasks.generate("sft", 400, seed=2, mix={"swe": 1.0}, wrong_fraction=0.5)
    wrong = [row for row in sft if not row["correct"]]
    assert len(wrong) > 100
    for row in wrong:
        score = _score(row, row["messages"][-1]["content"])
        assert not score.passed and 0.0 < score.reward < 1.0, (row, score)
    no_patch = _score(sft[0], "<think>\nfix\n</think>\n\nI fixed it.")
    assert no_patch.reward == -1.0


def test_heldout_problems_repair_towards_heldout_code_constants():
    """A held-out SWE problem's fixed function is a (template, constant) of tiny:code's held-out pool: neither
    SFT nor RL rows (of any domain) show that function."""
    pools = {}
    for template in tiny_code._CODE_TEMPLATES:
        pools.update(tiny_code._code_pools(template))
    fixed_bodies = {
        template.body.format(k=int(key.rsplit(":", 1)[1])): pool
        for template in tiny_code._CODE_TEMPLATES
        for key, pool in tiny_code._code_pools(template).items()
    }
    for split, wanted in (("heldout", {"heldout"}), ("train", {"rl"})):
        for row in tiny_tasks.generate("swe", 150, seed=4, split=split):
            fixed = row["label"]["golden_patch"].splitlines()[-1].removeprefix("+    return ")
            assert fixed_bodies[fixed] in wanted, (split, fixed)


def test_answers_fit_the_recipes_160_token_responses():
    tokenizer = tiny.build_tokenizer()
    rows = tiny_tasks.generate("swe", 400, seed=5) + tiny_tasks.generate("swe", 128, seed=5, split="heldout")
    lengths = [len(ids) for ids in tokenizer([r["reference"] for r in rows], add_special_tokens=False)["input_ids"]]
    assert max(lengths) < 160  # recipes/tiny.yaml: swe_rl.max_response_len and eval.max_tokens


def test_tiny_swe_benchmark_scores_its_references():
    bench = resolve_benchmark("tiny_swe")
    assert (bench.domain, bench.metric, bench.default_k) == ("swe", "accuracy", 4)
    rows = bench.rows(16)
    records = [{**row, "response": row["reference"]} for row in rows]
    summary, _ = score_benchmark(records, name="tiny_swe", domain="swe", k=1)
    assert summary["score"] == 100.0 and summary["problems"] == 16
    broken = [{**row, "response": row["reference"].replace("+    return ", "+    return -")} for row in rows]
    assert score_benchmark(broken, name="tiny_swe", domain="swe", k=1)[0]["score"] == 0.0


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_swe_rl_raises_heldout_reward_of_a_short_sft_model(cli, tmp_path, monkeypatch):
    """SWE RL as recipes/tiny.yaml runs it (a pool of 96 issues, 12 steps, 16 rollouts per prompt, 160-token
    patches, dynamic and epoch-level filtering) from a short swe/code/math SFT base (batch 4, as the recipe's
    SFT): held-out greedy mean reward (Eq. 2) rises.
    About 8 minutes on one core."""
    monkeypatch.setenv("CASCADE_THREADS", "1")
    run = functools.partial(_run_ok, cli)
    run("prepare-data", "--source", "tiny:sft", "--out", str(tmp_path / "sft_data"), "n=12000",
        "mix.swe=0.4", "mix.code=0.3", "mix.math=0.3")  # fmt: skip
    run("prepare-data", "--source", "tiny:swe", "--out", str(tmp_path / "swe"), "n=96", "holdout=64")
    run("sft", "--init", "tiny", "--data", str(tmp_path / "sft_data"), "--out", str(tmp_path / "sft"),
        "lr=3e-3", "min_lr=3e-4", "max_steps=3000", "batch_size=4", "bf16=false", "threads=1")  # fmt: skip
    run("rlvr", "--domain", "swe", "--init", str(tmp_path / "sft"), "--data", str(tmp_path / "swe"),
        "--out", str(tmp_path / "rl"), "--eval-data", str(tmp_path / "swe" / "heldout.jsonl"),
        "steps=12", "prompts_per_step=4", "group_size=16", "max_response_len=160", "temperature=1.0",
        "lr=1e-4", "dynamic_filter=true", "epoch_filter=true", "seed=0")  # fmt: skip
    metrics = json.loads((tmp_path / "rl" / "cascade_stage.json").read_text())["metrics"]
    before, after = metrics["heldout_reward_before"], metrics["heldout_reward_after"]
    assert metrics["heldout_n"] == 64
    assert after - before >= MIN_SWE_RL_GAIN, f"SWE RL did not raise held-out reward: {before:.3f} -> {after:.3f}"
