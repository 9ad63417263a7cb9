"""Reward-model training: cascade's local trainer vs TRL's `RewardTrainer`, side by side in one process.

Same tiny model (random-init `tiny`, or --init CKPT), same pairs (tiny:pref rendered by `rm_text`, tokenized
once and handed to both as ids), same optimiser settings (AdamW 0.9/0.95, cosine schedule with warmup,
batch, LR, one epoch), same thread count. Prints tokens/s of each and the ratio, and the held-out pairwise
accuracy of each model scored by the same function.

    PYTHONPATH=src python benchmarks/rm_vs_trl.py --pairs 256 --heldout 64
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--init", default="tiny")
    parser.add_argument("--pairs", type=int, default=256)
    parser.add_argument("--heldout", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--threads", type=int, default=0, help="torch threads for both (0: every core)")
    parser.add_argument("--repeats", type=int, default=2, help="rounds, alternating which trainer goes first")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args()

    import torch
    from bench_stage import bare_stage
    from datasets import Dataset
    from transformers.utils import logging as hf_logging
    from trl import RewardConfig, RewardTrainer

    from cascade_cli.config.rm import RewardModelConfig
    from cascade_cli.data.tiny_tasks import generate
    from cascade_cli.engines.local.ops.compute import configure_threads
    from cascade_cli.engines.local.train import reward_model as rm
    from cascade_cli.verifiers.reward_model import encode, load_reward_model, rm_text

    hf_logging.set_verbosity_error()
    threads = configure_threads(args.threads or None)
    train = [rm.parse_pair(row, i + 1) for i, row in enumerate(generate("pref", args.pairs, seed=0))]
    heldout = [rm.parse_pair(r, i + 1) for i, r in enumerate(generate("pref", args.heldout, split="heldout"))]
    work = Path(tempfile.mkdtemp(prefix="rm-vs-trl-"))
    config = RewardModelConfig(
        init=args.init, data="-", out=str(work / "ours"), batch_size=args.batch_size,
        micro_batch=args.batch_size, lr=args.lr, bf16=False, epochs=1.0,
    )

    def run_ours() -> tuple[float, float]:
        model, tokenizer, summary = rm.train_reward_model(bare_stage(config), train, [])
        return summary["tokens_per_s"], rm.pairwise_metrics(model, tokenizer, heldout, config)["accuracy"]

    def run_trl() -> tuple[float, float]:
        torch.manual_seed(config.seed)
        trl_model, tokenizer = load_reward_model(args.init, device="cpu")

        def ids(pair: rm.Pair, side: str) -> list[int]:
            return encode(tokenizer, [rm_text(pair.prompt, side, pair.mode)], config.max_seq_len)[0]

        dataset = Dataset.from_list(
            [{"chosen_ids": ids(p, p.chosen), "rejected_ids": ids(p, p.rejected)} for p in train]
        )
        tokens = sum(len(row["chosen_ids"]) + len(row["rejected_ids"]) for row in dataset)
        trl_args = RewardConfig(
            output_dir=str(work / "trl"), per_device_train_batch_size=args.batch_size, learning_rate=args.lr,
            num_train_epochs=1, lr_scheduler_type="cosine",
            warmup_steps=int(config.warmup_ratio * -(-len(train) // args.batch_size)),
            adam_beta1=0.9, adam_beta2=0.95, weight_decay=0.0, max_grad_norm=1.0, logging_steps=10_000,
            save_strategy="no", report_to=[], use_cpu=True, bf16=False, seed=config.seed, dataloader_num_workers=0,
            max_length=config.max_seq_len, disable_tqdm=True, center_rewards_coefficient=None,
        )
        trainer = RewardTrainer(model=trl_model, args=trl_args, train_dataset=dataset, processing_class=tokenizer)
        configure_threads(threads)
        started = time.perf_counter()
        trainer.train()
        elapsed = time.perf_counter() - started
        return tokens / elapsed, rm.pairwise_metrics(trainer.model, tokenizer, heldout, config)["accuracy"]

    # Alternate the order each round (ours first, then TRL first, ...) so load drift hits both alike; the
    # reported ratio is the median of the per-round ratios.
    rounds = []
    for index in range(args.repeats):
        if index % 2 == 0:
            ours_tps, ours_acc = run_ours()
            trl_tps, trl_acc = run_trl()
        else:
            trl_tps, trl_acc = run_trl()
            ours_tps, ours_acc = run_ours()
        rounds.append({"ours_tokens_per_s": ours_tps, "trl_tokens_per_s": trl_tps, "ratio": ours_tps / trl_tps,
                       "ours_heldout_accuracy": ours_acc, "trl_heldout_accuracy": trl_acc})
    ratios = [r["ratio"] for r in rounds]
    tokenizer = load_reward_model(args.init, device="cpu")[1]
    texts = [rm_text(p.prompt, side, p.mode) for p in train for side in (p.chosen, p.rejected)]
    tokens = sum(len(ids) for ids in encode(tokenizer, texts, config.max_seq_len))
    ours_acc, trl_acc = rounds[-1]["ours_heldout_accuracy"], rounds[-1]["trl_heldout_accuracy"]

    result = {
        "pairs": len(train),
        "heldout": len(heldout),
        "threads": threads,
        "train_tokens": tokens,
        "rounds": rounds,
        "speed_ratio_ours_over_trl": statistics.median(ratios),
        "ours_heldout_accuracy": ours_acc,
        "trl_heldout_accuracy": trl_acc,
    }
    if args.json:
        print(json.dumps(result))
        return
    print(f"pairs {len(train)} (held-out {len(heldout)}), {tokens} training tokens, {threads} threads")
    print(f"{'round':8}{'cascade tok/s':>15}{'TRL tok/s':>12}{'ratio':>8}{'cascade acc':>13}{'TRL acc':>9}")
    for index, r in enumerate(rounds):
        print(f"{index:<8}{r['ours_tokens_per_s']:>15.0f}{r['trl_tokens_per_s']:>12.0f}{r['ratio']:>8.2f}"
              f"{r['ours_heldout_accuracy']:>13.3f}{r['trl_heldout_accuracy']:>9.3f}")
    print(f"speed ratio cascade / TRL (median of rounds): {result['speed_ratio_ours_over_trl']:.2f}x")


if __name__ == "__main__":
    main()
