"""Code-switch detection: does a response drift into another script or language than its prompt's?

Nemotron-Cascade penalises code-switching per stage (math -1, code 0, RLHF lowest-in-batch - 10). Two
checks, both plain regexes over the text with code, LaTeX and URLs removed:

1. Script: letters of a script the prompt does not use (CJK, Cyrillic, Arabic, Hangul, ...). Single Greek
   letters are math (alpha, pi, Sigma), not language; one Han/Kana/Hangul character is already a word.
2. Latin-script language: sentences whose function words are clearly another language's (French, Spanish,
   German, Portuguese, Italian, Dutch) than the prompt's, or, for an English prompt, sentences made of
   accented words with no English function words (Vietnamese, ...). Loanwords and names (café, Poincaré)
   inside English sentences do not count.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import asdict, dataclass, field, replace
from typing import Any

# Script name -> character class. Anything not listed (digits, punctuation, math symbols) is neutral.
_SCRIPT_RANGES: dict[str, str] = {
    "latin": "A-Za-z\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u024f\u1e00-\u1eff",
    "greek": "\u0370-\u03ff\u1f00-\u1fff",
    "cyrillic": "\u0400-\u052f\u1c80-\u1c8f\u2de0-\u2dff\ua640-\ua69f",
    "armenian": "\u0530-\u058f",
    "hebrew": "\u0590-\u05ff",
    "arabic": "\u0600-\u06ff\u0750-\u077f\u08a0-\u08ff\ufb50-\ufdff\ufe70-\ufefc",
    "indic": "\u0900-\u0dff",
    "thai": "\u0e00-\u0e7f",
    "lao": "\u0e80-\u0eff",
    "tibetan": "\u0f00-\u0fff",
    "georgian": "\u10a0-\u10ff",
    "hangul": "\u1100-\u11ff\u3130-\u318f\uac00-\ud7af",
    "kana": "\u3040-\u30ff\u31f0-\u31ff\uff66-\uff9d",
    "han": "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002fa1f",
}
_IDEOGRAPHIC = frozenset({"han", "kana", "hangul"})
_SCRIPT_RUN = re.compile("|".join(f"(?P<{name}>[{chars}]+)" for name, chars in _SCRIPT_RANGES.items()))

# Removed before counting: code blocks, inline code, URLs, LaTeX commands (\frac, \alpha, \text).
_NOISE = re.compile(r"```.*?(?:```|\Z)|`[^`\n]*`|https?://\S+|\\[A-Za-z]+", re.DOTALL)


def _word_set(words: str) -> frozenset[str]:
    return frozenset(words.split())


# Function words that are NOT also English words (so "die", "also", "per", "in", "plus" are left out).
_FUNCTION_WORDS: dict[str, frozenset[str]] = {
    "en": _word_set(
        "the is are was were of and to we that this it for with be by from which have has not then so "
        "thus therefore since let can will would should there their these those what when where how "
        "into its our us you your they them but or if an at on as"
    ),
    "fr": _word_set(
        "le la les de des en est une du et pour avec dans sur que qui nous vous sont pas cette mais donc être "
        "très aussi comme ils elle nous avons sont leur où ainsi alors ça cela peut au aux"
    ),
    "es": _word_set(
        "el la los las de en es una por con para que como pero más está son sus entonces tenemos esto esta "
        "porque cuando donde también muy podemos hay sea al lo"
    ),
    "de": _word_set(
        "der das und ist nicht mit ein eine dem zu von auf für wir sich auch dass oder wenn aber "
        "dann werden wird ich sie es sind haben nach bei"
    ),
    "pt": _word_set(
        "não de uma com para os das dos então temos são mas isso também que é do da em um como pelo pela seja"
    ),
    "it": _word_set(
        "il della che sono una gli con questo quindi abbiamo anche perché della delle degli è di "
        "un del nel alla sia"
    ),
    "nl": _word_set("het een niet van dat zijn voor ook maar wij dus deze worden wordt heeft kunnen"),
}
_LOANWORDS = _word_set(
    "café cafés naïve naïvely naïveté résumé résumés façade déjà vu fiancé fiancée cliché clichés "
    "élan señor señora jalapeño piñata über doppelgänger protégé rôle coöperate touché soirée "
    "crème brûlée entrée entrées à la carte voilà déjà"
)
_WORD = re.compile(r"[A-Za-z\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u024f\u1e00-\u1eff]+")
_SENTENCE_END = re.compile(r"[.!?;:\n]+")


@dataclass(frozen=True)
class CodeSwitchResult:
    switched: bool
    reason: str
    prompt_script: str
    prompt_language: str | None
    foreign_fraction: float
    foreign_scripts: dict[str, int] = field(default_factory=dict)
    foreign_language: str | None = None
    samples: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["samples"] = list(self.samples)
        return data


def _clean(text: str) -> str:
    return _NOISE.sub(" ", text)


def script_letters(text: str) -> Counter[str]:
    """Letters per script in `text` (already cleaned)."""
    counts: Counter[str] = Counter()
    for match in _SCRIPT_RUN.finditer(text):
        counts[match.lastgroup or ""] += len(match.group(0))
    return counts


def _language_hits(words: list[str]) -> Counter[str]:
    hits: Counter[str] = Counter()
    for word in words:
        for language, function_words in _FUNCTION_WORDS.items():
            if word in function_words:
                hits[language] += 1
    return hits


def guess_latin_language(text: str) -> str | None:
    """The language whose function words dominate a Latin-script text, or None when there is no evidence."""
    hits = _language_hits([word.lower() for word in _WORD.findall(_clean(text))])
    if not hits:
        return None
    language, count = hits.most_common(1)[0]
    return language if count >= 2 or len(hits) == 1 else None


def _foreign_script_runs(text: str, allowed: set[str]) -> tuple[Counter[str], list[str]]:
    counts: Counter[str] = Counter()
    samples: list[str] = []
    for match in _SCRIPT_RUN.finditer(text):
        script = match.lastgroup or ""
        run = match.group(0)
        if script in allowed or (script == "greek" and len(run) <= 2):
            continue
        counts[script] += len(run)
        if len(samples) < 5:
            samples.append(run[:20])
    return counts, samples


def _foreign_latin_sentences(text: str, prompt_language: str) -> tuple[str | None, int, list[str]]:
    """(language, words in foreign sentences, samples) for Latin-script text against the prompt's language."""
    words_by_language: Counter[str] = Counter()
    samples: list[str] = []
    for sentence in _SENTENCE_END.split(text):
        words = [word.lower() for word in _WORD.findall(sentence)]
        if len(words) < 3:
            continue
        hits = _language_hits(words)
        own = hits.get(prompt_language, 0)
        foreign = [(count, language) for language, count in hits.items() if language != prompt_language]
        language = None
        if foreign:
            count, best = max(foreign)
            if count >= 2 and count > 2 * own:
                language = best
        if language is None and prompt_language == "en" and own == 0:
            accented = [word for word in words if not word.isascii() and word not in _LOANWORDS]
            if len(accented) >= 2 and len(accented) * 3 >= len(words):
                language = "other"
        if language is not None:
            words_by_language[language] += len(words)
            if len(samples) < 3:
                samples.append(sentence.strip()[:60])
    if not words_by_language:
        return None, 0, samples
    language, _ = words_by_language.most_common(1)[0]
    return language, sum(words_by_language.values()), samples


