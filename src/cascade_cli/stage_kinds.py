"""The table of stage kinds: kind -> config class, local runner, OpenRLHF job builder, CLI words, flags.

The recipe loader and runner, `recipe plan` and the CLI's stage commands all read `STAGE_KINDS`. Targets are
"module:attr" strings, so importing the table loads no engine. A kind is listed only once its command
works, so a recipe never names a stage nobody can run.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from cascade_cli import files
from cascade_cli.config.checks import validate
from cascade_cli.errors import CascadeUsageError

OPENRLHF_RUNNER = "cascade_cli.engines.openrlhf.runner:run_openrlhf_stage"
JOBS = "cascade_cli.engines.openrlhf.jobs"
EXTRA_ARGS = "cascade_cli.engines.openrlhf.extra_args:check_extra_args"  # openrlhf.extra_args: OpenRLHF's flags


@dataclass(frozen=True)
class StageKind:
    kind: str
    config: str  # "module:Class", the stage's config dataclass
    runner: str  # "module:function" on the local engine, called as runner(config) -> metrics dict
    command: tuple[str, ...]  # the CLI words, e.g. ("rlhf", "rm")
    flags: tuple[str, ...]  # config keys the command takes as --flags (required ones first), in this order
    options: tuple[str, ...] = ()  # more optional --flags of the CLI command (`recipe plan` writes key=value)
    openrlhf_jobs: str | None = None  # "module:function": config -> its OpenRLHF jobs; None: local only
    openrlhf_missing: str = ""  # local only: what OpenRLHF lacks to run this kind, and what would carry it
    produces_model: bool = True  # a policy: the next stage starts from it and the recipe evaluates it
    defaults_init: bool = True  # `init` defaults to the previous policy (prepare_data has none)
    # "module:function" for the checks a config class cannot make itself (a name in a registry outside
    # config/, e.g. prepare-data's formats); run with the class's own checks by `check`.
    registry_check: str | None = None

    def config_class(self) -> type:
        return load(self.config)

    def check(self, config: Any) -> None:
        """Every check of a stage config: its class's bounds and checks (config/checks.py), the model specs
        it names (a typo fails here with a did-you-mean, not after loading a model library), then the kind's
        registry check. The recipe loader (so `recipe validate`) and every run call this."""
        from cascade_cli.models.specs import check_spec

        validate(config)
        for key in MODEL_KEYS:
            check_spec(getattr(config, key, None), key)
        if self.registry_check:
            load(self.registry_check)(config)

    def run(self, config: Any) -> dict[str, Any]:
        """Check a stage config (and, on the local engine, that `out` is a folder it can write) and run it on
        its engine (`engine: local | openrlhf`)."""
        try:
            self.check(config)
            if config.engine == "local":
                from cascade_cli.models.specs import check_hub

                for key in MODEL_KEYS:
                    check_hub(getattr(config, key, None), key)
                if config.out:
                    files.output_dir(config.out, key="out")
            if "data" in self.flags and self.kind in STAGE_DATA_KINDS:  # a raw file or hub id: into OUT/data
                from cascade_cli.data.stage_data import prepared_stage_data

                config.data = prepared_stage_data(config)
        except CascadeUsageError as error:
            where = f"stage {config.name}" if config.name else " ".join(self.command)
            raise CascadeUsageError(f"{where}: {error}") from None
        if config.engine == "openrlhf":
            return load(OPENRLHF_RUNNER)(config, openrlhf_builder(config)) or {}
        return load(self.runner)(config) or {}


def load(target: str) -> Any:
    module_name, attribute = target.split(":")
    return getattr(importlib.import_module(module_name), attribute)


TRAINING_OPTIONS = ("engine", "dry_run", "restart", "report_to", "data_map")  # on every training command
# Kinds whose `data` may be a raw file, a folder of shards or a hub id, prepared on the fly into OUT/data.
STAGE_DATA_KINDS = ("sft", "reward_model", "rlhf", "rlvr", "distill")
MODEL_KEYS = ("init", "reward_model")  # config keys that name a model spec
# Read in OpenRLHF 0.11.2's source (README, Engines): the truncated importance weight is there
# (--algo.advantage.is_correction_*), the teachers are not.
MOPD_ON_OPENRLHF = (
    "OpenRLHF 0.11.2 has no per-sample teacher: the only second model whose per-token log-probs reach the loss "
    "is the KL reference, loaded from --actor.model_name_or_path (cli/train_ppo_ray.py) and applied to every "
    "sample alike (RemoteExperienceMaker.make_experience), and an agent function returns one scalar reward per "
    "sample; an experience maker holding one reference group per domain, loaded from the teacher checkpoints and "
    "routing each sample by its label's domain, would carry it. Run this stage with engine: local"
)

# One row per kind: kind, config class, local runner, CLI words, --flags, more --options, OpenRLHF jobs.
_KINDS = (
    StageKind("prepare_data", "cascade_cli.config.data:PrepareDataConfig", "cascade_cli.data.prepare:run_prepare_data",
              ("prepare-data",), ("source", "out"), produces_model=False, defaults_init=False,
              registry_check="cascade_cli.data.prepare:check_config"),
    StageKind("sft", "cascade_cli.config.sft:SFTConfig", "cascade_cli.engines.local.train.sft:run_sft",
              ("sft",), ("init", "data", "out"), ("chat_template", *TRAINING_OPTIONS), openrlhf_jobs=f"{JOBS}:sft_jobs",
              registry_check=EXTRA_ARGS),
    # Not a policy: the next stage's init skips it and the recipe does not generate with it. It starts from the
    # previous policy (the SFT checkpoint) like any stage.
    StageKind("reward_model", "cascade_cli.config.rm:RewardModelConfig",
              "cascade_cli.engines.local.train.reward_model:run_reward_model", ("rlhf", "rm"), ("init", "data", "out"),
              ("eval_data", "skip_bad_rows", *TRAINING_OPTIONS), f"{JOBS}:reward_model_jobs", produces_model=False,
              registry_check=EXTRA_ARGS),
    StageKind("rlhf", "cascade_cli.config.rlhf:RLHFConfig", "cascade_cli.engines.local.train.rlhf:run_rlhf",
              ("rlhf",), ("init", "reward_model", "data", "out"), ("eval_data", "chat_template", *TRAINING_OPTIONS),
              f"{JOBS}:rlhf_jobs", registry_check=EXTRA_ARGS),
    StageKind("rlvr", "cascade_cli.config.grpo:RLVRConfig", "cascade_cli.engines.local.train.grpo:run_rlvr",
              ("rlvr",), ("domain", "init", "data", "out"), ("eval_data", "chat_template", "reward_func", *TRAINING_OPTIONS),
              f"{JOBS}:rlvr_jobs", registry_check=EXTRA_ARGS),
    # Data, not a policy: samples with the previous policy (its `init`) and keeps the prompts inside a pass-rate
    # band, so the RL stage after it reads `${stages.NAME.out}` and starts from that same policy.
    StageKind("pass_rate_filter", "cascade_cli.data.pass_rate:PassRateFilterConfig",
              "cascade_cli.engines.local.rollout.pass_rate_runner:run_pass_rate_filter_stage", ("prepare-data", "filter"),
              ("init", "data", "out"), produces_model=False, registry_check="cascade_cli.data.pass_rate:check_required"),
    StageKind("distill", "cascade_cli.config.distill:DistillConfig", "cascade_cli.engines.local.train.distill:run_distill",
              ("distill",), ("init", "teachers", "data", "out"), ("eval_data", "domain_weights", "chat_template",
                                                                *TRAINING_OPTIONS),
              openrlhf_missing=MOPD_ON_OPENRLHF),
)
STAGE_KINDS: dict[str, StageKind] = {kind.kind: kind for kind in _KINDS}


def get_kind(kind: str) -> StageKind:
    return STAGE_KINDS[kind]


def run_config(config: Any) -> dict[str, Any]:
    """Run a stage config on its engine; what the CLI commands and the recipe runner call."""
    return get_kind(config.kind).run(config)


def openrlhf_builder(config: Any) -> Any:
    """The OpenRLHF job builder of a stage config's kind (config -> its jobs, in order)."""
    kind = STAGE_KINDS.get(config.kind)
    if kind is not None and kind.openrlhf_missing:
        raise CascadeUsageError(f"stage {config.name or config.kind}: engine openrlhf: {kind.openrlhf_missing}")
    if kind is None or kind.openrlhf_jobs is None:
        runs = ", ".join(name for name, entry in STAGE_KINDS.items() if entry.openrlhf_jobs)
        raise CascadeUsageError(
            f"stage {config.name or config.kind}: engine openrlhf runs kinds {runs}; found kind {config.kind!r}"
        )
    return load(kind.openrlhf_jobs)


def build_openrlhf_jobs(config: Any) -> list[Any]:
    """Every OpenRLHF job of a stage config, in order, built by its kind's builder from this table."""
    from cascade_cli.engines.openrlhf.jobs import stage_jobs

    return stage_jobs(config, openrlhf_builder(config))
