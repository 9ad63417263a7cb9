"""IF-RL prompts from any prompt set (`prepare-data --add-constraints ifeval|ifbench`), the way IF-RLVR
training data is built (IFEvalG / open-instruct): each prompt gets 1-3 verifiable constraints, drawn from a
set, with varied kwargs, phrased in natural language and appended to the prompt; a constraint that conflicts
with one already drawn is skipped (the conflict tables of IFEval's `instructions_registry` and IFBench's
training constraints). Every label is checked with the instruction verifier's `check_label` before it is
written. The base prompts are decontaminated against the benchmark of the set (`prepare.py`).

Sets: `ifeval` (IFEval's 25 instructions), `ifbench` (the 29 IFEvalG training constraints of IFBench), or
both, comma-separated.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cascade_cli.config.data import parse_count_range, parse_sets
from cascade_cli.errors import CascadeRunError, CascadeUsageError

SET_BENCHMARKS = {"ifeval": "ifeval", "ifbench": "ifbench"}  # decontaminated against by default
RELATIONS = ("at least", "less than")
LANGUAGES = {"es": "Spanish", "fr": "French", "de": "German", "it": "Italian", "pt": "Portuguese"}
END_PHRASES = ("Is there anything else I can help with?", "Let me know if you have additional questions.",
               "Any other questions?", "That is all.")  # fmt: skip
FALLBACK_WORDS = ("answer", "simple", "example", "reason", "detail", "clear", "people", "future", "idea")
FILLER_WORDS = ("very", "really", "basically", "actually", "thing", "stuff", "just", "literally")
PHRASES = ("Dance like nobody is watching you", "The early bird catches the worm", "Time flies when having fun",
           "All that glitters is not gold")  # fmt: skip
_STOP_TEXT = (
    "about above after again against because before being below between could doing during every having "
    "other their there these those through under until where which while would should shall might write "
    "please tell explain describe given following someone something without within things think"
)
_STOP = frozenset(_STOP_TEXT.split())


@dataclass
class Context:
    rng: random.Random
    prompt: str
    words: list[str]  # content words of the prompt (keywords come from the prompt's own topic)

    def word(self) -> str:
        return self.rng.choice(self.words or list(FALLBACK_WORDS))

    def words_n(self, n: int) -> list[str]:
        pool = sorted(set(self.words)) or list(FALLBACK_WORDS)
        return self.rng.sample(pool, min(n, len(pool)))

    def relation(self) -> str:
        return self.rng.choice(RELATIONS)


@dataclass(frozen=True)
class Constraint:
    id: str
    kwargs: Callable[[Context], dict[str, Any]]
    phrases: tuple[str, ...]  # str.format templates over the kwargs (lists joined as quoted words)
    conflicts: frozenset[str] = frozenset()
    fits: Callable[[str], bool] = lambda prompt: True  # whether the constraint makes sense for this prompt


def _none(ctx: Context) -> dict[str, Any]:
    return {}


def _c(cid: str, kwargs: Callable[[Context], dict[str, Any]], *phrases: str, conflicts: tuple[str, ...] = (),
       fits: Callable[[str], bool] | None = None) -> Constraint:  # fmt: skip
    return Constraint(cid, kwargs, phrases, frozenset(conflicts), fits or (lambda prompt: True))


def _two_numbers(ctx: Context, limit: int) -> tuple[int, int]:
    first = ctx.rng.randint(0, max(0, limit - 2))
    return first, ctx.rng.randint(first + 1, limit)


# -- IFEval's 25 (phrasings after IFEval's own templates, with variants) ---------------------------------------
KW, LEN, FMT, CASE = "keywords:", "length_constraints:", "detectable_format:", "change_case:"
IFEVAL = [
    _c(KW + "existence", lambda c: {"keywords": c.words_n(c.rng.randint(1, 2))},
       "Include the keywords {keywords} in the response.", "Make sure your answer uses the words {keywords}."),
    _c(KW + "frequency", lambda c: {"keyword": c.word(), "frequency": c.rng.randint(1, 4), "relation": c.relation()},
       "In your response, the word {keyword} should appear {relation} {frequency} times.",
       "Use the word {keyword} {relation} {frequency} times in your answer."),
    _c(KW + "forbidden_words", lambda c: {"forbidden_words": c.rng.sample(FILLER_WORDS, c.rng.randint(1, 3))},
       "Do not include keywords {forbidden_words} in the response.",
       "Avoid using {forbidden_words} anywhere in your answer."),
    _c(KW + "letter_frequency",
       lambda c: {"letter": c.rng.choice("abcdefghilmnoprstuwy"), "let_frequency": c.rng.randint(2, 12),
                  "let_relation": c.relation()},
       "In your response, the letter {letter} should appear {let_relation} {let_frequency} times.",
       "Make sure the letter {letter} appears {let_relation} {let_frequency} times in your answer."),
    _c("language:response_language", lambda c: {"language": c.rng.choice(sorted(LANGUAGES))},
       "Your ENTIRE response should be in {language_name} language, no other language is allowed.",
       "Please answer only in {language_name}, with no other language.",
       conflicts=(FMT + "multiple_sections", KW + "existence", KW + "frequency", KW + "forbidden_words",
                  "startend:end_checker", CASE + "english_capital", CASE + "english_lowercase")),
    _c(CASE + "english_capital", _none,
       "Your entire response should be in English, and in all capital letters.",
       "Write your whole answer in English using only CAPITAL LETTERS."),
    _c(CASE + "english_lowercase", _none,
       "Your entire response should be in English, and in all lowercase letters. No capital letters are allowed.",
       "Answer in English using only lowercase letters; do not use any capital letters.",
       conflicts=(CASE + "english_capital",)),
    _c(CASE + "capital_word_frequency",
       lambda c: {"capital_frequency": c.rng.randint(1, 10), "capital_relation": c.relation()},
       "In your response, words with all capital letters should appear {capital_relation} {capital_frequency} times.",
       "Use words written in ALL CAPS {capital_relation} {capital_frequency} times.",
       conflicts=(CASE + "english_lowercase", CASE + "english_capital")),
    _c(LEN + "number_sentences", lambda c: {"num_sentences": c.rng.randint(2, 10), "relation": c.relation()},
       "Your response should contain {relation} {num_sentences} sentences.",
       "Answer with {relation} {num_sentences} sentences."),
    _c(LEN + "number_words", lambda c: {"num_words": c.rng.choice((30, 50, 80, 100, 150, 200, 300)),
                                        "relation": c.relation()},
       "Answer with {relation} {num_words} words.", "Your response should contain {relation} {num_words} words."),
    _c(LEN + "number_paragraphs", lambda c: {"num_paragraphs": c.rng.randint(2, 5)},
       "There should be {num_paragraphs} paragraphs. Paragraphs are separated with the markdown divider: ***",
       "Write exactly {num_paragraphs} paragraphs, separated from each other by a line with ***.",
       conflicts=(LEN + "nth_paragraph_first_word", LEN + "number_sentences")),
    _c(LEN + "nth_paragraph_first_word",
       lambda c: (lambda n: {"num_paragraphs": n, "nth_paragraph": c.rng.randint(1, n), "first_word": c.word()})(
           c.rng.randint(2, 5)),
       "There should be {num_paragraphs} paragraphs. Paragraphs and only paragraphs are separated with each other "
       "by two new lines. Paragraph {nth_paragraph} must start with the word {first_word}.",
       conflicts=(LEN + "number_paragraphs",)),
    _c("detectable_content:number_placeholders", lambda c: {"num_placeholders": c.rng.randint(1, 4)},
       "The response must contain at least {num_placeholders} placeholders represented by square brackets, "
       "such as [address].",
       "Include at least {num_placeholders} placeholders in square brackets, like [name]."),
    _c("detectable_content:postscript", lambda c: {"postscript_marker": c.rng.choice(("P.S.", "P.P.S"))},
       "At the end of your response, please explicitly add a postscript starting with {postscript_marker}",
       "End with a postscript that starts with {postscript_marker}"),
    _c(FMT + "number_bullet_lists", lambda c: {"num_bullets": c.rng.randint(2, 5)},
       "Your answer must contain exactly {num_bullets} bullet points. Use the markdown bullet points such as:\n"
       "* This is point 1.\n* This is point 2",
       "Give exactly {num_bullets} bullet points, written in markdown as lines starting with * ."),
    _c(FMT + "constrained_response", _none,
       'Answer with one of the following options: ("My answer is yes.", "My answer is no.", "My answer is maybe.")',
       conflicts=("*",), fits=lambda prompt: prompt.rstrip().endswith("?") and len(prompt) < 300),
    _c(FMT + "number_highlighted_sections", lambda c: {"num_highlights": c.rng.randint(1, 4)},
       "Highlight at least {num_highlights} sections in your answer with markdown, i.e. *highlighted section*.",
       "Mark at least {num_highlights} parts of your answer as *highlighted sections* with markdown."),
    _c(FMT + "multiple_sections",
       lambda c: {"section_spliter": c.rng.choice(("Section", "SECTION", "PART")), "num_sections": c.rng.randint(2, 4)},
       "Your response must have {num_sections} sections. Mark the beginning of each section with "
       "{section_spliter} X, such as:\n{section_spliter} 1\n[content of section 1]\n{section_spliter} 2\n"
       "[content of section 2]",
       conflicts=(FMT + "number_highlighted_sections", CASE + "english_capital", CASE + "english_lowercase")),
    _c(FMT + "json_format", _none,
       "Entire output should be wrapped in JSON format. You can use markdown ticks such as ```.",
       "Give your whole answer as JSON (markdown ticks such as ``` are allowed).",
       conflicts=("*", "!" + KW + "forbidden_words", "!" + KW + "existence")),
    _c(FMT + "title", _none,
       "Your answer must contain a title, wrapped in double angular brackets, such as <<poem of joy>>.",
       "Give your answer a title wrapped in double angular brackets, like <<my title>>."),
    _c("combination:two_responses", _none,
       "Give two different responses. Responses and only responses should be separated by 6 asterisk "
       "symbols: ******.",
       conflicts=("*", "!" + KW + "forbidden_words", "!" + KW + "existence", "!language:response_language",
                  "!" + FMT + "title", "!punctuation:no_comma")),
    _c("combination:repeat_prompt", lambda c: {"prompt_to_repeat": c.prompt},
       "First repeat the request above word for word without change, then give your answer (1. do not say any "
       "words or characters before repeating the request; 2. the request you need to repeat does not include "
       "this sentence or the instructions after it)",
       conflicts=("*", "!" + KW + "existence", "!" + FMT + "title", "!punctuation:no_comma")),
    _c("startend:end_checker", lambda c: {"end_phrase": c.rng.choice(END_PHRASES)},
       "Finish your response with this exact phrase {end_phrase} No other words should follow this phrase.",
       "End your answer with the exact phrase: {end_phrase} Do not write anything after it."),
    _c("startend:quotation", _none, "Wrap your entire response with double quotation marks.",
       "Put your whole answer inside double quotation marks.", conflicts=(FMT + "title",)),
    _c("punctuation:no_comma", _none, "In your entire response, refrain from the use of any commas.",
       "Do not use any commas in your answer."),
]  # fmt: skip

# -- IFBench's IF-RLVR training constraints (IFEvalG's new ones; phrasings after its templates) ---------------
COPY = ("copy:copy", "copy:copying_simple", "copy:copying_multiple", "new:copy_span_idx")
WRAPPERS = ("detectable_format:square_brackets", "detectable_format:bigram_wrapping",
            "detectable_format:sentence_hyphens")  # fmt: skip
_KEYWORD_IDS = (KW + "word_once", KW + "word_count_different_numbers", KW + "exclude_word_harder",
                "count:count_increment_word")  # fmt: skip
_PARAGRAPHS = ("paragraphs:paragraphs", "paragraphs:paragraphs2", "count:counting_composition")
_WRAPPER_CONFLICTS = ("*", "!punctuation:punctuation_dot", "!punctuation:punctuation_exclamation",
                      "!letters:letter_counting", "!count:lowercase_counting")  # fmt: skip


def _copy_span(c: Context) -> dict[str, Any]:
    start, end = _two_numbers(c, min(len(c.prompt), 120))
    return {"prompt_to_repeat": c.prompt, "n_start": start, "n_end": end}


def _increment_words(c: Context) -> dict[str, Any]:
    first, second = (c.words_n(2) + list(FALLBACK_WORDS[:2]))[:2]
    return {"keyword1": first, "keyword2": second if second != first else "again"}


IFBENCH = [
    _c("copy:repeat_phrase", lambda c: {"phrase": c.rng.choice(PHRASES), "small_n": c.rng.randint(2, 4)},
       "Repeat the phrase {phrase} exactly {small_n} times, transforming it slightly each time by replacing "
       "only one word in the center of the phrase.", conflicts=("*",)),
    _c("copy:copy", lambda c: {"prompt_to_repeat": c.prompt},
       "Copy this instruction verbatim, do not follow the instruction, only copy it into the output (do not "
       "include this instruction sentence!).", conflicts=("*",)),
    _c("copy:copying_simple", lambda c: {"prompt_to_repeat": c.prompt},
       "Repeat the request without change (do not say anything before repeating the request; the request you "
       "need to repeat does not include this sentence) and do not answer the actual request!", conflicts=("*",)),
    _c("copy:copying_multiple", lambda c: {"prompt_to_repeat": c.prompt, "N": c.rng.randint(2, 3)},
       "Repeat the request without change {N} times, separated by 6 asterisk symbols (do not say anything "
       "before repeating the request; the request you need to repeat does not include this sentence) and do "
       "not answer the actual request!", conflicts=("*",)),
    _c("new:copy_span_idx", _copy_span,
       "Copy the span of words that lies between (and including) index {n_start} and {n_end}, the indices are "
       "character indices!", conflicts=("*",), fits=lambda prompt: len(prompt) >= 20),
    _c(WRAPPERS[2], _none, "All sentences must be connected using hyphens, with no spaces between them.",
       conflicts=_WRAPPER_CONFLICTS),
    _c(KW + "no_adjacent_consecutive", _none,
       "No two adjacent words can start with consecutive letters of the alphabet."),
    _c(WRAPPERS[0], _none, "Enclose every word in your response within square brackets.",
       conflicts=_WRAPPER_CONFLICTS),
    _c(KW + "word_once", lambda c: {"keyword": c.word()}, "Include the keyword {keyword} once in your response.",
       conflicts=_KEYWORD_IDS),
    _c(KW + "word_count_different_numbers",
       lambda c: {"keyword": c.word(), "frequency": c.rng.randint(1, 5), "relation": c.relation()},
       "In your response, the word {keyword} should appear {relation} {frequency} times.", conflicts=_KEYWORD_IDS),
    _c(KW + "exclude_word_harder", lambda c: {"keyword": c.word()},
       "Do not include the keyword {keyword} in the response.", conflicts=_KEYWORD_IDS),
    _c("paragraphs:paragraphs", _none, "There should be 2 paragraphs. Paragraphs and only paragraphs are "
       "separated with each other by the markdown divider: ***", conflicts=_PARAGRAPHS),
    _c("paragraphs:paragraphs2", _none, "There should be 2 paragraphs. Paragraphs and only paragraphs are "
       "separated with each other by two line breaks.", conflicts=_PARAGRAPHS),
    _c("first_word:first_word_sent", lambda c: {"first_word": c.word()},
       "The first word of each sentence should be the word {first_word}.",
       conflicts=("first_word:first_word_answer",)),
    _c("first_word:first_word_answer", lambda c: {"first_word": c.word()},
       "The first word of your response should be the word {first_word}.", conflicts=("keywords:start_end",)),
    _c("last_word:last_word_sent", lambda c: {"last_word": c.word()},
       "The last word of each sentence, before punctuation, should be the word {last_word}.",
       conflicts=("last_word:last_word_answer",)),
    _c("last_word:last_word_answer", lambda c: {"last_word": c.word()},
       "The last word of your response should be the word {last_word}.", conflicts=("keywords:start_end",)),
    _c(WRAPPERS[1], _none, "Wrap every word bigram in double angular brackets, such as <<I am>> <<at home>> "
       "<<with my>> <<cute dog>>.", conflicts=_WRAPPER_CONFLICTS),
    _c("punctuation:punctuation_dot", _none,
       "In your entire response, refrain from the use of . (i.e. dots) as punctuation and in general.",
       conflicts=("count:counting_composition", "first_word:first_word_sent", "last_word:last_word_sent",
                  KW + "keyword_specific_position")),
    _c("punctuation:punctuation_exclamation", _none,
       "In your entire response, refrain from the use of ! (i.e. exclamation marks) as punctuation and in general."),
    _c("count:lowercase_counting", lambda c: {"N": c.rng.choice((5, 10, 20, 40))},
       "In your response, all lowercase words should appear at most {N} times."),
    _c("letters:letter_counting", lambda c: {"N": c.rng.choice((50, 100, 200, 400)), "relation": c.relation()},
       "Answer with {relation} {N} letters."),
    _c("letters:letter_counting2",
       lambda c: {"letter": c.rng.choice("abcdeilmnorst"), "let_frequency": c.rng.randint(2, 10),
                  "let_relation": c.relation()},
       "In your response, the letter {letter} should appear {let_relation} {let_frequency} times."),
    _c("count:counting_composition", lambda c: {"n_sent": c.rng.randint(2, 3), "n_words": c.rng.randint(5, 10)},
       "Write 3 paragraphs, delimited by the markdown divider: * * *, with exactly {n_sent} sentences each, "
       "with exactly {n_words} words in each sentence.", conflicts=_PARAGRAPHS),
    _c("count:count_unique", _none, "Only use unique words in your response, no word should be repeated!",
       conflicts=(*_KEYWORD_IDS, *_PARAGRAPHS, "letters:letter_counting")),
    _c("count:count_increment_word", _increment_words,
       "Include the keyword {keyword1} once in your response, and the keyword {keyword2} twice.",
       conflicts=_KEYWORD_IDS),
    _c(KW + "palindrome", _none, "Include a palindrome in your response."),
    _c(KW + "keyword_specific_position",
       lambda c: {"keyword": c.word(), "n": c.rng.randint(1, 3), "m": c.rng.randint(1, 8)},
       "Include the keyword {keyword} in sentence number {n} of your response, as word number {m} of that "
       "sentence."),
    _c(KW + "start_end", _none, "Start and end your response with the same word (do not write anything after "
       "the last word, not even punctuation)."),
]  # fmt: skip
# Between the two sets (used together): instructions on the same property of the whole text.
CROSS_CONFLICTS = {
    "count:lowercase_counting": (CASE + "english_lowercase",),
    "paragraphs:paragraphs": (LEN + "number_paragraphs", LEN + "nth_paragraph_first_word"),
    "paragraphs:paragraphs2": (LEN + "number_paragraphs", LEN + "nth_paragraph_first_word"),
    "count:counting_composition": (LEN + "number_paragraphs", LEN + "nth_paragraph_first_word",
                                   LEN + "number_sentences", LEN + "number_words"),
    "punctuation:punctuation_dot": ("detectable_content:postscript", LEN + "number_sentences"),
    "first_word:first_word_answer": ("startend:quotation", FMT + "title", LEN + "nth_paragraph_first_word"),
    "last_word:last_word_answer": ("startend:end_checker", "detectable_content:postscript", "startend:quotation"),
    KW + "start_end": ("startend:end_checker", "detectable_content:postscript", "startend:quotation", FMT + "title"),
    "letters:letter_counting": (LEN + "number_words",),
    "letters:letter_counting2": (KW + "letter_frequency",),
}  # fmt: skip
BY_SET = {"ifeval": IFEVAL, "ifbench": IFBENCH}


def with_benchmark_decontamination(config: Any) -> Any:
    """The prepare-data config with each constraint set's benchmark added to `decontaminate_against`."""
    import dataclasses

    against = list(config.decontaminate_against)
    against += [SET_BENCHMARKS[name] for name in parse_sets(config.add_constraints) if SET_BENCHMARKS[name] not in against]
    return dataclasses.replace(config, decontaminate_against=against)


