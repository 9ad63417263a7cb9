"""`cascade rlhf rm`: Bradley-Terry reward model (loss, held-out accuracy, checkpoint formats, bad rows) and the
preference / prompt-filter normalisers of prepare-data."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
import torch

from cascade_cli.config.rm import RewardModelConfig
from cascade_cli.config.structure import structure
from cascade_cli.data.preferences import normalize_preferences
from cascade_cli.data.prompt_filters import classify_prompt, drop_math_and_code
from cascade_cli.engines.local.train import reward_model as rm
from cascade_cli.errors import CascadeUsageError
from cascade_cli.jsonl import write_jsonl
from cascade_cli.manifest import read_manifest, read_metrics
from cascade_cli.verifiers import reward_model as scoring

NAMES = ["Ann", "Bo", "Cy", "Di", "Ed", "Flo", "Gus", "Hal", "Ivy", "Jo", "Kim", "Lu", "Max", "Ned", "Oz", "Pam",
         "Quin", "Rex", "Sue", "Tim", "Uma", "Vic", "Wes", "Xia", "Yul", "Zed", "Amy", "Ben", "Cal", "Dan"]


def polite_pairs(names: list[str]) -> list[dict]:
    """Learnable preferences: a greeting beats a rude reply (the rejected side of every other pair thinks)."""
    rows = []
    for index, name in enumerate(names):
        think = index % 2 == 0
        rows.append(
            {
                "id": f"p{index}",
                "domain": "pref",
                "mode": "think" if think else "no_think",
                "prompt": f"Greet {name}.",
                "chosen": f"Hello {name}!",
                "rejected": ("<think>\nBe rude.\n</think>\n\n" if think else "") + f"Go away {name}.",
            }
        )
    return rows


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """One short real training run shared by the tests that inspect its outputs."""
    root = tmp_path_factory.mktemp("rm")
    write_jsonl(root / "train.jsonl", polite_pairs(NAMES[:22] * 2))
    write_jsonl(root / "heldout.jsonl", polite_pairs(NAMES[22:]))
    config = structure(
        RewardModelConfig,
        {"init": "tiny", "data": str(root / "train.jsonl"), "eval_data": str(root / "heldout.jsonl"),
         "out": str(root / "rm"), "lr": 3e-3, "batch_size": 8, "micro_batch": 8, "epochs": 2.0, "bf16": False},
    )
    summary = rm.run_reward_model(config)
    return root, summary


def test_loss_decreases_and_heldout_accuracy(trained):
    root, summary = trained
    losses = [row["loss"] for row in read_metrics(root / "rm")]
    assert len(losses) == summary["steps"] == 12  # 44 pairs, 8 per step: 6 steps per epoch, 2 epochs
    assert sum(losses[-4:]) / 4 < 0.5 * sum(losses[:4]) / 4
    assert summary["heldout_accuracy"] >= 0.9
    assert summary["heldout_margin"] > summary["heldout_margin_before"]
    manifest = read_manifest(root / "rm")
    assert manifest["kind"] == "reward_model"
    assert manifest["metrics"]["heldout_accuracy"] == summary["heldout_accuracy"]


def test_checkpoint_loads_as_sequence_classification_with_score_head(trained):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    root, _ = trained
    model = AutoModelForSequenceClassification.from_pretrained(root / "rm").eval()
    tokenizer = AutoTokenizer.from_pretrained(root / "rm")
    assert model.config.num_labels == 1
    assert isinstance(model.score, torch.nn.Linear) and model.score.out_features == 1
    pair = rm.parse_pair(polite_pairs(["Zed"])[0], 1)
    texts = [scoring.rm_text(pair.prompt, side, pair.mode) for side in (pair.chosen, pair.rejected)]
    ours = scoring.score_texts(*scoring.load_reward_model(root / "rm", device="cpu"), texts)
    # The plain HF way (one text at a time, no padding) gives the same rewards.
    with torch.no_grad():
        hf = [float(model(**tokenizer(t, return_tensors="pt", add_special_tokens=False)).logits[0, 0]) for t in texts]
    assert ours == pytest.approx(hf, abs=1e-4)
    assert ours[0] > ours[1]


def _openrlhf_reward_model_class():
    """OpenRLHF 0.11.2's own `_get_reward_model`, compiled from the installed source (its module imports
    deepspeed and peft, which CPU test machines lack; the function itself needs neither)."""
    import importlib.util
    from typing import Optional

    spec = importlib.util.find_spec("openrlhf")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("openrlhf source not installed")
    source_path = Path(next(iter(spec.submodule_search_locations))) / "models" / "model.py"
    tree = ast.parse(source_path.read_text())
    function = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "_get_reward_model")
    namespace = {"torch": torch, "nn": torch.nn, "Optional": Optional}
    exec(compile(ast.Module(body=[function], type_ignores=[]), str(source_path), "exec"), namespace)
    return namespace["_get_reward_model"]


def test_checkpoint_loads_in_openrlhf_reward_model(trained):
    """What `get_llm_for_sequence_regression(path, "reward")` does: the base class from the config, the
    `value_head_prefix` from the config (else "score"), then from_pretrained; rewards equal ours."""
    from transformers import AutoConfig, AutoModel

    root, _ = trained
    get_reward_model = _openrlhf_reward_model_class()
    config = AutoConfig.from_pretrained(root / "rm")
    config.normalize_reward = False
    value_head_prefix = getattr(config, "value_head_prefix", "score")
    assert value_head_prefix == "score"
    base_class = AutoModel._model_mapping[type(config)]
    reward_class = get_reward_model(base_class.__base__, base_class, value_head_prefix)
    model = reward_class.from_pretrained(str(root / "rm"), config=config).eval()
    tokenizer = scoring.load_reward_model(root / "rm", device="cpu")[1]
    pairs = [rm.parse_pair(row, 1) for row in polite_pairs(["Yul", "Zed"])]
    texts = [scoring.rm_text(p.prompt, p.rejected if i else p.chosen, p.mode) for p in pairs for i in (0, 1)]
    tokenizer.padding_side = "right"  # OpenRLHF's reward dataset pads on the right
    batch = tokenizer(texts, add_special_tokens=False, padding=True, return_tensors="pt")
    with torch.no_grad():
        theirs = model(batch["input_ids"], attention_mask=batch["attention_mask"]).tolist()
    ours = scoring.score_texts(*scoring.load_reward_model(root / "rm", device="cpu"), texts)
    assert theirs == pytest.approx(ours, abs=1e-4)


def test_parse_pair_text_and_message_sides():
    text = rm.parse_pair({"prompt": "Hi", "chosen": "Hello!", "rejected": "Bye."}, 1)
    assert text.prompt == [{"role": "user", "content": "Hi"}] and text.chosen == "Hello!"
    conversation = [{"role": "user", "content": "Hi"}]
    messages = rm.parse_pair(
        {"chosen": [*conversation, {"role": "assistant", "content": "Hello!"}],
         "rejected": [*conversation, {"role": "assistant", "content": "Bye."}]},
        2,
    )
    assert messages.prompt == conversation and (messages.chosen, messages.rejected) == ("Hello!", "Bye.")
    # The RM reads the answer only: thinking is stripped; an unfinished think block is scored as it stands.
    assert scoring.rm_text(text.prompt, "<think>\nhmm\n</think>\n\nHello!", "think").endswith(
        "<|im_start|>assistant\nHello!<|im_end|>"
    )
    assert "unfinished" in scoring.rm_text(text.prompt, "<think>\nunfinished", "think")


BAD_ROWS = [
    {"prompt": "Hi", "chosen": "Hello!", "rejected": "Bye."},
    {"prompt": "Hi", "chosen": "  ", "rejected": "Bye."},  # row 2: empty side
    {"prompt": "Hi", "chosen": "Same.", "rejected": "Same."},  # row 3: identical
    {"prompt": "Hi", "chosen": "Hello!"},  # row 4: missing rejected
    {"chosen": "Hello!", "rejected": "Bye."},  # row 5: missing prompt
    {"prompt": "Hey", "chosen": "Hello there!", "rejected": "Go."},
]


def test_bad_rows_fail_before_training_with_row_numbers(tmp_path, cli):
    path = tmp_path / "pairs.jsonl"
    write_jsonl(path, BAD_ROWS)
    with pytest.raises(CascadeUsageError) as caught:
        rm.load_pairs(path)
    message = str(caught.value)
    assert f"{path}: row 2: chosen is empty" in message
    assert "row 3: chosen and rejected are identical" in message
    assert "row 4: missing field 'rejected'" in message and "1 more bad rows" in message
    pairs, dropped = rm.load_pairs(path, skip_bad_rows=True)
    assert dropped == 4 and [p.row for p in pairs] == [1, 6]

    result = cli(["rlhf", "rm", "--init", "tiny", "--data", path, "--out", tmp_path / "rm"])
    assert result.exit_code == 2
    assert "row 2" in result.output and not (tmp_path / "rm").exists()


def test_cli_rm_skip_bad_rows_trains_and_writes_checkpoint(tmp_path, cli):
    path = tmp_path / "pairs.jsonl"
    write_jsonl(path, BAD_ROWS)
    result = cli(["rlhf", "rm", "--init", "tiny", "--data", path, "--out", tmp_path / "rm", "--skip-bad-rows",
                  "heldout_fraction=0", "max_steps=1", "batch_size=2"])
    assert result.exit_code == 0, result.output
    manifest = read_manifest(tmp_path / "rm")
    assert manifest["metrics"]["bad_rows_dropped"] == 4 and manifest["metrics"]["steps"] == 1
    assert json.loads((tmp_path / "rm" / "config.json").read_text())["architectures"] == [
        "Qwen3ForSequenceClassification"
    ]
    bad = cli(["rlhf", "rm", "--init", "tiny", "--data", path, "--out", tmp_path / "x", "no_such_key=1"])
    assert bad.exit_code == 2 and "no_such_key" in bad.output


def test_recipe_kind_and_plan_command():
    from cascade_cli.stage_kinds import get_kind

    kind = get_kind("reward_model")
    assert kind.command == ("rlhf", "rm") and kind.config_class() is RewardModelConfig
    assert RewardModelConfig().epochs == 1.0  # the paper: one epoch


def test_helpsteer_and_ultrafeedback_normalisers():
    helpsteer = [
        {"prompt": "Q1", "response_1": "A", "response_2": "B", "preference_strength": -2},
        {"prompt": "Q2", "response_1": "A", "response_2": "B", "preference_strength": 0},  # tie: dropped
        {"context": [{"role": "user", "content": "Q3"}], "response1": "A", "response2": "B",
         "overall_preference": 1},
    ]
    rows, counts = normalize_preferences(helpsteer, source="hs")
    assert counts == {"kept": 2, "ties_dropped": 1}
    assert (rows[0]["chosen"], rows[0]["rejected"], rows[0]["domain"]) == ("A", "B", "pref")
    assert (rows[1]["chosen"], rows[1]["rejected"]) == ("B", "A")
    assert rows[1]["prompt"] == [{"role": "user", "content": "Q3"}]

    user = {"role": "user", "content": "Q"}
    ultra = [
        {"prompt": "Q", "chosen": [user, {"role": "assistant", "content": "good"}],
         "rejected": [user, {"role": "assistant", "content": "bad"}], "score_chosen": 8, "score_rejected": 3},
        {"prompt": "Q", "chosen": [user, {"role": "assistant", "content": "x"}],
         "rejected": [user, {"role": "assistant", "content": "y"}], "score_chosen": 5, "score_rejected": 5},
        {"instruction": "Q", "completions": [{"response": "mid", "overall_score": 5},
                                             {"response": "best", "overall_score": 9},
                                             {"response": "worst", "overall_score": 2}]},
    ]
    rows, counts = normalize_preferences(ultra, fmt="ultrafeedback")
    assert counts == {"kept": 2, "ties_dropped": 1}
    assert (rows[0]["prompt"], rows[0]["chosen"], rows[0]["rejected"]) == ("Q", "good", "bad")
    assert (rows[1]["chosen"], rows[1]["rejected"], rows[1]["margin"]) == ("best", "worst", 7.0)
    # Every normalised row is a valid pair for the reward model.
    assert all(rm.parse_pair(row, 1) for row in rows)
    with pytest.raises(CascadeUsageError, match="row 2: missing field"):
        normalize_preferences([helpsteer[0], {"prompt": "Q", "response_1": "A", "response_2": "B"}])


def test_prompt_filter_drops_math_and_code_only():
    from cascade_cli.data.tiny_tasks import generate

    rows = generate("math", 40) + generate("code", 40) + generate("general", 40) + generate("if", 40)
    kept, report = drop_math_and_code(rows)
    assert report["dropped"] == {"math": 40, "code": 40}
    assert {row["domain"] for row in kept} == {"general", "if"}
    assert classify_prompt("Compute $\\frac{1}{2} + x$ and put the final answer in \\boxed{}.") == "math"
    assert classify_prompt(
        "Given n integers, print their sum.\nInput\nThe first line contains n (1 <= n <= 10^5).\nOutput\n"
    ) == "code"
    for general in ("How many legs does a spider have?", "Explain what Python is used for.", "Write a haiku."):
        assert classify_prompt(general) is None


def test_prepare_data_format_and_drop_math_code_hooks(tmp_path, cli):
    from cascade_cli.data.tiny_tasks import generate

    raw = [
        {"prompt": "Q1", "response_1": "A", "response_2": "B", "preference_strength": -2},
        {"prompt": "Q2", "response_1": "A", "response_2": "B", "preference_strength": 0},  # tie
        {"prompt": "Q3", "response_1": "A", "response_2": "B", "preference_strength": 3},
    ]
    write_jsonl(tmp_path / "hs.jsonl", raw)
    result = cli(["prepare-data", "--source", tmp_path / "hs.jsonl", "--out", tmp_path / "pairs", "format=helpsteer"])
    assert result.exit_code == 0, result.output
    pairs, dropped = rm.load_pairs(tmp_path / "pairs")
    assert dropped == 0 and [(p.chosen, p.rejected) for p in pairs] == [("A", "B"), ("B", "A")]

    write_jsonl(tmp_path / "mixed.jsonl", generate("general", 6) + generate("math", 3) + generate("code", 2))
    result = cli(["prepare-data", "--source", tmp_path / "mixed.jsonl", "--out", tmp_path / "rl", "drop_math_code=true"])
    assert result.exit_code == 0, result.output
    card = json.loads((tmp_path / "rl" / "data_card.json").read_text())
    report = next(f for f in card["filters"] if f["name"] == "drop_math_code")
    assert report["removed_by"] == {"math": 3, "code": 2} and report["out"] == 6
    assert "drop_math_code: 11 -> 6 rows" in result.output


def test_drop_math_code_filters_both_splits(tmp_path, cli):
    from cascade_cli.jsonl import read_jsonl

    result = cli(["prepare-data", "--source", "tiny:pref", "--out", tmp_path / "pref", "--n", "40", "--holdout", "20",
                  "drop_math_code=true"])
    assert result.exit_code == 0, result.output
    for name in ("data.jsonl", "heldout.jsonl"):
        rows = list(read_jsonl(tmp_path / "pref" / name))
        assert rows and all(classify_prompt(row["prompt"]) is None for row in rows)
