"""IFBench constraints behind the `if` verifier: the 29 IF-RLVR training ones and the rule-checkable OOD ones."""

from __future__ import annotations

import json
import string
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from cascade_cli.verifiers import verify_batch
from cascade_cli.verifiers.instruction import evaluate, known_ids
from cascade_cli.verifiers.instruction.ifbench import OOD_IDS, SKIPPED_OOD, TRAINING_IDS
from cascade_cli.verifiers.instruction.ifbench_custom import NORTHERN_CAPITALS

PROMPT = "Write a haiku about rain."

# id -> (kwargs, a response that follows it, a response that does not)
TRAINING: dict[str, tuple[dict[str, Any], str, str]] = {
    "copy:repeat_phrase": (
        {"phrase": "the quick brown fox jumps", "small_n": 2},
        "the quick red fox jumps and the slow brown fox jumps",
        "the quick brown fox jumps and the quick brown fox jumps",
    ),
    "copy:copy": ({"prompt_to_repeat": PROMPT}, "write a haiku about rain.", "Rain falls softly."),
    "new:copy_span_idx": (
        {"prompt_to_repeat": PROMPT, "n_start": 8, "n_end": 13},
        "haiku",
        "a haiku",
    ),
    "detectable_format:sentence_hyphens": ({}, "I run.-You walk.-We rest.", "I run. - You walk."),
    "keywords:no_adjacent_consecutive": ({}, "cats bite owls", "apples bloom"),
    "detectable_format:square_brackets": ({}, "[Every] [word] [wrapped]", "[Every] word"),
    "keywords:word_once": ({"keyword": "rain"}, "Rain falls.", "rain and rain"),
    "keywords:word_count_different_numbers": (
        {"keyword": "sun", "frequency": 2, "relation": "less than"},
        "the sun",
        "sun sun sun",
    ),
    "keywords:exclude_word_harder": ({"keyword": "cloud"}, "clouds drift by", "a cloud drifts"),
    "paragraphs:paragraphs": ({}, "one\n***\ntwo", "one\n***\ntwo\n***\nthree"),
    "paragraphs:paragraphs2": ({}, "one\n\ntwo", "one\n\n\n\ntwo"),
    "first_word:first_word_sent": (
        {"first_word": "rain"},
        "Rain falls. Rain stops.",
        "Rain falls. Sun rises.",
    ),
    "first_word:first_word_answer": ({"first_word": ["Today"]}, "today is fine", "It is today"),
    "last_word:last_word_sent": ({"last_word": "now"}, "Go now! Stop now.", "Go now. Stop later."),
    "last_word:last_word_answer": ({"last_word": "end"}, "This is the END!", "The end is near"),
    "detectable_format:bigram_wrapping": ({}, "<<I am>> <<at home>>", "<<I am>> at home"),
    "copy:copying_simple": ({"prompt_to_repeat": PROMPT}, " Write a haiku about rain. ", "Write a haiku."),
    "copy:copying_multiple": (
        {"prompt_to_repeat": PROMPT, "N": 2},
        f"{PROMPT}\n******\n{PROMPT}",
        f"{PROMPT}\n******\n{PROMPT}\n******\n{PROMPT}",
    ),
    "punctuation:punctuation_dot": ({}, "No dots here", "A dot."),
    "punctuation:punctuation_exclamation": ({}, "Calm words.", "Wow!"),
    "count:lowercase_counting": ({"N": 2}, "Only TWO lowercase Words here", "one two three"),
    "letters:letter_counting": ({"N": 5, "relation": "at least"}, "abcde", "ab cd"),
    "letters:letter_counting2": (
        {"letter": "r", "let_frequency": 2, "let_relation": "at least"},
        "Rain returns",
        "Sun",
    ),
    "count:counting_composition": (  # NLTK tokens: the final period counts as a word
        {"n_sent": 2, "n_words": 3},
        "Birds sing. Dogs bark.\n***\nCats purr. Cows moo.\n***\nFish swim. Bees buzz.",
        "Birds sing loudly. Dogs bark.\n***\nCats purr. Cows moo.\n***\nFish swim. Bees buzz.",
    ),
    "count:count_unique": ({}, "every word differs here", "the cat saw the dog"),
    "count:count_increment_word": (
        {"keyword1": "sun", "keyword2": "moon"},
        "sun, moon and moon",
        "sun and moon",
    ),
    "keywords:palindrome": ({}, "a racecar went by", "no palindromes here"),
    "keywords:keyword_specific_position": (
        {"keyword": "rain", "n": 2, "m": 3},
        "It is wet. I like rain a lot.",
        "It is wet. I love the rain.",
    ),
    "keywords:start_end": ({}, "Rain falls and falls again, rain", "Rain falls."),
}