def conflict_table(constraints: list[Constraint]) -> dict[str, set[str]]:
    """id -> the ids it cannot be combined with, made symmetric. `*` = every id; `!ID` = except ID."""
    ids = {c.id for c in constraints}
    table: dict[str, set[str]] = {cid: {cid} for cid in ids}
    for constraint in constraints:
        names = set(constraint.conflicts) | set(CROSS_CONFLICTS.get(constraint.id, ()))
        blocked = set(ids) if "*" in names else {name for name in names if name in ids}
        blocked -= {name[1:] for name in names if name.startswith("!")}
        blocked.add(constraint.id)
        for other in blocked:
            table[constraint.id].add(other)
            table[other].add(constraint.id)
    return table


def _fields(kwargs: dict[str, Any]) -> dict[str, Any]:
    fields = dict(kwargs)
    for key, value in kwargs.items():
        if isinstance(value, list):
            quoted = [f'"{item}"' for item in value]
            fields[key] = quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " and " + quoted[-1]
        elif key in ("keyword", "first_word", "last_word", "keyword1", "keyword2", "letter", "phrase"):
            fields[key] = f'"{value}"'
    if "language" in kwargs:
        fields["language_name"] = LANGUAGES[kwargs["language"]]
    return fields


def content_words(text: str) -> list[str]:
    return [w for w in re.findall(r"[a-z]{5,12}", text.lower()) if w not in _STOP]


