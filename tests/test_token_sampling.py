"""The sort-free sampler (engines/local/rollout/token_sampling.py) against the definition of temperature / top-k / top-p
sampling (a chi-square test of sampled frequencies, vocabularies of 64 and 49,152), and against the previous
sampler and decode loop (benchmarks/decode_baseline.py, kept there verbatim as the reference)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import torch

from cascade_cli.chat import render_prompt
from cascade_cli.engines.local.rollout.token_sampling import TokenSampler, sorted_sample

BASELINE_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "decode_baseline.py"
_spec = importlib.util.spec_from_file_location("decode_baseline", BASELINE_PATH)
baseline = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(baseline)

sys.path.insert(0, str(Path(__file__).parent))

# (temperature, top_p, top_k): each path of the sampler, the recipes' setting (1.0, 0.95) among them
SETTINGS = [(1.0, 1.0, -1), (1.0, 0.95, -1), (0.7, 0.9, -1), (1.0, 0.5, -1), (1.3, 0.95, 40), (1.0, 1.0, 20)]


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def reference_probs(logits: torch.Tensor, temperature: float, top_p: float, top_k: int) -> torch.Tensor:
    """The definition in float64 for one row [V]: top-k keeps ties at the k-th value; top-p ranks by a stable
    descending sort (equal logits by token id) and drops a token once the tokens above it hold top_p."""
    scaled = logits.double() / temperature
    if 0 < top_k < len(scaled):
        scaled = scaled.masked_fill(scaled < scaled.topk(top_k).values[-1], float("-inf"))
    probs = scaled.softmax(-1)
    if top_p < 1.0:
        ordered, order = probs.sort(descending=True, stable=True)
        drop = (ordered.cumsum(-1) - ordered) >= top_p
        probs = probs.masked_fill(torch.zeros_like(drop).scatter(-1, order, drop), 0.0)
    return probs / probs.sum()


def chi_square_p(observed: torch.Tensor, expected_probs: torch.Tensor, min_expected: float = 20.0) -> float:
    """p-value of the chi-square test of token counts against probabilities; tokens in rank order are pooled
    into bins of at least `min_expected` expected draws. Any draw of a probability-0 token fails outright."""
    draws = float(observed.sum())
    assert int(observed[expected_probs == 0].sum()) == 0, "sampled a token outside the kept set"
    order = expected_probs.argsort(descending=True)
    bins_observed, bins_expected, pending_o, pending_e = [], [], 0.0, 0.0
    for token in order[expected_probs[order] > 0].tolist():
        pending_o, pending_e = pending_o + float(observed[token]), pending_e + float(expected_probs[token]) * draws
        if pending_e >= min_expected:
            bins_observed.append(pending_o)
            bins_expected.append(pending_e)
            pending_o = pending_e = 0.0
    if pending_e > 0 and bins_expected:
        bins_observed[-1] += pending_o
        bins_expected[-1] += pending_e
    o, e = torch.tensor(bins_observed, dtype=torch.float64), torch.tensor(bins_expected, dtype=torch.float64)
    if len(o) < 2:
        return 1.0
    statistic = float(((o - e) ** 2 / e).sum())
    return float(torch.special.gammaincc(torch.tensor((len(o) - 1) / 2), torch.tensor(statistic / 2)))


def sampled_counts(sample, logits: torch.Tensor, draws: int, chunk: int) -> torch.Tensor:
    counts = torch.zeros(len(logits), dtype=torch.long)
    for _ in range(draws // chunk):
        tokens = sample(logits[None].expand(chunk, -1).contiguous())
        counts += torch.bincount(tokens, minlength=len(logits))
    return counts


def row_logits(vocab: int, shape: str, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    if shape == "flat":  # a random model's: the nucleus is most of the vocabulary
        return torch.randn(vocab, generator=generator) * 0.2
    if shape == "ties":  # integer logits: many equal values at the top-k and top-p boundaries
        return torch.randint(0, 6, (vocab,), generator=generator).float()
    return torch.randn(vocab, generator=generator) * 3.0  # peaked, like a trained model's


@pytest.mark.parametrize("temperature,top_p,top_k", SETTINGS)
@pytest.mark.parametrize("shape", ["peaked", "flat", "ties"])
def test_sampled_frequencies_match_the_definition_vocab_64(temperature, top_p, top_k, shape):
    logits = row_logits(64, shape, seed=1)
    expected = reference_probs(logits, temperature, top_p, top_k)
    sampler = TokenSampler(temperature, top_p, top_k, torch.Generator().manual_seed(2))
    counts = sampled_counts(sampler, logits, draws=40_000, chunk=4_000)
    assert chi_square_p(counts, expected) > 1e-3


@pytest.mark.parametrize("temperature,top_p,top_k", [(1.0, 0.95, -1), (0.7, 0.9, -1), (1.3, 0.95, 40), (1.0, 1.0, -1)])
@pytest.mark.parametrize("shape", ["peaked", "flat"])
def test_sampled_frequencies_match_the_definition_vocab_49152(temperature, top_p, top_k, shape):
    logits = row_logits(49_152, shape, seed=3)
    expected = reference_probs(logits, temperature, top_p, top_k)
    draws = 3 if shape == "flat" else None  # a GPU's rejection draws per step, on the flat row
    sampler = TokenSampler(temperature, top_p, top_k, torch.Generator().manual_seed(4), draws=draws)
    counts = sampled_counts(sampler, logits, draws=12_000, chunk=400)
    assert chi_square_p(counts, expected) > 1e-3


def passes_for_every_setting(sample, logits: torch.Tensor) -> bool:
    """`sample(rows, temperature, top_p, top_k, generator)` passes the test in each of SETTINGS."""
    for temperature, top_p, top_k in SETTINGS:
        generator = torch.Generator().manual_seed(5)
        draws = sampled_counts(lambda rows: sample(rows, temperature, top_p, top_k, generator), logits, 40_000, 4_000)  # noqa: B023
        if chi_square_p(draws, reference_probs(logits, temperature, top_p, top_k)) <= 1e-3:
            return False
    return True


def test_the_previous_sampler_matches_the_same_definition():
    """The reference distribution is today's: the previous sampler passes the same test (no ties: its sort
    left equal logits in an unspecified order)."""
    assert passes_for_every_setting(baseline._sample, row_logits(64, "peaked", seed=1))


def test_a_sampler_that_ignores_the_nucleus_fails_the_test():
    """The test's power: sampling the whole distribution instead of the top-p 0.9 nucleus is caught (on a flat
    row about 10% of the draws fall outside it), and so is a temperature 10% off."""
    logits = row_logits(64, "flat", seed=1)
    counts = sampled_counts(TokenSampler(1.0, 1.0, -1, torch.Generator().manual_seed(2)), logits, 20_000, 4_000)
    with pytest.raises(AssertionError, match="outside the kept set"):
        chi_square_p(counts, reference_probs(logits, 1.0, 0.9, -1))
    peaked = row_logits(64, "peaked", seed=1)  # and a temperature 10% off
    warmer = sampled_counts(TokenSampler(1.1, 1.0, -1, torch.Generator().manual_seed(2)), peaked, 40_000, 4_000)
    assert chi_square_p(warmer, reference_probs(peaked, 1.0, 1.0, -1)) < 1e-3


@pytest.mark.parametrize("top_k", [20, -1])
def test_ties_inside_the_kept_set_are_ranked_by_token_id(top_k):
    """6 tokens at logit 3, 6 at 2, the rest distinct and lower, shuffled; top_p puts the nucleus boundary
    inside the group at 2, so which of them stay depends on the order among equal logits (token id)."""
    values = torch.tensor([3.0] * 6 + [2.0] * 6 + [1.2 - 0.05 * i for i in range(52)])
    logits = values[torch.randperm(64, generator=torch.Generator().manual_seed(9))]
    probs = reference_probs(logits, 1.0, 1.0, top_k)
    top_p = float(probs[logits == 3.0].sum() + 2.5 * probs[logits == 2.0][0])
    expected = reference_probs(logits, 1.0, top_p, top_k)
    assert int((expected[logits == 2.0] > 0).sum()) == 3  # half of the group at 2 is kept
    counts = sampled_counts(TokenSampler(1.0, top_p, top_k, torch.Generator().manual_seed(3)), logits, 40_000, 4_000)
    assert chi_square_p(counts, expected) > 1e-3


def test_greedy_is_argmax_and_open_rows_are_settled():
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(300, 1000, generator=generator)
    assert torch.equal(TokenSampler(0.0)(logits), logits.argmax(-1))
    assert torch.equal(TokenSampler(0.0)(logits.bfloat16()), logits.bfloat16().float().argmax(-1))
    ties = torch.randint(0, 4, (300, 1000), generator=generator).float()
    sampler = TokenSampler(1.0, 1.0, 5, torch.Generator().manual_seed(1))
    draw = sampler.draw(ties)
    assert draw.unresolved is not None and bool(draw.unresolved.all())  # a tie at the 5th place in every row
    tokens = sampler.resolve(ties, draw)
    assert bool((ties.gather(-1, tokens[:, None]) == 3).all())  # the kept set: every token at the top value


def test_seeds_reproduce():
    logits = torch.randn(64, 49_152, generator=torch.Generator().manual_seed(0)) * 0.3

    def run(seed: int) -> list[int]:
        return TokenSampler(1.0, 0.95, -1, torch.Generator().manual_seed(seed))(logits).tolist()

    assert run(1) == run(1)
    assert run(1) != run(2)


def test_the_fallback_is_the_definition():
    assert passes_for_every_setting(sorted_sample, row_logits(64, "ties", seed=7))


# ---- the decode loop against the previous one -------------------------------------------------------


@pytest.fixture(scope="module")
def smollm2_shaped_dir(tmp_path_factory, smollm2_dir) -> Path:
    """SmolLM2's tokenizer and 49,152-token vocabulary, 2 layers of width 64, random weights."""
    sys.path.insert(0, str(BASELINE_PATH.parent))
    from decode_loop import build_loop_model

    out = build_loop_model(smollm2_dir, tmp_path_factory.mktemp("sampling") / "smol")
    import json

    config = json.loads((out / "config.json").read_text())
    config["num_hidden_layers"] = 2
    (out / "config.json").write_text(json.dumps(config))
    return out


