"""Converted data goes through OpenRLHF 0.11.2's own dataset classes (PromptDataset, SFTDataset,
RewardDataset) with our tokenizer's chat template and yields the prompts, labels and loss spans we expect."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from cascade_cli import chat
from cascade_cli.engines.openrlhf.data import convert_rows, convert_stage_data, write_phase_files
from cascade_cli.errors import CascadeUsageError
from cascade_cli.jsonl import write_jsonl

pytest.importorskip("openrlhf", reason="the real OpenRLHF source: pip install --no-deps openrlhf==0.11.2")
datasets = pytest.importorskip("datasets")

RL_ROWS = [
    {"id": "m1", "source": "t", "domain": "math", "prompt": "What is 1+1?", "label": {"answer": "2"}, "mode": "think"},
    {
        "id": "i1",
        "source": "t",
        "domain": "if",
        "prompt": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Say hi without commas"},
        ],
        "label": {"instruction_id_list": ["punctuation:no_comma"], "kwargs": [{}]},
        "mode": "no_think",
    },
    {
        "id": "c1",
        "source": "t",
        "domain": "code",
        "mode": "no_think",
        "prompt": "Add two numbers.",
        "label": {"kind": "call", "fn_name": "add", "inputs": [[1, 2]], "outputs": [3]},
    },
]


@pytest.fixture(scope="module")
def tokenizer():
    from cascade_cli.models.tiny import build_tokenizer

    return build_tokenizer()  # the tiny model's tokenizer: chat.CHAT_TEMPLATE, as build_tiny saves it


# A base model's own template (not ours): SFT and RM get ours through --data.tokenizer_chat_template.
FOREIGN_TEMPLATE = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"


@pytest.fixture
def base_tokenizer():
    from cascade_cli.models.tiny import build_tokenizer

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
    dataset = PromptDataset(
        load_json(target),
        tokenizer,
        strategy(input_key="prompt", label_key="label", apply_chat_template=True),
    )
    assert dataset.prompts == [
        chat.render_prompt("What is 1+1?", mode="think"),
        chat.render_prompt(RL_ROWS[1]["prompt"], mode="no_think"),
        chat.render_prompt("Add two numbers.", mode="no_think"),
    ]
    assert dataset.prompts[1].endswith("Say hi without commas /no_think<|im_end|>\n<|im_start|>assistant\n")
    labels = [json.loads(label) for label in dataset.labels]
    assert labels[0] == {"answer": "2", "domain": "math"}
    assert labels[1]["domain"] == "if" and labels[1]["instruction_id_list"] == ["punctuation:no_comma"]
    assert labels[2] == {**RL_ROWS[2]["label"], "domain": "code"}
    assert dataset.datasources == ["math", "if", "code"]


def test_rlhf_half_half_modes(tmp_path, tokenizer):
    from openrlhf.datasets import PromptDataset

    rows = [
        {"id": str(i), "source": "t", "domain": "general", "mode": "think", "prompt": f"Tell me about topic {i}."}
        for i in range(6)
    ]
    target = convert(tmp_path, "rlhf", rows, mode="half")
    dataset = PromptDataset(
        load_json(target),
        tokenizer,
        strategy(input_key="prompt", label_key="label", apply_chat_template=True),
    )
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
    target = convert(tmp_path, "sft", [{"id": "s", "source": "t", "domain": "sft", "messages": messages, "mode": "think"}])
    tokenizer = base_tokenizer
    dataset = SFTDataset(
        load_json(target),
        tokenizer,
        512,
        strategy(
            input_key="messages",
            output_key=None,
            apply_chat_template=True,
            tokenizer_chat_template=chat.CHAT_TEMPLATE,
        ),
        input_template=None,
        num_processors=1,
        multiturn=True,
    )
    input_ids, _, loss_mask = dataset[0]
    text = tokenizer.decode(input_ids[0], skip_special_tokens=False)
    assert text == chat.render_messages(messages, mode="think").rstrip("\n")
    # OpenRLHF marks the position before each target token: shift by one to get the trained tokens.
    trained = [int(t) for t, m in zip(input_ids[0][1:], loss_mask[0][:-1], strict=True) if m]
    # Our assistant-only spans; OpenRLHF also trains the newline after a non-final turn's <|im_end|>.
    expected = "\n".join(
        piece for piece, is_output in chat.render_segments(messages, mode="think") if is_output
    )
    assert tokenizer.decode(trained, skip_special_tokens=False) == expected


def test_preference_pairs_through_openrlhf_reward_dataset(tmp_path, base_tokenizer):
    from openrlhf.datasets import RewardDataset

    row = {
        "id": "p",
        "source": "t",
        "domain": "pref",
        "prompt": "Write a haiku.",
        "chosen": chat.format_response("Old pond, frog jumps in.", thinking="A haiku has three lines."),
        "rejected": "No.",
        "mode": "no_think",
    }
    target = convert(tmp_path, "reward_model", [row])
    dataset = RewardDataset(
        load_json(target),
        base_tokenizer,
        512,
        strategy(
            prompt_key="prompt",
            chosen_key="chosen",
            rejected_key="rejected",
            apply_chat_template=True,
            tokenizer_chat_template=chat.CHAT_TEMPLATE,
        ),
        num_processors=1,
    )
    prompt = chat.render_prompt("Write a haiku.", mode="no_think")
    assert dataset.prompts[0] == prompt
    assert dataset.chosens[0] == "Old pond, frog jumps in.<|im_end|>\n"  # the RM reads the answer only
    assert dataset.rejects[0] == "No.<|im_end|>\n"


def test_bad_rows_name_the_file_and_row(tmp_path):
    source = tmp_path / "bad.jsonl"
    missing_prompt = {"id": "x", "source": "t", "domain": "math", "mode": "think", "label": {"answer": "1"}}
    write_jsonl(source, [RL_ROWS[0], missing_prompt])
    with pytest.raises(CascadeUsageError, match=r"bad.jsonl: row 2: missing key 'prompt'"):
        list(convert_rows("rlvr", source))
    write_jsonl(source, [{**RL_ROWS[0], "label": {"answer": 2}}])
    with pytest.raises(CascadeUsageError, match=r"bad.jsonl: row 1: 'label.answer' must be a string"):
        list(convert_rows("rlvr", source))
    write_jsonl(source, [RL_ROWS[0]])
    with pytest.raises(CascadeUsageError, match=r"bad.jsonl: row 1: 'domain' must be 'if' here"):
        list(convert_rows("rlvr", source, domain="if"))
    sft = {"id": "s", "source": "t", "domain": "sft", "mode": "think", "messages": [{"role": "user", "content": "hi"}]}
    write_jsonl(source, [sft])
    with pytest.raises(CascadeUsageError, match=r"bad.jsonl: row 1: 'messages' has no assistant turn"):
        list(convert_rows("sft", source))
    write_jsonl(source, [{"id": "p", "source": "t", "domain": "pref", "mode": "think", "prompt": "q", "chosen": "a"}])
    with pytest.raises(CascadeUsageError, match=r"row 1: missing key 'rejected'"):
        list(convert_rows("reward_model", source))
    with pytest.raises(CascadeUsageError, match="file not found"):
        list(convert_rows("rlvr", tmp_path / "missing.jsonl"))


def test_stage_modes_follow_the_paper_and_the_local_engine(tmp_path):
    rows = [{**RL_ROWS[1], "id": str(i), "mode": "think"} for i in range(4)]
    (tmp_path / "prepared").mkdir()
    write_jsonl(tmp_path / "prepared" / "data.jsonl", rows)
    for kind, domain, mode, flags in (
        ("rlvr", "if", None, ["/no_think"] * 4),  # IF-RL: non-thinking by default
        ("rlvr", "if", "row", ["/think"] * 4),
        ("rlhf", None, None, ["/think", "/no_think"] * 2),  # RLHF: half-half
    ):
        config = SimpleNamespace(kind=kind, data=str(tmp_path / "prepared"), domain=domain, mode=mode)
        target = tmp_path / f"{kind}-{mode}.jsonl"
        assert convert_stage_data(config, target) == 4
        converted = [json.loads(line) for line in target.read_text().splitlines()]
        assert [row["prompt"][-1]["content"].rsplit(" ", 1)[1] for row in converted] == flags


def test_phase_files_hold_exactly_each_phases_prompts_in_epochs(tmp_path):
    source = tmp_path / "train.jsonl"
    write_jsonl(source, [{"n": index} for index in range(10)])
    targets = [tmp_path / f"phase{k}.jsonl" for k in range(3)]
    write_phase_files(source, [4, 12, 3], targets, seed=7)
    phases = [[json.loads(line)["n"] for line in target.read_text().splitlines()] for target in targets]
    assert [len(phase) for phase in phases] == [4, 12, 3]
    stream = [n for phase in phases for n in phase]
    # Consecutive chunks of a stream of epochs: every prompt once before any repeats.
    assert sorted(stream[:10]) == list(range(10)) and sorted(stream[10:19]) == sorted(set(stream[10:19]))
    assert stream[:10] != list(range(10))  # shuffled (seeded)
    write_phase_files(source, [4, 12, 3], [tmp_path / f"again{k}.jsonl" for k in range(3)], seed=7)
    assert (tmp_path / "again1.jsonl").read_text() == targets[1].read_text()
