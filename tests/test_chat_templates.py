"""Chat templates of real models: a ChatML tokenizer (SmolLM2) renders with the project's template; a
tokenizer with another template (Llama 3 / Gemma style, built offline on SmolLM2's tokenizer) renders with
its own, the flag on every user turn, the SFT loss only on assistant tokens, and the template saved."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from cascade_cli import chat
from cascade_cli.engines.local.train.rl_data import render_row
from cascade_cli.engines.local.train.sft_data import load_examples
from cascade_cli.models.loader import load_tokenizer

LLAMA3 = (
    "{%- for message in messages %}{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + "
    "message['content'] | trim + '<|eot_id|>' }}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}"
)
GEMMA = (
    "{%- for message in messages %}{%- set role = 'model' if message['role'] == 'assistant' else message['role'] %}"
    "{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}{%- endfor %}"
    "{%- if add_generation_prompt %}{{ '<start_of_turn>model\\n' }}{%- endif %}"
)
CONVERSATION = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "What is 2+2?"},
    {"role": "assistant", "content": "<think>\n2+2=4\n</think>\n\n4"},
    {"role": "user", "content": "And 3+3?"},
    {"role": "assistant", "content": "6"},
]


@pytest.fixture(scope="module")
def smol_tokenizer(smollm2_dir: Path):
    return load_tokenizer(smollm2_dir)


def model_with_template(smollm2_dir: Path, out: Path, template: str) -> Path:
    """SmolLM2 with another chat template: its weights linked, its tokenizer saved with `template`."""
    from transformers import AutoTokenizer

    out.mkdir()
    for name in ("config.json", "generation_config.json", "model.safetensors"):
        (out / name).symlink_to(smollm2_dir / name)
    tokenizer = AutoTokenizer.from_pretrained(smollm2_dir)
    tokenizer.chat_template = template
    tokenizer.save_pretrained(out)
    return out


# ---- ChatML: SmolLM2 -----------------------------------------------------------------------------------


def test_smollm2_renders_with_the_project_template(smol_tokenizer):
    assert not chat.uses_own_template(smol_tokenizer) and smol_tokenizer.chat_template == chat.CHAT_TEMPLATE
    ours = chat.render_messages(CONVERSATION, "no_think", tokenizer=smol_tokenizer)
    assert ours == chat.render_messages(CONVERSATION, "no_think")
    # the saved template renders the same text (vLLM, OpenRLHF), with no implicit system prompt
    plain = [m for m in CONVERSATION if m["role"] != "system"]
    rendered = smol_tokenizer.apply_chat_template(plain, tokenize=False, mode="no_think")
    assert rendered == chat.render_messages(plain, "no_think") and "SmolLM" not in rendered
    prompt = chat.render_prompt("Hi", "think", smol_tokenizer)
    assert prompt == "<|im_start|>user\nHi /think<|im_end|>\n<|im_start|>assistant\n"


def test_smollm2_own_template_counts_as_chatml(smollm2_dir: Path):
    """SmolLM2's shipped template (with its default system prompt) is ChatML, so it is replaced by ours."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(smollm2_dir)
    tokenizer.chat_template = (
        "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
        "{{ '<|im_start|>system\\nYou are a helpful AI assistant named SmolLM<|im_end|>\\n' }}{% endif %}"
        "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"
        "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
    )
    assert not chat.uses_own_template(tokenizer)
    assert chat.adopt_template(tokenizer) and tokenizer.chat_template == chat.CHAT_TEMPLATE


def test_think_tags_are_plain_text_on_smollm2(smol_tokenizer):
    text = "<think>\nadd them\n</think>\n\n4<|im_end|>"
    ids = smol_tokenizer.encode(text, add_special_tokens=False)
    assert len(smol_tokenizer.encode("</think>", add_special_tokens=False)) > 1  # not a special token here
    assert smol_tokenizer.decode(ids) == text
    assert chat.split_response(smol_tokenizer.decode(ids)).answer == "4"


def test_smollm2_sft_masks_cover_assistant_turns(smol_tokenizer, tmp_path: Path):
    masked = sft_masked_text(smol_tokenizer, tmp_path)
    assert masked == ["<think>\n2+2=4\n</think>\n\n4<|im_end|>", "6<|im_end|>"]


# ---- another template: Llama 3 and Gemma style ---------------------------------------------------------


