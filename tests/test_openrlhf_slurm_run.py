"""The sbatch scripts of `recipe plan --launcher slurm` run under a real Slurm on this machine: slurmctld and
two slurmd (Debian's slurm-wlm runs several slurmd on one host, each a node: this machine's hostname and
`localhost`, so that the first node's name, the master address, resolves), munge for authentication. The
fixture installs slurm-wlm and munge with apt-get when they are absent (as root) and starts the daemons on
free ports with a config of its own; it stops what it started.

The trainer is the CPU stand-in gloo_check, put in place of openrlhf.cli.train_sft in the generated script:
the two srun tasks' torchruns form one gloo group and all-reduce, so a wrong rank, world size or master
address cannot pass.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cascade_cli.jsonl import write_jsonl

pytestmark = pytest.mark.slow  # daemons start in seconds, the job in ~20 s (installing Slurm: a minute more)

STAND_IN = "cascade_cli.engines.openrlhf.gloo_check"
REPO = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def ensure_installed() -> None:
    if shutil.which("slurmctld") and shutil.which("munged"):
        return
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        pytest.skip("Slurm is not installed and this user cannot apt-get install slurm-wlm munge")
    result = subprocess.run(
        ["apt-get", "install", "-y", "--no-install-recommends", "slurm-wlm", "munge"],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
    )
    if result.returncode != 0:
        pytest.fail(
            "apt-get install slurm-wlm munge failed:\n" + result.stdout[-2000:] + result.stderr[-2000:]
        )


def munge_works() -> bool:
    return subprocess.run("munge -n | unmunge", shell=True, capture_output=True).returncode == 0


SLURM_CONF = """\
ClusterName=cascadetest
SlurmctldHost={host}
SlurmctldPort={ctld_port}
SlurmdPort={d_port}
AuthType=auth/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool/%n
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd-%n.pid
SlurmctldLogFile={root}/slurmctld.log
SlurmdLogFile={root}/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
NodeName={host} NodeHostname={host} NodeAddr=127.0.0.1 Port={n1_port} CPUs={cpus} RealMemory=1000
NodeName=localhost NodeHostname={host} NodeAddr=127.0.0.1 Port={n2_port} CPUs={cpus} RealMemory=1000
PartitionName=cascade Nodes={host},localhost Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
"""


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    ensure_installed()
    host = socket.gethostname().split(".")[0]
    if host == "localhost":
        pytest.skip(
            "the test names its second Slurm node `localhost`; this machine's hostname is that already"
        )
    root = Path("/tmp") / f"slurmt{os.getpid()}"  # short, and readable by the daemons
    for folder in ("state", "spool"):
        (root / folder).mkdir(parents=True, exist_ok=True)
    conf = root / "slurm.conf"
    conf.write_text(
        SLURM_CONF.format(
            host=host,
            root=root,
            ctld_port=free_port(),
            d_port=free_port(),
            n1_port=free_port(),
            n2_port=free_port(),
            cpus=os.cpu_count() or 1,
        )
    )
    env = {**os.environ, "SLURM_CONF": str(conf)}
    started: list[subprocess.Popen] = []

    def start(*argv: str) -> None:
        """A daemon in the foreground (-F / -D), its output discarded; stopped when the fixture ends."""
        started.append(subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))

    if not munge_works():
        Path("/run/munge").mkdir(parents=True, exist_ok=True)
        shutil.chown("/run/munge", "munge", "munge")
        start("munged", "-F", "--force")
        time.sleep(1)
    start("slurmctld", "-D", "-f", str(conf))
    time.sleep(1)
    for node in (host, "localhost"):
        start("slurmd", "-D", "-f", str(conf), "-N", node)
    try:
        deadline, states = time.time() + 60, ""
        while time.time() < deadline:
            states = subprocess.run(
                ["sinfo", "-h", "-o", "%T %D"], env=env, capture_output=True, text=True
            ).stdout
            if states.split() == ["idle", "2"]:
                break
            time.sleep(1)
        else:
            logs = "".join(path.read_text()[-1500:] for path in root.glob("*.log"))
            pytest.fail(f"Slurm did not come up (sinfo: {states!r}):\n{logs}")
        yield env
    finally:
        for process in reversed(started):
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
        shutil.rmtree(root, ignore_errors=True)


def plan_sft(tmp_path: Path, env: dict[str, str]) -> Path:
    """`recipe plan --launcher slurm` of a 2-node SFT stage, its trainer replaced by the stand-in."""
    write_jsonl(
        tmp_path / "sft.jsonl",
        [
            {
                "id": "1",
                "source": "t",
                "domain": "sft",
                "mode": "think",
                "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}],
            }
        ],
    )
    (tmp_path / "r.yaml").write_text(
        "name: slurmtest\nmodel: Qwen/Qwen3-8B-Base\nrun_dir: runs/slurmtest\n"
        "defaults:\n  cluster: {nodes: 2, gpus_per_node: 1, gpu_resource: test_gpu, launcher: slurm,"
        " slurm_partition: cascade, slurm_time: '00:10:00'}\n"
        "stages:\n  sft: {kind: sft, engine: openrlhf, data: sft.jsonl, init: Qwen/Qwen3-8B-Base}\n"
    )
    return plan_with_stand_in(tmp_path, env, "01_sft.sbatch", "-m openrlhf.cli.train_sft")


def plan_with_stand_in(tmp_path: Path, env: dict[str, str], script_name: str, trainer: str) -> Path:
    """`cascade recipe plan r.yaml --out plan` in tmp_path; the `trainer` command of plan/SCRIPT_NAME replaced
    by the gloo_check stand-in; the plan's submit.sh."""
    result = subprocess.run(
        [sys.executable, "-m", "cascade_cli", "recipe", "plan", "r.yaml", "--out", "plan"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    script = tmp_path / "plan" / script_name
    text = script.read_text()
    assert trainer in text
    script.write_text(text.replace(trainer, trainer.replace(trainer.split()[-1], STAND_IN)))
    return tmp_path / "plan" / "submit.sh"


def submit_and_wait(submit: Path, env: dict[str, str]) -> tuple[str, str]:
    """Run submit.sh; wait for the job to leave the queue; (its final state, its log)."""
    result = subprocess.run(["bash", str(submit)], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    job_id = re.search(r"as job (\d+)", result.stdout).group(1)
    deadline = time.time() + 240
    while time.time() < deadline:
        shown = subprocess.run(
            ["scontrol", "show", "job", job_id], env=env, capture_output=True, text=True
        ).stdout
        state = re.search(r"JobState=(\w+)", shown).group(1)
        if state not in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING"):
            log = Path(re.search(r"StdOut=(\S+)", shown).group(1)).read_text()
            return state, log
        time.sleep(2)
    pytest.fail(f"job {job_id} still {state} after 240 s")


def job_env(slurm: dict[str, str], **extra: str) -> dict[str, str]:
    """The submitting shell's environment, which sbatch hands the job: cascade and torchrun on PATH."""
    src = str(REPO / "src")
    path = f"{Path(sys.executable).parent}{os.pathsep}{slurm['PATH']}"
    pythonpath = os.pathsep.join(filter(None, [src, slurm.get("PYTHONPATH")]))
    return {**slurm, "PATH": path, "PYTHONPATH": pythonpath, "MASTER_PORT": str(free_port()), **extra}


def test_sbatch_script_starts_one_torchrun_per_node_in_one_gloo_group(tmp_path, slurm):
    env = job_env(slurm)
    state, log = submit_and_wait(plan_sft(tmp_path, env), env)
    assert state == "COMPLETED", log
    checks = sorted(
        re.findall(
            r"gloo_check rank=(\d) node_rank=(\d) local_rank=0 world_size=(\d) master=(\S+) "
            r"host=\S+ sum=(\S+) expected=(\S+)",
            log,
        )
    )
    master = f"{sorted([socket.gethostname().split('.')[0], 'localhost'])[0]}:{env['MASTER_PORT']}"
    assert checks == [("0", "0", "2", master, "3", "3"), ("1", "1", "2", master, "3", "3")], log
    assert "wrote 1 rows to" in log  # the data conversion ran in the job, before the trainer
    report = json.loads((tmp_path / "runs" / "slurmtest" / "sft" / "config.json").read_text())
    assert report["world_size"] == 2 and report["sum"] == 3.0


def test_a_failing_node_fails_the_slurm_job_with_its_message(tmp_path, slurm):
    env = job_env(slurm, CASCADE_GLOO_CHECK_FAIL_RANK="1")
    state, log = submit_and_wait(plan_sft(tmp_path, env), env)
    assert state == "FAILED", log
    assert "gloo_check: node 1 fails on purpose" in log


def plan_rl(tmp_path: Path, env: dict[str, str]) -> Path:
    """`recipe plan --launcher slurm` of a 2-node math RL stage, train_ppo_ray replaced by the stand-in."""
    rows = [
        {
            "id": str(i),
            "source": "t",
            "domain": "math",
            "mode": "think",
            "prompt": f"{i}+1?",
            "label": {"answer": str(i + 1)},
        }
        for i in range(4)
    ]
    write_jsonl(tmp_path / "math.jsonl", rows)
    (tmp_path / "r.yaml").write_text(
        "name: slurmrl\nmodel: Qwen/Qwen3-8B-Base\nrun_dir: runs/slurmrl\n"
        "defaults:\n  cluster: {nodes: 2, gpus_per_node: 1, gpu_resource: test_gpu, launcher: slurm, vllm_engines: 2,"
        " reward_urls: ['http://127.0.0.1:9/get_reward'], slurm_partition: cascade, slurm_time: '00:10:00'}\n"
        "stages:\n  math_rl: {kind: rlvr, domain: math, engine: openrlhf, data: math.jsonl,"
        " init: Qwen/Qwen3-8B-Base, prompts_per_step: 2, group_size: 2, phases: [{steps: 1}]}\n"
    )
    return plan_with_stand_in(tmp_path, env, "01_math_rl.sbatch", "python3 -m openrlhf.cli.train_ppo_ray")


def test_rl_sbatch_script_starts_a_ray_cluster_on_the_allocation(tmp_path, slurm):
    # Ray's own ports off the defaults (another Ray on this machine may hold them); no token auth on loopback.
    env = job_env(
        slurm, RAY_PORT=str(free_port()), RAY_DASHBOARD_PORT=str(free_port()), RAY_AUTH_MODE="disabled"
    )
    state, log = submit_and_wait(plan_rl(tmp_path, env), env)
    assert state == "COMPLETED", log
    assert "ray_check nodes=2 expected=2" in log, log  # both allocated nodes joined before the job started
    report = json.loads((tmp_path / "runs" / "slurmrl" / "math_rl" / "config.json").read_text())
    assert report["nodes"] == 2 and "--actor.num_nodes" in report["argv"]
    leftover = subprocess.run(["pgrep", "-f", f"[-]-port={env['RAY_PORT']}"], capture_output=True, text=True)
    assert leftover.stdout == "", "the Ray head outlived its Slurm job"
