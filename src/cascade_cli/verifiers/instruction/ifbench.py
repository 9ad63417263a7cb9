"""IFBench constraints (Pyatkin et al. 2025, arXiv 2507.02833) that a rule can check, with IFBench's ids.

Two families, both behind the IFEval registry:
- IF-RLVR training constraints (the 29 "new" ones of open-instruct's IFEvalG: `copy:`, `new:`, `paragraphs:`,
  `first_word:`, `last_word:`, `letters:`, `count:`, and new `keywords:` / `detectable_format:` /
  `punctuation:` ids). These split sentences with IFEval's rule-based splitter.
- IFBench's out-of-distribution test constraints (`count:word_count_range`, `ratio:*`, `words:*`,
  `sentence:*`, `format:*`, `repeat:*`, the word-list and part-of-speech ones in ifbench_lexicon and the 11
  single-prompt `custom:*` ones). These split sentences with the same rule-based splitter, as the evaluator
  that produced IFBench's published verdicts and the paper's numbers did (allenai/IFBench c94da02,
  `split_into_sentences`). IFBench switched to `nltk.sent_tokenize` in 6fffd61 (2025-12-16); the two differ
  where a period sits inside a closing quote (`... "paraphrasing." Paraphrasing ...`: the rules end that
  sentence with the period, Punkt with the quote), which changes one `ratio:sentence_type` verdict of the
  reference sample.
Each rule mirrors the published checker; where the reference fills a missing or falsy kwarg with a random
value, the kwarg is required here instead (a 0 is taken literally).
"""

from __future__ import annotations

from cascade_cli.verifiers.instruction import (  # noqa: F401  (registration)
    ifbench_custom,
    ifbench_format,
    ifbench_lexicon,
    ifbench_words,
)
from cascade_cli.verifiers.instruction.ifbench_training import TRAINING_IDS

__all__ = ["OOD_IDS", "SKIPPED_OOD", "TRAINING_IDS"]

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
    "ratio:stop_words",
    "count:person_names",
    "words:odd_even_syllables",
    "format:emoji",
    "words:start_verb",
    "custom:multiples",
    "custom:mcq_count_length",
    "custom:reverse_newline",
    "custom:word_reverse",
    "custom:character_reverse",
    "custom:sentence_alphabet",
    "custom:european_capitals_sort",
    "custom:csv_city",
    "custom:csv_special_character",
    "custom:csv_quotes",
    "custom:date_format_list",
)

# Every IFBench test constraint is implemented; kept (empty) so callers can still ask what is skipped.
SKIPPED_OOD: dict[str, str] = {}
