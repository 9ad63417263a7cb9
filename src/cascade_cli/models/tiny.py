"""The embedded default model: `tiny` or `tiny:SEED`.

Built offline and deterministically: a character-level tokenizer (every printable ASCII character plus
newline and tab is one token; anything else is `<unk>`; the ChatML, think and tool tags are single special
tokens) and a randomly initialised Qwen3-architecture causal LM of about 1.5M parameters. Both are saved
with `save_pretrained`, so transformers, vLLM and OpenRLHF read the directory like any hub checkpoint.
"""

from __future__ import annotations

import json
from pathlib import Path

from cascade_cli import chat
from cascade_cli.errors import CascadeUsageError
from cascade_cli.models.specs import TINY_SPEC, is_embedded_spec, is_tiny_spec  # noqa: F401  (this module's API too)

TINY_PREFIX = "tiny"
DEFAULT_SEED = 0
UNK_TOKEN = "<unk>"
PAD_TOKEN = "<|endoftext|>"  # as in Qwen: padding reuses end-of-text; it never carries loss
EOS_TOKEN = chat.IM_END
MARKER_NAME = "cascade_tiny.json"

# Printable ASCII (space..~) plus newline and tab: covers every tiny task and the real benchmark text we
# tokenize for evaluation once non-ASCII is mapped to <unk>.
CHARACTERS: tuple[str, ...] = tuple(chr(code) for code in range(32, 127)) + ("\n", "\t")

# Small enough to train on two CPU cores in minutes; head_dim 64 is a size every vLLM attention backend has.
MODEL_SHAPE = {
    "hidden_size": 128,
    "intermediate_size": 384,
    "num_hidden_layers": 6,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "max_position_embeddings": 4096,
    "rope_theta": 10000.0,
    "rms_norm_eps": 1e-6,
    "tie_word_embeddings": True,
}
VOCAB_MULTIPLE = 64

def tiny_seed(spec: str) -> int:
    match = TINY_SPEC.match(spec.strip())
    if match is None:
        raise CascadeUsageError(f"model {spec!r}: expected `tiny` or `tiny:SEED` (SEED an integer)")
    return int(match.group(1)) if match.group(1) is not None else DEFAULT_SEED


def special_tokens() -> list[str]:
    """Every token that must stay a single id, in id order (after <unk>)."""
    ordered = [PAD_TOKEN, *chat.SPECIAL_TOKENS, *chat.EXTRA_TOKENS]
    return list(dict.fromkeys(ordered))  # keep order, drop the duplicate <|endoftext|>


def tiny_vocab() -> dict[str, int]:
    tokens = [UNK_TOKEN, *special_tokens(), *CHARACTERS]
    return {token: index for index, token in enumerate(tokens)}


def build_tokenizer():
    """A character-level `PreTrainedTokenizerFast` with the project's chat template."""
    from tokenizers import Tokenizer, decoders, models
    from transformers import PreTrainedTokenizerFast

    vocab = tiny_vocab()
    # BPE without merges splits text into single characters; unknown characters become <unk>.
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token=UNK_TOKEN, fuse_unk=False))
    backend.decoder = decoders.Fuse()
    extra = [token for token in special_tokens() if token not in (PAD_TOKEN, EOS_TOKEN)]
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        unk_token=UNK_TOKEN,
        pad_token=PAD_TOKEN,
        eos_token=EOS_TOKEN,
        additional_special_tokens=extra,
        model_max_length=MODEL_SHAPE["max_position_embeddings"],
        padding_side="left",  # generation pads on the left; trainers build their own batches
        clean_up_tokenization_spaces=False,
    )
    # Re-registering as special makes the added-token matcher split them out before the BPE model sees text.
    tokenizer.add_special_tokens({"additional_special_tokens": extra})
    tokenizer.chat_template = chat.CHAT_TEMPLATE
    return tokenizer


def build_model(seed: int, vocab_size: int):
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    shape = dict(MODEL_SHAPE)
    rope_theta = shape.pop("rope_theta")
    padded_vocab = -(-vocab_size // VOCAB_MULTIPLE) * VOCAB_MULTIPLE
    vocab = tiny_vocab()
    config = Qwen3Config(
        vocab_size=padded_vocab,
        rope_parameters={"rope_type": "default", "rope_theta": rope_theta},
        hidden_act="silu",
        attention_bias=False,
        use_sliding_window=False,
        bos_token_id=vocab[chat.IM_START],
        eos_token_id=vocab[EOS_TOKEN],
        pad_token_id=vocab[PAD_TOKEN],
        dtype="float32",
        **shape,
    )
    cpu_state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    try:
        model = Qwen3ForCausalLM(config)
    finally:
        torch.random.set_rng_state(cpu_state)
    model.generation_config.eos_token_id = [vocab[EOS_TOKEN], vocab[PAD_TOKEN]]
    model.generation_config.pad_token_id = vocab[PAD_TOKEN]
    model.generation_config.bos_token_id = vocab[chat.IM_START]
    return model


def build_tiny(spec: str, out_dir: str | Path) -> Path:
    """Write the tiny tokenizer + model for `tiny`/`tiny:SEED` into `out_dir` and return it."""
    from transformers.utils import logging as hf_logging

    seed = tiny_seed(spec)
    hf_logging.disable_progress_bar()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer()
    model = build_model(seed, len(tokenizer))
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    (out_dir / MARKER_NAME).write_text(json.dumps({"spec": f"tiny:{seed}", "seed": seed}, indent=2) + "\n")
    return out_dir
