"""The rollout generator: the hf loop against teacher-forced forward passes, stops, seeds, weight sync."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from cascade_cli.chat import render_prompt
from cascade_cli.engines.local.rollout.generation import Generator, resolve_backend, vllm_available
from cascade_cli.engines.local.rollout.token_sampling import TokenSampler
from cascade_cli.errors import CascadeUsageError

sys.path.insert(0, str(Path(__file__).parent))
from test_grpo_support import build_model_dir  # noqa: E402

PROMPTS = [
    render_prompt("add 2 and 3", "no_think"),
    render_prompt("a much longer prompt, to force padding", "think"),
]


# Two cores shared by many processes: one torch thread avoids OpenMP spin-waits (15x faster here).
pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return build_model_dir(tmp_path_factory.mktemp("gen") / "model", seed=0)


@pytest.fixture(scope="module")
def other_model_dir(tmp_path_factory) -> Path:
    return build_model_dir(tmp_path_factory.mktemp("gen") / "other", seed=1)


def test_auto_picks_hf_on_cpu(model_dir):
    assert resolve_backend("auto", model_dir, "cpu") == "hf"
    with pytest.raises(CascadeUsageError, match="rollout backend must be one of"):
        resolve_backend("tgi", model_dir, "cpu")


def test_batched_left_padded_greedy_equals_one_prompt_at_a_time(model_dir):
    gen = Generator(model_dir, backend="hf", dtype="float32")
    together = gen.generate(PROMPTS, n=2, max_new_tokens=24, temperature=0.0)
    assert [len(group) for group in together] == [2, 2]
    for prompt, group in zip(PROMPTS, together, strict=True):
        alone = gen.generate([prompt], n=1, max_new_tokens=24, temperature=0.0)[0][0]
        assert group[0].token_ids == alone.token_ids == group[1].token_ids


def test_logprob_sum_matches_a_teacher_forced_forward_pass(model_dir):
    gen = Generator(model_dir, backend="hf", dtype="float32", seed=3)
    completion = gen.generate([PROMPTS[1]], n=1, max_new_tokens=16, temperature=1.0, logprobs=True)[0][0]
    prompt_ids = gen.tokenizer.encode(PROMPTS[1], add_special_tokens=False)
    ids = torch.tensor([prompt_ids + completion.token_ids])
    with torch.no_grad():
        logits = gen.model(input_ids=ids).logits[0, len(prompt_ids) - 1 : -1].float()
    expected = logits.log_softmax(-1).gather(-1, torch.tensor(completion.token_ids)[:, None]).sum()
    assert completion.logprob_sum == pytest.approx(float(expected), abs=1e-3)


def test_stop_tokens_end_a_completion_and_are_reported(model_dir):
    gen = Generator(model_dir, backend="hf", seed=0)
    stops = list("aeiou ")
    groups = gen.generate(PROMPTS, n=16, max_new_tokens=12, temperature=1.0, stop=stops)
    stop_ids = {gen.tokenizer.convert_tokens_to_ids(s) for s in stops} | {gen.tokenizer.eos_token_id}
    assert len(stop_ids) == len(stops) + 1
    reasons = {c.finish_reason for group in groups for c in group}
    assert reasons == {"stop", "length"}  # a random model hits both within 16 x 2 samples
    for completion in (c for group in groups for c in group):
        assert not stop_ids & set(completion.token_ids[:-1])
        if completion.finish_reason == "stop":
            assert completion.token_ids[-1] in stop_ids
        else:
            assert len(completion.token_ids) == 12


def test_multi_token_stop_string_cuts_text(model_dir):
    gen = Generator(model_dir, backend="hf", dtype="float32")
    full = gen.generate([PROMPTS[0]], max_new_tokens=20, temperature=0.0, stop=[])[0][0]
    assert full.finish_reason == "length"
    stop_string = full.text[6:8]
    cut = gen.generate([PROMPTS[0]], max_new_tokens=20, temperature=0.0, stop=[stop_string])[0][0]
    assert cut.finish_reason == "stop"
    assert full.text.startswith(cut.text) and stop_string not in cut.text
    assert cut.token_ids == full.token_ids[: len(cut.token_ids)] and len(cut.token_ids) < 20


def test_seeded_sampling_is_reproducible_and_seed_dependent(model_dir):
    def sample(seed: int) -> list[list[int]]:
        gen = Generator(model_dir, backend="hf", seed=seed)
        return [c.token_ids for c in gen.generate(PROMPTS, n=4, max_new_tokens=10, temperature=1.0)[0]]

    assert sample(1) == sample(1)
    assert sample(1) != sample(2)
    gen = Generator(model_dir, backend="hf", seed=5)
    state = gen.rng_state()
    first = gen.generate(PROMPTS, n=2, max_new_tokens=8)
    gen.set_rng_state(state)
    assert [[c.token_ids for c in g] for g in gen.generate(PROMPTS, n=2, max_new_tokens=8)] == [
        [c.token_ids for c in g] for g in first
    ]


def test_sampler_filters():
    rng = torch.Generator().manual_seed(0)
    logits = torch.tensor([[0.0, 1.0, 3.0, 2.0]]).repeat(400, 1)

    def sample(temperature: float, top_p: float, top_k: int) -> set[int]:
        return set(TokenSampler(temperature, top_p, top_k, rng)(logits).tolist())

    assert sample(1.0, 1.0, 1) == {2}  # top_k=1 is greedy
    assert sample(1.0, 0.01, -1) == {2}  # tiny top_p keeps the best token
    assert sample(1.0, 1.0, 2) == {2, 3}
    assert sample(5.0, 1.0, -1) == {0, 1, 2, 3}
    assert sample(0.0, 1.0, -1) == {2}


def test_update_weights_and_shared_module(model_dir, other_model_dir):
    def tokens(gen: Generator) -> list[list[int]]:
        gen.set_rng_state(torch.Generator().manual_seed(7).get_state())
        return [c.token_ids for g in gen.generate(PROMPTS, n=3, max_new_tokens=12) for c in g]

    gen = Generator(model_dir, backend="hf", dtype="float32")
    target = Generator(other_model_dir, backend="hf", dtype="float32")
    before = tokens(gen)
    gen.update_weights(target.model.state_dict())
    after = tokens(gen)
    assert after == tokens(target)
    assert after != before

    shared = Generator.from_model(target.model, target.tokenizer)
    assert shared.model is target.model
    shared.update_weights(target.model.state_dict())  # same tensors: a no-op
    assert tokens(shared) == after


VLLM_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import torch
    from transformers import AutoModelForCausalLM
    from cascade_cli.engines.local.rollout.generation import Generator

    if __name__ == "__main__":
        model_dir, other_dir, prompts = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
        gen = Generator(model_dir, backend="vllm", seed=0, dtype="float32")
        before = gen.generate(prompts, max_new_tokens=12, temperature=0.0)
        gen.update_weights(AutoModelForCausalLM.from_pretrained(other_dir).state_dict())
        after = gen.generate(prompts, max_new_tokens=12, temperature=0.0)
        sampled = gen.generate(prompts, n=4, max_new_tokens=12, temperature=1.0, top_p=0.9, top_k=20)

        def sample():
            return [[c.token_ids for c in g] for g in gen.generate(prompts, n=4, max_new_tokens=12)]

        state = gen.rng_state()
        torch.manual_seed(123)
        caller_rng = torch.get_rng_state()
        first = sample()
        caller_untouched = torch.equal(torch.get_rng_state(), caller_rng)
        torch.manual_seed(456)  # the caller's RNG does not steer the engine's sampling
        gen.set_rng_state(state)
        replay = sample()
        onward = sample()
        gen.close()
        print(json.dumps({
            "before": [g[0].token_ids for g in before],
            "after": [g[0].token_ids for g in after],
            "sampled": [[c.finish_reason for c in g] for g in sampled],
            "replay_equal": replay == first,
            "onward_differs": onward != first,
            "caller_untouched": caller_untouched,
        }))
    """
)