def draw_constraints(
    prompt: str, constraints: list[Constraint], table: dict[str, set[str]], count: int, rng: random.Random
) -> list[tuple[Constraint, dict[str, Any], str]]:
    """Up to `count` non-conflicting constraints for `prompt`: (constraint, kwargs, phrase)."""
    ctx = Context(rng, prompt, content_words(prompt))
    chosen: list[tuple[Constraint, dict[str, Any], str]] = []
    blocked: set[str] = set()
    for constraint in rng.sample(constraints, len(constraints)):
        if len(chosen) == count:
            break
        if constraint.id in blocked or not constraint.fits(prompt):
            continue
        kwargs = constraint.kwargs(ctx)
        phrase = rng.choice(constraint.phrases).format(**_fields(kwargs))
        chosen.append((constraint, kwargs, phrase))
        blocked |= table[constraint.id]
    # A "repeat the request" instruction reads first: the request it repeats is the text above it.
    chosen.sort(key=lambda item: "prompt_to_repeat" not in item[1])
    return chosen


def attach_constraints(
    rows: list[dict[str, Any]], sets: str, per_prompt: str, seed: int
) -> list[dict[str, Any]]:
    """Prompt rows -> IF rows: the prompt plus the constraints' phrases, the label their ids and kwargs."""
    from cascade_cli.verifiers.instruction import InstructionVerifier

    constraints = [c for name in parse_sets(sets) for c in BY_SET[name]]
    table = conflict_table(constraints)
    low, high = parse_count_range(per_prompt)
    verifier = InstructionVerifier()
    rng = random.Random(f"constraints:{seed}")
    result = []
    for row in rows:
        prompt = row.get("prompt")
        if not isinstance(prompt, str) or not prompt.strip():
            raise CascadeUsageError(
                f"--add-constraints: row {row.get('id')}: expected a prompt row with a text prompt; "
                f"found a {row.get('domain')} row with {type(prompt).__name__} prompt"
            )
        drawn = draw_constraints(prompt.strip(), constraints, table, rng.randint(low, high), rng)
        label = {"instruction_id_list": [c.id for c, _, _ in drawn], "kwargs": [kwargs for _, kwargs, _ in drawn]}
        problem = verifier.check_label(label)
        if problem:  # a sampler out of its bounds: a bug here, never the user's
            raise CascadeRunError(f"--add-constraints: built an invalid label for row {row.get('id')}: {problem}")
        text = prompt.strip() + "\n\n" + " ".join(phrase for _, _, phrase in drawn)
        result.append({**row, "domain": "if", "prompt": text, "label": label, "mode": "no_think"})
    return result
