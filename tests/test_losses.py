"""Chunked log-probs (engines/local/ops/logprobs.py) against today's full-logits loss, and their memory bound."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import torch

from cascade_cli.engines.local.ops import logprobs
from cascade_cli.engines.local.ops.logprobs import length_buckets, response_hidden, token_logprobs
from cascade_cli.engines.local.ops.losses import grpo_loss

sys.path.insert(0, str(Path(__file__).parent))
from test_grpo_support import build_model_dir  # noqa: E402


def full_logits_loss(logits, tokens, mask, advantages, total_tokens, ref_logprobs, kl_coef, entropy_coef, aggregation):
    """The loss as it was computed before chunking (grpo.py at 4f39bb3): full float32 [B, T, V] log-softmax."""

    def reduce(values):
        if aggregation == "sequence":
            return ((values * mask).sum(-1) / mask.sum(-1).clamp(min=1)).sum() / total_tokens
        return (values * mask).sum() / total_tokens

    logprobs_all = logits.float().log_softmax(-1)
    logprobs = logprobs_all.gather(-1, tokens[..., None]).squeeze(-1)
    ratio = torch.exp(logprobs - logprobs.detach())
    loss = -reduce(advantages[:, None] * ratio)
    entropy = -(logprobs_all.exp() * logprobs_all).sum(-1)
    if entropy_coef:
        loss = loss - entropy_coef * reduce(entropy)
    kl = torch.zeros(())
    if kl_coef and ref_logprobs is not None:
        log_ratio = ref_logprobs - logprobs
        kl = torch.exp(log_ratio) - log_ratio - 1
        loss = loss + kl_coef * reduce(kl)
        kl = (kl * mask).sum()
    return loss, {"entropy_sum": float((entropy.detach() * mask).sum()), "kl_sum": float(kl.detach())}


def full_sequence_logits(model, prompts, responses, temperature):
    """[B, R, V] logits predicting each response token, one plain forward of prompt + response per row."""
    width = max(len(r) for r in responses)
    rows = []
    for prompt, response in zip(prompts, responses, strict=True):
        logits = model(input_ids=torch.tensor([prompt + response])).logits[0, len(prompt) - 1 : -1] / temperature
        rows.append(torch.nn.functional.pad(logits, (0, 0, 0, width - len(response))))
    return torch.stack(rows)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    from transformers import AutoModelForCausalLM

    path = build_model_dir(tmp_path_factory.mktemp("losses") / "tiny", seed=0)
    policy = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    reference = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).requires_grad_(False)
    with torch.no_grad():  # a reference that differs from the policy, so the KL term is not zero
        for param in reference.parameters():
            param.add_(0.02 * torch.randn_like(param))
    return policy, reference


@pytest.mark.parametrize("aggregation", ["token", "sequence"])
@pytest.mark.parametrize("chunk_tokens", [1, 5, 4096])
@pytest.mark.parametrize("entropy_coef", [0.05, 0.0])  # 0: the closed-form head (_HeadLogprobs), else autograd
@pytest.mark.parametrize("bucket_cost", [0, logprobs.BUCKET_COST_TOKENS])  # 0: every response its own bucket
def test_chunked_loss_and_gradients_equal_the_full_logits_computation(
    models, aggregation, chunk_tokens, entropy_coef, bucket_cost, monkeypatch
):
    monkeypatch.setattr(logprobs, "BUCKET_COST_TOKENS", bucket_cost)
    policy, reference = models
    short, long = [5, 6, 7], [8, 9, 10, 11, 12, 13]
    prompts = [short, short, long, long]
    responses = [[20, 21, 22, 1], [23], [24, 25, 26], [27, 28, 29, 30, 31, 2]]
    keep = torch.tensor([1.0, 1.0, 0.0, 1.0])
    advantages = torch.tensor([0.7, -1.3, 0.4, 0.9])
    temperature, settings = 0.8, {"kl_coef": 0.1, "entropy_coef": entropy_coef, "aggregation": aggregation}
    normaliser = 11 if aggregation == "token" else 3

    hidden, tokens, present = response_hidden(policy, prompts, responses, pad=0, device="cpu")
    policy_logprobs, entropy = token_logprobs(
        hidden, policy.lm_head, tokens, temperature, chunk_tokens, bool(entropy_coef), present=present
    )
    mask = present.float() * keep[:, None]
    with torch.no_grad():
        ref_hidden = response_hidden(reference, prompts, responses, pad=0, device="cpu")[0]
        ref_logprobs = token_logprobs(ref_hidden, reference.lm_head, tokens, temperature, chunk_tokens)[0]
    loss, stats = grpo_loss(policy_logprobs, mask, advantages, normaliser, entropy, ref_logprobs, **settings)
    policy.zero_grad()
    loss.backward()
    chunked_grads = {n: p.grad.clone() for n, p in policy.named_parameters()}

    policy.zero_grad()
    logits = full_sequence_logits(policy, prompts, responses, temperature)
    with torch.no_grad():
        ref_all = full_sequence_logits(reference, prompts, responses, temperature).float().log_softmax(-1)
        full_ref = ref_all.gather(-1, tokens[..., None]).squeeze(-1)
    expected, expected_stats = full_logits_loss(
        logits, tokens, mask, advantages, normaliser, full_ref, settings["kl_coef"], settings["entropy_coef"],
        aggregation,
    )  # fmt: skip
    expected.backward()

    assert loss.item() == pytest.approx(expected.item(), rel=1e-5, abs=1e-7)
    assert stats["entropy_sum"] == pytest.approx(expected_stats["entropy_sum"], rel=1e-5)
    assert stats["kl_sum"] == pytest.approx(expected_stats["kl_sum"], rel=1e-4) and stats["kl_sum"] > 0
    for name, param in policy.named_parameters():
        assert torch.allclose(chunked_grads[name], param.grad, rtol=1e-4, atol=1e-6), name
    assert any(g.abs().sum() > 0 for g in chunked_grads.values())


def test_length_buckets_trade_padding_for_forward_passes(monkeypatch):
    lengths = [3, 120, 5, 118, 4, 121, 6, 119]
    buckets = length_buckets(lengths)
    assert sorted(row for bucket in buckets for row in bucket) == list(range(8))
    assert [sorted(b) for b in buckets] == [[1, 3, 5, 7], [0, 2, 4, 6]]  # long rows apart from short ones
    assert length_buckets([64] * 8) == [list(range(8))]  # nothing to save: one pass
    monkeypatch.setattr(logprobs, "BUCKET_COST_TOKENS", 0)
    assert len(length_buckets(lengths)) == logprobs.MAX_BUCKETS


def test_closed_form_head_matches_autograd_under_bf16_autocast():
    """The fused head's log-probs and gradients are those of nn.Linear + log_softmax under autocast."""
    torch.manual_seed(0)
    head = torch.nn.Linear(16, 50, bias=False)
    hidden = torch.randn(3, 5, 16, requires_grad=True)
    tokens, weights = torch.randint(0, 50, (3, 5)), torch.randn(3, 5)
    present = torch.ones(3, 5, dtype=torch.long)
    present[1, 3:] = 0
    results = []
    for closed_form in (True, False):
        hidden.grad, head.weight.grad = None, None
        with torch.autocast("cpu", dtype=torch.bfloat16):
            values, entropy = token_logprobs(hidden, head, tokens, 1.0, 4, not closed_form, present=present)
        (values * weights).sum().backward()
        results.append((values.detach(), entropy.detach(), hidden.grad.clone(), head.weight.grad.clone()))
    (ours, our_entropy, our_hidden, our_weight), (theirs, their_entropy, their_hidden, their_weight) = results
    assert torch.allclose(ours, theirs * present, atol=1e-5)
    assert torch.allclose(our_entropy, their_entropy * present, atol=1e-4)
    assert torch.allclose(our_hidden, their_hidden, atol=1e-2) and our_hidden.abs().sum() > 0
    assert torch.allclose(our_weight, their_weight, atol=5e-2) and our_weight.abs().sum() > 0


