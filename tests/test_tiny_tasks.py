"""The synthetic tiny tasks: determinism, disjoint pools, label shapes, sizes, and the real verifiers."""

from __future__ import annotations

import importlib.util
import json
import re
import string

import pytest

from cascade_cli.chat import answer_text, render_messages, render_prompt
from cascade_cli.data import tiny_tasks
from cascade_cli.data.io import row_error
from cascade_cli.data.prepare import prompt_key
from cascade_cli.data.tiny import code as tiny_code

RL_DOMAINS = ("math", "code", "swe", "if", "general")
PRINTABLE = set(string.printable) - set("\x0b\x0c\r")


def _rows(domain: str, n: int = 300, **kwargs):
    return tiny_tasks.generate(domain, n, **kwargs)


@pytest.mark.parametrize("domain", tiny_tasks.TINY_DOMAINS)
def test_generation_is_deterministic_and_seed_dependent(domain):
    assert _rows(domain, 60, seed=3) == _rows(domain, 60, seed=3)
    assert _rows(domain, 60, seed=3) != _rows(domain, 60, seed=4)
    assert [r["id"] for r in _rows(domain, 60, seed=3)] == [
        f"tiny-{domain}-train-3-{i:06d}" for i in range(60)
    ]


@pytest.mark.parametrize("domain", tiny_tasks.TINY_DOMAINS)
@pytest.mark.parametrize("split", tiny_tasks.SPLITS)
def test_every_row_is_a_valid_canonical_row(domain, split):
    rows = _rows(domain, 200, seed=1, split=split)
    assert len(rows) == 200
    for row in rows:
        assert row_error(row) is None, (row_error(row), row)
        assert row["source"] == f"tiny:{domain}"


@pytest.mark.parametrize("domain", tiny_tasks.TINY_DOMAINS)
def test_train_and_heldout_prompts_are_disjoint(domain):
    train = {prompt_key(r) for r in _rows(domain, 1500, seed=0)}
    for seed in (0, 1, 7):
        heldout = {prompt_key(r) for r in _rows(domain, 300, seed=seed, split="heldout")}
        assert not train & heldout


def test_sft_prompts_are_disjoint_from_rl_prompts():
    """Paper §4: SFT and RL prompts are strictly disjoint, whatever the seeds."""
    sft = {prompt_key(r) for r in _rows("sft", 3000, seed=0)}
    for domain in RL_DOMAINS + ("pref",):
        rl = {prompt_key(r) for r in _rows(domain, 1000, seed=5)}
        assert not sft & rl, domain


def test_pools_split_the_problem_space_by_key():
    assert {tiny_tasks.pool_of(f"math:{a}+{b}") for a in range(20) for b in range(20)} == {
        "sft",
        "rl",
        "heldout",
    }
    assert tiny_tasks.pool_of("math:3+4") == tiny_tasks.pool_of("math:3+4")
    assert tiny_tasks.pool_for("sft", "train") == "sft"
    assert tiny_tasks.pool_for("math", "train") == "rl"
    assert tiny_tasks.pool_for("sft", "heldout") == tiny_tasks.pool_for("code", "heldout") == "heldout"


def test_code_pools_split_each_template_so_every_pool_has_every_operation():
    """Held-out code prompts use operations SFT taught (with other constants) and RL trains."""
    for template in tiny_code._CODE_TEMPLATES:
        pools = tiny_code._code_pools(template)
        if len(pools) >= 3:
            assert set(pools.values()) == {"sft", "rl", "heldout"}, template.name
        else:
            assert set(pools.values()) == {"sft"}, template.name
    heldout = {r["prompt"].split(" that ")[1] for r in _rows("code", 150, seed=0, split="heldout")}
    assert len(heldout) >= 30  # distinct problems, not one problem under several function names


def test_stratified_pools_rank_by_hash_and_keep_the_shares():
    keys = tuple(f"family:{k}" for k in range(1, 10))
    pools = tiny_tasks.stratified_pools(keys, 0.25, 0.3)
    counts = {pool: list(pools.values()).count(pool) for pool in ("sft", "rl", "heldout")}
    assert counts == {"sft": 4, "rl": 3, "heldout": 2}
    assert tiny_tasks.stratified_pools(tuple(reversed(keys)), 0.25, 0.3) == pools  # order-free
    assert set(tiny_tasks.stratified_pools(("a", "b"), 0.25, 0.3).values()) == {"sft"}


def test_rows_fit_a_512_char_printable_ascii_model():
    for domain in tiny_tasks.TINY_DOMAINS:
        for row in _rows(domain, 400, seed=2):
            if "messages" in row:
                text = render_messages(row["messages"], mode=row["mode"])
            else:
                answer = row.get("reference") or row.get("chosen")
                text = render_prompt(row["prompt"], mode=row["mode"]) + answer
            assert len(text) <= 512, (domain, len(text), text)
            assert set(text) <= PRINTABLE, (domain, set(text) - PRINTABLE)


