"""`report_to` (issue 51): a training stage and an evaluation report their metrics, config, tags and tables
to the real TensorBoard, wandb (offline) and MLflow (file store) libraries, and the test reads back what each
one wrote; each RL step's sampled rollouts go to OUT/rollouts.jsonl and to the trackers as a table."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from cascade_cli.engines.local.train.grpo import run_rlvr
from cascade_cli.manifest import read_metrics

sys.path.insert(0, str(Path(__file__).parent))
from test_grpo import toy_config  # noqa: E402
from tracker_files import mlflow_run, tensorboard_scalars, tensorboard_texts, wandb_run  # noqa: E402

ALL = ["tensorboard", "wandb", "mlflow"]


@pytest.fixture(autouse=True)
def offline_trackers(monkeypatch, single_thread):
    """No network, no account: wandb offline, MLflow's store under OUT; one thread (conftest.py)."""
    for name in (
        "WANDB_MODE",
        "WANDB_API_KEY",
        "MLFLOW_TRACKING_URI",
        "WANDB_PROJECT",
        "MLFLOW_EXPERIMENT_NAME",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")


def test_an_rl_stage_reports_to_every_tracker_and_logs_rollouts(tmp_path, tiny_dir, toy_verifier):
    config = toy_config(tmp_path, tiny_dir, steps=2, report_to=ALL, log_rollouts=3, name="toy_rl")
    run_rlvr(config)
    out = Path(config.out)
    metrics = read_metrics(out)
    rewards = [line["reward_mean"] for line in metrics]

    rollouts = [json.loads(line) for line in (out / "rollouts.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rollouts] == [1, 1, 1, 2, 2, 2]
    for row in rollouts:
        assert set(row) == {"step", "id", "prompt", "answer", "reward", "passed", "finish_reason"}
        assert (
            "Write" in row["prompt"] and isinstance(row["reward"], float) and isinstance(row["passed"], bool)
        )

    scalars = tensorboard_scalars(out / "tensorboard")
    assert [value for _, value in scalars["reward_mean"]] == pytest.approx(rewards)
    texts = tensorboard_texts(out / "tensorboard")
    assert "answer" in texts["rollouts"][0] and '"log_rollouts": 3' in texts["config"][0]

    run = wandb_run(out)
    assert run["name"] == "toy_rl" and {"cascade", "rlvr", "math"} <= set(run["tags"])
    assert run["config"]["lr"] == config.lr and run["config"]["report_to"] == ALL
    assert [float(run["history"][step]["reward_mean"]) for step in (1, 2)] == pytest.approx(rewards)
    assert run["history"][2]["rollouts/nrows"] == 3  # the table of step 2
    (table,) = out.glob("wandb/offline-run-*/files/" + run["history"][2]["rollouts/path"])
    assert json.loads(table.read_text())["columns"] == [
        "id",
        "prompt",
        "answer",
        "reward",
        "passed",
        "finish_reason",
    ]

    client, mlrun = mlflow_run(out)
    assert mlrun.info.run_name == "toy_rl" and mlrun.data.tags["cascade.tags"].startswith("cascade,rlvr")
    assert json.loads(mlrun.data.params["lr"]) == config.lr
    history = client.get_metric_history(mlrun.info.run_id, "reward_mean")
    assert [(m.step, m.value) for m in history] == [
        (1, pytest.approx(rewards[0])),
        (2, pytest.approx(rewards[1])),
    ]
    tables = [a.path for a in client.list_artifacts(mlrun.info.run_id, "rollouts")]
    assert tables == ["rollouts/step_000001.json", "rollouts/step_000002.json"]


def test_report_to_empty_writes_metrics_jsonl_alone(tmp_path, tiny_dir, toy_verifier):
    config = toy_config(tmp_path, tiny_dir, steps=1, report_to=[], log_rollouts=0)
    run_rlvr(config)
    out = Path(config.out)
    assert len(read_metrics(out)) == 1
    assert not any((out / name).exists() for name in ("tensorboard", "wandb", "mlruns", "rollouts.jsonl"))


def test_an_evaluation_reports_its_scores(tmp_path):
    from cascade_cli.config.eval import EvalSettings
    from cascade_cli.evaluation.run import evaluate_checkpoint

    settings = EvalSettings(limit=2, k=1, max_tokens=4, report_to=["mlflow"])
    results = evaluate_checkpoint("tiny", ["tiny_math"], settings, out_dir=tmp_path)
    client, mlrun = mlflow_run(tmp_path)
    assert mlrun.info.run_name == "eval-" + Path(results["model"]).name
    assert mlrun.data.metrics["tiny_math/score"] == results["benchmarks"]["tiny_math"]["score"]
    assert [a.path for a in client.list_artifacts(mlrun.info.run_id)] == ["samples"]


def test_a_misspelt_tracker_is_one_line_with_a_suggestion(cli, tmp_path):
    result = cli(
        ["sft", "--init", "tiny", "--data", "missing.jsonl", "--out", str(tmp_path), "--report-to", "wanb"]
    )
    assert result.exit_code == 2
    assert (
        "report_to: expected a list of tensorboard, wandb, mlflow; found 'wanb' (did you mean wandb?)"
        in result.output
    )


def test_the_openrlhf_engine_passes_the_trackers_through(tmp_path):
    from cascade_cli.config.grpo import RLVRConfig
    from cascade_cli.engines.openrlhf.jobs import rlvr_jobs
    from cascade_cli.engines.openrlhf.logger_args import MLFLOW_NOTE, WANDB_ENV_NOTE, WANDB_KEY_PLACEHOLDER

    def job(**values):
        config = RLVRConfig(
            domain="math", init="tiny", data="d.jsonl", out=str(tmp_path / "rl"), engine="openrlhf",
            prompts_per_step=8, group_size=2, **values,
        )  # fmt: skip
        config.cluster.reward_urls = ["http://127.0.0.1:5000/get_reward"]
        return rlvr_jobs(config)[0]

    default = job()
    assert default.args[default.args.index("--logger.tensorboard_dir") + 1] == str(
        tmp_path / "rl" / "tensorboard"
    )
    assert "--logger.wandb.key" not in default.args
    both = job(report_to=["wandb", "mlflow"])
    flags = dict(zip(both.args, both.args[1:], strict=False))
    assert (
        flags["--logger.wandb.key"] == WANDB_KEY_PLACEHOLDER and flags["--logger.wandb.project"] == "cascade"
    )
    assert "--logger.tensorboard_dir" not in both.args
    assert WANDB_ENV_NOTE in both.notes and MLFLOW_NOTE in both.notes
    offline = RLVRConfig(domain="math", init="tiny", data="d.jsonl", out=str(tmp_path / "rl"), engine="openrlhf",
                         prompts_per_step=8, group_size=2, report_to=["wandb"])  # fmt: skip
    offline.cluster.reward_urls = ["http://127.0.0.1:5000/get_reward"]
    offline.cluster.runtime_env_json = json.dumps({"env_vars": {"WANDB_MODE": "offline"}})
    assert WANDB_ENV_NOTE not in rlvr_jobs(offline)[0].notes


@pytest.mark.parametrize(("flag", "written"), [("[]", set()), ("tensorboard,mlflow", {"tensorboard", "mlruns"})])
def test_eval_report_to_flag_takes_a_list_or_none(cli, tmp_path, flag, written):
    """`cascade eval --report-to "[]"` (what its --help offers) writes results.json alone; a comma list writes each."""
    result = cli(["eval", "--model", "tiny", "--benchmarks", "tiny_math", "--limit", "1", "--k", "1", "--max-tokens", "4",
                  "--out", tmp_path, "--report-to", flag])  # fmt: skip
    assert result.exit_code == 0, result.output
    trackers = {name for name in ("tensorboard", "wandb", "mlruns") if (tmp_path / name).exists()}
    assert trackers == written