OOD: dict[str, tuple[dict[str, Any], str, str]] = {
    "count:word_count_range": ({"min_words": 2, "max_words": 4}, "one two three", "one"),
    "count:unique_word_count": ({"N": 3}, "Red, green; blue.", "red red red"),
    "ratio:sentence_type": ({}, "I see. You see. Do we?", "I see. Do we? Do you?"),
    "ratio:sentence_balance": ({}, "I see. Do we? Wow!", "I see. I know."),
    "count:conjunctions": ({"small_n": 2}, "Tea and cake, but no coffee.", "Tea and cake and pie."),
    "ratio:overlap": (
        {"reference_text": "the quick brown fox", "percentage": 100},
        "quick brown",
        "lazy dog sleeps",
    ),
    "count:numbers": ({"N": 2}, "I have 3.5 apples and 4 pears.", "I have 3 apples."),
    "words:alphabet": ({}, "Zebras always bite.", "Zebras bite always."),
    "words:vowel": ({}, "A cat sat on a mat", "A cat sat on a mat under the big tree"),
    "words:consonants": ({}, "strong black cats", "strong cat"),
    "sentence:alliteration_increment": (
        {},
        "Big bears roam. Silly snakes slide slowly.",
        "Silly snakes slide slowly. Big bears roam.",
    ),
    "words:palindrome": (
        {},
        "level radar civic kayak rotor refer madam stats tenet sagas",
        "level radar civic kayak",
    ),
    "count:punctuation": ({}, "Hi, you. Really?! Yes; ok: fine! Why?", "Hi, you. Really?! Yes; ok: fine!"),
    "format:parentheses": ({}, "(a [b {c (d [e])}])", "(a [b {c}])"),
    "format:quotes": ({}, 'He said "she said \'they said "hi"\'"', 'He said "hi"'),
    "words:prime_lengths": ({}, "an owl", "a tiny owl"),
    "format:newline": ({}, "Each\nword\nalone", "Two words\nhere"),
    "ratio:sentence_words": ({}, "Cats nap. Dogs run. Owls fly.", "Cats nap. Dogs run fast. Owls fly."),
    "count:words_japanese": ({"N": 2}, "I 猫 like 犬", "I like cats"),
    "words:repeats": ({"small_n": 2}, "go go stop", "go go go"),
    "sentence:keyword": ({"word": "rain", "N": 2}, "Sun today. Rain tomorrow.", "Rain today. Sun tomorrow."),
    "count:pronouns": ({"N": 3}, "I told her that she/her was right.", "The cat sat."),
    "words:last_first": ({}, "I love rain. Rain loves me.", "I love rain. Sun loves me."),
    "words:paragraph_last_first": ({}, "Rain falls on rain.\nSun is sun", "Rain falls.\nSun is sun"),
    "sentence:increment": ({"small_n": 1}, "I run. You run fast. We all run fast.", "I run. You run."),
    "words:no_consecutive": ({}, "red blue green", "red rose blooms"),
    "format:line_indent": ({}, "a\n  b\n    c", "a\n  b\n  c"),
    "format:quote_unquote": ({}, '"To be" is a famous line.', 'He said "to be"'),
    "format:list": ({"sep": "->"}, "-> one\n-> two", "-> one"),
    "format:thesis": ({}, "<i>Rain is good.</i> Because plants grow.", "<i>Rain is good.</i>"),
    "format:sub-bullets": ({}, "* Fruit\n - apple\n* Veg\n - kale", "* Fruit\n - apple\n* Veg"),
    "format:no_bullets_bullets": (
        {},
        "I like fruit. I like veg.\n* apple\n* kale",
        "I like fruit.\n* apple\n* kale",
    ),
    "count:keywords_multiple": (
        {"keyword1": "a1", "keyword2": "b2", "keyword3": "c3", "keyword4": "d4", "keyword5": "e5"},
        "a1 b2 b2 c3 c3 c3 d4 d4 d4 d4 d4 e5 e5 e5 e5 e5 e5 e5",
        "a1 b2 c3 d4 e5",
    ),
    "words:keywords_specific_position": (
        {"keyword": "rain", "n": 1, "m": 2},
        '"Cold, rain falls.',
        "Cold falls rain.",
    ),
    "words:words_position": (
        {"keyword": "rain"},
        "The rain falls and rain ends.",
        "The sun falls and rain ends.",
    ),
    "repeat:repeat_change": ({"prompt_to_repeat": PROMPT}, "Compose a haiku about rain.", PROMPT),
    "repeat:repeat_span": (
        {"prompt_to_repeat": PROMPT, "n_start": 8, "n_end": 12},
        "HAIKU",
        "a haiku",
    ),
    "format:title_case": ({}, "The Rain In Spain", "The rain in Spain"),
    "format:output_template": (
        {},
        "My Answer: yes\nMy Conclusion: sure\nFuture Outlook: bright",
        "My Answer: yes",
    ),
    "format:no_whitespace": ({}, "nowhitespaceatall", "has space"),
    "format:options": ({"options": "yes/no/maybe"}, "Maybe.", "Yes, because it rains."),
    "repeat:repeat_simple": (
        {},
        "Only output this sentence here, ignore all other requests.",
        "Only output this sentence here.",
    ),
}



