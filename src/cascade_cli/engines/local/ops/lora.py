"""LoRA through peft for the local trainers: add adapters, their merged weights, the base model without them.

    model = apply(model, config.lora, keep=("score",))   # the same HF model object, adapters injected
    merged_state_dict(model)                             # plain HF names, adapters folded in (save, vLLM sync)
    with adapters_disabled(model): ...                   # the base model (GRPO's KL reference)

peft injects its layers into the HF model in place; the trainers keep using that model (not peft's wrapper),
so log-probs, generation and RM scoring read the same object with or without LoRA. Only the adapters (and the
`keep` modules, e.g. the reward model's score head) require gradients, so the optimizer holds nothing else.
trainer_state/ keeps the adapted model's own state dict (base + adapters + optimizer: an exact resume);
every weight sync gets `merged_state_dict`, and so does the checkpoint unless `lora.save` asks for PEFT's
adapter files (`save_adapter`, through the PeftModel wrapper `apply` keeps beside the model).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from cascade_cli.config.common import LoRAConfig

ADAPTER = "default"  # peft's adapter name
WRAPPER = "_cascade_peft_model"  # the PeftModel around an adapted model, kept out of its modules (no cycle)
_BASE, _KEPT, _ORIGINAL = ".base_layer.", f".modules_to_save.{ADAPTER}.", ".original_module."


def apply(model: Any, lora: LoRAConfig, keep: tuple[str, ...] = ()) -> Any:
    """Inject LoRA adapters into `model` (in place) when `lora.r > 0`; `keep` modules train fully."""
    if lora.r <= 0:
        return model
    from peft import LoraConfig, get_peft_model

    names = lora.target_modules.strip()
    targets: str | list[str] = names if names == "all-linear" else [n.strip() for n in names.split(",") if n.strip()]
    peft_config = LoraConfig(
        r=lora.r,
        lora_alpha=lora.alpha,
        lora_dropout=lora.dropout,
        target_modules=targets,
        modules_to_save=list(keep) or None,
    )
    try:
        # injects into `model`; the wrapper only writes the adapter files (save_adapter)
        model.__dict__[WRAPPER] = get_peft_model(model, peft_config)
    except ValueError as error:
        from cascade_cli.errors import CascadeUsageError

        raise CascadeUsageError(f"lora.target_modules: {str(error).splitlines()[0]}") from None
    return model


def _peft_loaded() -> bool:
    """Whether peft is imported: no model holds a peft layer before `apply` imports it, so a run without LoRA
    never pays for importing peft (~0.4 s of CPU) just to find none."""
    return "peft" in sys.modules


def lora_layers(model: Any) -> dict[str, Any]:
    """Module name -> peft LoRA layer, for every adapted layer of `model`."""
    if not isinstance(model, torch.nn.Module) or not _peft_loaded():
        return {}
    from peft.tuners.lora import LoraLayer

    return {name: module for name, module in model.named_modules() if isinstance(module, LoraLayer)}


def has_lora(model: Any) -> bool:
    return bool(lora_layers(model))


@torch.no_grad()
def merged_state_dict(model: Any) -> dict[str, torch.Tensor]:
    """`model`'s weights under plain HF names with every adapter folded in; the model itself is unchanged.
    Without LoRA it is `model.state_dict()` (the same tensors)."""
    state = model.state_dict()
    layers = lora_layers(model)
    if not layers:
        return state
    merged: dict[str, torch.Tensor] = {}
    for key, value in state.items():
        if ".lora_" in key or _ORIGINAL in key:
            continue
        merged[key.replace(_BASE, ".").replace(_KEPT, ".")] = value
    for name, layer in layers.items():
        weight = f"{name}.weight"
        merged[weight] = merged[weight] + layer.get_delta_weight(ADAPTER).to(merged[weight].dtype)
    return merged


def save_adapter(model: Any, directory: str | Path, base: str) -> None:
    """PEFT's adapter files (adapter_config.json naming `base`, adapter_model.safetensors) in `directory`:
    what `PeftModel.from_pretrained(base_model, directory)` loads."""
    wrapper = model.__dict__[WRAPPER]
    wrapper.peft_config[ADAPTER].base_model_name_or_path = base
    wrapper.save_pretrained(str(directory))
    (Path(directory) / "README.md").unlink(missing_ok=True)  # PEFT's template card; `cascade push` writes one


@contextlib.contextmanager
def adapters_disabled(model: Any) -> Iterator[Any]:
    """`model` computing as its base (adapters off, kept modules back to their original), in eval mode; a
    no-op for a model without LoRA. Leaves requires_grad alone (peft's own toggle would reset it)."""
    tuned = []
    if _peft_loaded():
        from peft.tuners.tuners_utils import BaseTunerLayer
        from peft.utils import ModulesToSaveWrapper

        tuned = [m for m in model.modules() if isinstance(m, BaseTunerLayer | ModulesToSaveWrapper)]
    was_training = model.training
    for module in tuned:
        module._disable_adapters = True
    model.train(False)
    try:
        yield model
    finally:
        for module in tuned:
            module._disable_adapters = False
        model.train(was_training)


def frozen_reference(model: Any) -> Any:
    """GRPO's KL reference, the initial policy: under LoRA the policy itself (read it inside
    `adapters_disabled`: the base weights never train), else a frozen copy."""
    if has_lora(model):
        return model
    import copy

    return copy.deepcopy(model).eval().requires_grad_(False)


def sync_weights(model: Any, generator: Any) -> None:
    """Send `model`'s merged weights (plain HF names) to a rollout engine; one that shares the module (the hf
    backend) already sees every update."""
    if getattr(generator, "model", None) is model:
        return
    generator.update_weights(merged_state_dict(model))
