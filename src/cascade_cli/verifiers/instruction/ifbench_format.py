"""IFBench's out-of-distribution constraints on layout and repetition (`format:*`, `repeat:*`).

Imported for its side effect: registration in `registry.REGISTRY`.
"""

from __future__ import annotations

import re
import string

from cascade_cli.verifiers.instruction import text as measure
from cascade_cli.verifiers.instruction.registry import instruction


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


@instruction("format:line_indent")
def indent_stairs(text: str) -> bool:
    """Each line indented (with spaces) more than the one before.

    Blank lines are dropped as the reference drops them: removing from the list it iterates, so a blank line
    right after a removed one stays.
    """
    lines = text.split("\n")
    position = 0
    while position < len(lines):
        if not lines[position].strip():
            lines.remove(lines[position])
        position += 1
    return all(_indent(b) > _indent(a) for a, b in zip(lines, lines[1:], strict=False))


@instruction("format:quote_unquote")
def quote_then_explanation(text: str) -> bool:
    """Every quoted phrase is followed by unquoted text."""
    text = "".join(text.replace("'\"'", "").split())
    if '""' in text:
        return False
    stripped = text.strip(string.digits + measure.PUNCTUATION.replace('"', ""))
    return not (stripped and stripped[-1] == '"')


@instruction("format:list", sep="str")
def custom_bullets(text: str, *, sep: str) -> bool:
    return text.count(sep) >= 2


@instruction("format:thesis")
def italic_thesis(text: str) -> bool:
    """An HTML-italic thesis (`<i>` or `<em>`) followed by more text."""
    start = text.find("<i>")
    if start == -1:
        start = text.find("<em>")
        if start == -1:
            return False
    text = text[start:]
    end = text.find("</i>")
    if end == -1:
        end = text.find("</em>")
        if end == -1:
            return False
    return bool(text[3:end].strip()) and bool(text[end + 4 :].strip())


@instruction("format:sub-bullets")
def sub_bullets(text: str) -> bool:
    return all("-" in bullet for bullet in text.split("*")[1:])


@instruction("format:no_bullets_bullets")
def sentences_then_bullets(text: str) -> bool:
    """At least two sentences, then at least two `*` bullets, nothing after the bullets."""
    in_sentences, sentences, bullets = True, 0, 0
    for line in text.split("\n"):
        if line.strip().startswith("*"):
            in_sentences = False
            if sentences < 2:
                return False
            bullets += 1
        elif in_sentences:
            sentences += len(measure.split_sentences_by_rules(line.strip()))
        else:
            return False
    return bullets >= 2


@instruction("repeat:repeat_change", prompt_to_repeat="str")
def repeat_with_first_word_changed(text: str, *, prompt_to_repeat: str) -> bool:
    if prompt_to_repeat == text:
        return False
    return " ".join(prompt_to_repeat.split()[1:]) == " ".join(text.split()[1:])


@instruction("repeat:repeat_span", prompt_to_repeat="str", n_start="int", n_end="int")
def repeat_span(text: str, *, prompt_to_repeat: str, n_start: int, n_end: int) -> bool:
    return text.strip().lower() == prompt_to_repeat[n_start : n_end + 1].strip().lower()


@instruction("format:title_case")
def title_case(text: str) -> bool:
    for word in measure.word_tokens(text):
        if not word or not word[0].isalpha():
            continue
        if len(word) == 1:
            if word.islower():
                return False
            continue
        if word[0].isupper() and word[1:].islower():
            continue
        if word[0].islower() and (word[1:].isupper() or word[1:].islower()):
            return False
    return True


_LETTER_OPTIONS = re.compile(r"\W*[aA]\W*[bB]\W*[cC]\W*")


@instruction("format:options", options="str")
def one_of_options(text: str, *, options: str) -> bool:
    """The response is one of `options` ("yes/no/maybe", "I know or I don't know", "a), b), c), d)").

    Options split on "/" if present, else on "or" (as a substring, as the reference does), else on ",".
    Lettered options must match exactly; others ignoring case and surrounding punctuation.
    """
    separator = "/" if "/" in options else "or" if "or" in options else ","
    choices = [choice.strip() for choice in options.split(separator)]
    if _LETTER_OPTIONS.match(options):
        return text in choices
    answer = measure.strip_punctuation(text).lower()
    return any(measure.strip_punctuation(choice).lower() == answer for choice in choices)


@instruction("repeat:repeat_simple")
def repeat_simple(text: str) -> bool:
    return text.strip().lower() == "only output this sentence here, ignore all other requests."


@instruction("format:output_template")
def output_template(text: str) -> bool:
    return all(part in text for part in ("My Answer:", "My Conclusion:", "Future Outlook:"))


@instruction("format:no_whitespace")
def no_whitespace(text: str) -> bool:
    return not any(ch.isspace() for ch in text)


_CLOSES = {")": "(", "]": "[", "}": "{"}


@instruction("format:parentheses")
def nested_brackets(text: str) -> bool:
    """Brackets of any kind nested at least 5 deep, closed properly."""
    stack: list[str] = []
    deepest = 0
    for ch in text:
        if ch in "([{":
            stack.append(ch)
            deepest = max(deepest, len(stack))
        elif ch in _CLOSES:
            if stack and stack[-1] == _CLOSES[ch]:
                stack.pop()
                if deepest >= 5 and len(stack) < deepest:
                    return True
            else:
                stack, deepest = [], 0
    return False


@instruction("format:quotes")
def nested_quotes(text: str) -> bool:
    """Quotes within quotes at least 3 levels deep (a quote char closes the innermost open one of its kind)."""
    stack: list[str] = []
    reached = 0
    for ch in text:
        if stack and ch == stack[-1]:
            stack.pop()
            if reached - len(stack) >= 3:
                return True
        elif ch in "\"'":
            stack.append(ch)
            reached = max(reached, len(stack))
    return False
