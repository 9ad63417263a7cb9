"""ChatML with the paper's per-turn mode flags (Nemotron-Cascade §3.1.2).

Every user turn ends with ` /think` or ` /no_think`. A thinking answer is `<think>\n...\n</think>\n\n` then
the answer; a non-thinking answer has no think block at all (not even an empty one). Tools go in the
system prompt inside `<tools>...</tools>`; calls inside `<tool_call>...</tool_call>`; tool results are a
turn of their own (role `tool`).

Real models (`tokenizer=` on the render functions):
- A ChatML tokenizer (its own template renders `<|im_start|>`/`<|im_end|>`: SmolLM2, Qwen) renders with
  this project's template, and `adopt_template` makes it the tokenizer's, so every saved checkpoint carries
  it. Deliberately no implicit system prompt (SmolLM2's own template injects "You are a helpful AI
  assistant named SmolLM..."): the rows say what the system turn is, the paper's template has none, and one
  rendering everywhere (trainer, vLLM, OpenRLHF, the Hub) needs a template without hidden text.
- Any other template (Llama 3, Gemma, Mistral) renders through the tokenizer's own `apply_chat_template`
  with the flag appended to every user turn; SFT finds each assistant span by rendering prefixes.
- `<think>`/`</think>` are plain text where they are not special tokens; nothing here needs them as one id.
- Which of these renders is chosen per model by `chat_template: auto | model | cascade`
  (template_choice.py): a tokenizer chosen to render as the model (`renders_as_model`) renders through its
  own template as is, its system prompt included, with no mode flag (mode `none`).
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

Mode = Literal["think", "no_think"]
MODES: tuple[str, ...] = ("think", "no_think")
NO_FLAG = "none"  # render with no mode flag (what a model's own template, which knows none, gets)
RENDER_MODES: tuple[str, ...] = (*MODES, NO_FLAG)
# Set on a tokenizer (template_choice.choose_template) whose own template renders every prompt, as is: no
# mode flag, its own system prompt where it adds one. Unset: cascade's rendering (ChatML + flags).
MODEL_RENDERING = "cascade_model_rendering"
# The template a tokenizer was loaded with, before `adopt_template` replaced a ChatML one (models/loader.py).
OWN_TEMPLATE = "cascade_own_template"

IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"
SPECIAL_TOKENS: tuple[str, ...] = (IM_START, IM_END, "<|endoftext|>")
EXTRA_TOKENS: tuple[str, ...] = (THINK_OPEN, THINK_CLOSE, "<tool_call>", "</tool_call>", "<tools>", "</tools>")
ROLES = ("system", "user", "assistant", "tool")

# The same rendering as `render_messages`, for tokenizers (vLLM, OpenRLHF `--data.apply_chat_template`).
# The caller may pass `mode`; a user turn that already ends with a flag keeps it.
CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{%- set content = message['content'] -%}"
    "{%- if message['role'] == 'user' and mode is defined and mode and "
    "not (content.endswith('/think') or content.endswith('/no_think')) -%}"
    "{%- set content = content + ' /' + mode -%}"
    "{%- endif -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + content + '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)


def check_mode(mode: str) -> Mode:
    if mode not in RENDER_MODES:
        raise ValueError(f"mode must be one of {', '.join(RENDER_MODES)}; found {mode!r}")
    return mode  # type: ignore[return-value]


def flag_user_turn(content: str, mode: str) -> str:
    """Append ` /think` or ` /no_think` unless the turn already ends with a flag (mode `none`: as is)."""
    if check_mode(mode) == NO_FLAG:
        return content
    stripped = content.rstrip()
    if stripped.endswith("/think") or stripped.endswith("/no_think"):
        return content
    return f"{content} /{check_mode(mode)}"


def tools_system_prompt(tools: list[dict[str, Any]], system: str = "") -> str:
    listing = "\n".join(json.dumps(tool, ensure_ascii=False) for tool in tools)
    intro = (
        "You may call one or more functions to assist with the user query. The available functions are:\n"
        f"<tools>\n{listing}\n</tools>\n"
        "For each call, return a JSON object with the function name and arguments inside "
        '<tool_call></tool_call>: <tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
    )
    return f"{system}\n\n{intro}" if system else intro


def with_tools(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """The conversation with the tool listing in its system turn (one added when there is none)."""
    messages = list(messages)
    if tools:
        if messages and messages[0].get("role") == "system":
            messages[0] = {**messages[0], "content": tools_system_prompt(tools, messages[0]["content"])}
        else:
            messages.insert(0, {"role": "system", "content": tools_system_prompt(tools)})
    return messages


def flagged_messages(messages: list[dict[str, Any]], mode: str) -> list[dict[str, Any]]:
    """Checked messages with the mode flag on every user turn."""
    check_mode(mode)
    flagged = []
    for index, message in enumerate(messages):
        role = message.get("role")
        if role not in ROLES:
            raise ValueError(f"message {index}: role must be one of {', '.join(ROLES)}; found {role!r}")
        content = message.get("content")
        if not isinstance(content, str):
            raise ValueError(f"message {index}: content must be a string; found {type(content).__name__}")
        flagged.append({**message, "content": flag_user_turn(content, mode) if role == "user" else content})
    return flagged


# ---- whose template renders: ours (ChatML) or the tokenizer's own --------------------------------------

@functools.lru_cache(maxsize=64)
def template_is_chatml(template: str) -> bool:
    """True when a jinja chat template renders a user turn as `<|im_start|>user\n...<|im_end|>`."""
    from transformers.utils.chat_template_utils import render_jinja_template

    try:
        rendered, _ = render_jinja_template([[{"role": "user", "content": "hi"}]], chat_template=template)
        probe = rendered[0]
    except Exception:  # a template that cannot render a lone user turn is not ChatML either
        probe = ""
    return f"{IM_START}user\nhi" in probe and IM_END in probe


def renders_as_model(tokenizer: Any) -> bool:
    """True when `tokenizer` was chosen to render with its own template as is (no mode flag)."""
    return tokenizer is not None and bool(getattr(tokenizer, MODEL_RENDERING, False))


def uses_own_template(tokenizer: Any) -> bool:
    """True when `tokenizer` carries a template that is not ChatML (so it renders through its own);
    False for no tokenizer, no template, our template or any other ChatML template."""
    template = getattr(tokenizer, "chat_template", None) if tokenizer is not None else None
    if not isinstance(template, str) or not template or template == CHAT_TEMPLATE:
        return False
    return not template_is_chatml(template)


def saved_template(model_dir: str | Path) -> str | None:
    """The chat template saved with a checkpoint directory (chat_template.jinja or tokenizer_config.json)."""
    model_dir = Path(model_dir)
    if (model_dir / "chat_template.jinja").is_file():
        return (model_dir / "chat_template.jinja").read_text()
    config = model_dir / "tokenizer_config.json"
    template = json.loads(config.read_text()).get("chat_template") if config.is_file() else None
    return template if isinstance(template, str) and template else None


def adopt_template(tokenizer: Any) -> bool:
    """Give a ChatML tokenizer (or one without a template) the project's template; True when it did.
    A tokenizer with another template keeps its own."""
    if uses_own_template(tokenizer):
        return False
    tokenizer.chat_template = CHAT_TEMPLATE
    return True


def _own_render(tokenizer: Any, messages: list[dict[str, Any]], add_generation_prompt: bool) -> str:
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=add_generation_prompt)


def own_segments(
    tokenizer: Any, messages: list[dict[str, Any]], add_generation_prompt: bool
) -> list[tuple[str, bool]]:
    """(text, is_assistant_output) pieces from the tokenizer's own template (messages already flagged).

    Assistant turn i spans from the end of render(messages[:i], generation prompt) to the end of
    render(messages[:i+1]) less trailing whitespace; both must be prefixes of the whole rendering."""
    full = _own_render(tokenizer, messages, add_generation_prompt)
    segments: list[tuple[str, bool]] = []
    at = 0
    for index, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        start = len(_own_render(tokenizer, messages[:index], True)) if index else 0
        turn = _own_render(tokenizer, messages[: index + 1], False).rstrip()
        if not full.startswith(turn) or not at <= start <= len(turn):
            raise ValueError(
                f"message {index}: the tokenizer's chat template does not render the conversation prefix by "
                "prefix, so the assistant tokens cannot be found (expected a template like Llama 3's or Gemma's)"
            )
        segments += [(full[at:start], False), (full[start : len(turn)], True)]
        at = len(turn)
    segments.append((full[at:], False))
    return [(text, trainable) for text, trainable in segments if text]


def render_segments(
    messages: list[dict[str, Any]],
    mode: str = "think",
    add_generation_prompt: bool = False,
    tools: list[dict[str, Any]] | None = None,
    tokenizer: Any = None,
) -> list[tuple[str, bool]]:
    """Render a conversation as (text, is_assistant_output) pieces; SFT puts the loss on the True ones.

    The trainable part of an assistant turn is its content plus `<|im_end|>` (or the template's end of
    turn); the role header is context. `tokenizer` with a non-ChatML template renders through its own; one
    chosen to render as the model (`renders_as_model`) through its own and without the mode flag.
    """
    mode = NO_FLAG if renders_as_model(tokenizer) else mode
    messages = flagged_messages(with_tools(messages, tools), mode)
    if renders_as_model(tokenizer) or uses_own_template(tokenizer):
        return own_segments(tokenizer, messages, add_generation_prompt)
    segments: list[tuple[str, bool]] = []
    for message in messages:
        role, content = message["role"], message["content"]
        if role == "assistant":
            segments.append((f"{IM_START}assistant\n", False))
            segments.append((f"{content}{IM_END}", True))
            segments.append(("\n", False))
        else:
            segments.append((f"{IM_START}{role}\n{content}{IM_END}\n", False))
    if add_generation_prompt:
        segments.append((f"{IM_START}assistant\n", False))
    return segments


def render_messages(
    messages: list[dict[str, Any]],
    mode: str = "think",
    add_generation_prompt: bool = False,
    tools: list[dict[str, Any]] | None = None,
    tokenizer: Any = None,
) -> str:
    if renders_as_model(tokenizer) or uses_own_template(tokenizer):
        mode = NO_FLAG if renders_as_model(tokenizer) else mode
        flagged = flagged_messages(with_tools(messages, tools), mode)
        return _own_render(tokenizer, flagged, add_generation_prompt)
    return "".join(text for text, _ in render_segments(messages, mode, add_generation_prompt, tools))


def prompt_messages(prompt: str | list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A canonical row's `prompt` is either a string (one user turn) or a list of messages."""
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt}]
    return list(prompt)


