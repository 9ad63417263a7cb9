"""`recipe plan --launcher slurm --out DIR`: the recipe as sbatch scripts, one per OpenRLHF job (and one per
local-engine stage or evaluation), and DIR/submit.sh chaining them with `--dependency=afterok`.

The scripts carry what `recipe plan` prints for Ray (the same data conversion, agent files and OpenRLHF
flags); only the launch differs (engines/openrlhf/slurm.py).
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from cascade_cli.config.common import ClusterConfig
from cascade_cli.recipe import lineage
from cascade_cli.recipe.plan import eval_argv, stage_argv
from cascade_cli.recipe.schema import Recipe, RecipeStage

SUBMIT = "submit.sh"


def use_launcher(stages: list[RecipeStage], launcher: str) -> None:
    """Set cluster.launcher on every openrlhf stage (what `--launcher` says for the whole plan)."""
    for stage in stages:
        if getattr(stage.config, "engine", "local") == "openrlhf":
            stage.config.cluster.launcher = launcher


def wants_slurm(stages: list[RecipeStage]) -> bool:
    return any(
        getattr(stage.config, "engine", "local") == "openrlhf" and stage.config.cluster.launcher == "slurm"
        for stage in stages
    )


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-")


def slurm_scripts(recipe: Recipe, stages: list[RecipeStage]) -> dict[str, str]:
    """File name -> script text, in submission order (submit.sh last)."""
    from cascade_cli.engines.openrlhf.agent_file import export_command
    from cascade_cli.engines.openrlhf.data import RL_KINDS
    from cascade_cli.engines.openrlhf.jobs import stage_jobs
    from cascade_cli.engines.openrlhf.runner import EPOCH_FILTER_PLAN, conversion_command
    from cascade_cli.engines.openrlhf.slurm import job_script, plain_script, submit_script
    from cascade_cli.stage_kinds import openrlhf_builder

    log_dir = (Path(recipe.recipe.run_dir) / "slurm_logs").resolve()
    openrlhf = [stage for stage in stages if getattr(stage.config, "engine", "local") == "openrlhf"]
    default_cluster = openrlhf[0].config.cluster if openrlhf else ClusterConfig()
    scripts: dict[str, str] = {}

    def names(name: str) -> tuple[str, str]:
        """(file name, Slurm job name) of the next script."""
        return f"{len(scripts) + 1:02d}_{_safe(name)}.sbatch", f"cascade-{_safe(name)}"

    def add_plain(name: str, cluster: ClusterConfig, lines: list[str]) -> None:
        file_name, job_name = names(name)
        scripts[file_name] = plain_script(job_name, cluster, log_dir, lines)

    whole_run = stages == recipe.stages
    if recipe.evaluates and recipe.eval.include_base and whole_run:
        add_plain("eval_base", default_cluster, [shlex.join(eval_argv(recipe, "base", recipe.recipe.model))])
    for stage in stages:
        stage, choices = lineage.resolve(recipe, stage, strict=False)
        config = stage.config
        comments = [f"# stage {stage.name} ({stage.kind.kind}): {shlex.join(stage_argv(stage))}"]
        comments += [f"#   {choice}" for choice in choices]
        if getattr(config, "engine", "local") != "openrlhf":
            add_plain(stage.name, config.cluster, [*comments, shlex.join(stage_argv(stage))])
        else:
            before = [*comments, shlex.join(conversion_command(config))]
            if config.kind in RL_KINDS and config.epoch_filter:
                before.append(f"# {EPOCH_FILTER_PLAN}")
            for job in stage_jobs(config, openrlhf_builder(config)):
                lines = [*before, *([export_command(*job.agent)] if job.agent else [])]
                file_name, job_name = names(job.name)
                scripts[file_name] = job_script(job, config.cluster, job_name, log_dir, lines)
                before = []
        if recipe.evaluates and stage.kind.produces_model:
            add_plain(
                f"eval_{stage.name}", default_cluster, [shlex.join(eval_argv(recipe, stage.name, stage.out))]
            )
    if recipe.evaluates:
        report = [
            "cascade",
            "report",
            recipe.recipe.run_dir,
            "--max-regression",
            str(recipe.eval.max_regression),
        ]
        add_plain("report", default_cluster, [shlex.join(report)])
    scripts[SUBMIT] = submit_script(list(scripts), log_dir)
    return scripts
