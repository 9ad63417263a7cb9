"""The `openrlhf` engine: a stage runs as OpenRLHF 0.11.2 jobs on a Ray cluster (rollouts by vLLM), rewarded by
our verifiers through the reward service (`cascade verify --serve`) or the reward_func file.

- jobs.py      typed stage config -> the exact OpenRLHF jobs, one builder per kind (named by the stage table):
               `ray job submit ... -- LAUNCHER openrlhf.cli.train_sft|train_rm ...` /
               `... -- python3 -m openrlhf.cli.train_ppo_ray ...` (one job per phase of a length schedule)
- launch.py    cluster.launcher -> how a non-Ray trainer starts (deepspeed on one node, the Ray driver,
               DeepSpeed's hostfile launcher, torchrun per srun task)
- ray_launch.py  the Ray driver: one torchrun per node in a STRICT_SPREAD placement group, logs by node rank
- slurm.py     one sbatch script per job (`recipe plan --launcher slurm`)
- preflight.py checks before the first submission: Ray reachable, enough nodes and GPUs, run_dir visible
- gloo_check.py  a CPU stand-in for the non-Ray trainers (one gloo group across the launched processes)
- cluster.py   the cluster block -> the `ray job submit` prefix and each role's nodes x GPUs per node
- validate.py  checks only: refuse unknown / ill-typed flags (against flags_0_11_2.json), clusters too small
               and colocation mismatches before anything is submitted
- data.py      canonical rows -> the JSONL OpenRLHF's datasets read (flags appended to user turns)
- flagset.py   OpenRLHF's own parsers rebuilt from its source; regenerates flags_0_11_2.json
- runner.py    run_openrlhf_stage(config, builder): dry run prints; a real run converts, submits, follows the logs and
               writes the stage manifest (job ids, output dir)

Select it with `engine: openrlhf` in a recipe stage (or `engine=openrlhf` on a command); cluster sizes and the
reward service URLs live in the stage's `cluster` block. Never imports engines/local. Imports run one way:
runner -> jobs, data; jobs -> validate, cluster; validate -> cluster, flagset (tests check there is no cycle).
"""
