"""`cascade sft` on the local engine: masks, packing, loss, exact resume, manifest, CLI errors."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from cascade_cli import chat
from cascade_cli.cli import app
from cascade_cli.config.build import build_stage_config
from cascade_cli.config.sft import SFTConfig
from cascade_cli.engines.local.train import heldout
from cascade_cli.engines.local.train.rl_data import render_row
from cascade_cli.engines.local.train.rl_rewards import VerifierReward
from cascade_cli.engines.local.train.sft import load_eval_rows, run_sft, step_loss
from cascade_cli.engines.local.train.sft_data import BatchStream, Cursor, collate, load_examples, plan_epoch
from cascade_cli.errors import CascadeUsageError
from cascade_cli.manifest import read_manifest, read_metrics
from cascade_cli.models import loader


def math_rows(n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        a, b = rng.randint(0, 9), rng.randint(0, 9)
        mode = "think" if i % 3 else "no_think"
        answer = f"\\boxed{{{a + b}}}"
        response = chat.format_response(answer, f"{a}+{b} = {a + b}" if mode == "think" else None)
        rows.append(
            {
                "id": f"m{i}",
                "domain": "sft",
                "mode": mode,
                "source": "test",
                "label": {"answer": str(a + b)},
                "messages": [
                    {"role": "user", "content": f"What is {a}+{b}?"},
                    {"role": "assistant", "content": response},
                ],
            }
        )
    return rows


def write_rows(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


@pytest.fixture(scope="module")
def tokenizer(tiny_dir):
    return loader.load_tokenizer(str(tiny_dir))


@pytest.fixture
def data_dir(tmp_path) -> Path:
    write_rows(tmp_path / "data" / "data.jsonl", math_rows(48, seed=0))
    heldout = [
        {
            "id": f"h{i}",
            "domain": "math",
            "mode": "think",
            "prompt": f"What is {i}+1?",
            "label": {"answer": str(i + 1)},
        }
        for i in range(6)
    ]
    write_rows(tmp_path / "data" / "heldout.jsonl", heldout)
    return tmp_path / "data"


def sft_config(tiny_dir: Path, data: Path, out: Path, *overrides: str) -> SFTConfig:
    base = ["batch_size=8", "lr=3e-3", "warmup_ratio=0.1", "bf16=false", "max_steps=6"]
    return build_stage_config(
        SFTConfig, {"init": str(tiny_dir), "data": str(data), "out": str(out)}, [*base, *overrides]
    )


def test_assistant_only_masks(tmp_path, tokenizer):
    rows = [
        {
            "mode": "think",
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "What is 1+1?"},
                {"role": "assistant", "content": "<think>\n1+1 = 2\n</think>\n\n\\boxed{2}"},
                {"role": "user", "content": "And 2+2?"},
                {"role": "assistant", "content": "\\boxed{4}"},
            ],
        },
        {"mode": "no_think", "prompt": "What is 3+4?", "response": "\\boxed{7}"},
    ]
    examples = load_examples(write_rows(tmp_path / "d.jsonl", rows), tokenizer, max_seq_len=512)
    conversations = [
        rows[0]["messages"],
        [{"role": "user", "content": "What is 3+4?"}, {"role": "assistant", "content": "\\boxed{7}"}],
    ]
    trained = []
    for ids, mask, messages, row in zip(
        examples.input_ids, examples.loss_mask, conversations, rows, strict=True
    ):
        assert tokenizer.decode(ids) == chat.render_messages(messages, mode=row["mode"])
        spans, current = [], []
        for token, keep in zip(ids, mask, strict=True):
            if keep:
                current.append(token)
            elif current:
                spans.append(tokenizer.decode(current))
                current = []
        trained.append(spans)
    assert trained[0] == ["<think>\n1+1 = 2\n</think>\n\n\\boxed{2}<|im_end|>", "\\boxed{4}<|im_end|>"]
    assert trained[1] == ["\\boxed{7}<|im_end|>"]


def test_truncation_and_bad_rows(tmp_path, tokenizer):
    long = [
        {"messages": [{"role": "user", "content": "x" * 100}, {"role": "assistant", "content": "ok"}]},
        {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "y" * 100}]},
    ]
    examples = load_examples(write_rows(tmp_path / "long.jsonl", long), tokenizer, max_seq_len=40)
    assert len(examples) == 1 and examples.dropped == 1 and examples.truncated == 2
    assert len(examples.input_ids[0]) == 40
    bad = [math_rows(1, 0)[0], {"id": "x", "text": "no conversation"}]
    with pytest.raises(CascadeUsageError, match=r"bad\.jsonl: row 2: expected `messages` or `prompt`"):
        load_examples(write_rows(tmp_path / "bad.jsonl", bad), tokenizer, 64)
    no_answer = [{"messages": [{"role": "user", "content": "hi"}]}]
    with pytest.raises(CascadeUsageError, match="row 1: no assistant turn"):
        load_examples(write_rows(tmp_path / "na.jsonl", no_answer), tokenizer, 64)
    bad_mode = [{**math_rows(1, 0)[0], "mode": "thinking"}]
    with pytest.raises(CascadeUsageError, match="row 1: mode must be one of"):
        load_examples(write_rows(tmp_path / "mode.jsonl", bad_mode), tokenizer, 64)


def test_packing_keeps_examples_apart(tmp_path, tiny_dir, tokenizer):
    examples = load_examples(write_rows(tmp_path / "d.jsonl", math_rows(12, 3)), tokenizer, max_seq_len=128)
    plan = plan_epoch(
        examples.lengths, batch_size=2, seed=0, epoch=0, packing=True, max_seq_len=128, shuffle=True
    )
    assert sorted(i for batch in plan for row in batch for i in row) == list(range(12))
    assert all(sum(examples.lengths[i] for i in row) <= 128 for batch in plan for row in batch)
    model = loader.load_model(str(tiny_dir))
    packed = [collate(batch, examples, tokenizer.pad_token_id) for batch in plan]
    single = [collate([[i]], examples, tokenizer.pad_token_id) for i in range(12)]
    assert packed[0]["position_ids"] is not None and single[0]["position_ids"] is None
    total = sum(b["trainable"] for b in single)
    assert total == sum(b["trainable"] for b in packed) == sum(examples.trainable(i) for i in range(12))
    with torch.no_grad():
        packed_loss = sum(step_loss(model, b, total, "cpu", False).item() for b in packed)
        single_loss = sum(step_loss(model, b, total, "cpu", False).item() for b in single)
    assert packed_loss == pytest.approx(single_loss, rel=1e-5)


def test_batch_stream_resumes_mid_epoch(tokenizer):
    lengths = [random.Random(i).randint(5, 50) for i in range(30)]

    class Fake:
        def __init__(self):
            self.lengths = lengths

    stream = BatchStream(Fake(), batch_size=4, seed=1, packing=False, max_seq_len=64, shuffle=True)  # type: ignore[arg-type]
    first = stream.take(11)  # crosses into epoch 1 (8 micro-batches per epoch)
    assert stream.cursor == Cursor(1, 3)
    resumed = BatchStream(Fake(), 4, 1, False, 64, True, cursor=Cursor(1, 0))  # type: ignore[arg-type]
    assert resumed.take(3) == first[8:]
    assert first[:8] != first[8:] + first[:5]  # each epoch reshuffles


def test_sft_trains_writes_checkpoint_and_manifest(tmp_path, tiny_dir, data_dir):
    out = tmp_path / "out"
    config = sft_config(
        tiny_dir,
        data_dir,
        out,
        "max_steps=24",
        f"eval_prompts={data_dir}",
        "eval_max_new_tokens=24",
        "packing=true",
        "batch_size=2",
    )
    metrics = run_sft(config)
    losses = [row["loss"] for row in read_metrics(out)]
    assert len(losses) == 24
    assert sum(losses[-4:]) / 4 < 0.6 * sum(losses[:4]) / 4
    manifest = read_manifest(out)
    assert (
        manifest["status"] == "completed" and manifest["kind"] == "sft" and manifest["init"] == str(tiny_dir)
    )
    assert manifest["config"]["packing"] is True and manifest["config"]["lr"] == 3e-3
    assert manifest["data_fingerprints"]["data"].startswith("sha256:")
    for key in ("eval/init_accuracy", "eval/accuracy", "train/loss", "train/tokens_per_s"):
        assert key in manifest["metrics"], key
    assert manifest["metrics"]["eval/n"] == 6 and metrics["train/steps"] == 24
    from transformers import AutoModelForCausalLM, AutoTokenizer

    trained = AutoModelForCausalLM.from_pretrained(out)
    assert AutoTokenizer.from_pretrained(out).chat_template == chat.CHAT_TEMPLATE
    initial = AutoModelForCausalLM.from_pretrained(tiny_dir)
    assert not torch.equal(trained.model.embed_tokens.weight, initial.model.embed_tokens.weight)
    assert not (out / "trainer_state").exists()  # a completed stage is its checkpoint


def test_resume_after_stop_equals_uninterrupted_run(tmp_path, tiny_dir, data_dir):
    straight = tmp_path / "straight"
    run_sft(sft_config(tiny_dir, data_dir, straight, "max_steps=10", "grad_accum=2", "batch_size=4"))
    interrupted = tmp_path / "interrupted"
    stopped = run_sft(
        sft_config(
            tiny_dir, data_dir, interrupted, "max_steps=10", "grad_accum=2", "batch_size=4", "stop_after=4"
        )
    )
    assert stopped["train/steps"] == 4 and read_manifest(interrupted)["status"] == "stopped"
    assert not (interrupted / "model.safetensors").exists()
    saved_elapsed = json.loads((interrupted / "trainer_state" / "progress.json").read_text())["extra"]["elapsed_s"]
    assert 0 < saved_elapsed <= read_manifest(interrupted)["timings"]["elapsed_s"]
    run_sft(sft_config(tiny_dir, data_dir, interrupted, "max_steps=10", "grad_accum=2", "batch_size=4"))
    # The stage's time counts both segments: the first one's up to its save, then the resumed one.
    timings = read_manifest(interrupted)["timings"]
    assert timings["elapsed_s"] >= saved_elapsed + timings["total_s"] - 1e-3
    curve = [(row["step"], row["loss"], row["lr"]) for row in read_metrics(straight)]
    assert [(row["step"], row["loss"], row["lr"]) for row in read_metrics(interrupted)] == curve
    from safetensors.torch import load_file

    a, b = load_file(straight / "model.safetensors"), load_file(interrupted / "model.safetensors")
    assert all(torch.equal(a[key], b[key]) for key in a)
    # A changed config no longer trains afresh silently: it is a usage error naming the keys, unless restart.
    with pytest.raises(CascadeUsageError, match=r"different config: .*lr \(0.003 -> 0.001\), max_steps \(10 -> 3\)"):
        run_sft(sft_config(tiny_dir, data_dir, interrupted, "max_steps=3", "lr=1e-3"))
    changed = run_sft(sft_config(tiny_dir, data_dir, interrupted, "max_steps=3", "lr=1e-3", "restart=true"))
    assert changed["train/steps"] == 3 and len(read_metrics(interrupted)) == 3  # trained afresh


@pytest.mark.slow
def test_resume_after_sigkill_equals_uninterrupted_run(tmp_path, tiny_dir, data_dir):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    args = [
        sys.executable,
        "-m",
        "cascade_cli",
        "sft",
        "--init",
        str(tiny_dir),
        "--data",
        str(data_dir),
        "batch_size=4",
        "lr=3e-3",
        "bf16=false",
        "max_steps=30",
        "save_every=3",
    ]
    straight = tmp_path / "straight"
    subprocess.run([*args, "--out", str(straight)], check=True, env=env, capture_output=True)
    killed = tmp_path / "killed"
    process = subprocess.Popen(
        [*args, "--out", str(killed)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.time() + 300
    while time.time() < deadline and not (killed / "trainer_state" / "progress.json").exists():
        time.sleep(0.05)
    time.sleep(0.5)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert read_manifest(killed)["status"] == "running"
    subprocess.run([*args, "--out", str(killed)], check=True, env=env, capture_output=True)
    assert [r["loss"] for r in read_metrics(killed)] == [r["loss"] for r in read_metrics(straight)]


def test_heldout_file_rule_scoring_and_row_checks(tmp_path, data_dir):
    """One rule for every trainer: a folder gives heldout.jsonl, else data.jsonl, never the training file."""
    train_file = data_dir / "data.jsonl"
    assert heldout.heldout_file(data_dir, "eval_prompts", train_file) == data_dir / "heldout.jsonl"
    bare = write_rows(tmp_path / "bare" / "data.jsonl", math_rows(2, seed=1)).parent
    assert heldout.heldout_file(bare, "eval_data", train_file) == bare / "data.jsonl"
    with pytest.raises(CascadeUsageError, match=r"eval_data: .*data.jsonl is the file this stage trains on"):
        heldout.heldout_file(bare, "eval_data", bare / "data.jsonl")
    config = SFTConfig(init="tiny", data=str(data_dir), eval_prompts=str(data_dir), eval_limit=4)
    rows = load_eval_rows(config, train_file)
    assert len(rows) == 4 and render_row(rows[0], "think") == chat.render_prompt("What is 0+1?", mode="think")
    records = [
        {"response": "<think>\n\\boxed{3}\n</think>\n\n\\boxed{4}", "label": {"answer": "4"}},
        {"response": "<think>\n\\boxed{4}\n</think>\n\nno box", "label": {"answer": "4"}},
    ]
    assert [s.passed for s in VerifierReward("math").score(records)] == [True, False]
    bad = write_rows(tmp_path / "p.jsonl", [{"prompt": "hi", "label": {}}])
    with pytest.raises(CascadeUsageError, match=r"row 1: label: label must have key 'answer'"):
        load_eval_rows(SFTConfig(init="tiny", data=str(data_dir), eval_prompts=str(bad)), train_file)


runner = CliRunner()


def _one_line_error(result) -> str:
    text = result.output.strip()
    assert result.exit_code == 2, text
    assert "Traceback" not in text and len(text.splitlines()) == 1, text
    return text


def test_cli_errors(tmp_path, tiny_dir, data_dir):
    base = ["sft", "--init", str(tiny_dir), "--out", str(tmp_path / "o")]
    text = _one_line_error(runner.invoke(app, [*base, "--data", str(tmp_path / "missing.jsonl")]))
    assert "missing.jsonl: file not found" in text
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(math_rows(1, 0)[0]) + "\n\n" + '{"messages": [\n')
    assert "bad.jsonl: row 3: malformed JSON" in _one_line_error(
        runner.invoke(app, [*base, "--data", str(bad)])
    )
    text = _one_line_error(runner.invoke(app, [*base, "--data", str(data_dir), "learning_rate=1e-3"]))
    assert "unknown key 'learning_rate'" in text
    text = _one_line_error(runner.invoke(app, [*base, "--data", str(data_dir), "max_steps=ten"]))
    assert "max_steps: wrong type" in text
    (tmp_path / "empty").mkdir()  # (a folder holding data files is prepared on the fly: tests/test_stage_data.py)
    text = _one_line_error(runner.invoke(app, [*base, "--data", str(tmp_path / "empty")]))
    assert "no data.jsonl" in text


def test_cli_runs_sft_in_a_subprocess(tmp_path, tiny_dir, data_dir):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = tmp_path / "o"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "cascade_cli",
            "sft",
            "--init",
            str(tiny_dir),
            "--data",
            str(data_dir),
            "--out",
            str(out),
            "max_steps=2",
            "batch_size=4",
            "bf16=false",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "sft done: 2 steps" in done.stderr
    assert read_manifest(out)["status"] == "completed"


def test_step_loss_equals_transformers_loss_on_a_padded_batch(tmp_path, tiny_dir, tokenizer):
    """No attention mask with right padding and the LM head on assistant positions only give the same
    loss as transformers' own masked forward over the whole padded batch."""
    examples = load_examples(write_rows(tmp_path / "d.jsonl", math_rows(5, 7)), tokenizer, max_seq_len=128)
    batch = collate([[i] for i in range(5)], examples, tokenizer.pad_token_id)
    assert len(set(examples.lengths)) > 1  # really padded
    model = loader.load_model(str(tiny_dir))
    attention_mask = torch.zeros_like(batch["input_ids"])
    for row, length in enumerate(examples.lengths):
        attention_mask[row, :length] = 1
    with torch.no_grad():
        ours = step_loss(model, batch, batch["trainable"], "cpu", False)
        reference = model(
            input_ids=batch["input_ids"], attention_mask=attention_mask, labels=batch["labels"]
        ).loss
    assert ours.item() == pytest.approx(reference.item(), rel=1e-5)
