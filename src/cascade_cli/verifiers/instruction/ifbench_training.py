"""IF-RLVR training constraints of IFBench: the 29 "new" ones of open-instruct's IFEvalG (`copy:`, `new:`,
`paragraphs:`, `first_word:`, `last_word:`, `letters:`, `count:`, and new `keywords:` / `detectable_format:` /
`punctuation:` ids). These split sentences with IFEval's rule-based splitter. Imported for its side effect:
registration in `registry.REGISTRY`.
"""

from __future__ import annotations

import re
from typing import Any

from cascade_cli.verifiers.instruction import text as measure
from cascade_cli.verifiers.instruction.ifeval import (
    _DIVIDER,
    _single_character,
    compare,
    count_parts_allowing_empty_ends,
    keywords_letter_frequency,
)
from cascade_cli.verifiers.instruction.registry import compile_pattern, instruction


@instruction("copy:repeat_phrase", phrase="str", small_n="int")
def repeat_phrase(text: str, *, phrase: str, small_n: int) -> bool:
    """The phrase `small_n` times, each copy with exactly one word changed."""
    reference = phrase.strip().split()
    found = compile_pattern(rf"{reference[0]} .*? {reference[-1]}").findall(text)
    if len(found) != small_n:
        return False
    changed_once = 0
    for candidate in found:
        words = candidate.split()
        if len(words) != len(reference):
            return False
        differences = sum(1 for a, b in zip(words, reference, strict=True) if a != b)
        if differences > 1:
            return False
        changed_once += differences == 1
    return changed_once == small_n


@instruction("copy:copy", prompt_to_repeat="str")
def copy_verbatim(text: str, *, prompt_to_repeat: str) -> bool:
    return text.strip().lower() == prompt_to_repeat.strip().lower()


@instruction("copy:copying_simple", prompt_to_repeat="str")
def copying_simple(text: str, *, prompt_to_repeat: str) -> bool:
    return text.strip().lower() == prompt_to_repeat.strip().lower()


@instruction("copy:copying_multiple", prompt_to_repeat="str", N="int")
def copying_multiple(text: str, *, prompt_to_repeat: str, N: int) -> bool:  # noqa: N803  (IFBench's kwarg)
    copies = text.split("******")
    expected = prompt_to_repeat.strip().lower()
    return len(copies) == N and all(copy.strip().lower() == expected for copy in copies)


@instruction("new:copy_span_idx", prompt_to_repeat="str", n_start="int", n_end="int")
def copy_span_idx(text: str, *, prompt_to_repeat: str, n_start: int, n_end: int) -> bool:
    return text.strip().lower() == prompt_to_repeat[n_start:n_end].strip().lower()


@instruction("detectable_format:sentence_hyphens")
def sentence_hyphens(text: str) -> bool:
    """Sentences joined by `-` with no spaces around the hyphens."""
    gold = measure.split_sentences_by_rules(text.replace("-", " "))
    for piece, sentence in zip(text.split("-"), gold, strict=False):
        if piece.strip() != piece or piece != sentence:
            return False
    return True


@instruction("keywords:no_adjacent_consecutive")
def no_adjacent_consecutive(text: str) -> bool:
    """No two adjacent words start with consecutive letters of the alphabet."""
    words = text.split()
    for first, second in zip(words, words[1:], strict=False):
        a, b = first[0].lower(), second[0].lower()
        if len(a) != 1 or len(b) != 1 or ord(b) - ord(a) == 1:
            return False
    return True


@instruction("detectable_format:square_brackets")
def square_brackets(text: str) -> bool:
    return all(word.startswith("[") and word.endswith("]") for word in text.split())


@instruction("keywords:word_once", keyword="str")
def word_once(text: str, *, keyword: str) -> bool:
    return len(compile_pattern(keyword.strip(), re.IGNORECASE).findall(text)) == 1


@instruction("keywords:word_count_different_numbers", keyword="str", frequency="int", relation="relation")
def word_count_different_numbers(text: str, *, keyword: str, frequency: int, relation: str) -> bool:
    return compare(len(compile_pattern(keyword.strip(), re.IGNORECASE).findall(text)), relation, frequency)


@instruction("keywords:exclude_word_harder", keyword="str", instruction="any?")
def exclude_word_harder(text: str, *, keyword: str, instruction: Any = None) -> bool:
    return " " + keyword.strip() + " " not in text


@instruction("paragraphs:paragraphs")
def two_paragraphs_divider(text: str) -> bool:
    return count_parts_allowing_empty_ends(_DIVIDER.split(text)) == 2


@instruction("paragraphs:paragraphs2")
def two_paragraphs_blank_line(text: str) -> bool:
    return count_parts_allowing_empty_ends(text.split("\n\n")) == 2


@instruction("first_word:first_word_sent", first_word="first_str")
def first_word_sent(text: str, *, first_word: str) -> bool:
    expected = first_word.strip().lower()
    for sentence in measure.split_sentences_by_rules(text):
        if not sentence.strip() or sentence.split()[0].strip().lower() != expected:
            return False
    return True


@instruction("first_word:first_word_answer", first_word="first_str")
def first_word_answer(text: str, *, first_word: str) -> bool:
    words = text.split()
    return bool(words) and words[0].strip().lower() == first_word.strip().lower()