@pytest.mark.slow
@pytest.mark.vllm
@pytest.mark.skipif(not vllm_available(), reason="vllm not installed")
def test_vllm_backend_matches_hf_greedy_reloads_weights_and_replays_its_rng(
    model_dir, other_model_dir, tmp_path
):
    import json

    script = tmp_path / "run_vllm.py"
    script.write_text(VLLM_SCRIPT)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            [str(Path(__file__).parents[1] / "src"), os.environ.get("PYTHONPATH", "")]
        ),
    }
    result = subprocess.run(
        [sys.executable, str(script), str(model_dir), str(other_model_dir), json.dumps(PROMPTS)],
        capture_output=True,
        text=True,
        env=env,
        timeout=500,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    got = json.loads(result.stdout.strip().splitlines()[-1])
    hf_before = Generator(model_dir, backend="hf", dtype="float32").generate(
        PROMPTS, max_new_tokens=12, temperature=0.0
    )
    hf_after = Generator(other_model_dir, backend="hf", dtype="float32").generate(
        PROMPTS, max_new_tokens=12, temperature=0.0
    )
    assert got["before"] == [g[0].token_ids for g in hf_before]
    assert got["after"] == [g[0].token_ids for g in hf_after]
    assert all(len(group) == 4 for group in got["sampled"])
    # The engine samples from the generator's own RNG state: restoring it replays the same samples.
    assert got["replay_equal"] and got["onward_differs"] and got["caller_untouched"]