def micro_batch_peak_mib(vocab: int, batch: int, length: int, chunk: int, entropy_bonus: bool) -> float:
    """Growth of peak RSS (MiB) over one chunked micro-batch, measured by benchmarks/logprob_memory.py's worker."""
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "logprob_memory.py"
    spec = importlib.util.spec_from_file_location("logprob_memory", path)
    benchmark = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(benchmark)
    return benchmark.peak_growth_mib("chunked", vocab, batch, length, chunk, entropy_bonus)


def test_micro_batch_peak_memory_does_not_grow_with_vocabulary_times_length():
    """8 x 1024 tokens over a 50k vocabulary: full float32 logits alone would be 1.6 GB (and the old loss
    held several such tensors). Chunked, the peak stays near chunk x vocab, whatever the length is."""
    vocab, batch, chunk = 50_000, 8, 256
    full_logits_mib = batch * 1024 * vocab * 4 / 2**20  # 1562 MiB
    long = micro_batch_peak_mib(vocab, batch, 1024, chunk, entropy_bonus=False)
    bonus = micro_batch_peak_mib(vocab, batch, 1024, chunk, entropy_bonus=True)
    short = micro_batch_peak_mib(vocab, batch, 128, chunk, entropy_bonus=True)
    per_chunk_mib = chunk * vocab * 4 / 2**20  # 49 MiB: one float32 chunk of logits
    for peak in (long, bonus):
        assert peak < full_logits_mib / 4, (long, bonus, short)
        assert peak < 12 * per_chunk_mib, (long, bonus, short)  # a bound set by the chunk, not by B x T
    assert bonus - short < 4 * per_chunk_mib, (long, bonus, short)  # 8x the tokens: (almost) no more memory
