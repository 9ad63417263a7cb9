"""Converted data goes through OpenRLHF 0.11.2's own dataset classes (PromptDataset, SFTDataset,
RewardDataset) with our tokenizer's chat template and yields the prompts, labels and loss spans we expect."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from cascade_cli import chat
from cascade_cli.engines.openrlhf.data import convert_rows, convert_stage_data
from cascade_cli.errors import CascadeUsageError
from cascade_cli.jsonl import write_jsonl

pytest.importorskip("openrlhf", reason="the real OpenRLHF source: pip install --no-deps openrlhf==0.11.2")
datasets = pytest.importorskip("datasets")

RL_ROWS = [
    {"id": "m1", "domain": "math", "prompt": "What is 1+1?", "label": {"answer": "2"}, "mode": "think"},
    {"id": "i1", "domain": "if", "prompt": [{"role": "system", "content": "Be brief."},
                                           {"role": "user", "content": "Say hi without commas"}],
     "label": {"instruction_id_list": ["punctuation:no_comma"], "kwargs": [{}]}, "mode": "no_think"},
    {"id": "c1", "domain": "code", "prompt": "Add two numbers.",
     "label": {"kind": "call", "fn_name": "add", "inputs": [[1, 2]], "outputs": [3]}},
]


@pytest.fixture(scope="module")
def tokenizer():
    from cascade_cli.tiny import build_tokenizer

    return build_tokenizer()  # the tiny model's tokenizer: chat.CHAT_TEMPLATE, as build_tiny saves it


# A base model's own template (not ours): SFT and RM get ours through --data.tokenizer_chat_template.
FOREIGN_TEMPLATE = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"


@pytest.fixture
def base_tokenizer():
    from cascade_cli.tiny import build_tokenizer

    tokenizer = build_tokenizer()
    tokenizer.chat_template = FOREIGN_TEMPLATE
    return tokenizer


def strategy(**data) -> SimpleNamespace:
    data.setdefault("tokenizer_chat_template", None)
    args = SimpleNamespace(data=SimpleNamespace(image_key="images", **data))
    return SimpleNamespace(args=args, is_rank_0=lambda: True, print=print)


def load_json(path: Path):
    # What OpenRLHF's blending_datasets does for a local .jsonl file.
    return datasets.load_dataset("json", data_files=str(path), split="train")


def convert(tmp_path: Path, kind: str, rows: list[dict], mode: str | None = None) -> Path:
    source = write_jsonl(tmp_path / "canonical.jsonl", rows) and tmp_path / "canonical.jsonl"
    target = tmp_path / "openrlhf.jsonl"
    write_jsonl(target, convert_rows(kind, source, mode))
    return target


def test_rl_prompts_and_labels_through_openrlhf_prompt_dataset(tmp_path, tokenizer):
    from openrlhf.datasets import PromptDataset

    target = convert(tmp_path, "rlvr", RL_ROWS)
    dataset = PromptDataset(load_json(target), tokenizer,
                            strategy(input_key="prompt", label_key="label", apply_chat_template=True))
    assert dataset.prompts == [
        chat.render_prompt("What is 1+1?", mode="think"),
        chat.render_prompt(RL_ROWS[1]["prompt"], mode="no_think"),
        chat.render_prompt("Add two numbers.", mode="think"),  # no row mode: the code domain's (thinking)
    ]
    assert dataset.prompts[1].endswith("Say hi without commas /no_think<|im_end|>\n<|im_start|>assistant\n")
    labels = [json.loads(label) for label in dataset.labels]
    assert labels[0] == {"answer": "2", "domain": "math"}
    assert labels[1]["domain"] == "if" and labels[1]["instruction_id_list"] == ["punctuation:no_comma"]
    assert labels[2] == {**RL_ROWS[2]["label"], "domain": "code"}
    assert dataset.datasources == ["math", "if", "code"]


def test_rlhf_half_half_modes(tmp_path, tokenizer):
    from openrlhf.datasets import PromptDataset

    rows = [{"id": str(i), "domain": "general", "prompt": f"Tell me about topic {i}."} for i in range(6)]
    target = convert(tmp_path, "rlhf", rows, mode="half")
    dataset = PromptDataset(load_json(target), tokenizer,
                            strategy(input_key="prompt", label_key="label", apply_chat_template=True))
    flags = [prompt.split("<|im_end|>")[0].rsplit(" ", 1)[1] for prompt in dataset.prompts]
    assert flags == ["/think", "/no_think"] * 3
    assert all(json.loads(label) == {"domain": "general"} for label in dataset.labels)


def test_sft_loss_spans_through_openrlhf_sft_dataset(tmp_path, base_tokenizer):
    from openrlhf.datasets import SFTDataset

    messages = [
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": chat.format_response("4", thinking="2+2 is 4")},
        {"role": "user", "content": "and 3+3?"},
        {"role": "assistant", "content": "6"},
    ]
    target = convert(tmp_path, "sft", [{"id": "s", "domain": "sft", "messages": messages, "mode": "think"}])
    tokenizer = base_tokenizer
    dataset = SFTDataset(load_json(target), tokenizer, 512,
                         strategy(input_key="messages", output_key=None, apply_chat_template=True,
                                  tokenizer_chat_template=chat.CHAT_TEMPLATE),
                         input_template=None, num_processors=1, multiturn=True)
    input_ids, _, loss_mask = dataset[0]
    text = tokenizer.decode(input_ids[0], skip_special_tokens=False)
    assert text == chat.render_messages(messages, mode="think").rstrip("\n")
    # OpenRLHF marks the position before each target token: shift by one to get the trained tokens.
    trained = [int(t) for t, m in zip(input_ids[0][1:], loss_mask[0][:-1], strict=True) if m]
    # Our assistant-only spans; OpenRLHF also trains the newline after a non-final turn's <|im_end|>.
    expected = "\n".join(piece for piece, is_output in chat.render_segments(messages, mode="think") if is_output)
    assert tokenizer.decode(trained, skip_special_tokens=False) == expected


def test_preference_pairs_through_openrlhf_reward_dataset(tmp_path, base_tokenizer):
    from openrlhf.datasets import RewardDataset

    row = {"id": "p", "domain": "pref", "prompt": "Write a haiku.", "chosen": "Old pond, frog jumps in.",
           "rejected": "No.", "mode": "no_think"}
    target = convert(tmp_path, "reward_model", [row])
    dataset = RewardDataset(load_json(target), base_tokenizer, 512,
                            strategy(prompt_key="prompt", chosen_key="chosen", rejected_key="rejected",
                                     apply_chat_template=True, tokenizer_chat_template=chat.CHAT_TEMPLATE),
                            num_processors=1)
    prompt = chat.render_prompt("Write a haiku.", mode="no_think")
    assert dataset.prompts[0] == prompt
    assert dataset.chosens[0] == "Old pond, frog jumps in.<|im_end|>\n"
    assert dataset.rejects[0] == "No.<|im_end|>\n"


def test_bad_rows_name_the_file_and_row(tmp_path):
    source = tmp_path / "bad.jsonl"
    write_jsonl(source, [RL_ROWS[0], {"id": "x", "domain": "math", "label": {"answer": "1"}}])
    with pytest.raises(CascadeUsageError, match=r"bad.jsonl: row 2: missing key 'prompt'"):
        list(convert_rows("rlvr", source))
    write_jsonl(source, [{"id": "s", "messages": [{"role": "user", "content": "hi"}]}])
    with pytest.raises(CascadeUsageError, match=r"bad.jsonl: row 1: 'messages' has no assistant turn"):
        list(convert_rows("sft", source))
    write_jsonl(source, [{"id": "p", "prompt": "q", "chosen": "a"}])
    with pytest.raises(CascadeUsageError, match=r"row 1: missing key 'rejected'"):
        list(convert_rows("reward_model", source))
    with pytest.raises(CascadeUsageError, match="data not found"):
        list(convert_rows("rlvr", tmp_path / "missing"))


def test_convert_stage_data_reads_a_prepare_data_directory(tmp_path):
    (tmp_path / "prepared").mkdir()
    write_jsonl(tmp_path / "prepared" / "data.jsonl", RL_ROWS[:1])
    config = SimpleNamespace(kind="rlvr", data=str(tmp_path / "prepared"), domain="math", mode=None)
    assert convert_stage_data(config, tmp_path / "out" / "train.jsonl") == 1
