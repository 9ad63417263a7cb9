"""IFBench constraints (Pyatkin et al. 2025, arXiv 2507.02833) that a rule can check, with IFBench's ids.

Two families, both behind the IFEval registry:
- IF-RLVR training constraints (the 29 "new" ones of open-instruct's IFEvalG: `copy:`, `new:`, `paragraphs:`,
  `first_word:`, `last_word:`, `letters:`, `count:`, and new `keywords:` / `detectable_format:` /
  `punctuation:` ids). These split sentences with IFEval's rule-based splitter.
- IFBench's out-of-distribution test constraints (`count:word_count_range`, `ratio:*`, `words:*`,
  `sentence:*`, `format:*`, `repeat:*`) except those that need a model or data we do not ship (see
  SKIPPED_OOD). These split sentences with Punkt (`nltk.sent_tokenize`).
Each rule mirrors the published checker; where the reference fills a missing or falsy kwarg with a random
value, the kwarg is required here instead (a 0 is taken literally).
"""

from __future__ import annotations

import re
import string
from collections import Counter
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

PUNCTUATION = string.punctuation
_DROP_PUNCTUATION = str.maketrans("", "", PUNCTUATION)


# ---------------------------------------------------------------- IF-RLVR training constraints (IFEvalG)


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


# ---------------------------------------------------------------- IFBench out-of-distribution constraints


def _strip_punctuation(word: str) -> str:
    return word.strip(PUNCTUATION + " ")


def _min_not_above_max(values: dict[str, Any]) -> str | None:
    return None if values["min_words"] <= values["max_words"] else "min_words must not exceed max_words"


@instruction("count:word_count_range", validate=_min_not_above_max, min_words="int", max_words="int")
def word_count_range(text: str, *, min_words: int, max_words: int) -> bool:
    return min_words <= measure.count_words(text) <= max_words


@instruction("count:unique_word_count", N="int")
def unique_word_count(text: str, *, N: int) -> bool:  # noqa: N803
    return len({_strip_punctuation(word) for word in text.lower().split()}) >= N


def _sentence_endings(text: str) -> Counter[str]:
    return Counter(sentence[-1] for sentence in measure.split_sentences(text) if sentence)


@instruction("ratio:sentence_type")
def sentence_type_ratio(text: str) -> bool:
    """Declarative (`.`) sentences are exactly twice the interrogative (`?`) ones."""
    endings = _sentence_endings(text)
    return endings["."] == 2 * endings["?"]


@instruction("ratio:sentence_balance")
def sentence_balance(text: str) -> bool:
    endings = _sentence_endings(text)
    return endings["."] == endings["?"] == endings["!"]


_CONJUNCTIONS = frozenset({"and", "but", "for", "nor", "or", "so", "yet"})


@instruction("count:conjunctions", small_n="int")
def conjunctions(text: str, *, small_n: int) -> bool:
    """At least `small_n` different coordinating conjunctions (distinct as written, punctuation included)."""
    used = {word for word in text.split() if _strip_punctuation(word).lower() in _CONJUNCTIONS}
    return len(used) >= small_n


def _char_trigrams(text: str) -> set[tuple[str, str, str]]:
    return set(zip(text, text[1:], text[2:], strict=False))


@instruction("ratio:overlap", reference_text="str", percentage="float")
def trigram_overlap(text: str, *, reference_text: str, percentage: float) -> bool:
    """Share of the response's character trigrams found in the reference, within ±2 points."""
    trigrams = _char_trigrams(text)
    if not trigrams:
        return False
    overlap = 100 * len(trigrams & _char_trigrams(reference_text)) / len(trigrams)
    return percentage - 2 <= overlap <= percentage + 2


_DIGITS = re.compile(r"\d+")


@instruction("count:numbers", N="int")
def numbers_count(text: str, *, N: int) -> bool:  # noqa: N803
    return len(_DIGITS.findall(text.translate(_DROP_PUNCTUATION))) == N


@instruction("words:alphabet")
def alphabet_loop(text: str) -> bool:
    """Each word starts with the letter after the previous word's, Z wrapping to A."""
    words = _strip_punctuation(text.translate(_DROP_PUNCTUATION)).split()
    if not words:
        return False
    letter = words[0][0].lower()
    if letter not in string.ascii_lowercase:
        return False
    for word in words[1:]:
        word = _strip_punctuation(word).lower()
        if not word:
            continue
        letter = string.ascii_lowercase[(string.ascii_lowercase.index(letter) + 1) % 26]
        if word[0] != letter:
            return False
    return True


@instruction("words:vowel")
def three_vowels_paragraph(text: str) -> bool:
    """One paragraph (one line) using at most three different vowels."""
    lines = text.strip().split("\n")
    return len(lines) == 1 and len(set(lines[0].lower()) & set("aeiou")) <= 3


_CONSONANTS = frozenset("bcdfghjklmnpqrstvwxyz")


