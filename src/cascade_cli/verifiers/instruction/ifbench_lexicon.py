"""IFBench's out-of-distribution constraints that need a word list, a lexicon or a model: stop words, person
names, syllables, emoji and parts of speech (`ratio:stop_words`, `count:person_names`,
`words:odd_even_syllables`, `format:emoji`, `words:start_verb`).

Everything is offline: the stop words are NLTK's English list (the Snowball list with the contraction stems
NLTK adds; no PyPI package ships NLTK's corpus, and `stop-words`' 1,333-word English list disagrees with the
reference on a third of the sample), the names are the 50 the instruction itself lists, syllables come from
`syllapy`'s bundled dictionary, emoji from the `emoji` package's database, and parts of speech from NLTK's own
`PerceptronTagger` on the English averaged-perceptron model that `nltk.pos_tag` uses, shipped in
`nltk_data/taggers/` beside this module (its source and MIT license: the LICENSE.txt there). Imported for its
side effect: registration in `registry.REGISTRY`.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from cascade_cli.verifiers.instruction import text as measure
from cascade_cli.verifiers.instruction.registry import instruction

# NLTK's `stopwords.words("english")` as word-token matches: its entries with an apostrophe ("don't", "she's")
# can never equal a `\w+` token, so they are left out.
_STOP_WORDS = """
    i me my myself we our ours ourselves you your yours yourself yourselves he him his himself she her hers
    herself it its itself they them their theirs themselves what which who whom this that these those am is
    are was were be been being have has had having do does did doing a an the and but if or because as until
    while of at by for with about against between into through during before after above below to from up
    down in out on off over under again further then once here there when where why how all any both each few
    more most other some such no nor not only own same so than too very s t can will just don should now d ll
    m o re ve y ain aren couldn didn doesn hadn hasn haven isn ma mightn mustn needn shan shouldn wasn weren
    won wouldn
"""
STOP_WORDS = frozenset(_STOP_WORDS.split())

# The names `count:person_names` lists in its instruction text; only these count.
_PERSON_NAMES = (
    "Emma Liam Sophia Jackson Olivia Noah Ava Lucas Isabella Mason Mia Ethan Charlotte Alexander Amelia "
    "Benjamin Harper Leo Zoe Daniel Chloe Samuel Lily Matthew Grace Owen Abigail Gabriel Ella Jacob Scarlett "
    "Nathan Victoria Elijah Layla Nicholas Audrey David Hannah Christopher Penelope Thomas Nora Andrew Aria "
    "Joseph Claire Ryan Stella Jonathan"
)
PERSON_NAMES = tuple(_PERSON_NAMES.split())
_NAME_PATTERNS = tuple(re.compile(rf"\b{re.escape(name)}\b") for name in PERSON_NAMES)


@instruction("ratio:stop_words", percentage="float")
def stop_word_ratio(text: str, *, percentage: float) -> bool:
    """At most `percentage`% of the `\\w+` words are (case-insensitively) stop words."""
    tokens = measure.words(text)
    if not tokens:
        return False
    stop = sum(token.lower() in STOP_WORDS for token in tokens)
    return stop / len(tokens) * 100 <= percentage


@instruction("count:person_names", N="int")
def person_names(text: str, *, N: int) -> bool:  # noqa: N803
    """At least N different names of the listed 50, matched case-sensitively as whole words."""
    return sum(1 for pattern in _NAME_PATTERNS if pattern.search(text)) >= N


@instruction("words:odd_even_syllables")
def odd_even_syllables(text: str) -> bool:
    """Consecutive words (punctuation dropped, split on whitespace) alternate odd and even syllable counts."""
    import syllapy

    parities = [syllapy.count(word) % 2 for word in text.translate(measure.DROP_PUNCTUATION).lower().split()]
    return all(a != b for a, b in zip(parities, parities[1:], strict=False))


def _is_emoji(char: str) -> bool:
    import emoji

    return emoji.is_emoji(char)


@instruction("format:emoji")
def emoji_per_sentence(text: str) -> bool:
    """Every sentence ends with an emoji (its last or second-last character once ASCII punctuation is
    dropped), or the next sentence starts with one (the splitter puts an emoji written after the period there)."""
    sentences = [
        sentence.translate(measure.DROP_PUNCTUATION).strip() for sentence in measure.split_sentences_by_rules(text)
    ]
    for position, sentence in enumerate(sentences):
        if not sentence:
            return False
        if _is_emoji(sentence[-1]) or _is_emoji(sentence[-2] if len(sentence) > 1 else sentence[-1]):
            continue
        if position == len(sentences) - 1:
            return False
        following = sentences[position + 1]
        if not following or not _is_emoji(following[0]):
            return False
    return True


TAGGER_DIR = Path(__file__).resolve().parent / "nltk_data" / "taggers" / "averaged_perceptron_tagger_eng"


@lru_cache(maxsize=1)
def english_tagger() -> Any:
    """NLTK's `PerceptronTagger` with the shipped English model (what `nltk.pos_tag` loads, no download)."""
    from nltk.tag.perceptron import PerceptronTagger

    tagger = PerceptronTagger(load=False)
    files = (f"averaged_perceptron_tagger_eng.{part}.json" for part in ("weights", "tagdict", "classes"))
    tagger.decode_json_params(json.loads((TAGGER_DIR / name).read_text(encoding="utf-8")) for name in files)
    return tagger


@instruction("words:start_verb")
def starts_with_verb(text: str) -> bool:
    """The first of NLTK's word tokens is tagged as a verb (`VB`, `VBD`, `VBG`, `VBN`, `VBP`, `VBZ`).

    As the reference, the whole response is tagged: a token's tag depends on the words around it.
    """
    tokens = measure.word_tokens(text)
    return bool(tokens) and "VB" in english_tagger().tag(tokens)[0][1]