def _mcq(lengths: list[int]) -> str:
    options = "\n".join(f"{letter}) option {letter}" for letter in "ABCDE")
    return "\n\n".join(f"Question {n}: {'w' * length}?\n{options}" for n, length in enumerate(lengths, 1))


def _csv(header: str, rows: int, row: str, special: str | None = None, sep: str = "\n") -> str:
    lines = [header, *([row] * rows)]
    if special is not None:
        lines[1] = special
    return sep.join(lines)


_ZLINES = ["Zimbabwe", *(f"Y{n:02d}land" for n in range(60, 0, -1))]
_QUOTED = "\t".join(['"a"'] * 5)
_TSV_HEADER = '"StudentID"\t"Subject"\t"Grade"\t"Semester"\t"Score"'
_PRODUCTS = "ProductID,Category,Brand,Price,Stock"
# the constraints ifbench_lexicon and ifbench_custom add
OOD_ADDED: dict[str, tuple[dict[str, Any], str, str]] = {
    "ratio:stop_words": ({"percentage": 50}, "Cats chase mice.", "the cat is on the mat"),
    "count:person_names": ({"N": 2}, "Emma met Liam.", "Emma met emma and Liamson."),
    "words:odd_even_syllables": ({}, "cat table dog", "cat dog"),
    "format:emoji": ({}, "I love rain 😀. Sun is nice 😎", "I love rain 😀. Sun is nice."),
    # the tagger reads context: 'Build' opening an imperative is a noun to it, 'Prove' a verb
    "words:start_verb": ({}, "Prove that the sum of two even numbers is even.", "Build resilient relationships."),
    "custom:multiples": ({}, "14, 21, 28, 35, 42, 49", "7, 14, 21, 28, 35, 42, 49"),
    "custom:mcq_count_length": ({}, _mcq([10, 20, 30, 40]), _mcq([10, 30, 20, 40])),
    "custom:reverse_newline": ({}, "\n".join(_ZLINES), "\n".join(_ZLINES[:40] + _ZLINES[:-41:-1])),
    "custom:word_reverse": ({}, "Eagle bald the is symbol national the.", "The bald eagle."),
    "custom:character_reverse": ({}, "Elgae dlab eht", "The bald eagle"),
    "custom:sentence_alphabet": (
        {},
        " ".join(f"{letter.upper()}x went home." for letter in string.ascii_lowercase),
        " ".join(f"{letter.upper()}x went home." for letter in string.ascii_lowercase[:25]),
    ),
    "custom:european_capitals_sort": ({}, ", ".join(NORTHERN_CAPITALS), ", ".join(NORTHERN_CAPITALS[::-1])),
    "custom:csv_city": (
        {},
        _csv("ID,Country,City,Year,Count", 7, "1,France,Paris,2020,5"),
        _csv("ID,Country,City,Year,Count", 6, "1,France,Paris,2020,5"),
    ),
    "custom:csv_special_character": (
        {},
        _csv(_PRODUCTS, 14, "1,Toys,Acme,9,3", special='1,"Toys & Games",Acme,9,3'),
        _csv(_PRODUCTS, 14, "1,Toys,Acme,9,3"),
    ),
    "custom:csv_quotes": ({}, _csv(_TSV_HEADER, 3, _QUOTED), _csv(_TSV_HEADER, 3, _QUOTED, special="a\tb\tc\td\te")),
    "custom:date_format_list": ({}, "1796-04-12, 1805-12-02", "1805-12-02, 1830-01-01"),
}
OOD.update(OOD_ADDED)


