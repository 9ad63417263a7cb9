"""Training commands take `--data` as users have it: a CSV, a TRL-layout file, a folder of Hub shards or a hub
id is prepared on the fly into OUT/data (with its data card); a prepared folder is read as it is; a source
that cannot be prepared (a hub id offline) says the exact `cascade prepare-data` command in one line."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cascade_cli.config.build import build_stage_config
from cascade_cli.config.grpo import RLVRConfig
from cascade_cli.data.io import load_canonical
from cascade_cli.data.stage_data import needs_preparing, prepared_stage_data
from cascade_cli.errors import CascadeUsageError

ROOT = Path(__file__).resolve().parents[1]
TRL_ROWS = [
    {
        "prompt": [{"role": "user", "content": f"What is {i} + {i}?"}],
        "completion": [{"role": "assistant", "content": f"{2 * i}"}],
    }
    for i in range(1, 7)
]


def _write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def _sft(cli, data: Path | str, out: Path):
    return cli(["sft", "--init", "tiny", "--data", data, "--out", out, "max_steps=2", "batch_size=2"])


def test_sft_prepares_a_trl_conversational_file_into_out_data(tmp_path, cli):
    source = _write_jsonl(tmp_path / "trl.jsonl", TRL_ROWS)
    result = _sft(cli, source, tmp_path / "sft")
    assert result.exit_code == 0, result.output
    rows = load_canonical(tmp_path / "sft" / "data")
    assert [row["messages"][-1]["content"] for row in rows] == [str(2 * i) for i in range(1, 7)]
    card = json.loads((tmp_path / "sft" / "data" / "data_card.json").read_text())
    assert card["source"] == str(source) and card["counts"]["rejected"] == 0
    manifest = json.loads((tmp_path / "sft" / "cascade_stage.json").read_text())
    assert manifest["config"]["data"] == str(tmp_path / "sft" / "data")  # the stage read the prepared rows
    assert (tmp_path / "sft" / "model.safetensors").is_file()


def test_sft_reads_a_csv_path_directly(tmp_path, cli):
    source = tmp_path / "qa.csv"
    with source.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["prompt", "completion"])
        writer.writerows([[f"What is {i} + {i}?", 2 * i] for i in range(1, 7)])
    result = _sft(cli, source, tmp_path / "sft")
    assert result.exit_code == 0, result.output
    rows = load_canonical(tmp_path / "sft" / "data")
    assert rows[0]["messages"] == [
        {"role": "user", "content": "What is 1 + 1?"},
        {"role": "assistant", "content": "2"},
    ]


def test_sft_reads_a_folder_of_hub_shards(tmp_path, cli):
    shards = tmp_path / "chat" / "data"
    shards.mkdir(parents=True)
    for index in range(2):
        rows = [{"prompt": f"q{index}-{i}", "completion": f"a{index}-{i}"} for i in range(3)]
        pq.write_table(pa.Table.from_pylist(rows), shards / f"train-0000{index}-of-00002.parquet")
    result = _sft(cli, tmp_path / "chat", tmp_path / "sft")
    assert result.exit_code == 0, result.output
    assert len(load_canonical(tmp_path / "sft" / "data")) == 6


def test_a_prepared_folder_or_a_file_the_stage_reads_is_used_as_it_is(tmp_path, cli):
    prepared = tmp_path / "prepared"
    assert cli(["prepare-data", "--source", "tiny:sft", "--out", prepared, "--n", "8"]).exit_code == 0
    assert not needs_preparing("sft", str(prepared))
    assert not needs_preparing("sft", str(prepared / "data.jsonl"))
    plain = _write_jsonl(tmp_path / "plain.jsonl", [{"prompt": "p", "response": "r"}])
    assert not needs_preparing("sft", str(plain))  # the SFT loader reads prompt + response itself
    assert needs_preparing("sft", str(_write_jsonl(tmp_path / "trl.jsonl", TRL_ROWS)))
    assert needs_preparing(
        "rlvr", str(_write_jsonl(tmp_path / "math.jsonl", [{"problem": "1+1?", "answer": "2"}]))
    )
    assert not needs_preparing("sft", str(prepared / "missing"))  # a local path that is not there
    assert not needs_preparing("sft", "rows.jsonl") and not needs_preparing("sft", str(tmp_path / "empty"))
    assert needs_preparing("sft", "HuggingFaceH4/ultrachat_200k") and needs_preparing("sft", "gsm8k")
    result = _sft(cli, prepared, tmp_path / "sft")
    assert result.exit_code == 0, result.output
    assert not (tmp_path / "sft" / "data").exists()


def test_rlvr_data_is_prepared_as_the_stage_domain(tmp_path):
    source = _write_jsonl(
        tmp_path / "math.jsonl", [{"problem": f"{i}+{i}?", "answer": 2 * i} for i in range(4)]
    )
    values = {"init": "tiny", "data": str(source), "out": str(tmp_path / "rl"), "domain": "math"}
    config = build_stage_config(RLVRConfig, values, [], where="rlvr")
    prepared = prepared_stage_data(config)
    assert prepared == str(tmp_path / "rl" / "data")
    rows = load_canonical(prepared, domain="math")
    assert [row["label"]["answer"] for row in rows] == ["0", "2", "4", "6"]


def test_hub_id_offline_says_the_prepare_data_command_in_one_line(tmp_path):
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""),
    }
    result = subprocess.run(
        [sys.executable, "-m", "cascade_cli", "sft", "--init", "tiny", "--data", "HuggingFaceH4/ultrachat_200k",
         "--out", "run"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in result.stderr, result.stderr
    assert "file not found" not in errors[0]
    assert (
        "cascade prepare-data --source HuggingFaceH4/ultrachat_200k --out run/data --domain sft" in errors[0]
    )


def test_data_map_and_data_prepare_reach_the_on_the_fly_preparation(tmp_path, cli):
    """A TRL user's own columns: `--data-map` is prepare-data's --map, `data_prepare.KEY=VALUE` its keys."""
    source = _write_jsonl(
        tmp_path / "qa.jsonl", [{"question": f"{i}+{i}?", "solution": 2 * i, "prompt": "x"} for i in range(6)]
    )
    values = {
        "init": "tiny", "data": str(source), "out": str(tmp_path / "rl"), "domain": "math",
        "data_map": {"prompt": "question", "answer": "solution"},
    }  # fmt: skip
    config = build_stage_config(RLVRConfig, values, ["data_prepare.limit=4"], where="rlvr")
    assert prepared_stage_data(config) == str(tmp_path / "rl" / "data")
    rows = load_canonical(tmp_path / "rl" / "data", domain="math")
    assert [(row["prompt"], row["label"]["answer"]) for row in rows] == [(f"{i}+{i}?", str(2 * i)) for i in range(4)]

    result = cli(["sft", "--init", "tiny", "--data", source, "--out", tmp_path / "sft", "--data-map",
                  "prompt=question,response=solution", "data_prepare.splt=x"])  # fmt: skip
    assert result.exit_code == 2 and "Traceback" not in result.output
    text = " ".join(result.output.split())
    assert "unknown key 'splt'" in text
    assert "--map prompt=question,response=solution splt=x" in text  # the command to run it yourself
    assert "--data-map" in " ".join(cli(["sft", "--help"]).output.split())


def test_data_map_on_a_prepared_folder_is_one_line(tmp_path):
    prepared = tmp_path / "prepared"
    prepared.mkdir()
    _write_jsonl(prepared / "data.jsonl", [{"id": "a", "domain": "math", "prompt": "1+1?", "label": {"answer": "2"}}])
    values = {"init": "tiny", "data": str(prepared), "out": str(tmp_path / "rl"), "domain": "math",
              "data_map": {"prompt": "question"}}  # fmt: skip
    config = build_stage_config(RLVRConfig, values, [], where="rlvr")
    with pytest.raises(CascadeUsageError, match="a prepared folder, read as it is"):
        prepared_stage_data(config)
    config = build_stage_config(RLVRConfig, {**values, "data_map": {}}, ["data_prepare.out=x"], where="rlvr")
    with pytest.raises(CascadeUsageError, match="data_prepare: out set by the stage"):
        prepared_stage_data(config)
