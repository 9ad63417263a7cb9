"""benchmarks/rm_heldout.py reuses a policy's cached answers only for the prompts and token limit they answered."""

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "rm_heldout", Path(__file__).resolve().parents[1] / "benchmarks" / "rm_heldout.py"
)
rm_heldout = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rm_heldout)

PROMPTS = [{"id": "a", "prompt": [{"role": "user", "content": "Name a fruit."}]},
           {"id": "b", "prompt": [{"role": "user", "content": "Name a colour."}]}]  # fmt: skip


def test_cached_answers_come_back_for_the_same_inputs(tmp_path: Path) -> None:
    cache = tmp_path / "rm.start.answers.jsonl"
    rm_heldout.write_answers(cache, "smollm2-135m", PROMPTS, 512, ["Apple.", "Blue."])
    assert rm_heldout.cached_answers(cache, "smollm2-135m", PROMPTS, 512) == ["Apple.", "Blue."]


def test_cached_answers_are_not_reused_for_other_prompts_a_limit_or_a_model(tmp_path: Path) -> None:
    cache = tmp_path / "rm.start.answers.jsonl"
    rm_heldout.write_answers(cache, "smollm2-135m", PROMPTS, 512, ["Apple.", "Blue."])
    other = [PROMPTS[0], {"id": "b", "prompt": [{"role": "user", "content": "Name a city."}]}]  # same ids and count
    assert rm_heldout.cached_answers(cache, "smollm2-135m", other, 512) is None
    assert rm_heldout.cached_answers(cache, "smollm2-135m", PROMPTS, 256) is None
    assert rm_heldout.cached_answers(cache, "runs/x/if_rl", PROMPTS, 512) is None
    assert rm_heldout.cached_answers(tmp_path / "missing.jsonl", "smollm2-135m", PROMPTS, 512) is None
