"""The lifecycle every local trainer runs through: SFT, the reward model, GRPO (RLHF and RLVR) and distill.

A trainer's entry point reads, top to bottom:

    stage = Stage.open(config, data=TRAIN_FILE, eval_data=HELDOUT_FILE)   # checks, init, inputs, resume
    if stage.completed is not None:
        return stage.completed                                 # same config and inputs: nothing to train
                                                               # (checked here, once: nothing below checks it)
    device = stage.setup()                                     # threads, device, seed
    tokenizer, model = stage.load_tokenizer(), stage.load_model()
    ... its own loop from stage.begin.step; stage.save_state(...) every save_every steps
    stage.save_final(model, tokenizer); return stage.complete(metrics, ...)

1. checks   what a run needs beyond its config class's own checks (config/checks.py): an init and an out;
2. init     the init checkpoint resolved once (models/resolve.py: embedded specs, folders, hub ids) into
            `stage.init`, a folder every later step loads as is (models/loader.where);
3. inputs   fingerprints of every input: the init checkpoint and any other model (their stage manifest, so
            a stage trained again since refuses a resume) and every data file the stage reads;
4. resume   manifest.check, then trainer_state.start: completed with the same config and inputs -> its
            metrics; unfinished -> resume from trainer_state/; anything changed -> exit 2 naming it, unless
            --restart;
5. compute  torch's threads, the device (models/loader.pick_device), the seed;
6. loading  models/loader: the tokenizer with a pad token and the chat template, the model on the device;
7. state    trainer_state/ (save_state), metrics.jsonl (metrics_log) and the manifest (manifest.StageManifest,
            as every other kind of stage writes it): running, then stopped
            or completed, written last so a kill before it leaves a resumable run; a completed stage drops
            its trainer_state/ unless keep_trainer_state. The manifest's `timings.elapsed_s` is the stage's
            time over every segment of a resumed run (each save carries it forward; what a cut run did after
            its last save was redone, so it counts once).
Held-out evaluation is heldout.py: the rule for which file a prepare-data folder gives, and the greedy path.
Code that trains outside a stage folder (tests, benchmarks) builds a `Stage(config, init)` itself.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cascade_cli.config.diff import class_defaults
from cascade_cli.config.structure import to_plain
from cascade_cli.console import console
from cascade_cli.engines.local.ops.compute import configure_threads
from cascade_cli.engines.local.train import trainer_state
from cascade_cli.errors import CascadeUsageError
from cascade_cli.manifest import MetricsLog, StageComplete, StageManifest, input_fingerprints, model_inputs
from cascade_cli.models import loader
from cascade_cli.models.resolve import resolve
from cascade_cli.template_choice import RECORD_KEY, TemplateUse, choose_template

ELAPSED_KEY = "elapsed_s"  # in trainer_state's extra values and the manifest's timings


@dataclass
class Stage:
    """One local training stage: its config, resolved init, inputs and where it starts (see the module doc)."""

    config: Any
    init: Path  # resolved once (`open`): the folder the tokenizer and model load from
    inputs: dict[str, str] = field(default_factory=dict)
    begin: trainer_state.Start = field(default_factory=trainer_state.Start)
    completed: dict[str, Any] | None = None  # the metrics of a stage already complete with this config
    device: str = "cpu"
    threads: int = 0
    started: float = field(default_factory=time.perf_counter)
    template: TemplateUse | None = None  # what the config's chat_template resolved to (load_tokenizer)
    first_prompt: str | None = None  # the first prompt the stage rendered (`rendered`)
    records: dict[str, Any] = field(default_factory=dict)  # more entries for the manifest (distill: its teachers')

    @classmethod
    def open(cls, config: Any, **files: str | Path | None) -> Stage:
        """Steps 1-4 for a config with an `out`; `files` are the data files the stage reads, by name."""
        if not config.init:
            raise CascadeUsageError("init: missing (give --init MODEL: tiny, a checkpoint directory or a hub id)")
        if not config.out:
            raise CascadeUsageError("out: missing (give --out DIR)")
        stage = cls(config, resolve(config.init, "init"))
        stage.inputs = input_fingerprints(models=model_inputs(config), **files)
        try:
            stage.begin = trainer_state.start(
                stage.out, stage.config_dict, kind=config.kind, restart=config.restart, resume=config.resume,
                fingerprints=stage.inputs, defaults=class_defaults(config),
            )
        except StageComplete as done:
            console.print(done.message, soft_wrap=True)
            stage.completed = done.metrics
        return stage

    @property
    def name(self) -> str:
        return self.config.name or self.config.kind

    @property
    def run_name(self) -> str:
        """The trackers' run name: the stage's name in a recipe, else KIND-OUT_FOLDER."""
        return self.config.name or f"{self.config.kind}-{self.out.name}"

    @property
    def out(self) -> Path:
        return Path(self.config.out or "")

    @property
    def config_dict(self) -> dict[str, Any]:
        return to_plain(self.config)

    # ---- compute and loading ------------------------------------------------------------------------------

    def setup(self, threads: int | None = None) -> str:
        """Step 5: torch's threads (`threads`, else $CASCADE_THREADS, else the idle cores), the device and the
        seed; returns the device."""
        import torch

        self.threads = configure_threads(threads)
        self.device = loader.pick_device()
        torch.manual_seed(self.config.seed)
        return self.device

    def load_tokenizer(self) -> Any:
        """The init's tokenizer, set up to render with the config's `chat_template` (template_choice.py)."""
        tokenizer = loader.load_tokenizer(self.init)
        choice = getattr(self.config, "chat_template", None)
        if choice is not None:  # the reward model has no choice: it reads cascade's rendering
            self.template = choose_template(tokenizer, choice, model_dir=self.init, sft=self.config.kind == "sft")
        return tokenizer

    def rendered(self, first_prompt: str) -> None:
        """The trainer rendered its data: the manifest keeps the first prompt; the output says which template
        (once the data loaded, so bad data still fails with its one line)."""
        self.first_prompt = first_prompt
        if self.template:
            console.print(self.template.line(self.config.init), soft_wrap=True)

    def load_model(self, *, dtype: Any = "float32", head: str = "causal", pad_id: int | None = None) -> Any:
        return loader.load_model(self.init, dtype=dtype, device=self.device, head=head, pad_id=pad_id)

    def prepare_for_training(self, model: Any, tokens: int, keep: tuple[str, ...] = ()) -> Any:
        return prepare_for_training(model, self.config, tokens, keep)

    # ---- state, metrics, manifest -------------------------------------------------------------------------

    def load_state(self, model: Any, optimizer: Any, scheduler: Any = None) -> None:
        trainer_state.load_state(self.begin, model, optimizer, scheduler)

    @property
    def elapsed_s(self) -> float:
        """Seconds since this segment opened, plus the earlier segments' up to the save it resumed from."""
        earlier = float(self.begin.extra.get(ELAPSED_KEY, 0.0)) if self.begin.resumed else 0.0
        return earlier + time.perf_counter() - self.started

    def save_state(self, step: int, model: Any, optimizer: Any, scheduler: Any = None, extra: dict | None = None) -> None:
        trainer_state.save_state(
            self.out, step=step, config=self.config_dict, model=model, optimizer=optimizer, scheduler=scheduler,
            extra={**(extra or {}), ELAPSED_KEY: self.elapsed_s}, fingerprints=self.inputs,
        )

    def save_last_state(
        self, step: int, total: int, model: Any, optimizer: Any, scheduler: Any = None, extra: dict | None = None
    ) -> None:
        """The state when the loop ends: what a run stopped before its last step resumes from; a completed
        stage keeps it only with keep_trainer_state."""
        if step < total or self.config.keep_trainer_state:
            self.save_state(step, model, optimizer, scheduler, extra)

    def metrics_log(self) -> MetricsLog:
        """metrics.jsonl and the trackers of `report_to` (named after the stage, with its config and tags); a
        resumed run keeps the lines up to its step."""
        from cascade_cli.trackers import Trackers, stage_tags

        resumed_at = self.begin.step if self.begin.resumed else None
        trackers = Trackers(
            self.config.report_to, self.out, name=self.run_name, config=self.config_dict, tags=stage_tags(self.config)
        )
        return MetricsLog(self.out, trackers, truncate_after_step=resumed_at)

    def record(self, status: str, metrics: dict[str, Any] | None = None, **timings: float) -> None:
        """The stage manifest (cascade_stage.json) with this status."""
        StageManifest(self.out, self.config, init=self.config.init, inputs=self.inputs).write(
            status, metrics or {}, timings={**timings, ELAPSED_KEY: round(self.elapsed_s, 3)},
            extra={**({RECORD_KEY: self.template.record(self.first_prompt)} if self.template else {}), **self.records}
            or None,
        )

    def save_final(self, model: Any, tokenizer: Any) -> None:
        """The HF checkpoint (weights + tokenizer; under LoRA as `lora.save` says) in OUT; the manifest comes
        after, in `complete`."""
        lora_save = self.config.lora.save if hasattr(self.config, "lora") else "merged"
        trainer_state.save_final(
            self.out, model, tokenizer, lora_save=lora_save, base=str(self.init), safe_serialization=True
        )

    def stopped(self, step: int, total: int, metrics: dict[str, Any], **timings: float) -> dict[str, Any]:
        """A run stopped before its last step (stop_after): its state is saved; a rerun resumes it."""
        self.record("stopped", metrics, **timings)
        console.print(f"stopped after step {step}/{total}; rerun the same command to resume")
        return metrics

    def complete(self, metrics: dict[str, Any], **timings: float) -> dict[str, Any]:
        """The manifest says completed; then the trainer state goes (unless keep_trainer_state): a kill
        before the manifest leaves a run that resumes, one after it a stage that is done."""
        self.record("completed", metrics, **timings)
        if not self.config.keep_trainer_state:
            trainer_state.drop_state(self.out)
        return metrics


def prepare_for_training(model: Any, config: Any, tokens: int, keep: tuple[str, ...] = ()) -> Any:
    """`config.gradient_checkpointing` (for micro-batches of `tokens` positions) and `config.lora` (`keep`:
    modules that train fully under LoRA) applied to `model`, in place; returns it."""
    from cascade_cli.engines.local.ops import grad_checkpointing, lora

    device = next(model.parameters()).device.type
    grad_checkpointing.enable(model, config.gradient_checkpointing, tokens, device)
    return lora.apply(model, config.lora, keep)
