"""One sbatch script per OpenRLHF job (`cascade recipe plan RECIPE --launcher slurm --out DIR`), following
OpenRLHF's own Slurm examples:

- train_sft / train_rm (examples/scripts/train_nonrl_slurm.sh): one srun task per node, each running
  `torchrun --nnodes N --nproc_per_node G --node_rank $SLURM_NODEID --master_addr $MASTER_ADDR ...`, the
  master being the allocation's first node;
- train_ppo_ray (examples/scripts/train_ppo_ray_slurm.sh): a Ray cluster started on the allocation (`ray start
  --head` on the first node, `ray start --address` on the others, each an srun task in the background), then
  the job submitted to it from the first node, as the Ray plan submits it.

The OpenRLHF flags sit in a bash array (`TRAINER_ARGS=(...)`, each word quoted once) handed to the task's
command as "$@", so values with spaces and quotes (the chat template) survive srun and `bash -c` intact.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from cascade_cli.config.common import ClusterConfig, role_layout
from cascade_cli.engines.openrlhf.cluster import runtime_env
from cascade_cli.engines.openrlhf.jobs import OpenRLHFJob, _shell_word
from cascade_cli.engines.openrlhf.launch import split_entrypoint

RAY_PORT = 6379
DASHBOARD_PORT = 8265
NODES_WAIT_SECONDS = 300


def sbatch_header(
    name: str, cluster: ClusterConfig, nodes: int, per_node: int, log_dir: Path, exclusive: bool = True
) -> list[str]:
    """#SBATCH lines: one task per node; GPUs asked only where the cluster counts real ones (gpu_resource GPU).
    The script starts in the directory the plan was made in: the recipe's relative paths are relative to it."""
    lines = [
        "#!/usr/bin/env bash",
        f"#SBATCH --job-name={name}",
        f"#SBATCH --nodes={nodes}",
        "#SBATCH --ntasks-per-node=1",
        f"#SBATCH --output={log_dir}/{name}-%j.log",
    ]
    if cluster.gpu_resource == "GPU":
        lines += [f"#SBATCH --gpus-per-node={per_node}", *(["#SBATCH --exclusive"] if exclusive else [])]
    for option, value in (
        ("partition", cluster.slurm_partition),
        ("account", cluster.slurm_account),
        ("time", cluster.slurm_time),
    ):
        if value:
            lines.append(f"#SBATCH --{option}={value}")
    return [*lines, "set -euo pipefail", f"cd {shlex.quote(str(Path.cwd()))}"]


def srun_prefix(cluster: ClusterConfig) -> str:
    """srun, inside the job's container when cluster.slurm_container names one (pyxis), with the plan's
    directory mounted at the same path (run_dir and the data are below it or on a shared mount)."""
    if not cluster.slurm_container:
        return "srun"
    image = shlex.quote(str(cluster.slurm_container))
    here = shlex.quote(str(Path.cwd()))
    return f"srun --container-image={image} --container-mounts={here}:{here} --container-workdir={here}"


def trainer_args_line(args: list[str]) -> str:
    return "TRAINER_ARGS=(" + " ".join(map(_shell_word, args)) + ")"


def _task_word(word: str) -> str:
    """A word of a task's command line: $VARIABLES stay references the task's own shell expands."""
    return f'"{word}"' if word.startswith("$") else shlex.quote(word)


def torchrun_lines(job: OpenRLHFJob, cluster: ClusterConfig) -> list[str]:
    """One torchrun per node (srun: one task per node), ranks from each task's SLURM_NODEID."""
    module, args = split_entrypoint(job.entrypoint)
    launcher = job.entrypoint[: job.entrypoint.index(module) + 1]
    command = "exec " + " ".join(map(_task_word, launcher)) + ' "$@"'
    return [
        trainer_args_line(args),
        'MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
        "MASTER_PORT=${MASTER_PORT:-" + str(cluster.master_port or 29500) + "}",
        "export MASTER_ADDR MASTER_PORT",
        # --kill-on-bad-exit: a node that fails ends the others (else they wait for it until NCCL's timeout).
        f'{srun_prefix(cluster)} --kill-on-bad-exit=1 --nodes="$SLURM_JOB_NUM_NODES" --ntasks-per-node=1 '
        f'bash -c {shlex.quote(command)} torchrun "${{TRAINER_ARGS[@]}}"',
    ]