def render_prompt(prompt: str | list[dict[str, Any]], mode: str = "think", tokenizer: Any = None) -> str:
    """The text a model continues from: the conversation plus the assistant header."""
    return render_messages(prompt_messages(prompt), mode=mode, add_generation_prompt=True, tokenizer=tokenizer)


def format_response(answer: str, thinking: str | None = None) -> str:
    """A thinking answer (`thinking` given) or a non-thinking one (no think block)."""
    if thinking is None:
        return answer
    return f"{THINK_OPEN}\n{thinking.strip()}\n{THINK_CLOSE}\n\n{answer}"


@dataclass(frozen=True)
class ParsedResponse:
    thinking: str
    answer: str
    finished: bool  # False when a think block was opened and never closed
    has_think_block: bool


def split_response(text: str) -> ParsedResponse:
    """Split any response into (thinking, answer, finished).

    `<think>a</think>b` -> thinking a, answer b. `a</think>b` (the prompt opened the block) -> same.
    `<think>a` with no close -> thinking a, answer "", unfinished. No think block -> the whole text is the
    answer. A trailing `<|im_end|>` / `<|endoftext|>` is dropped.
    """
    for stop in (IM_END, "<|endoftext|>"):
        if text.endswith(stop):
            text = text[: -len(stop)]
    close_at = text.find(THINK_CLOSE)
    stripped = text.lstrip()
    if close_at >= 0:
        thinking = text[:close_at]
        thinking = thinking.lstrip()
        if thinking.startswith(THINK_OPEN):
            thinking = thinking[len(THINK_OPEN) :]
        return ParsedResponse(thinking.strip(), text[close_at + len(THINK_CLOSE) :].strip(), True, True)
    if stripped.startswith(THINK_OPEN):
        return ParsedResponse(stripped[len(THINK_OPEN) :].strip(), "", False, True)
    return ParsedResponse("", text.strip(), True, False)


def answer_text(text: str) -> str:
    """What verifiers and reward models read: the text after `</think>`, else the whole response."""
    close_at = text.rfind(THINK_CLOSE)
    if close_at >= 0:
        text = text[close_at + len(THINK_CLOSE) :]
    for stop in (IM_END, "<|endoftext|>"):
        if text.endswith(stop):
            text = text[: -len(stop)]
    return text.strip()