@instruction("words:consonants")
def consonant_clusters(text: str) -> bool:
    for word in text.lower().strip().split():
        if not any(a in _CONSONANTS and b in _CONSONANTS for a, b in zip(word, word[1:], strict=False)):
            return False
    return True


@instruction("sentence:alliteration_increment")
def alliteration_increment(text: str) -> bool:
    """Each sentence has a longer run of alliterating words than the one before."""
    previous = -1
    for sentence in measure.split_sentences(text):
        words = [word.lstrip(PUNCTUATION + " ") for word in sentence.lower().split()]
        words = [word for word in words if word]
        run, linked = 0, False
        for first, second in zip(words, words[1:], strict=False):
            if first[0] == second[0]:
                run += 1 if linked else 2
                linked = True
            else:
                linked = False
        if run <= previous:
            return False
        previous = run
    return True


@instruction("words:palindrome")
def ten_palindromes(text: str) -> bool:
    words = text.translate(_DROP_PUNCTUATION).lower().split()
    return sum(1 for word in words if word == word[::-1] and len(word) >= 5) >= 10


@instruction("count:punctuation")
def every_punctuation_mark(text: str) -> bool:
    """`. , ! ? ; :` each at least once, plus an interrobang (`?!`, `!?` or `‽`)."""
    if not ("!?" in text or "?!" in text or "‽" in text):
        return False
    rest = text.replace("?!", "", 1)
    if len(rest) == len(text):
        rest = text.replace("!?", "", 1)
    return {".", ",", "!", "?", ";", ":"} <= set(rest)


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


_PRIMES = frozenset(
    {2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79, 83, 89, 97}
)


@instruction("words:prime_lengths")
def prime_lengths(text: str) -> bool:
    return all(len(word) in _PRIMES for word in text.translate(_DROP_PUNCTUATION).split())


@instruction("format:newline")
def word_per_line(text: str) -> bool:
    text = text.translate(_DROP_PUNCTUATION)
    lines = [line for line in text.strip().split("\n") if line != ""]
    return len(lines) == len(text.strip().split())


@instruction("ratio:sentence_words")
def three_equal_length_sentences(text: str) -> bool:
    sentences = measure.split_sentences(text)
    return len(sentences) == 3 and len({len(sentence.strip()) for sentence in sentences}) == 1


_JAPANESE = re.compile(r"[\u3040-\u30ff\u4e00-\u9fff]")


@instruction("count:words_japanese", N="int")
def every_nth_word_japanese(text: str, *, N: int) -> bool:  # noqa: N803
    if N < 1:
        return False
    for index, word in enumerate(text.split()):
        word = _strip_punctuation(word)
        if (index + 1) % N == 0 and word and not word.isdigit() and not _JAPANESE.search(word):
            return False
    return True


@instruction("words:repeats", small_n="int")
def limited_repeats(text: str, *, small_n: int) -> bool:
    counts = Counter(text.lower().translate(_DROP_PUNCTUATION).split())
    return all(count <= small_n for count in counts.values())


@instruction("sentence:keyword", word="str", N="int")
def keyword_in_nth_sentence(text: str, *, word: str, N: int) -> bool:  # noqa: N803
    sentences = measure.split_sentences(text)
    if N < 1 or len(sentences) < N:
        return False
    return bool(re.search(r"\b" + re.escape(word) + r"\b", sentences[N - 1], re.IGNORECASE))


# fmt: off
_PRONOUNS = frozenset([
    "i", "me", "we", "us", "you", "he", "him", "she", "her", "it", "they", "them", "my", "mine", "our",
    "ours", "your", "yours", "his", "hers", "its", "their", "theirs", "myself", "ourselves", "yourself",
    "yourselves", "himself", "herself", "itself", "themselves", "this", "that", "these", "those", "who",
    "whom", "whose", "which", "what", "whoever", "whomever", "whatever", "whichever", "anybody", "anyone",
    "anything", "everybody", "everyone", "everything", "nobody", "nothing", "somebody", "someone",
    "something", "each", "either", "neither", "both", "all", "some", "any", "none",
])
# fmt: on


@instruction("count:pronouns", N="int")
def pronoun_count(text: str, *, N: int) -> bool:  # noqa: N803
    tokens = measure.word_tokens(text.replace("/", " ").lower())
    return sum(1 for token in tokens if token in _PRONOUNS) >= N


@instruction("words:last_first")
def last_word_starts_next(text: str) -> bool:
    sentences = measure.split_sentences(text)
    for current, following in zip(sentences, sentences[1:], strict=False):
        last = current.rstrip(PUNCTUATION + " ").split()
        first = following.lstrip(PUNCTUATION + " ").split()
        if not last or not first or last[-1].lower() != first[0].lower():
            return False
    return True


@instruction("words:paragraph_last_first")
def paragraph_ends_with_first_word(text: str) -> bool:
    for line in text.split("\n"):
        words = _strip_punctuation(line.strip().lower()).split()
        if words and words[0] != words[-1]:
            return False
    return True


