"""Peak memory of one GRPO micro-batch: chunked log-probs from hidden states vs full float32 logits.

A random Qwen3 with a large vocabulary (default 50k), one micro-batch of B responses x T tokens after a shared
prompt, forward + backward of the token-level GRPO loss with the entropy computed too (tests/test_losses.py
runs the chunked side of this script to bound it). `full` is the usual
computation (the model's [B, T, V] logits, a float32 log-softmax and entropy over the whole vocabulary);
`chunked` is cascade's (`engines/local/ops/logprobs.py`: the LM head applied `--chunk` positions at a time and
recomputed in backward). Each runs in a fresh process; prints the growth of peak RSS and the ratio.

    python benchmarks/logprob_memory.py [--vocab 50000] [--batch 8] [--length 1024] [--chunk 256]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import textwrap

WORKER = """
import json, resource, sys, time
import torch
from transformers import AutoModelForCausalLM, Qwen3Config, Qwen3ForCausalLM
from cascade_cli.models.attention import use_gqa_sdpa
from cascade_cli.engines.local.ops.logprobs import response_hidden, token_logprobs
from cascade_cli.engines.local.ops.losses import grpo_loss

path, model_dir = sys.argv[1], sys.argv[7]
vocab, batch, length, chunk, bonus = (int(v) for v in sys.argv[2:7])
checkpointing, threads, limit_bytes = int(sys.argv[8]), int(sys.argv[9]), int(sys.argv[10])
torch.manual_seed(0)
torch.set_num_threads(threads)
if model_dir:
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    use_gqa_sdpa(model)  # the trainer's CPU attention (the rollout engine switches the shared policy to it)
    vocab = model.config.vocab_size
else:
    config = Qwen3Config(vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, head_dim=16, max_position_embeddings=4096)
    model = Qwen3ForCausalLM(config)
    model.config._attn_implementation = "sdpa"
model.train()
if checkpointing:
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
if limit_bytes:  # fail with an allocation error instead of pushing the machine into swap or the OOM killer
    resource.setrlimit(resource.RLIMIT_AS, (limit_bytes, limit_bytes))
prompt = list(range(1, 17)) if model_dir else list(range(1, 9))
responses = [torch.randint(1, vocab, (length,)).tolist() for _ in range(batch)]
peak_kib = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
before, began = peak_kib(), time.perf_counter()
try:
    if path == "chunked":
        hidden, tokens, present = response_hidden(model, [prompt] * batch, responses, pad=0, device="cpu")
        logprobs, entropy = token_logprobs(hidden, model.lm_head, tokens, 1.0, chunk, entropy_grad=bool(bonus))
    else:
        ids = torch.tensor([prompt + r for r in responses])
        logits = model(input_ids=ids).logits[:, len(prompt) - 1 : -1]
        all_logprobs = logits.float().log_softmax(-1)
        tokens = ids[:, len(prompt):]
        logprobs = all_logprobs.gather(-1, tokens[..., None]).squeeze(-1)
        entropy = -(all_logprobs.exp() * all_logprobs).sum(-1)
        present = torch.ones_like(tokens)
    loss, _ = grpo_loss(logprobs, present.float(), torch.ones(batch), batch * length, entropy,
                        entropy_coef=bonus * 0.01)
    loss.backward()
except (MemoryError, RuntimeError) as error:
    if "memory" not in str(error).lower() and not isinstance(error, MemoryError):
        raise
    print(json.dumps({"error": "out of memory: " + str(error).splitlines()[0][:120]}))
    sys.exit(0)
print(json.dumps({"peak_growth_mib": (peak_kib() - before) / 1024, "peak_rss_mib": peak_kib() / 1024,
                  "seconds": time.perf_counter() - began, "vocab": vocab}))
"""


def measure(
    path: str, vocab: int, batch: int, length: int, chunk: int, entropy_bonus: bool = False, *,
    model: str = "", checkpointing: bool = False, threads: int = 1, limit_bytes: int = 0,
) -> dict:
    """One micro-batch's forward + backward (`path`: full | chunked) in a fresh process: {peak_growth_mib,
    peak_rss_mib, seconds, vocab}, or {error} when it ran out of the `limit_bytes` address space.
    `model`: an HF model directory (default: a random one-layer Qwen3 with `vocab` entries)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "OMP_NUM_THREADS": str(threads)}
    args = [path, str(vocab), str(batch), str(length), str(chunk), str(int(entropy_bonus)), model,
            str(int(checkpointing)), str(threads), str(limit_bytes)]
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(WORKER), *args], capture_output=True, text=True, env=env
    )
    if done.returncode < 0:  # the kernel's OOM killer, typically
        return {"error": f"killed by signal {-done.returncode} (out of memory?)"}
    if done.returncode != 0:
        raise SystemExit(f"{path} worker failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def peak_growth_mib(path: str, vocab: int, batch: int, length: int, chunk: int, entropy_bonus: bool = False) -> float:
    """Growth of peak RSS (MiB) over one micro-batch's forward + backward (`path`: full | chunked), in a fresh
    process; `entropy_bonus` adds an entropy term to the loss (so the entropy carries gradients too)."""
    return measure(path, vocab, batch, length, chunk, entropy_bonus)["peak_growth_mib"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--vocab", type=int, default=50_000)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--length", type=int, default=1024)
    parser.add_argument("--chunk", type=int, default=256)
    args = parser.parse_args()
    one_logits_mib = args.batch * args.length * args.vocab * 4 / 2**20
    print(f"micro-batch {args.batch} x {args.length} tokens, vocabulary {args.vocab:,}: "
          f"one float32 logits tensor is {one_logits_mib:,.0f} MiB")
    full = peak_growth_mib("full", args.vocab, args.batch, args.length, args.chunk)
    chunked = peak_growth_mib("chunked", args.vocab, args.batch, args.length, args.chunk)
    print(f"full logits   peak growth {full:8,.0f} MiB")
    print(f"chunked ({args.chunk:>4}) peak growth {chunked:8,.0f} MiB")
    print(f"ratio chunked / full = {chunked / full:.3f}")


if __name__ == "__main__":
    main()