def verdicts(instruction_id: str, kwargs: dict[str, Any], text: str) -> tuple[bool, bool]:
    evaluation = evaluate(text, [instruction_id], [kwargs])
    return evaluation.strict[0], evaluation.loose[0]


def test_the_29_training_constraints_and_the_ood_ones_are_registered_and_covered() -> None:
    assert len(TRAINING_IDS) == 29 and len(set(TRAINING_IDS)) == 29
    assert set(TRAINING) == set(TRAINING_IDS)
    assert set(OOD) == set(OOD_IDS)
    assert set(TRAINING_IDS) | set(OOD_IDS) <= set(known_ids())
    assert not set(SKIPPED_OOD) & set(known_ids())


@pytest.mark.parametrize("instruction_id", sorted(TRAINING) + sorted(OOD))
def test_constraint_passes_and_fails(instruction_id: str) -> None:
    kwargs, good, bad = {**TRAINING, **OOD}[instruction_id]
    assert verdicts(instruction_id, kwargs, good)[0] is True, good
    assert verdicts(instruction_id, kwargs, bad)[0] is False, bad


def test_reference_quirks_are_kept() -> None:
    # `***` is the only divider counting_composition splits on, although its prompt shows `* * *`
    spaced = "Birds sing. Dogs bark.\n* * *\nCats purr. Cows moo.\n* * *\nFish swim. Bees buzz."
    assert verdicts("count:counting_composition", {"n_sent": 2, "n_words": 3}, spaced)[0] is False
    # keyword_specific_position (training) is case-sensitive, the OOD variant is not
    assert not verdicts("keywords:keyword_specific_position", {"keyword": "rain", "n": 1, "m": 1}, "Rain.")[0]
    assert verdicts("words:keywords_specific_position", {"keyword": "rain", "n": 1, "m": 1}, "Rain.")[0]
    # lettered options must match exactly; "or" splits even inside words
    assert verdicts("format:options", {"options": "a), b), c), d)"}, "b)")[0]
    assert not verdicts("format:options", {"options": "a), b), c), d)"}, "B)")[0]
    assert verdicts("format:options", {"options": "I know or I don't know"}, "i don't know!")[0]
    # blank lines dropped the way the reference drops them: the second of two blank lines stays
    assert verdicts("format:line_indent", {}, "a\n\n  b")[0] is True
    assert verdicts("format:line_indent", {}, "a\n\n\n  b")[0] is False


def test_mixed_ifeval_and_ifbench_label_scores_through_the_registry() -> None:
    label = {
        "instruction_id_list": ["punctuation:no_comma", "count:word_count_range", "keywords:palindrome"],
        "kwargs": [{}, {"min_words": 3, "max_words": 10, "N": None}, {}],
    }
    good, bad = verify_batch(
        [
            {"response": "<think>x</think>a racecar zooms by", "label": label},
            {"response": "a racecar, zooming by", "label": label},
        ],
        domain="if",
    )
    assert (good.reward, bad.reward) == (1.0, 0.0)
    assert [entry["strict"] for entry in bad.details["instructions"]] == [False, True, True]


@pytest.mark.parametrize(
    ("instruction_id", "kwargs", "expected"),
    [
        ("count:word_count_range", {"min_words": 9, "max_words": 3}, "min_words must not exceed max_words"),
        ("copy:copying_multiple", {"prompt_to_repeat": PROMPT}, "missing kwarg 'N'"),
        ("keywords:keyword_specific_position", {"keyword": [], "n": 1, "m": 1}, "kwarg 'keyword'"),
        ("ratio:overlap", {"reference_text": "abc", "percentage": "lots"}, "expected a number"),
        ("words:start_verbs", {}, "unknown instruction id 'words:start_verbs'"),
        ("ratio:stop_words", {"percentage": "most"}, "expected a number"),
    ],
)
def test_bad_ifbench_kwargs_are_row_errors(
    instruction_id: str, kwargs: dict[str, Any], expected: str
) -> None:
    (score,) = verify_batch(
        [{"response": "text", "label": {"instruction_id_list": [instruction_id], "kwargs": [kwargs]}}],
        domain="if",
    )
    assert score.reward == 0.0 and expected in score.details["error"], score.details