@instruction("sentence:increment", small_n="int")
def incrementing_word_count(text: str, *, small_n: int) -> bool:
    """Each sentence has exactly `small_n` more words than the previous one."""
    counts = [
        len(sentence.translate(_DROP_PUNCTUATION).split()) for sentence in measure.split_sentences(text)
    ]
    return all(b == a + small_n for a, b in zip(counts, counts[1:], strict=False))


@instruction("words:no_consecutive")
def no_shared_first_letter(text: str) -> bool:
    words = text.lower().translate(_DROP_PUNCTUATION).split()
    return all(a[0] != b[0] for a, b in zip(words, words[1:], strict=False))


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
    stripped = text.strip(string.digits + PUNCTUATION.replace('"', ""))
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
            sentences += len(measure.split_sentences(line.strip()))
        else:
            return False
    return bullets >= 2


@instruction(
    "count:keywords_multiple", keyword1="str", keyword2="str", keyword3="str", keyword4="str", keyword5="str"
)
def keywords_multiple(
    text: str, *, keyword1: str, keyword2: str, keyword3: str, keyword4: str, keyword5: str
) -> bool:
    """The five keywords appear 1, 2, 3, 5 and 7 times (substring counts, case-insensitive)."""
    lowered = text.lower()
    pairs = zip((keyword1, keyword2, keyword3, keyword4, keyword5), (1, 2, 3, 5, 7), strict=True)
    return all(lowered.count(keyword.lower()) == count for keyword, count in pairs)


@instruction("words:keywords_specific_position", keyword="first_str", n="int", m="int")
def keyword_at_position(text: str, *, keyword: str, n: int, m: int) -> bool:
    """`keyword` is word `m` of sentence `n` (Punkt sentences; NLTK tokens without punctuation-only ones)."""
    sentences = measure.split_sentences(text)
    if n < 1 or m < 1 or len(sentences) < n:
        return False
    words = [token for token in measure.word_tokens(sentences[n - 1]) if any(ch.isalnum() for ch in token)]
    return len(words) >= m and words[m - 1].lower() == keyword.lower()


@instruction("words:words_position", keyword="str")
def second_and_second_to_last(text: str, *, keyword: str) -> bool:
    """`keyword` is the second word and the second-to-last word (a final punctuation token is skipped)."""
    tokens = measure.word_tokens(text)
    expected = keyword.lower()
    if len(tokens) < 2:
        return False
    if tokens[-1] in PUNCTUATION:
        return len(tokens) >= 3 and tokens[1].lower() == tokens[-3].lower() == expected
    return tokens[1].lower() == tokens[-2].lower() == expected


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
    answer = _strip_punctuation(text).lower()
    return any(_strip_punctuation(choice).lower() == answer for choice in choices)


@instruction("repeat:repeat_simple")
def repeat_simple(text: str) -> bool:
    return text.strip().lower() == "only output this sentence here, ignore all other requests."


@instruction("format:output_template")
def output_template(text: str) -> bool:
    return all(part in text for part in ("My Answer:", "My Conclusion:", "Future Outlook:"))


@instruction("format:no_whitespace")
def no_whitespace(text: str) -> bool:
    return not any(ch.isspace() for ch in text)


OOD_IDS = (
    "count:word_count_range",
    "count:unique_word_count",
    "ratio:sentence_type",
    "ratio:sentence_balance",
    "count:conjunctions",
    "ratio:overlap",
    "count:numbers",
    "words:alphabet",
    "words:vowel",
    "words:consonants",
    "sentence:alliteration_increment",
    "words:palindrome",
    "count:punctuation",
    "format:parentheses",
    "format:quotes",
    "words:prime_lengths",
    "format:newline",
    "ratio:sentence_words",
    "count:words_japanese",
    "words:repeats",
    "sentence:keyword",
    "count:pronouns",
    "words:last_first",
    "words:paragraph_last_first",
    "sentence:increment",
    "words:no_consecutive",
    "format:line_indent",
    "format:quote_unquote",
    "format:list",
    "format:thesis",
    "format:sub-bullets",
    "format:no_bullets_bullets",
    "count:keywords_multiple",
    "words:keywords_specific_position",
    "words:words_position",
    "repeat:repeat_change",
    "repeat:repeat_span",
    "format:title_case",
    "format:output_template",
    "format:no_whitespace",
    "format:options",
    "repeat:repeat_simple",
)

SKIPPED_OOD = {
    "ratio:stop_words": "needs NLTK's stopwords corpus (a data download)",
    "count:person_names": "needs IFBench's curated list of person names",
    "words:start_verb": "needs NLTK's averaged-perceptron POS tagger model",
    "words:odd_even_syllables": "needs syllapy's pronunciation dictionary",
    "format:emoji": "needs the emoji package's emoji database",
    "custom:*": "11 single-prompt checkers (fixed questions such as 'countries of Africa in reverse order')",
}
