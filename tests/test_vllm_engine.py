"""One in-process vLLM engine per process (engines/local/rollout/vllm_engine.py): reused across generators with the
checkpoint's weights reloaded in place, the same answers as a fresh engine, and torch's threads left alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cascade_cli.engines.local.rollout.generation import vllm_available
from cascade_cli.engines.local.rollout.vllm_engine import engine_key

sys.path.insert(0, str(Path(__file__).parent))
from test_grpo_support import build_model_dir  # noqa: E402

# argv: model A, model B (same architecture), model C (another architecture), prompts
SCRIPT = textwrap.dedent(
    """
    import json, sys
    import torch
    torch.set_num_threads(2)
    from cascade_cli.engines.local.rollout import vllm_engine
    from cascade_cli.engines.local.rollout.generation import Generator

    def greedy(model_dir):
        gen = Generator(model_dir, backend="vllm", seed=0, dtype="float32")
        tokens = [g[0].token_ids for g in gen.generate(prompts, max_new_tokens=12, temperature=0.0)]
        engine = vllm_engine._engine.llm
        gen.close()
        return tokens, engine

    if __name__ == "__main__":
        a, b, c, prompts = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
        a_first, engine_a = greedy(a)
        threads_after_start = torch.get_num_threads()
        b_tokens, engine_b = greedy(b)
        a_again, engine_a2 = greedy(a)
        c_tokens, engine_c = greedy(c)
        print(json.dumps({
            "a_first": a_first, "b": b_tokens, "a_again": a_again,
            "reused": engine_a is engine_b is engine_a2, "new_for_c": engine_c is not engine_a,
            "threads_after_start": threads_after_start,
        }))
    """
)


def other_architecture(model_dir: Path, out: Path) -> Path:
    """A copy of `model_dir` whose config differs (a shorter context): vLLM must build another engine."""
    import shutil

    shutil.copytree(model_dir, out)
    config = json.loads((out / "config.json").read_text())
    config["max_position_embeddings"] //= 2
    (out / "config.json").write_text(json.dumps(config))
    return out


def test_engine_key_ignores_names_and_tracks_architecture(tmp_path):
    a = build_model_dir(tmp_path / "a", seed=0)
    b = build_model_dir(tmp_path / "b", seed=1)
    key = engine_key(a, "float32", None, "cpu", {})
    assert engine_key(b, "float32", None, "cpu", {}) == key  # other weights, same engine
    assert engine_key(a, "bfloat16", None, "cpu", {}) != key
    assert engine_key(a, "float32", 256, "cpu", {}) != key
    config = json.loads((b / "config.json").read_text())
    config["num_hidden_layers"] += 1
    (b / "config.json").write_text(json.dumps(config))
    assert engine_key(b, "float32", None, "cpu", {}) != key


@pytest.mark.vllm
@pytest.mark.skipif(not vllm_available(), reason="vllm not installed")
def test_one_engine_serves_every_checkpoint_of_an_architecture(tmp_path):
    from cascade_cli.chat import render_prompt
    from cascade_cli.engines.local.rollout.generation import Generator

    a = build_model_dir(tmp_path / "a", seed=0)
    b = build_model_dir(tmp_path / "b", seed=1)
    c = other_architecture(a, tmp_path / "c")
    prompts = [render_prompt("add 2 and 3", "no_think"), render_prompt("a longer prompt, to pad", "think")]
    script = tmp_path / "run.py"
    script.write_text(SCRIPT)
    src = str(Path(__file__).parents[1] / "src")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    env.pop("OMP_NUM_THREADS", None)
    result = subprocess.run(
        [sys.executable, str(script), str(a), str(b), str(c), json.dumps(prompts)],
        capture_output=True, text=True, env=env, timeout=500,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    got = json.loads(result.stdout.strip().splitlines()[-1])
    assert got["reused"] and got["new_for_c"]
    assert got["threads_after_start"] == 2  # vLLM would have cut torch to one thread

    def hf(model_dir):
        gen = Generator(model_dir, backend="hf", dtype="float32")
        return [g[0].token_ids for g in gen.generate(prompts, max_new_tokens=12, temperature=0.0)]

    assert got["a_first"] == hf(a) == got["a_again"]  # the reloaded weights answer as a fresh engine would
    assert got["b"] == hf(b) != got["a_first"]
