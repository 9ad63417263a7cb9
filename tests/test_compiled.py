"""`compile: true` (engines/local/ops/compiled.py): the compiled decoder trains the same model as eager, and a
machine without a C++ compiler trains eager after a warning."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cascade_cli.cli import app
from cascade_cli.engines.local.ops import compiled
from cascade_cli.manifest import read_metrics
from cascade_cli.models import loader
from cascade_cli.models.resolve import resolve_model

sys.path.insert(0, str(Path(__file__).parent))
from test_sft import math_rows, write_rows  # noqa: E402


def sft(data: Path, out: Path, compile_: bool) -> list[dict]:
    keys = f"max_steps=6 batch_size=4 lr=3e-3 bf16=false threads=1 compile={str(compile_).lower()}".split()
    result = CliRunner().invoke(app, ["sft", "--init", "tiny", "--data", str(data), "--out", str(out), *keys])
    assert result.exit_code == 0, result.output
    return read_metrics(out)


@pytest.mark.skipif(compiled.compiler_missing("cpu") is not None, reason="no C++ compiler for TorchInductor")
def test_compiled_sft_trains_the_same_model_as_eager(tmp_path):
    data = write_rows(tmp_path / "d.jsonl", math_rows(24, seed=3))  # think / no_think rows: lengths vary
    eager = sft(data, tmp_path / "eager", compile_=False)
    fused = sft(data, tmp_path / "compiled", compile_=True)
    assert len({row["tokens"] for row in eager}) > 1  # batches of several lengths go through one graph
    assert [row["tokens"] for row in fused] == [row["tokens"] for row in eager]
    for ours, reference in zip(fused, eager, strict=True):
        assert ours["loss"] == pytest.approx(reference["loss"], rel=1e-4)
        assert ours["grad_norm"] == pytest.approx(reference["grad_norm"], rel=1e-3)
    # Adam normalises each coordinate's step, so rounding-level gradient differences can move a weight by up
    # to lr per step: compare with how far training moved each tensor.
    init = loader.load_model(str(resolve_model("tiny", tmp_path / "models"))).state_dict()
    eager_w, fused_w = (
        loader.load_model(str(tmp_path / side)).state_dict() for side in ("eager", "compiled")
    )
    for name, start in init.items():
        moved = (eager_w[name] - start).abs().max().item()
        apart = (fused_w[name] - eager_w[name]).abs().max().item()
        assert apart <= 0.1 * moved + 1e-7, (name, apart, moved)


def test_without_a_cxx_compiler_training_runs_eager(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no g++, c++ or clang++ here
    monkeypatch.delenv("CXX", raising=False)
    assert "C++ compiler" in compiled.compiler_missing("cpu")
    assert compiled.compiler_missing("cuda") is None  # Inductor emits Triton there
    model = loader.load_model(str(resolve_model("tiny", tmp_path / "models")))
    assert compiled.training_decoder(model, enabled=True, device="cpu") is model.get_decoder()
    assert compiled.training_decoder(model, enabled=False, device="cpu") is model.get_decoder()


@pytest.mark.skipif(compiled.compiler_missing("cpu") is not None, reason="no C++ compiler for TorchInductor")
def test_layers_compile_in_place_and_generation_on_them_runs_eager(tmp_path):
    import torch

    from cascade_cli.engines.local.rollout.generation import Generator

    torch.manual_seed(0)
    model = loader.load_model(str(resolve_model("tiny", tmp_path / "models")))
    tokenizer = loader.load_tokenizer(str(resolve_model("tiny", tmp_path / "models")))
    expected = Generator.from_model(model, tokenizer).generate(["Compute 2+3."], n=2, max_new_tokens=12)
    decoder = compiled.training_decoder(model, enabled=True, device="cpu")
    assert decoder is model.get_decoder()  # regional: the model's own layers, compiled in place
    model.train()
    ids = torch.randint(5, 90, (2, 17))
    decoder(input_ids=ids, use_cache=False).last_hidden_state.sum().backward()  # compiles the training pass
    with torch.compiler.set_stance("fail_on_recompile"):
        with compiled.eager_generation():
            found = Generator.from_model(model, tokenizer).generate(["Compute 2+3."], n=2, max_new_tokens=12)
        assert [c.token_ids for c in found[0]] == [c.token_ids for c in expected[0]]
        with pytest.raises(RuntimeError, match="recompil"):  # the layers are compiled: eager needs asking for
            Generator.from_model(model, tokenizer).generate(["Compute 2+3."], n=2, max_new_tokens=12)