def detect_code_switch(
    prompt: str,
    response: str,
    min_foreign_units: int = 2,
    min_foreign_sentence_words: int = 4,
) -> CodeSwitchResult:
    """Whether `response` uses a script or (Latin-script) language that `prompt` does not.

    A foreign script counts once `min_foreign_units` is reached, where a Han/Kana/Hangul character counts 2
    and any other letter 1 (so one stray Chinese character flags, one stray Cyrillic letter does not).
    """
    prompt_clean, response_clean = _clean(prompt), _clean(response)
    prompt_counts = script_letters(prompt_clean)
    prompt_script = prompt_counts.most_common(1)[0][0] if prompt_counts else "latin"
    allowed = {script for script, count in prompt_counts.items() if count >= 1} | {prompt_script}
    if "kana" in allowed:
        allowed.add("han")  # Japanese mixes kana and kanji
    if prompt_script != "latin":
        allowed.add("latin")  # variables, units and code names; a full switch is caught by dominance below
    response_counts = script_letters(response_clean)
    total_letters = sum(response_counts.values()) or 1
    foreign, samples = _foreign_script_runs(response_clean, allowed)
    units = sum(count * (2 if script in _IDEOGRAPHIC else 1) for script, count in foreign.items())
    prompt_language = guess_latin_language(prompt) if prompt_script == "latin" else None
    if prompt_script == "latin" and prompt_language is None:
        prompt_language = "en"
    by_script = CodeSwitchResult(  # the verdict on scripts alone; also the final "not switched" one
        units >= min_foreign_units,
        f"response uses script(s) the prompt does not: {', '.join(sorted(foreign))}",
        prompt_script,
        prompt_language,
        round(sum(foreign.values()) / total_letters, 4),
        dict(foreign),
        None,
        tuple(samples),
    )
    if by_script.switched:
        return by_script
    response_script = response_counts.most_common(1)[0][0] if response_counts else prompt_script
    if (
        prompt_script != "latin"
        and response_script == "latin"
        and response_counts["latin"] > 3 * max(1, response_counts[prompt_script])
    ):
        return CodeSwitchResult(
            True,
            f"prompt is {prompt_script} but the response is mostly latin script",
            prompt_script,
            prompt_language,
            round(response_counts["latin"] / total_letters, 4),
            {"latin": response_counts["latin"]},
        )
    if prompt_script == "latin" and prompt_language is not None:
        language, foreign_words, sentences = _foreign_latin_sentences(response_clean, prompt_language)
        if language is not None and foreign_words >= min_foreign_sentence_words:
            all_words = max(1, len(_WORD.findall(response_clean)))
            return CodeSwitchResult(
                True,
                f"latin-script text in another language ({language}) than the prompt ({prompt_language})",
                prompt_script,
                prompt_language,
                round(foreign_words / all_words, 4),
                {},
                language,
                tuple(sentences),
            )
    return replace(by_script, reason="same script and language as the prompt")