PROMPTS = [render_prompt(q, "no_think") for q in ("add 2 and 3", "a much longer prompt, to force padding", "hi")]


@pytest.mark.parametrize("model", ["tiny", "smollm2_shaped"])
@pytest.mark.parametrize("share_prompt", [True, False])
def test_greedy_tokens_and_logprobs_identical_to_the_previous_loop(model, share_prompt, request):
    from cascade_cli.engines.local.rollout.generation import Generator

    model_dir = request.getfixturevalue(f"{model}_dir")
    generator = Generator(model_dir, backend="hf", dtype="float32", share_prompt=share_prompt)
    kwargs = dict(n=3, max_new_tokens=24, temperature=0.0, logprobs=True)
    new = generator.generate(PROMPTS, **kwargs)
    old = baseline.generate(generator, PROMPTS, **kwargs)
    for new_group, old_group in zip(new, old, strict=True):
        for a, b in zip(new_group, old_group, strict=True):
            assert (a.token_ids, a.text, a.finish_reason) == (b.token_ids, b.text, b.finish_reason)
            assert a.logprob_sum == pytest.approx(b.logprob_sum, abs=1e-4)
    reasons = {c.finish_reason for group in new for c in group}
    assert reasons <= {"stop", "length"}


def test_sampled_loop_matches_the_previous_loop_in_distribution(tiny_dir):
    """First tokens of many sampled rows (one prompt, top-p 0.9): both loops' frequencies pass the test
    against the definition computed from the model's own next-token logits."""
    from cascade_cli.engines.local.rollout.generation import Generator

    generator = Generator(tiny_dir, backend="hf", dtype="float32", seed=0)
    ids = torch.tensor([generator.tokenizer.encode(PROMPTS[0], add_special_tokens=False)])
    with torch.no_grad():
        logits = generator.model(input_ids=ids).logits[0, -1]
    expected = reference_probs(logits, 1.0, 0.9, -1)
    for generate in (generator.generate, lambda *a, **k: baseline.generate(generator, *a, **k)):
        groups = generate([PROMPTS[0]] * 10, n=200, max_new_tokens=1, temperature=1.0, top_p=0.9)
        first = torch.tensor([c.token_ids[0] for group in groups for c in group])
        assert chi_square_p(torch.bincount(first, minlength=len(logits)), expected) > 1e-3


def test_a_top_k_tie_in_the_loop_is_settled_exactly(tiny_dir):
    """A head of zeros: every logit ties, so top-k 5 keeps the whole vocabulary (ties included) and top-p 0.5
    then keeps its lower half by token id. Every row's draw is open; the loop must settle it (a loop that kept
    the fast path's 5 tokens fails the test)."""
    from cascade_cli.engines.local.rollout.generation import Generator

    generator = Generator(tiny_dir, backend="hf", dtype="float32", seed=0)
    head = generator.model.get_output_embeddings()
    head.weight = torch.nn.Parameter(torch.zeros_like(head.weight))  # untied from the embeddings
    vocab = head.weight.shape[0]
    groups = generator.generate([PROMPTS[0]] * 8, n=250, max_new_tokens=1, temperature=1.0, top_p=0.5, top_k=5)
    first = torch.tensor([c.token_ids[0] for group in groups for c in group])
    expected = reference_probs(torch.zeros(vocab), 1.0, 0.5, 5)
    assert int((expected > 0).sum()) == vocab // 2
    assert chi_square_p(torch.bincount(first, minlength=vocab), expected) > 1e-3
