"""Reading back what the real tracker libraries wrote (no tests here): TensorBoard event files, a wandb
offline run's `.wandb` record log, an MLflow file store."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

WANDB_HEADER = 7  # ":W&B", a 2-byte magic, a 1-byte version
BLOCK = 32 * 1024  # the LevelDB log layout wandb writes: 32 KiB blocks of CRC / length / type framed chunks
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def tensorboard_scalars(folder: Path) -> dict[str, list[tuple[int, float]]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(folder))
    events.Reload()
    return {tag: [(e.step, e.value) for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}


def tensorboard_texts(folder: Path) -> dict[str, list[str]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(folder), size_guidance={"tensors": 0})
    events.Reload()
    return {
        tag.removesuffix("/text_summary"): [
            e.tensor_proto.string_val[0].decode() for e in events.Tensors(tag)
        ]
        for tag in events.Tags()["tensors"]
    }


def wandb_records(path: Path) -> list[Any]:
    """The protobuf records of a `.wandb` file."""
    from wandb.proto import wandb_internal_pb2 as pb

    data = path.read_bytes()
    assert data[:4] == b":W&B", f"{path}: not a wandb run file"
    records, pending, at = [], b"", WANDB_HEADER
    while at + 7 <= len(data):
        if BLOCK - at % BLOCK < 7:  # a block's tail too short for a header is padding
            at += BLOCK - at % BLOCK
            continue
        length, kind = struct.unpack("<HB", data[at + 4 : at + 7])
        chunk = data[at + 7 : at + 7 + length]
        at += 7 + length
        if kind == 0 and length == 0:
            continue
        pending = chunk if kind in (FULL, FIRST) else pending + chunk
        if kind in (FULL, LAST):
            record = pb.Record()
            record.ParseFromString(pending)
            records.append(record)
    return records


def wandb_run(folder: Path) -> dict[str, Any]:
    """An offline run's name, tags, config and history rows ({step: {key: value}}) from OUT/wandb."""
    (path,) = folder.glob("wandb/offline-run-*/run-*.wandb")
    run: dict[str, Any] = {"history": {}, "config": {}}
    for record in wandb_records(path):
        kind = record.WhichOneof("record_type")
        if kind == "run":
            run["name"], run["tags"] = record.run.display_name, list(record.run.tags)
            run["config"].update({i.key: json.loads(i.value_json) for i in record.run.config.update})
        elif kind == "config":
            run["config"].update({i.key: json.loads(i.value_json) for i in record.config.update})
        elif kind == "history":
            row = {i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in record.history.item}
            run["history"][row.get("_step")] = row
    return run


def mlflow_run(folder: Path) -> tuple[Any, Any]:
    """(client, the one run) of the file store OUT/mlruns."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"file:{(folder / 'mlruns').resolve()}")
    experiment = client.get_experiment_by_name("cascade")
    (run,) = client.search_runs([experiment.experiment_id])
    return client, run
