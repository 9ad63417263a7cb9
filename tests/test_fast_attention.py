"""The fast decode path (GQA-native SDPA + preallocated KV cache) computes what stock transformers computes."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from cascade_cli.chat import render_prompt
from cascade_cli.engines.local.ops.fast_attention import PreallocatedKVCache, SharedPrompt
from cascade_cli.engines.local.rollout.generation import Generator
from cascade_cli.models.attention import GQA_SDPA, use_gqa_sdpa

sys.path.insert(0, str(Path(__file__).parent))
from test_grpo_support import build_model_dir  # noqa: E402

PROMPTS = [
    render_prompt("Compute 37+45.", "think"),
    render_prompt("Write a Python function f(x) that returns x plus 3.", "no_think"),
    render_prompt("hi", "no_think"),
]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return build_model_dir(tmp_path_factory.mktemp("fast") / "model", seed=3)


def load(model_dir: Path, fast: bool):
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    assert model.config.num_key_value_heads < model.config.num_attention_heads  # the tiny model is GQA
    if fast:
        assert use_gqa_sdpa(model)
        assert model.config._attn_implementation == GQA_SDPA
    return model


def padded_batch(tokenizer, texts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
    encoded = [tokenizer.encode(t, add_special_tokens=False) for t in texts]
    width = max(map(len, encoded))
    ids = torch.full((len(encoded), width), tokenizer.pad_token_id or 0)
    mask = torch.zeros_like(ids)
    for row, tokens in enumerate(encoded):
        ids[row, width - len(tokens) :] = torch.tensor(tokens)
        mask[row, width - len(tokens) :] = 1
    return ids, mask


def test_left_padded_forward_and_gradients_match_stock_sdpa(model_dir):
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    ids, mask = padded_batch(tokenizer, PROMPTS)
    losses, grads = [], []
    for fast in (False, True):
        model = load(model_dir, fast)
        logits = model(input_ids=ids, attention_mask=mask).logits
        loss = (logits.log_softmax(-1)[..., 5] * mask).sum()
        loss.backward()
        losses.append((logits * mask[..., None]).detach())
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters()]))
    torch.testing.assert_close(losses[1], losses[0], atol=2e-5, rtol=1e-4)
    torch.testing.assert_close(grads[1], grads[0], atol=2e-5, rtol=1e-3)


def test_generator_greedy_equals_transformers_generate(model_dir):
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    stock = load(model_dir, fast=False)
    generator = Generator(model_dir, backend="hf", dtype="float32")
    assert generator.model.config._attn_implementation == GQA_SDPA
    ours = generator.generate(PROMPTS, n=2, max_new_tokens=40, temperature=0.0, stop=[])
    for prompt, group in zip(PROMPTS, ours, strict=True):
        ids = torch.tensor([tokenizer.encode(prompt, add_special_tokens=False)])
        reference = stock.generate(
            ids, attention_mask=torch.ones_like(ids), max_new_tokens=40, do_sample=False, eos_token_id=None
        )[0, ids.shape[1] :].tolist()
        assert [c.token_ids for c in group] == [reference, reference]


def test_preallocated_cache_grows_in_place_and_refuses_overflow():
    cache = PreallocatedKVCache(capacity=5)
    first = torch.randn(2, 1, 3, 4)
    keys, _ = cache.update(first, first.clone(), layer_idx=0)
    buffer = cache.layers[0]._key_buffer
    keys, values = cache.update(torch.ones(2, 1, 2, 4), torch.ones(2, 1, 2, 4), layer_idx=0)
    assert cache.get_seq_length() == 5 and keys.shape == (2, 1, 5, 4)
    assert cache.layers[0]._key_buffer.data_ptr() == buffer.data_ptr()  # no copy of the cache per step
    torch.testing.assert_close(keys[:, :, :3], first)
    cache.batch_select_indices(torch.tensor([1]))
    assert cache.layers[0].keys.shape == (1, 1, 5, 4)
    with pytest.raises(ValueError, match="capacity 5 exceeded"):
        cache.update(torch.ones(1, 1, 1, 4), torch.ones(1, 1, 1, 4), layer_idx=0)


def test_models_not_on_sdpa_keep_their_attention(model_dir):
    model = AutoModelForCausalLM.from_pretrained(model_dir, attn_implementation="eager")
    assert not use_gqa_sdpa(model)
    assert model.config._attn_implementation == "eager"


def test_only_cpu_models_switch(model_dir):
    model = AutoModelForCausalLM.from_pretrained(model_dir).to("meta")  # stands in for any non-CPU device
    assert not use_gqa_sdpa(model)
    assert model.config._attn_implementation == "sdpa"


def test_saved_checkpoints_do_not_name_the_custom_attention(model_dir, tmp_path):
    model = load(model_dir, fast=True)
    model.save_pretrained(tmp_path)
    assert GQA_SDPA not in (tmp_path / "config.json").read_text()  # vLLM / OpenRLHF load it as usual


@pytest.mark.parametrize("n", [3, 4])
def test_shared_prompt_samples_what_the_repeated_cache_samples(model_dir, n):
    # Prompts of different lengths (left padding) and stops on common characters, so that rows end at
    # different steps: the batch is compacted, and prompts whose samples have all ended leave the grid.
    prompts = [*PROMPTS, render_prompt("Compute 8*7 and say why, twice.", "think")]
    outputs = {}
    for shared in (True, False):
        generator = Generator(model_dir, backend="hf", dtype="float32", seed=5, share_prompt=shared)
        outputs[shared] = generator.generate(
            prompts, n=n, max_new_tokens=48, temperature=1.0, stop=["e", "a"], logprobs=True
        )
    lengths = {len(c.token_ids) for group in outputs[True] for c in group}
    assert len(lengths) > 3 and {c.finish_reason for g in outputs[True] for c in g} == {"stop", "length"}
    for ours, repeated in zip(outputs[True], outputs[False], strict=True):
        assert [c.token_ids for c in ours] == [c.token_ids for c in repeated]
        assert [c.logprob_sum for c in ours] == pytest.approx([c.logprob_sum for c in repeated], abs=1e-4)


def test_shared_prompt_attention_matches_sdpa_over_the_whole_cache():
    torch.manual_seed(0)
    prompts, n, kv_heads, heads, width, dim, generated = 3, 4, 2, 4, 7, 8, 5
    prompt_keys, prompt_values = torch.randn(2, prompts, kv_heads, width, dim).unbind(0)
    prompt_mask = torch.ones(prompts, width, dtype=torch.long)
    prompt_mask[0, :3] = 0  # left padding
    cache = PreallocatedKVCache(width)
    cache.update(prompt_keys, prompt_values, layer_idx=0)
    shared = SharedPrompt(cache, prompt_mask, n)
    live = torch.tensor([0, 2, 3, 5, 6, 7])  # prompt 2's samples (8-11) have all ended, prompt 1 keeps two
    shared.select(live)
    keys, values = torch.randn(2, len(live), kv_heads, generated, dim).unbind(0)
    query = torch.randn(len(live), heads, 1, dim)
    out = shared.attend(query, keys, values, layer=0, scaling=None)
    prompt_of = live // n
    whole_keys = torch.cat([prompt_keys[prompt_of], keys], dim=2)
    whole_values = torch.cat([prompt_values[prompt_of], values], dim=2)
    mask = torch.cat([prompt_mask[prompt_of], torch.ones(len(live), generated, dtype=torch.long)], 1).bool()
    expected = torch.nn.functional.scaled_dot_product_attention(
        query, whole_keys, whole_values, attn_mask=mask[:, None, None, :], enable_gqa=True
    )
    assert len(shared.bias) == 2  # the ended prompt's keys and values were let go
    torch.testing.assert_close(out, expected.transpose(1, 2), atol=1e-5, rtol=1e-5)
