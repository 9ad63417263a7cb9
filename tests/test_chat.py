"""ChatML rendering with per-turn /think and /no_think, and the response parser."""

from __future__ import annotations

import jinja2
import pytest

from cascade_cli import chat


def test_flag_is_appended_to_every_user_turn():
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello."},
        {"role": "user", "content": "2+2?"},
    ]
    text = chat.render_messages(messages, mode="no_think", add_generation_prompt=True)
    assert text == (
        "<|im_start|>system\nBe brief.<|im_end|>\n"
        "<|im_start|>user\nHi /no_think<|im_end|>\n"
        "<|im_start|>assistant\nHello.<|im_end|>\n"
        "<|im_start|>user\n2+2? /no_think<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    assert chat.render_prompt("2+2?", "think").endswith("2+2? /think<|im_end|>\n<|im_start|>assistant\n")


def test_existing_flag_is_kept():
    assert chat.flag_user_turn("x /no_think", "think") == "x /no_think"


def test_segments_mark_only_assistant_content_and_end_token():
    segments = chat.render_segments(
        [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}], mode="think"
    )
    trainable = "".join(text for text, train in segments if train)
    assert trainable == "a<|im_end|>"
    assert "".join(text for text, _ in segments) == chat.render_messages(
        [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}], mode="think"
    )


def test_jinja_template_matches_python_rendering():
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "q"}]
    template = jinja2.Environment().from_string(chat.CHAT_TEMPLATE)
    for mode in chat.MODES:
        rendered = template.render(messages=messages, add_generation_prompt=True, mode=mode)
        assert rendered == chat.render_messages(messages, mode=mode, add_generation_prompt=True)


def test_thinking_and_plain_responses():
    thinking = chat.format_response("The answer is 4.", thinking="2+2=4")
    assert thinking == "<think>\n2+2=4\n</think>\n\nThe answer is 4."
    assert chat.format_response("4") == "4"
    parsed = chat.split_response(thinking + "<|im_end|>")
    assert (parsed.thinking, parsed.answer, parsed.finished) == ("2+2=4", "The answer is 4.", True)


@pytest.mark.parametrize(
    ("text", "thinking", "answer", "finished"),
    [
        ("plain answer", "", "plain answer", True),
        ("<think>still going", "still going", "", False),
        ("reasoning</think>final", "reasoning", "final", True),  # the prompt opened the think block
        ("<think></think>x", "", "x", True),
    ],
)
def test_split_response(text, thinking, answer, finished):
    parsed = chat.split_response(text)
    assert (parsed.thinking, parsed.answer, parsed.finished) == (thinking, answer, finished)


def test_answer_text_reads_after_last_think_close():
    assert chat.answer_text("<think>a</think>\n\n\\boxed{1}<|im_end|>") == "\\boxed{1}"
    assert chat.answer_text("<think>unfinished") == "<think>unfinished"


def test_tools_go_in_the_system_prompt():
    tools = [{"name": "add", "parameters": {"type": "object"}}]
    text = chat.render_messages(
        [{"role": "user", "content": "add 1 2"}, {"role": "tool", "content": "3"}], tools=tools
    )
    assert "<tools>\n" in text and '"name": "add"' in text and "<|im_start|>tool\n3<|im_end|>" in text


def test_bad_role_and_mode():
    with pytest.raises(ValueError, match="role"):
        chat.render_messages([{"role": "robot", "content": "x"}])
    with pytest.raises(ValueError, match="mode"):
        chat.render_prompt("x", mode="fast")
