"""`chat_template: auto | model | cascade`: which template renders a model's prompts, in `cascade eval` and in
every training stage that renders prompts (sft, rlvr, rlhf, distill).

- `cascade`: cascade's rendering (chat.py): ChatML with the paper's mode flag (` /think`, ` /no_think`) on
  every user turn, for a ChatML tokenizer or one without a template; a tokenizer with another template
  (Llama 3, Gemma) keeps its own, with the flag appended to each user turn (its vocabulary has no ChatML).
- `model`: the tokenizer's own template as is: its own system prompt where it adds one, no mode flag. What
  lm-eval's `--apply_chat_template` renders, and what a stock model was trained on.
- `auto` (the default): `cascade` for a checkpoint cascade trained with its rendering (its tokenizer carries
  cascade's template, or its stage manifest says so) and for a model without a template; the model's own
  for any other model. SFT is the exception: `auto` adopts cascade's template on a stock model (the SFT data
  has thinking and non-thinking turns, which the flags select), and says so.

Mode flags go only where the template knows them, so under `model` every prompt renders with mode `none`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cascade_cli.chat import CHAT_TEMPLATE, MODEL_RENDERING, OWN_TEMPLATE, adopt_template
from cascade_cli.errors import CascadeUsageError

TEMPLATE_CHOICES: tuple[str, ...] = ("auto", "model", "cascade")
STAGE_MANIFEST = "cascade_stage.json"  # checkpoint.MANIFEST_NAME (not imported: that module pulls in torch)
RECORD_KEY = "chat_template"  # in results.json and cascade_stage.json


@dataclass(frozen=True)
class TemplateUse:
    """What `chat_template` resolved to for one model: `used` is cascade or model; `why` says how."""

    choice: str
    used: str
    why: str

    @property
    def mode_flags(self) -> bool:
        return self.used == "cascade"

    def record(self, first_prompt: str | None) -> dict[str, Any]:
        """The entry results.json and cascade_stage.json carry under `chat_template`."""
        return {
            "choice": self.choice,
            "used": self.used,
            "mode_flags": self.mode_flags,
            "why": self.why,
            "first_prompt": first_prompt,
        }

    def line(self, model: Any) -> str:
        """One line for the run's output."""
        what = (
            "cascade's (ChatML + mode flags)" if self.used == "cascade" else "the model's own (no mode flag)"
        )
        return f"chat template of {model}: {what}; chat_template {self.choice}: {self.why}"


def trained_template(model_dir: str | Path | None) -> str | None:
    """The template a cascade stage trained `model_dir` with (cascade or model), from its stage manifest; None
    where there is no such manifest (a stock model)."""
    if model_dir is None:
        return None
    try:
        manifest = json.loads((Path(model_dir) / STAGE_MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    record = manifest.get(RECORD_KEY) if isinstance(manifest, dict) else None
    used = record.get("used") if isinstance(record, dict) else None
    return used if used in ("cascade", "model") else None


def check_choice(choice: str) -> str:
    if choice not in TEMPLATE_CHOICES:
        raise CascadeUsageError(
            f"chat_template: expected one of {', '.join(TEMPLATE_CHOICES)}; found {choice!r}"
        )
    return choice


def check_openrlhf_template(choice: str) -> None:
    """Engine openrlhf renders with the template its job passes (cascade's; a non-ChatML init's own)."""
    if choice == "model":
        raise CascadeUsageError(
            "chat_template: model renders on engine local only (engine openrlhf renders with cascade's template); "
            "use chat_template auto or cascade, or engine local"
        )


def resolve_choice(
    own: str | None, choice: str, *, model_dir: str | Path | None = None, sft: bool = False
) -> TemplateUse:
    """What `choice` means for a model whose tokenizer was saved with template `own` (None: none)."""
    check_choice(choice)
    if choice != "auto":
        return TemplateUse(choice, choice, "set explicitly")
    if not own:
        return TemplateUse(choice, "cascade", "the tokenizer has no chat template of its own")
    if own == CHAT_TEMPLATE:
        return TemplateUse(choice, "cascade", "its tokenizer carries cascade's template (cascade trained it)")
    trained = trained_template(model_dir)
    if trained == "cascade":
        return TemplateUse(choice, "cascade", "its stage manifest says cascade trained it with its template")
    if sft:
        return TemplateUse(
            choice,
            "cascade",
            "a stock model: SFT adopts cascade's template, so the checkpoint carries it (chat_template: model keeps "
            "the model's own)",
        )
    if trained == "model":
        return TemplateUse(choice, "model", "its stage manifest says cascade trained it with the model's own template")
    return TemplateUse(choice, "model", "a model cascade did not train renders with its own template")


def choose_template(
    tokenizer: Any, choice: str = "auto", *, model_dir: str | Path | None = None, sft: bool = False
) -> TemplateUse:
    """Resolve `choice` for a tokenizer from `models.loader.load_tokenizer` and set it up to render that way
    (chat.render_prompt / render_segments read it); a checkpoint saved with it then carries that template."""
    own = getattr(tokenizer, OWN_TEMPLATE, tokenizer.chat_template)
    use = resolve_choice(own, choice, model_dir=model_dir, sft=sft)
    if use.used == "model":
        if not own:
            raise CascadeUsageError(
                f"chat_template: model: {model_dir or 'the model'} has no chat template of its own "
                "(use auto or cascade)"
            )
        tokenizer.chat_template = own
        setattr(tokenizer, MODEL_RENDERING, True)
    else:
        tokenizer.chat_template = own
        setattr(tokenizer, MODEL_RENDERING, False)
        adopt_template(tokenizer)
    return use