def test_math_labels_and_references():
    for row in _rows("math", 300, seed=0):
        assert re.fullmatch(r"\d+", row["label"]["answer"])
        assert answer_text(row["reference"]) == "\\boxed{" + row["label"]["answer"] + "}"
        assert row["mode"] == "think" and row["reference"].startswith("<think>\n")
        numbers = [int(x) for x in re.findall(r"\d+", row["prompt"])]
        assert max(numbers) <= tiny_tasks.MAX_OPERAND


def test_math_thinking_is_column_arithmetic_with_true_steps():
    """Correct chains: every step is a true one-digit fact and the digits compose the answer."""
    for row in _rows("sft", 600, seed=4, mix={"math": 1.0}, wrong_fraction=0.3):
        thinking, answer = row["messages"][-1]["content"].split("</think>")
        problem, chain = thinking.replace("<think>", "").strip().split(": ")
        assert problem.replace("+", " ").replace("-", " ").replace("*", " ").split() == re.findall(
            r"\d+", row["messages"][0]["content"]
        )
        steps = chain.split(", ")
        assert len(steps) == 2
        values = []
        for step in steps:
            left, right = step.split("=")
            values.append(int(right))
            if row["correct"]:
                assert eval(left) == int(right), (row["messages"], step)  # noqa: S307 - our own "7+5" strings
        boxed = int(answer.strip()[len("\\boxed{") : -1])
        assert boxed == values[1] * 10 + values[0] % 10
        assert (boxed == int(row["label"]["answer"])) == row["correct"]


def _run_code(answer: str, label: dict) -> bool:
    """Executes our own generated one-liners against their own generated tests (a generator self-check)."""
    code = re.search(r"```python\n(.*?)```", answer, re.S)
    if code is None:
        return False
    namespace: dict = {}
    try:
        exec(code.group(1) + "\n" + label["test"] + f"\ncheck({label['entry_point']})\n", namespace)  # noqa: S102
    except Exception:
        return False
    return True


def test_code_labels_are_humaneval_asserts_that_the_reference_passes():
    for row in _rows("code", 300, seed=0) + _rows("code", 100, seed=0, split="heldout"):
        label = row["label"]
        assert set(label) == {"kind", "test", "entry_point"} and label["kind"] == "assert"
        assert label["test"].startswith("def check(candidate):\n    assert candidate(")
        assert f"def {label['entry_point']}(" in row["reference"]
        assert _run_code(answer_text(row["reference"]), label), row


def _ifeval_kwargs_by_id(shared_data) -> dict[str, set[str]]:
    keys: dict[str, set[str]] = {}
    for line in (shared_data / "ifeval" / "input_data.jsonl").read_text().splitlines():
        record = json.loads(line)
        for instruction_id, kwargs in zip(record["instruction_id_list"], record["kwargs"], strict=True):
            keys.setdefault(instruction_id, set()).update(kwargs)
    return keys


def test_if_labels_use_ifevals_own_ids_and_kwargs(shared_data):
    real = _ifeval_kwargs_by_id(shared_data)
    seen: set[str] = set()
    for row in _rows("if", 600, seed=0):
        label = row["label"]
        assert len(label["instruction_id_list"]) == len(label["kwargs"]) >= 1
        for instruction_id, kwargs in zip(label["instruction_id_list"], label["kwargs"], strict=True):
            assert instruction_id in real, instruction_id
            assert set(kwargs) <= real[instruction_id], (instruction_id, kwargs)
            seen.add(instruction_id)
    assert seen == set(tiny_tasks.INSTRUCTION_IDS)


def test_pref_chosen_is_right_and_rejected_is_not():
    rows = _rows("pref", 200, seed=0)
    assert {r["mode"] for r in rows} == {"think", "no_think"}
    for row in rows:
        assert row["chosen"] != row["rejected"]
        if row["task"] == "math":
            assert "\\boxed{" in row["chosen"] and "\\boxed{" in row["rejected"]
        if row["task"] == "general":
            assert answer_text(row["chosen"]).startswith(
                answer_text(row["rejected"])
            )  # rejected is truncated


