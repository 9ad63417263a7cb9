"""Test support for the RL tests: a random-init Qwen3 with a character tokenizer, saved as an HF directory.

(No tests here; `cascade_cli.tiny` replaces this once it lands.)
"""

from __future__ import annotations

from pathlib import Path

import torch

from cascade_cli.chat import CHAT_TEMPLATE, EXTRA_TOKENS, SPECIAL_TOKENS

CHARS = [chr(c) for c in range(32, 127)] + ["\n"]


def char_tokenizer():
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {token: i for i, token in enumerate([*SPECIAL_TOKENS, *EXTRA_TOKENS, *CHARS])}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="?"))
    core.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    core.decoder = decoders.Fuse()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=[*SPECIAL_TOKENS[:1], *EXTRA_TOKENS],
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def build_model_dir(path: Path, hidden: int = 64, layers: int = 2, seed: int = 0) -> Path:
    from transformers import Qwen3Config, Qwen3ForCausalLM

    tokenizer = char_tokenizer()
    torch.manual_seed(seed)
    config = Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=hidden * 2,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=32,  # vLLM CPU attention supports head_dim 32 and up
        max_position_embeddings=1024,
        tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
        initializer_range=0.1,
    )
    model = Qwen3ForCausalLM(config)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path
