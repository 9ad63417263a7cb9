"""The model + tokenizer loader: every trainer (SFT, reward model, GRPO for RLHF and RLVR), the rollout
generator (so evaluation, TTS and pass-rate filtering) and the reward service load through it.

    path = resolve(spec, "init")                        # models/resolve.py: tiny, smollm2-135m, a folder, a hub id
    tokenizer = load_tokenizer(path)                    # a pad token and the chat template, always
    model = load_model(path, dtype="float32")           # a causal LM on pick_device()
    model = load_model(path, head="score")              # a reward model: one-output linear head `score`

On a CPU every loaded model attends through `gqa_sdpa` (models/attention.py). The device is chosen here
and nowhere else: the GPU when there is one. A `str` spec is resolved on the way (models/resolve.py); a
`Path` is a folder already resolved, loaded as is.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cascade_cli.chat import OWN_TEMPLATE, adopt_template
from cascade_cli.errors import CascadeUsageError
from cascade_cli.models.resolve import resolve
from cascade_cli.progress import verbose

DTYPES = ("float32", "bfloat16", "float16", "auto")
HEADS = ("causal", "score")
SCORE_HEAD = "score"  # OpenRLHF's value_head_prefix default; also HF's ...ForSequenceClassification head


def pick_device(device: str | None = None) -> str:
    """`device` when given, else `cuda` when a GPU is visible, else `cpu`."""
    import torch

    if device:
        return device
    return "cuda" if torch.cuda.is_available() else "cpu"


def quiet_transformers() -> None:
    """Silence transformers' per-file progress bars and info logs (our own progress tells the story) unless
    `cascade --verbose` asked for them."""
    from transformers.utils import logging as hf_logging

    if verbose():
        return
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()


def _torch_dtype(dtype: Any) -> Any:
    import torch

    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype not in DTYPES:
        raise CascadeUsageError(f"dtype: expected one of {', '.join(DTYPES)}; found {dtype!r}")
    return "auto" if dtype == "auto" else getattr(torch, dtype)


def where(spec: str | Path) -> Path:
    """The folder to load: a `Path` is one already resolved (a stage's init, resolved once when it opens) and
    is loaded as is; a `str` is a spec, resolved here (`resolve`)."""
    return spec if isinstance(spec, Path) else resolve(spec)


def load_tokenizer(spec: str | Path) -> Any:
    """The tokenizer saved with a checkpoint, with a pad token (eos when it has none) and, for a ChatML
    tokenizer, the project's chat template (`chat.adopt_template`), so every checkpoint saved with it
    carries the template."""
    from transformers import AutoTokenizer

    quiet_transformers()
    path = where(spec)
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(path))
    except OSError as error:
        raise CascadeUsageError(f"tokenizer {spec}: cannot load ({error})") from None
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    setattr(tokenizer, OWN_TEMPLATE, tokenizer.chat_template)
    adopt_template(tokenizer)
    return tokenizer


def load_model(
    spec: str | Path, *, dtype: Any = "float32", device: str | None = None, head: str = "causal", pad_id: int | None = None
) -> Any:
    """A model from a spec or checkpoint on `device` (default `pick_device()`).

    `head="causal"`: the causal LM. `head="score"`: a reward model, the checkpoint as is when it is one, or a
    causal-LM checkpoint's transformer with a fresh one-output `score` head (`pad_id`: the tokenizer's pad
    token, where the head reads the last real token). Master weights default to float32 (train in fp32,
    autocast to bf16); `dtype="auto"` keeps the checkpoint's."""
    import torch
    from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification

    from cascade_cli.models.attention import use_gqa_sdpa

    if head not in HEADS:
        raise ValueError(f"head: expected one of {', '.join(HEADS)}; found {head!r}")
    quiet_transformers()
    path = str(where(spec))
    try:
        if head == "causal":
            model = AutoModelForCausalLM.from_pretrained(path, dtype=_torch_dtype(dtype))
        else:
            model = AutoModelForSequenceClassification.from_pretrained(path, num_labels=1, dtype=_torch_dtype(dtype))
    except OSError as error:
        raise CascadeUsageError(f"model {spec}: cannot load ({error})") from None
    if head == "score":
        score = getattr(model, SCORE_HEAD, None)
        if not isinstance(score, torch.nn.Linear) or score.out_features != 1:
            raise CascadeUsageError(f"{spec}: expected a model with a one-output linear head named {SCORE_HEAD!r}")
        model.config.pad_token_id = pad_id
        model.config.value_head_prefix = SCORE_HEAD  # OpenRLHF reads this key first
    model = model.to(pick_device(device))
    use_gqa_sdpa(model)
    return model
