"""The gsm8k and mbpp benchmarks (evaluation/benchmarks_real.py): the test splits with the stated ids, their
defaults beside them, and `cascade eval --responses` scoring another system's outputs on them (the reference
answers score 100, wrong ones 0)."""

from __future__ import annotations

import json
from pathlib import Path

from cascade_cli.data.decontaminate import reference_prompts
from cascade_cli.evaluation.benchmarks import BENCHMARKS, known_benchmarks, resolve_benchmark


def test_the_test_splits_and_their_ids(shared_data: Path):
    gsm8k, mbpp = resolve_benchmark("gsm8k").rows(), resolve_benchmark("mbpp").rows()
    assert len(gsm8k) == 1319 and [row["id"] for row in gsm8k[:2]] == ["0", "1"] and gsm8k[-1]["id"] == "1318"
    first = json.loads((shared_data / "real" / "gsm8k" / "test.jsonl").read_text().splitlines()[0])
    assert gsm8k[0]["question"] == first["question"] and gsm8k[0]["label"] == {"answer": "18"}
    assert len(mbpp) == 500 and [row["id"] for row in mbpp] == [str(i) for i in range(11, 511)]
    assert mbpp[0]["label"]["kind"] == "assert" and mbpp[0]["prompt"].count("assert ") == 1
    assert {"gsm8k", "mbpp", "humaneval", "ifeval", "math500"} <= set(known_benchmarks())


def test_defaults_written_beside_each_benchmark():
    assert (BENCHMARKS["gsm8k"].default_k, BENCHMARKS["gsm8k"].default_temperature) == (1, 0.0)
    assert (BENCHMARKS["mbpp"].default_k, BENCHMARKS["mbpp"].default_max_tokens) == (1, 512)
    assert BENCHMARKS["aime24"].default_k == 64 and BENCHMARKS["ifeval"].default_temperature == 0.6  # the paper's


def test_eval_samples_each_benchmark_with_its_own_defaults_unless_told(tmp_path: Path):
    """Unset --temperature / --max-tokens mean each benchmark's own; the values used land in its summary."""
    import dataclasses

    from cascade_cli.config.eval import EvalSettings
    from cascade_cli.evaluation.run import evaluate_checkpoint

    tiny_math = BENCHMARKS["tiny_math"]
    greedy_short = dataclasses.replace(tiny_math, name="greedy_short", default_temperature=0.0, default_max_tokens=3)
    warm_long = dataclasses.replace(tiny_math, name="warm_long", default_temperature=0.9, default_max_tokens=7)
    settings = EvalSettings(k=2, limit=3, backend="hf")
    results = evaluate_checkpoint("tiny", [greedy_short, warm_long], settings, out_dir=tmp_path / "own")
    own = results["benchmarks"]
    assert (own["greedy_short"]["temperature"], own["greedy_short"]["max_tokens"]) == (0.0, 3)
    assert (own["warm_long"]["temperature"], own["warm_long"]["max_tokens"]) == (0.9, 7)
    samples = [json.loads(line) for line in (tmp_path / "own" / "samples.jsonl").read_text().splitlines()]
    greedy = [s["response"] for s in samples if s["benchmark"] == "greedy_short"]
    assert all(greedy[i] == greedy[i + 1] for i in range(0, len(greedy), 2))  # greedy: both samples agree
    told = EvalSettings(k=2, limit=3, backend="hf", temperature=1.0, max_tokens=5)
    overridden = evaluate_checkpoint("tiny", [greedy_short], told)["benchmarks"]["greedy_short"]
    assert (overridden["temperature"], overridden["max_tokens"]) == (1.0, 5)


def test_responses_score_on_both(cli, tmp_path: Path, shared_data: Path):
    rows = {name: resolve_benchmark(name).rows() for name in ("gsm8k", "mbpp")}
    responses = tmp_path / "responses.jsonl"
    lines = [{"benchmark": "gsm8k", "id": row["id"], "response": row["reference"]} for row in rows["gsm8k"]]
    lines += [{"benchmark": "mbpp", "id": row["id"], "response": row["reference"]} for row in rows["mbpp"][:12]]
    lines += [{"benchmark": "mbpp", "id": row["id"], "response": "```python\nprint(1)\n```"} for row in rows["mbpp"][12:16]]
    responses.write_text("".join(json.dumps(line) + "\n" for line in lines))
    result = cli(["eval", "--responses", responses, "--benchmarks", "gsm8k,mbpp", "--out", tmp_path / "out"])
    assert result.exit_code == 0, result.output
    scores = json.loads((tmp_path / "out" / "results.json").read_text())["benchmarks"]
    assert scores["gsm8k"]["score"] == 100.0 and scores["gsm8k"]["problems"] == 1319
    assert scores["mbpp"]["problems"] == 16 and scores["mbpp"]["score"] == 75.0


def test_decontamination_compares_the_raw_problems(shared_data: Path):
    name, texts = reference_prompts("gsm8k")
    assert name == "gsm8k" and len(texts) == 1319 and "boxed" not in texts[0]
    assert len(reference_prompts("mbpp")[1]) == 500


def test_each_math_benchmark_names_how_its_answers_are_read(cli, tmp_path: Path, shared_data: Path):
    """gsm8k reads the last number, as lm-eval's gsm8k `flexible-extract` reports it; math500 and aime read
    boxes first (math-verify's order). The same responses score differently under the two, by design."""
    assert BENCHMARKS["gsm8k"].extraction == "flexible"
    assert {BENCHMARKS[name].extraction for name in ("math500", "aime24", "aime25")} == {"boxed_first"}
    gsm8k = resolve_benchmark("gsm8k").rows()[:4]
    # a box, then a check that ends on another number: boxed_first reads 18, flexible the check's 126
    texts = [f"So the answer is $\\boxed{{{row['label']['answer']}}}$.\n\nCheck: 2 * 63 = 126." for row in gsm8k]
    responses = tmp_path / "responses.jsonl"
    lines = [json.dumps({"id": row["id"], "response": text}) for row, text in zip(gsm8k, texts, strict=True)]
    responses.write_text("\n".join(lines) + "\n")
    result = cli(["eval", "--responses", responses, "--benchmarks", "gsm8k", "--out", tmp_path / "out"])
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "out" / "results.json").read_text())["benchmarks"]["gsm8k"]
    assert summary["verifier_options"] == {"extraction": "flexible"} and summary["score"] == 0.0
    samples = [json.loads(line) for line in (tmp_path / "out" / "samples.jsonl").read_text().splitlines()]
    assert {s["details"]["extracted"] for s in samples} == {"126"}
    from cascade_cli.verifiers.math import MathVerifier

    boxed_first = MathVerifier(code_switch_reward=None)
    assert all(boxed_first.score({"response": t, "label": r["label"]}).passed for r, t in zip(gsm8k, texts, strict=True))
