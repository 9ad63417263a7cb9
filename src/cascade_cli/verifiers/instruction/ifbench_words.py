"""IFBench's out-of-distribution constraints on counts, ratios, words and sentences (`count:*`, `ratio:*`,
`words:*`, `sentence:*`). These split sentences by IFEval's rules (see ifbench.py). Imported for its side
effect: registration in `registry.REGISTRY`.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from typing import Any

from cascade_cli.verifiers.instruction import text as measure
from cascade_cli.verifiers.instruction.registry import instruction


def _min_not_above_max(values: dict[str, Any]) -> str | None:
    return None if values["min_words"] <= values["max_words"] else "min_words must not exceed max_words"


@instruction("count:word_count_range", validate=_min_not_above_max, min_words="int", max_words="int")
def word_count_range(text: str, *, min_words: int, max_words: int) -> bool:
    return min_words <= measure.count_words(text) <= max_words


@instruction("count:unique_word_count", N="int")
def unique_word_count(text: str, *, N: int) -> bool:  # noqa: N803
    return len({measure.strip_punctuation(word) for word in text.lower().split()}) >= N


def _sentence_endings(text: str) -> Counter[str]:
    return Counter(sentence[-1] for sentence in measure.split_sentences_by_rules(text) if sentence)


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
    used = {word for word in text.split() if measure.strip_punctuation(word).lower() in _CONJUNCTIONS}
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
    return len(_DIGITS.findall(text.translate(measure.DROP_PUNCTUATION))) == N


@instruction("words:alphabet")
def alphabet_loop(text: str) -> bool:
    """Each word starts with the letter after the previous word's, Z wrapping to A."""
    words = measure.strip_punctuation(text.translate(measure.DROP_PUNCTUATION)).split()
    if not words:
        return False
    letter = words[0][0].lower()
    if letter not in string.ascii_lowercase:
        return False
    for word in words[1:]:
        word = measure.strip_punctuation(word).lower()
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
    for sentence in measure.split_sentences_by_rules(text):
        words = [word.lstrip(measure.PUNCTUATION + " ") for word in sentence.lower().split()]
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
    words = text.translate(measure.DROP_PUNCTUATION).lower().split()
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


_PRIMES = frozenset(
    {2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79, 83, 89, 97}
)


@instruction("words:prime_lengths")
def prime_lengths(text: str) -> bool:
    return all(len(word) in _PRIMES for word in text.translate(measure.DROP_PUNCTUATION).split())


@instruction("format:newline")
def word_per_line(text: str) -> bool:
    text = text.translate(measure.DROP_PUNCTUATION)
    lines = [line for line in text.strip().split("\n") if line != ""]
    return len(lines) == len(text.strip().split())


@instruction("ratio:sentence_words")
def three_equal_length_sentences(text: str) -> bool:
    sentences = measure.split_sentences_by_rules(text)
    return len(sentences) == 3 and len({len(sentence.strip()) for sentence in sentences}) == 1


_JAPANESE = re.compile(r"[\u3040-\u30ff\u4e00-\u9fff]")


@instruction("count:words_japanese", N="int")
def every_nth_word_japanese(text: str, *, N: int) -> bool:  # noqa: N803
    if N < 1:
        return False
    for index, word in enumerate(text.split()):
        word = measure.strip_punctuation(word)
        if (index + 1) % N == 0 and word and not word.isdigit() and not _JAPANESE.search(word):
            return False
    return True


@instruction("words:repeats", small_n="int")
def limited_repeats(text: str, *, small_n: int) -> bool:
    counts = Counter(text.lower().translate(measure.DROP_PUNCTUATION).split())
    return all(count <= small_n for count in counts.values())


@instruction("sentence:keyword", word="str", N="int")
def keyword_in_nth_sentence(text: str, *, word: str, N: int) -> bool:  # noqa: N803
    sentences = measure.split_sentences_by_rules(text)
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
    sentences = measure.split_sentences_by_rules(text)
    for current, following in zip(sentences, sentences[1:], strict=False):
        last = current.rstrip(measure.PUNCTUATION + " ").split()
        first = following.lstrip(measure.PUNCTUATION + " ").split()
        if not last or not first or last[-1].lower() != first[0].lower():
            return False
    return True


@instruction("words:paragraph_last_first")
def paragraph_ends_with_first_word(text: str) -> bool:
    for line in text.split("\n"):
        words = measure.strip_punctuation(line.strip().lower()).split()
        if words and words[0] != words[-1]:
            return False
    return True


@instruction("sentence:increment", small_n="int")
def incrementing_word_count(text: str, *, small_n: int) -> bool:
    """Each sentence has exactly `small_n` more words than the previous one."""
    counts = [
        len(sentence.translate(measure.DROP_PUNCTUATION).split())
        for sentence in measure.split_sentences_by_rules(text)
    ]
    return all(b == a + small_n for a, b in zip(counts, counts[1:], strict=False))


@instruction("words:no_consecutive")
def no_shared_first_letter(text: str) -> bool:
    words = text.lower().translate(measure.DROP_PUNCTUATION).split()
    return all(a[0] != b[0] for a, b in zip(words, words[1:], strict=False))


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
    """`keyword` is word `m` of sentence `n` (rule-split sentences; NLTK tokens without punctuation-only ones)."""
    sentences = measure.split_sentences_by_rules(text)
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
    if tokens[-1] in measure.PUNCTUATION:
        return len(tokens) >= 3 and tokens[1].lower() == tokens[-3].lower() == expected
    return tokens[1].lower() == tokens[-2].lower() == expected
