"""Progress of long work: a live bar on a terminal, plain lines in a log.

On a terminal a rich bar redraws in place. Anywhere else (stderr sent to a file, a pipe, a CI log) a bar
shows nothing until it ends, so `Progress` prints a plain line when the work starts, every
`CASCADE_PROGRESS_SECONDS` (60 by default; from a thread, so also while one step runs long) and when it
ends:

    sft: step 120/4000 (3%), 2.10 step/s, elapsed 0:57, ETA 30:47, loss 0.6123

Every long loop reports through it (training steps, evaluation, data preparation, pass-rate sampling):

    with Progress("sft", total=4000, unit="step") as progress:
        for step in ...:
            ...
            progress.advance(note=f"loss {loss:.4f}")

`update(done=..., total=..., note=..., label=...)` sets any of them at once (e.g. one line per benchmark:
`progress.update(done=index, note=f"{name}: 500 problems x 8")`).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from types import TracebackType

from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.progress import Progress as RichProgress

from cascade_cli.console import console

INTERVAL_ENV = "CASCADE_PROGRESS_SECONDS"
DEFAULT_INTERVAL_S = 60.0
VERBOSE_ENV = "CASCADE_VERBOSE"  # set by `cascade --verbose`; worker processes inherit it
# The switches the libraries read when they are imported (transformers follows huggingface_hub's).
LIBRARY_BAR_SWITCHES = {"HF_HUB_DISABLE_PROGRESS_BARS": "1", "HF_DATASETS_DISABLE_PROGRESS_BARS": "1"}


def verbose() -> bool:
    return os.environ.get(VERBOSE_ENV, "") not in ("", "0")


def set_verbosity(wanted: bool) -> None:
    """`--verbose`: third-party progress bars and logs as the libraries print them. Otherwise they are off
    (transformers' "Loading weights", GGUF dequantization, datasets and hub downloads): the lines of
    `Progress` tell the story, and a bar written into a log file is noise."""
    if wanted:
        os.environ[VERBOSE_ENV] = "1"
        return
    for name, value in LIBRARY_BAR_SWITCHES.items():
        os.environ.setdefault(name, value)
    # A library imported already has read its switch: tell it directly.
    if "huggingface_hub" in sys.modules:
        from huggingface_hub.utils import disable_progress_bars

        disable_progress_bars()
    if "transformers" in sys.modules:
        from transformers.utils import logging as transformers_logging

        transformers_logging.disable_progress_bar()
    if "datasets" in sys.modules:
        from datasets.utils.logging import disable_progress_bar

        disable_progress_bar()


def log_interval() -> float:
    """Seconds between plain progress lines when stderr is not a terminal."""
    try:
        return max(0.01, float(os.environ.get(INTERVAL_ENV, DEFAULT_INTERVAL_S)))
    except ValueError:
        return DEFAULT_INTERVAL_S


def _clock(seconds: float) -> str:
    seconds = int(max(0, seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


def _rate(per_second: float, unit: str) -> str:
    if per_second <= 0:
        return f"- {unit}/s"
    return f"{per_second:.2f} {unit}/s" if per_second >= 0.1 else f"{1 / per_second:.1f} s/{unit}"


class Progress:
    """`label`: what runs (a stage, a benchmark); `total`: the steps it takes (None: unknown); `done`: steps
    already done (a resumed run); `note`: what it is doing now (a loss, a benchmark name); `transient`: the
    terminal bar disappears at the end; `enabled=False` prints nothing (work too small to report);
    `line_per_update`: in a log, also a line at every `advance` / `update` (steps that take a minute or more,
    such as RL steps, each get their line)."""

    def __init__(
        self,
        label: str,
        total: int | None = None,
        *,
        unit: str = "step",
        done: int = 0,
        note: str = "",
        transient: bool = False,
        enabled: bool = True,
        line_per_update: bool = False,
    ) -> None:
        self.label, self.total, self.unit, self.done, self.note = label, total, unit, done, note
        self.enabled, self.transient, self.line_per_update = enabled, transient, line_per_update
        self._first, self._started = done, time.monotonic()
        self._bar: RichProgress | None = None
        self._task = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None

    # ---- the caller's side ----------------------------------------------------------------------------

    def advance(self, steps: int = 1, note: str | None = None) -> None:
        self.update(done=self.done + steps, note=note)

    def update(
        self, done: int | None = None, *, total: int | None = None, note: str | None = None, label: str | None = None
    ) -> None:
        with self._lock:
            self.done = self.done if done is None else done
            self.total = self.total if total is None else total
            self.note = self.note if note is None else note
            self.label = self.label if label is None else label
        if self._bar is not None:
            self._bar.update(self._task, completed=self.done, total=self.total, note=self.note, label=self.label)
        elif self._ticker is not None and self.line_per_update:
            self._print()

    def line(self) -> str:
        """The plain progress line: label, step/total, rate, elapsed, ETA, note."""
        with self._lock:
            done, total, note = self.done, self.total, self.note
        elapsed = time.monotonic() - self._started
        rate = (done - self._first) / elapsed if elapsed > 0 else 0.0
        parts = [f"{self.unit} {done}/{total} ({100 * done / total:.0f}%)" if total else f"{self.unit} {done}"]
        parts += [_rate(rate, self.unit), f"elapsed {_clock(elapsed)}"]
        if total:
            parts.append(f"ETA {_clock((total - done) / rate)}" if rate > 0 else "ETA -")
        if note:
            parts.append(note)
        return f"{self.label}: " + ", ".join(parts)

    # ---- the two displays ---------------------------------------------------------------------------

    def __enter__(self) -> Progress:
        if not self.enabled:
            return self
        if console.is_terminal:
            self._bar = RichProgress(
                TextColumn("{task.fields[label]}", markup=False, style="bold"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                TextColumn("{task.fields[note]}", markup=False),
                console=console,
                transient=self.transient,
            )
            self._bar.start()
            self._task = self._bar.add_task("", total=self.total, completed=self.done, note=self.note, label=self.label)
        else:
            self._print()
            self._ticker = threading.Thread(target=self._tick, name=f"progress-{self.label}", daemon=True)
            self._ticker.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
        if self._ticker is not None:
            self._stop.set()
            self._ticker.join()
            self._ticker = None
            if kind is None:
                self._print()

    def _print(self) -> None:
        console.print(self.line(), soft_wrap=True)

    def _tick(self) -> None:
        while not self._stop.wait(log_interval()):
            self._print()