_NOT_WORD = re.compile(r"[^\w\s]")


@instruction("last_word:last_word_sent", last_word="first_str")
def last_word_sent(text: str, *, last_word: str) -> bool:
    expected = last_word.strip().lower()
    for sentence in measure.split_sentences_by_rules(text):
        if not sentence.strip() or _NOT_WORD.sub("", sentence.split()[-1].strip()).lower() != expected:
            return False
    return True


@instruction("last_word:last_word_answer", last_word="first_str")
def last_word_answer(text: str, *, last_word: str) -> bool:
    words = text.split()
    return bool(words) and _NOT_WORD.sub("", words[-1].strip()).lower() == last_word.strip().lower()


@instruction("detectable_format:bigram_wrapping")
def bigram_wrapping(text: str) -> bool:
    """Every word pair wrapped as `<<first second>>`."""
    words = text.split()
    return all(words[i].startswith("<<") and words[i + 1].endswith(">>") for i in range(0, len(words) - 1, 2))


@instruction("punctuation:punctuation_dot")
def punctuation_dot(text: str) -> bool:
    return "." not in text


@instruction("punctuation:punctuation_exclamation")
def punctuation_exclamation(text: str) -> bool:
    return "!" not in text


_LOWERCASE_WORD = re.compile(r"\b[a-z]+\b")


@instruction("count:lowercase_counting", N="int")
def lowercase_counting(text: str, *, N: int) -> bool:  # noqa: N803
    return len(_LOWERCASE_WORD.findall(text)) <= N


_ASCII_LETTER = re.compile(r"[a-zA-Z]")


@instruction("letters:letter_counting", N="int", relation="relation")
def letter_counting(text: str, *, N: int, relation: str) -> bool:  # noqa: N803
    return compare(len(_ASCII_LETTER.findall(text)), relation, N)


instruction(
    "letters:letter_counting2",
    validate=_single_character,
    letter="str",
    let_frequency="int",
    let_relation="relation",
)(keywords_letter_frequency)


@instruction("count:counting_composition", n_sent="int", n_words="int")
def counting_composition(text: str, *, n_sent: int, n_words: int) -> bool:
    """3 paragraphs split by `***`, each of `n_sent` sentences of `n_words` NLTK tokens."""
    paragraphs = _DIVIDER.split(text)
    count = count_parts_allowing_empty_ends(paragraphs)
    if count is None:
        return False
    for paragraph in paragraphs:
        sentences = measure.split_sentences_by_rules(paragraph)
        if len(sentences) != n_sent:
            return False
        if any(len(measure.word_tokens(sentence)) != n_words for sentence in sentences):
            return False
    return count == 3


@instruction("count:count_unique")
def count_unique(text: str) -> bool:
    tokens = measure.word_tokens(text)
    return len(tokens) == len(set(tokens))


@instruction("count:count_increment_word", keyword1="str", keyword2="str")
def count_increment_word(text: str, *, keyword1: str, keyword2: str) -> bool:
    once = len(compile_pattern(keyword1.strip(), re.IGNORECASE).findall(text))
    twice = len(compile_pattern(keyword2.strip(), re.IGNORECASE).findall(text))
    return once == 1 and twice == 2


@instruction("keywords:palindrome")
def contains_palindrome(text: str) -> bool:
    return any(word == word[::-1] for word in text.split())


@instruction("keywords:keyword_specific_position", keyword="first_str", n="int", m="int")
def keyword_specific_position(text: str, *, keyword: str, n: int, m: int) -> bool:
    """`keyword` is token `m` of sentence `n` (rule-based sentences, NLTK tokens, case-sensitive)."""
    sentences = measure.split_sentences_by_rules(text)
    if n < 1 or m < 1 or len(sentences) < n:
        return False
    tokens = measure.word_tokens(sentences[n - 1])
    return len(tokens) >= m and tokens[m - 1] == keyword.strip()


@instruction("keywords:start_end")
def start_end_same_word(text: str) -> bool:
    tokens = measure.word_tokens(text)
    return len(tokens) >= 2 and tokens[0].lower() == tokens[-1].lower()


TRAINING_IDS = (
    "copy:repeat_phrase",
    "copy:copy",
    "new:copy_span_idx",
    "detectable_format:sentence_hyphens",
    "keywords:no_adjacent_consecutive",
    "detectable_format:square_brackets",
    "keywords:word_once",
    "keywords:word_count_different_numbers",
    "keywords:exclude_word_harder",
    "paragraphs:paragraphs",
    "paragraphs:paragraphs2",
    "first_word:first_word_sent",
    "first_word:first_word_answer",
    "last_word:last_word_sent",
    "last_word:last_word_answer",
    "detectable_format:bigram_wrapping",
    "copy:copying_simple",
    "copy:copying_multiple",
    "punctuation:punctuation_dot",
    "punctuation:punctuation_exclamation",
    "count:lowercase_counting",
    "letters:letter_counting",
    "letters:letter_counting2",
    "count:counting_composition",
    "count:count_unique",
    "count:count_increment_word",
    "keywords:palindrome",
    "keywords:keyword_specific_position",
    "keywords:start_end",
)