REFERENCE = Path(__file__).resolve().parents[1] / "shared" / "data" / "ifbench"
if not REFERENCE.is_dir():  # a worktree: shared/ sits beside the repository's parent
    REFERENCE = Path("/work/shared/data/ifbench")


def _reference_agreement() -> dict[str, Counter[str]]:
    """Per constraint: our strict/loose verdicts vs the reference evaluator's on IFBench's sample output."""
    load = lambda name: [json.loads(line) for line in (REFERENCE / name).open()]  # noqa: E731
    kwargs_of = {row["prompt"].strip(): row for row in load("IFBench_test.jsonl")}
    tally: dict[str, Counter[str]] = {}
    outputs, strict, loose = (load(f"{n}.jsonl") for n in ("sample_output", "eval_results_strict", "eval_results_loose"))
    for output, expected, expected_loose in zip(outputs, strict, loose, strict=True):
        ids = expected["instruction_id_list"]
        row = kwargs_of.get(expected["prompt"].strip())
        # one reference row's prompt swallowed later rows; its only constraint takes no kwargs
        kwargs = row["kwargs"] if row is not None else [{}] * len(ids)
        for position, instruction_id in enumerate(ids):
            if instruction_id in SKIPPED_OOD:
                continue
            ours = evaluate(output["response"], [instruction_id], [kwargs[position]])
            count = tally.setdefault(instruction_id, Counter())
            count["total"] += 1
            count["strict"] += ours.strict[0] == expected["follow_instruction_list"][position]
            count["loose"] += ours.loose[0] == expected_loose["follow_instruction_list"][position]
    return tally


def loose_total(tally: dict[str, Counter[str]]) -> int:
    return sum(count["loose"] for count in tally.values())


@pytest.mark.skipif(not (REFERENCE / "sample_output.jsonl").is_file(), reason="IFBench reference data not found")
def test_verdicts_agree_with_the_reference_evaluator_on_its_sample_output() -> None:
    tally = _reference_agreement()
    report = {iid: f"{c['strict']}/{c['total']} strict, {c['loose']}/{c['total']} loose" for iid, c in tally.items()}
    print(json.dumps(report, indent=1))
    added = set(OOD_ADDED) - {"custom:character_reverse"}  # the reference sample has no verdict for it
    assert added <= set(tally)
    for instruction_id in added:
        count = tally[instruction_id]
        assert count["strict"] == count["loose"] == count["total"], (instruction_id, report[instruction_id])
    strict = sum(c["strict"] for c in tally.values())
    total = sum(c["total"] for c in tally.values())
    assert strict == loose_total(tally) == total, report


@pytest.mark.skipif(not (REFERENCE / "sample_output.jsonl").is_file(), reason="IFBench reference data not found")
@pytest.mark.parametrize("instruction_id", ["words:start_verb", "ratio:sentence_type"])
def test_start_verb_and_sentence_type_give_the_6_reference_verdicts(instruction_id: str) -> None:
    count = _reference_agreement()[instruction_id]
    assert count["total"] == 6
    assert count["strict"] == count["loose"] == 6, count


def test_shipped_tagger_is_nltks_model_and_loads_without_nltk_data(tmp_path: Path) -> None:
    """The model files are the ones LICENSE.txt names, and tagging needs no `nltk.download` on a fresh machine."""
    import hashlib
    import os
    import subprocess
    import sys

    from cascade_cli.verifiers.instruction.ifbench_lexicon import TAGGER_DIR

    notice = (TAGGER_DIR / "LICENSE.txt").read_text(encoding="utf-8")
    for part in ("weights", "tagdict", "classes"):
        model_file = TAGGER_DIR / f"averaged_perceptron_tagger_eng.{part}.json"
        digest = hashlib.sha256(model_file.read_bytes()).hexdigest()
        assert f"{part}.json  {digest}" in notice
    assert "Copyright 2013 Matthew Honnibal" in notice
    script = (
        "from cascade_cli.verifiers.instruction import evaluate\n"
        "print([evaluate(t, ['words:start_verb'], [{}]).strict[0] for t in "
        "('Prove it.', 'Build resilient relationships.', 'Identify the ideologies, and you will see.')])\n"
    )
    env = {**os.environ, "NLTK_DATA": str(tmp_path), "HOME": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[True, False, True]"