def ray_cluster_lines(job: OpenRLHFJob, cluster: ClusterConfig) -> list[str]:
    """A Ray cluster on the allocation, the job submitted to it, the cluster stopped when the script ends.
    RAY_PORT and RAY_DASHBOARD_PORT in the submitting environment override the ports."""
    srun = srun_prefix(cluster)
    module, args = split_entrypoint(job.entrypoint)
    submit = (
        'ray job submit --address "http://$HEAD_IP:$RAY_DASHBOARD_PORT" '
        f"--runtime-env-json {shlex.quote(runtime_env(cluster))} -- python3 -m {module}"
    )
    return [
        trainer_args_line(args),
        f"RAY_PORT=${{RAY_PORT:-{RAY_PORT}}}",
        f"RAY_DASHBOARD_PORT=${{RAY_DASHBOARD_PORT:-{DASHBOARD_PORT}}}",
        'mapfile -t NODES < <(scontrol show hostnames "$SLURM_JOB_NODELIST")',
        "HEAD_IP=$(srun --nodes=1 --ntasks=1 -w \"${NODES[0]}\" hostname --ip-address | awk '{print $1}')",
        "trap 'kill $(jobs -p) 2>/dev/null || true' EXIT  # the Ray nodes end with the script",
        f'{srun} --nodes=1 --ntasks=1 -w "${{NODES[0]}}" ray start --head --block --node-ip-address="$HEAD_IP" '
        '--port="$RAY_PORT" --dashboard-host=0.0.0.0 --dashboard-port="$RAY_DASHBOARD_PORT" &',
        'for node in "${NODES[@]:1}"; do',
        f'  {srun} --nodes=1 --ntasks=1 -w "$node" ray start --block --address="$HEAD_IP:$RAY_PORT" &',
        "done",
        f"for _ in $(seq {NODES_WAIT_SECONDS}); do  # until every node joined",
        '  joined=$(RAY_ADDRESS="$HEAD_IP:$RAY_PORT" python3 -c \'import ray; ray.init(); '
        'print(sum(n["Alive"] for n in ray.nodes()))\' 2>/dev/null || echo 0)',
        '  [ "$joined" -ge "$SLURM_JOB_NUM_NODES" ] && break',
        "  sleep 1",
        "done",
        '[ "${joined:-0}" -ge "$SLURM_JOB_NUM_NODES" ] || '
        f'{{ echo "ray: $joined of $SLURM_JOB_NUM_NODES nodes joined in {NODES_WAIT_SECONDS} s" >&2; exit 1; }}',
        f'srun --overlap --nodes=1 --ntasks=1 -w "${{NODES[0]}}" {submit} "${{TRAINER_ARGS[@]}}"',
    ]


def job_script(
    job: OpenRLHFJob, cluster: ClusterConfig, script_name: str, log_dir: Path, before: list[str]
) -> str:
    """The sbatch script of one job; `before`: shell lines the first node runs first (data conversion, the
    agent file)."""
    nodes, per_node = role_layout(cluster, None)
    header = sbatch_header(script_name, cluster, nodes, per_node, log_dir)
    body = ray_cluster_lines(job, cluster) if job.cli == "train_ppo_ray" else torchrun_lines(job, cluster)
    notes = [f"# note: {note}" for note in job.notes]
    return "\n".join([*header, f"# job {job.name} (openrlhf.cli.{job.cli})", *notes, *before, *body]) + "\n"


def plain_script(script_name: str, cluster: ClusterConfig, log_dir: Path, lines: list[str]) -> str:
    """A one-node script for what is not an OpenRLHF job (a local-engine stage, an evaluation)."""
    header = sbatch_header(script_name, cluster, 1, 1, log_dir, exclusive=False)
    return "\n".join([*header, *lines]) + "\n"


def submit_script(names: list[str], log_dir: Path) -> str:
    """submit.sh: every script in order, each starting after the previous one succeeded."""
    quoted = " ".join(shlex.quote(name) for name in names)
    return (
        "\n".join(
            [
                "#!/usr/bin/env bash",
                "# Submits the scripts beside it in order, each after the previous one succeeded (afterok).",
                "set -euo pipefail",
                'here=$(cd "$(dirname "$0")" && pwd)',
                f"mkdir -p {shlex.quote(str(log_dir))}  # Slurm does not create the --output directory",
                'previous=""',
                f"for script in {quoted}; do",
                '  previous=$(sbatch --parsable ${previous:+--dependency=afterok:$previous} "$here/$script")',
                '  echo "submitted $script as job $previous"',
                "done",
            ]
        )
        + "\n"
    )