def test_sft_mixes_modes_tasks_and_a_configurable_share_of_wrong_answers():
    mix = {**tiny_tasks.DEFAULT_SFT_MIX, "swe": 0.1}
    rows = _rows("sft", 2000, seed=0, wrong_fraction=0.3, mix=mix)
    assert {r["task"] for r in rows} == {"math", "code", "swe", "if", "general"}
    assert {r["mode"] for r in rows} == {"think", "no_think"}
    for row in rows:
        answer = row["messages"][-1]["content"]
        assert answer.startswith("<think>\n") == (row["mode"] == "think")
        assert row["messages"][0]["role"] == "user" and "/think" not in row["messages"][0]["content"]
    checkable = [r for r in rows if r["task"] in ("math", "code", "swe", "if")]
    wrong = sum(not r["correct"] for r in checkable) / len(checkable)
    assert 0.24 < wrong < 0.36
    for row in checkable:
        if row["task"] == "code":
            assert _run_code(answer_text(row["messages"][-1]["content"]), row["label"]) == row["correct"]
        if row["task"] == "math":
            boxed = answer_text(row["messages"][-1]["content"])
            assert (boxed == "\\boxed{" + row["label"]["answer"] + "}") == row["correct"]
    assert all(r["correct"] for r in _rows("sft", 300, seed=0, wrong_fraction=0.0))


def test_sft_mix_and_mode_options():
    rows = _rows("sft", 200, seed=0, mix={"math": 1.0}, mode="no_think")
    assert {r["task"] for r in rows} == {"math"} and {r["mode"] for r in rows} == {"no_think"}
    with pytest.raises(ValueError, match="unknown task 'poetry'"):
        _rows("sft", 5, mix={"poetry": 1.0})
    with pytest.raises(ValueError, match="unknown tiny domain"):
        _rows("chess", 5)


# ---------------------------------------------------------------------------------------------------------
# The domain verifiers (written in parallel): run when their module is importable, skipped before.
# ---------------------------------------------------------------------------------------------------------

_VERIFIER_MODULES = {
    "math": "cascade_cli.verifiers.math",
    "if": "cascade_cli.verifiers.instruction",
    "code": "cascade_cli.verifiers.code",
    "swe": "cascade_cli.verifiers.swe",
}


def _verifier(domain: str):
    module = _VERIFIER_MODULES[domain]
    try:
        found = importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        found = False
    if not found:
        pytest.skip(f"{module} is not in this checkout yet")
    from cascade_cli.verifiers import get_verifier

    return get_verifier(domain)


def _record(row: dict, response: str) -> dict:
    prompt = row["prompt"] if "prompt" in row else row["messages"][0]["content"]
    return {
        "id": row["id"],
        "prompt": prompt,
        "response": response,
        "label": row["label"],
        "domain": row.get("task"),
        "mode": row["mode"],
        "finish_reason": "stop",
    }


@pytest.mark.parametrize("domain", ["math", "if", "code", "swe"])
def test_reference_answers_pass_the_domain_verifier(domain):
    verifier = _verifier(domain)
    rows = _rows(domain, 60 if domain == "code" else 300, seed=0) + _rows(domain, 20, seed=0, split="heldout")
    for row in rows:
        assert verifier.check_label(row["label"]) is None, row["label"]
        score = verifier.score(_record(row, row["reference"]))
        assert score.passed and score.reward > 0, (row, score)


@pytest.mark.parametrize("domain", ["math", "if", "code", "swe"])
def test_wrong_sft_answers_fail_the_domain_verifier(domain):
    verifier = _verifier(domain)
    rows = [r for r in _rows("sft", 600, seed=1, wrong_fraction=0.5, mix={domain: 1.0})][
        : 40 if domain == "code" else 200
    ]
    outcomes = {True: 0, False: 0}
    for row in rows:
        score = verifier.score(_record(row, row["messages"][-1]["content"]))
        assert score.passed == row["correct"], (row, score)
        outcomes[row["correct"]] += 1
    assert outcomes[True] and outcomes[False]


def test_rows_use_only_the_tiny_tokenizers_characters(tmp_path):
    """No <unk> when the embedded char-level tokenizer reads the rendered rows (and the data card counts tokens)."""
    from cascade_cli.data.card import rendered_text
    from cascade_cli.data.prepare import build_prepare_config, run_prepare_data
    from cascade_cli.models import tiny

    tokenizer = tiny.build_tokenizer()
    for domain in tiny_tasks.TINY_DOMAINS:
        texts = [rendered_text(row) for row in _rows(domain, 150, seed=6)]
        for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]:
            assert tokenizer.unk_token_id not in ids, domain
    run_prepare_data(
        build_prepare_config({"source": "tiny:sft", "out": str(tmp_path), "n": 100, "tokenizer": "tiny"})
    )
    card = json.loads((tmp_path / "data_card.json").read_text())
    for key, stats in card["length_tokens"].items():
        assert 0 < stats["p50"] <= stats["max"] < card["length_chars"][key]["max"]