def sft_masked_text(tokenizer, tmp_path: Path) -> list[str]:
    """The trainable spans of one SFT row, decoded (one string per run of loss tokens)."""
    data = tmp_path / "sft.jsonl"
    data.write_text(json.dumps({"messages": CONVERSATION, "mode": "think"}) + "\n")
    examples = load_examples(data, tokenizer, max_seq_len=512)
    ids, mask = examples.input_ids[0], examples.loss_mask[0]
    runs = itertools.groupby(zip(ids, mask, strict=True), key=lambda pair: pair[1])
    spans = [tokenizer.decode([token for token, _ in run]) for trainable, run in runs if trainable]
    assert tokenizer.decode(ids) == chat.render_messages(CONVERSATION, "think", tokenizer=tokenizer)
    return spans


@pytest.mark.parametrize(
    ("template", "header", "turn_end"),
    [(LLAMA3, "<|start_header_id|>assistant<|end_header_id|>\n\n", "<|eot_id|>"),
     (GEMMA, "<start_of_turn>model\n", "<end_of_turn>")],
    ids=["llama3", "gemma"],
)
def test_other_template_renders_its_own_with_flags_and_masks(smollm2_dir, tmp_path, template, header, turn_end):
    tokenizer = load_tokenizer(model_with_template(smollm2_dir, tmp_path / "model", template))
    assert chat.uses_own_template(tokenizer) and tokenizer.chat_template == template  # kept, not adopted
    text = chat.render_messages(CONVERSATION, "no_think", tokenizer=tokenizer)
    assert "<|im_start|>" not in text and text.count(" /no_think") == 2
    assert "What is 2+2? /no_think" in text and "And 3+3? /no_think" in text
    prompt = render_row({"prompt": "Hi"}, "think", tokenizer)  # what GRPO and eval generate from
    assert prompt.endswith(header) and "Hi /think" in prompt
    assert sft_masked_text(tokenizer, tmp_path) == ["<think>\n2+2=4\n</think>\n\n4" + turn_end, "6" + turn_end]


def test_a_template_that_does_not_render_by_prefix_is_refused(smollm2_dir, tmp_path):
    """A template that rewrites earlier turns once a later one exists (here: drops all but the last
    assistant turn) cannot be masked by prefixes: a clear error, not silently wrong labels."""
    drop_old = (
        "{%- for message in messages %}{%- if message['role'] != 'assistant' or loop.last %}"
        "{{- '[' + message['role'] + '] ' + message['content'] + '\\n' }}{%- endif %}{%- endfor %}"
        "{%- if add_generation_prompt %}{{- '[assistant] ' }}{%- endif %}"
    )
    tokenizer = load_tokenizer(model_with_template(smollm2_dir, tmp_path / "model", drop_old))
    with pytest.raises(ValueError, match="prefix by prefix"):
        chat.render_segments(CONVERSATION, "think", tokenizer=tokenizer)


def test_sft_saves_the_template_it_trained_with(smollm2_dir, tmp_path, cli):
    model = model_with_template(smollm2_dir, tmp_path / "model", LLAMA3)
    data = tmp_path / "sft.jsonl"
    data.write_text("".join(json.dumps({"messages": CONVERSATION[1:3], "mode": m}) + "\n" for m in chat.MODES))
    out = tmp_path / "sft"
    result = cli(["sft", "--init", model, "--data", data, "--out", out, "max_steps=1", "batch_size=2", "max_seq_len=64", "bf16=false"])
    assert result.exit_code == 0, result.output
    assert (out / "chat_template.jinja").read_text() == LLAMA3
    assert not chat.uses_own_template(load_tokenizer(smollm2_dir))  # and SmolLM2's stays ours (see e2e)


def test_openrlhf_sft_keeps_a_non_chatml_template(smollm2_dir, tmp_path):
    """OpenRLHF SFT gets our template for a ChatML init and none for an init with its own (rows carry flags)."""
    from cascade_cli.config.sft import SFTConfig
    from cascade_cli.engines.openrlhf.jobs import sft_jobs

    def template_flag(init: Path) -> list[str]:
        config = SFTConfig(engine="openrlhf", data="d.jsonl", init=str(init), out=str(tmp_path / "sft"))
        args = sft_jobs(config)[0].args
        return args[args.index("--data.tokenizer_chat_template") :][:2] if "--data.tokenizer_chat_template" in args else []

    assert template_flag(smollm2_dir) == ["--data.tokenizer_chat_template", chat.CHAT_TEMPLATE]
    assert template_flag(model_with_template(smollm2_dir, tmp_path / "llama", LLAMA3)) == []
