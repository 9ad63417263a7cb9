"""Stop strings on the device (engines/local/rollout/stop_matching.py) against the text check, with the real SmolLM2
and tiny tokenizers, and the text check catching what the matcher missed (engines/local/rollout/hf_decode.py)."""

from __future__ import annotations

import random

import pytest
import torch
from transformers import AutoTokenizer

from cascade_cli.engines.local.rollout.hf_decode import _completions
from cascade_cli.engines.local.rollout.stop_matching import StopMatcher, stop_prefix_length

STOPS = ["Question:", "\n\n###", "</answer>"]
PIECES = ["Question", " Question", "Quest", "ion", ":", " :", "Questions", "\n", "\n\n", "###", "#", "##", "</",
          "answer", ">", "</answer>", "answer>", " the", "Q", "a", ".", " no"]  # fmt: skip


def first_hits(matcher: StopMatcher, sequences: list[list[int]]) -> list[int | None]:
    """The 1-based step at which each sequence (a batch row) first completes a stop string, or None."""
    state = matcher.start(len(sequences))
    found: list[int | None] = [None] * len(sequences)
    for step in range(len(sequences[0])):
        hit, state = matcher.advance(state, torch.tensor([s[step] for s in sequences]))
        for row in hit.nonzero().squeeze(-1).tolist():
            found[row] = found[row] or step + 1
    return found


@pytest.mark.parametrize("which", ["smollm2", "tiny"])
def test_the_matcher_finds_the_first_stop_string_where_the_text_does(which, request):
    if which == "smollm2":
        tokenizer = AutoTokenizer.from_pretrained(request.getfixturevalue("smollm2_dir"))
    else:
        from cascade_cli.models.resolve import resolve_model

        tokenizer = AutoTokenizer.from_pretrained(resolve_model("tiny"))
    rng = random.Random(0)

    def encode(text: str) -> list[int]:
        return tokenizer.encode(text, add_special_tokens=False)

    def piece() -> list[int]:
        """A near-miss piece, a random token, or a stop string split somewhere and encoded in two parts."""
        roll = rng.random()
        if roll < 0.6:
            return encode(rng.choice(PIECES))
        if roll < 0.8:
            return [rng.randrange(len(tokenizer))]
        stop = rng.choice(STOPS)
        cut = rng.randrange(len(stop) + 1)
        return encode(rng.choice(["", " ", "x"]) + stop[:cut]) + encode(stop[cut:])

    sequences = []
    for _ in range(400):
        tokens: list[int] = []
        while len(tokens) < 14:
            tokens += piece()
        sequences.append(tokens[:14])
    matcher = StopMatcher(tokenizer, STOPS, len(tokenizer), torch.device("cpu"))
    expected = [stop_prefix_length(tokenizer, s, STOPS) for s in sequences]
    assert sum(e is not None for e in expected) > 100  # stop strings in many tokenizations, and near misses
    assert first_hits(matcher, sequences) == expected


def test_a_stop_string_in_another_tokenization_stops_a_row(smollm2_dir):
    tokenizer = AutoTokenizer.from_pretrained(smollm2_dir)
    ids = tokenizer.encode("Some answer. Question: what", add_special_tokens=False)
    assert tokenizer.encode("Question:", add_special_tokens=False) != ids[3:5]  # " Question" + ":"
    assert first_hits(StopMatcher(tokenizer, ["Question:"], 49_152, torch.device("cpu")), [ids]) == [5]


def test_the_text_check_cuts_a_row_at_a_stop_string_the_matcher_missed(smollm2_dir):
    """A row that ran on past a stop string (as when token texts do not add up to the decoded text) comes
    back cut after the token that completes it, finished by "stop", its log-probability summed that far."""
    tokenizer = AutoTokenizer.from_pretrained(smollm2_dir)
    ids = tokenizer.encode("First. Question: and more text after it", add_special_tokens=False)
    generated = torch.tensor([ids])
    logprobs = torch.full((1, len(ids)), -0.5)
    (completion,) = _completions(tokenizer, generated, torch.tensor([len(ids)]), torch.tensor([False]), logprobs,
                                 ["Question:"])  # fmt: skip
    cut = stop_prefix_length(tokenizer, ids, ["Question:"])
    assert completion.token_ids == ids[:cut] and cut < len(ids)
    assert completion.finish_reason == "stop"
    assert completion.text == "First. "
    assert completion.logprob_sum == pytest.approx(-0.5 * cut)
