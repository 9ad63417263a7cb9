"""Gradient checkpointing for the local trainers: the `true | false | auto` rule, and the GRPO forward that
works under it.

transformers' checkpointing (`gradient_checkpointing_enable`, non-reentrant) keeps only each decoder layer's
input and recomputes the layer in backward. Its layers drop any KV cache while checkpointing (a replay would
write the cache twice), so the shared-prompt KV trick of `logprobs.response_hidden` cannot run under it:
`joint_hidden` runs every row as prompt + response in one pass instead (the same numbers, the prompt computed
once per row rather than once per group).

`auto` turns checkpointing on when one micro-batch's activations (estimated from the model's shape and the
stage's longest micro-batch; the constant is fit to benchmarks/memory.py on SmolLM2) would need more than a
quarter of the machine's memory (MemTotal on CPU, the device's memory on GPU): off where memory is plentiful
(it costs ~1/3 more compute), on before a long-sequence step would run out of memory. GRPO first splits its
step into smaller micro-batches (`fitting_micro_batch`), which saves the memory without the recompute.
Total, not free, memory: the choice must not flip between a run and its resume (the paths round differently).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from cascade_cli.console import console, print_warning

# Bytes of saved activations per token, per layer, per (hidden + intermediate) unit, in float32, without
# checkpointing. Fit to benchmarks/memory.py on SmolLM2-135M (30 layers, 576 + 1536 units), chunked log-probs
# with the closed-form head, bf16 autocast, 2 threads: peak growth 4,530 MiB at 8 x 256 and 6,983 MiB at
# 8 x 512 response tokens, 1.20 MiB per token = 20 bytes per unit (linear in tokens: no T^2 attention term).
ACTIVATION_BYTES_PER_UNIT = 20.0
MEMORY_SHARE = 0.25


def activation_bytes(model: Any, tokens: int) -> float:
    """Estimated saved activations of one forward + backward over `tokens` positions without checkpointing."""
    config = model.config
    config = getattr(config, "text_config", None) or config
    layers = getattr(config, "num_hidden_layers", 1)
    units = getattr(config, "hidden_size", 0) + getattr(config, "intermediate_size", 0)
    scale = next(model.parameters()).element_size() / 4  # bf16 activations are half the size
    return ACTIVATION_BYTES_PER_UNIT * scale * tokens * layers * units


def memory_bytes(device: str) -> float:
    """The memory training runs in: the CUDA device's total, else the host's MemTotal."""
    if device.startswith("cuda"):
        return float(torch.cuda.get_device_properties(torch.device(device)).total_memory)
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return float(line.split()[1]) * 1024
    except OSError:  # pragma: no cover - not Linux
        pass
    return float("inf")


def wanted(setting: str, model: Any, tokens: int, device: str) -> bool:
    """Whether `gradient_checkpointing: setting` means on for one micro-batch of `tokens` positions."""
    if setting != "auto":
        return setting == "true"
    need, memory = activation_bytes(model, tokens), memory_bytes(device)
    if need <= MEMORY_SHARE * memory:
        return False
    console.print(
        f"gradient checkpointing on (auto): one micro-batch of up to {tokens:,} tokens needs ~{need / 2**30:.1f} "
        f"GiB of activations, over {MEMORY_SHARE:.0%} of the {memory / 2**30:.1f} GiB {device} memory"
    )
    return True


def fitting_micro_batch(model: Any, setting: str, rows: int, row_tokens: int, device: str) -> int:
    """Under `auto`, the largest micro-batch of at most `rows` rows (halving) whose activations fit the rule
    above, so checkpointing is left for a single row that does not fit; `rows` under `true` / `false`.

    More micro-batches give the same gradient (gradient accumulation) without checkpointing's recompute.
    Measured on SmolLM2-135M (64 responses of <= 128 tokens, bf16 autocast, 2 threads): 4 micro-batches of
    16 rows 14.3 s at 4.8 GiB peak RSS, 2 of 32 rows 11.2 s at 5.7 GiB, one of 64 checkpointed 22.9 s at 7.2 GiB."""
    if setting != "auto":
        return rows
    budget = MEMORY_SHARE * memory_bytes(device)
    fitting = rows
    while fitting > 1 and activation_bytes(model, fitting * row_tokens) > budget:
        fitting = (fitting + 1) // 2
    if fitting < rows:
        console.print(
            f"micro-batches of {fitting} rows instead of {rows} (gradient_checkpointing: auto): {rows} rows of up "
            f"to {row_tokens:,} tokens need ~{activation_bytes(model, rows * row_tokens) / 2**30:.1f} GiB of "
            f"activations, over {MEMORY_SHARE:.0%} of the {memory_bytes(device) / 2**30:.1f} GiB {device} memory"
        )
    return fitting


def enable(model: Any, setting: str, tokens: int, device: str) -> bool:
    """Turn transformers' gradient checkpointing on when `setting` says so; True when it is on."""
    if not wanted(setting, model, tokens, device):
        return False
    if not getattr(model, "supports_gradient_checkpointing", False):
        print_warning(f"{type(model).__name__} has no gradient checkpointing; training without")
        return False
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    return True


def active(model: Any) -> bool:
    """True when a forward of `model` now would checkpoint its layers (they then drop any KV cache)."""
    return bool(getattr(model, "is_gradient_checkpointing", False)) and model.training and torch.is_grad_enabled()


def joint_hidden(
    base: Any, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, tokens: torch.Tensor, present: torch.Tensor
) -> torch.Tensor:
    """Final hidden states [B, R, H] predicting each response token, from one cache-free pass per row over the
    row's left-padded prompt [B, P] followed by its right-padded response [B, R]."""
    ids = torch.cat([prompt_ids, tokens[:, :-1]], dim=1)
    mask = torch.cat([prompt_mask, present[:, :-1]], dim=1)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    hidden = base(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=False).last_hidden_state
    return hidden[:, prompt_ids.shape[1] - 1 :]
