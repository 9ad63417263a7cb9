"""GRPO's training pass with and without skipping zero-advantage responses, side by side on one batch.

A group whose answers all scored alike (all right, all wrong: most groups of a weak model) has zero
advantages, so with no KL or entropy term its responses add nothing to the gradient. cascade's
`policy_update` forwards and backpropagates only the responses with a nonzero advantage (the normaliser still
counts every token). The other side is the loop every response goes through (what policy_update ran before,
built from the same `micro_step`), on the same model copy, batch and normaliser. Both sides alternate in
one process, `--repeats` times each, and the script prints the median seconds of each, their ratio, and the
largest difference between the two sides' gradients (the same gradient, up to float rounding).

The batch is a code-RL step's shape (`recipes/smol-code.yaml`: 8 prompts x 16 answers of <= 256 tokens,
~160 on average): random token ids of those lengths, `--informative` the share of groups with a passing
answer (one answer right in such a group, the rest wrong, as at a few percent pass rate).

    python benchmarks/zero_advantage_skip.py --model smollm2-135m [--informative 0.25] [--repeats 2] [--threads 2]
"""

from __future__ import annotations

import argparse
import copy
import random
import statistics
import tempfile
import time
from types import SimpleNamespace


def make_groups(prompts: int, group_size: int, prompt_len: int, response_len: int, informative: float, vocab: int):
    """Groups as GRPO builds them: prompt ids, completions with token ids, advantages (0 for an all-alike group)."""
    rng = random.Random(0)
    groups = []
    with_signal = round(prompts * informative)
    for index in range(prompts):
        completions = [SimpleNamespace(token_ids=[rng.randrange(vocab) for _ in range(rng.randint(response_len // 2, response_len))],
                                       token_logprobs=None) for _ in range(group_size)]  # fmt: skip
        if index < with_signal:  # one right answer of the group: advantage (1 - mean) / std, the rest negative
            rewards = [1.0] + [0.0] * (group_size - 1)
            mean = sum(rewards) / group_size
            std = statistics.pstdev(rewards)
            advantages = [(r - mean) / std for r in rewards]
        else:
            advantages = [0.0] * group_size
        prompt = [rng.randrange(vocab) for _ in range(prompt_len)]
        groups.append(SimpleNamespace(prompt_ids=prompt, row_index=0, mode="think", completions=completions,
                                      advantages=advantages, loss_mask=[True] * group_size))  # fmt: skip
    return groups


def every_response_update(run, groups, temperature: float) -> None:
    """The loop before the skip: every response of the step through micro_step, the same normaliser."""
    import torch

    from cascade_cli.engines.local.train import grpo_step

    batch = [grpo_step.TrainSequence(g.prompt_ids, c.token_ids, a, m, None, c.token_logprobs)
             for g in groups for c, a, m in zip(g.completions, g.advantages, g.loss_mask, strict=True)]  # fmt: skip
    normaliser = sum(len(s.response_ids) for s in batch if s.keep)
    run.optimizer.zero_grad(set_to_none=True)
    for start in range(0, len(batch), run.micro_batch):
        grpo_step.micro_step(run, batch[start : start + run.micro_batch], normaliser, temperature)
    torch.nn.utils.clip_grad_norm_(run.policy.parameters(), run.config.max_grad_norm)
    run.optimizer.step()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m", help="a model spec or directory")
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--group-size", type=int, default=16)
    parser.add_argument("--prompt-len", type=int, default=120)
    parser.add_argument("--response-len", type=int, default=256)
    parser.add_argument("--informative", type=float, default=0.25, help="share of groups with a nonzero advantage")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    if not 0 <= args.informative <= 1:
        parser.error(f"--informative: expected a share between 0 and 1; found {args.informative}")

    import torch
    from bench_stage import bare_stage

    from cascade_cli.config.grpo import RLVRConfig
    from cascade_cli.engines.local.train import grpo, grpo_step
    from cascade_cli.engines.local.train.rl_rewards import RewardHook

    config = RLVRConfig(domain="code", init=args.model, data="-", out=tempfile.mkdtemp(prefix="skip-bench-"),
                        prompts_per_step=args.prompts, group_size=args.group_size, max_response_len=args.response_len,
                        lr=2e-5, resume=False)  # fmt: skip
    rows = [{"id": "0", "prompt": "x " * args.prompt_len, "label": None}]
    base, _ = grpo.build_run(bare_stage(config), rows, RewardHook(), domain="code", mode="no_think")
    torch.set_num_threads(args.threads)  # after build_run, whose stage set-up picks the idle cores
    groups = make_groups(args.prompts, args.group_size, args.prompt_len, args.response_len, args.informative,
                         base.policy.config.vocab_size)  # fmt: skip
    start = copy.deepcopy(base.policy.state_dict())
    print(f"{args.prompts} x {args.group_size} responses of <= {args.response_len} tokens, {args.informative:.0%} of "
          f"groups informative, micro-batch {base.micro_batch}, bf16 autocast {base.bf16}, {args.threads} threads")  # fmt: skip
    seconds: dict[str, list[float]] = {"skip": [], "every response": []}
    updates: dict[str, dict[str, torch.Tensor]] = {}
    for repeat in range(args.repeats):
        for side in seconds:
            base.policy.load_state_dict(start)
            base.optimizer = torch.optim.AdamW(base.policy.parameters(), lr=config.lr)  # fresh moments each time
            began = time.perf_counter()
            if side == "skip":
                grpo_step.policy_update(base, groups, 1.0)
            else:
                every_response_update(base, groups, 1.0)
            seconds[side].append(time.perf_counter() - began)
            # the clipped gradient each side stepped with (AdamW's first step is ~lr x sign(grad) whatever its size)
            updates[side] = {n: p.grad.detach().float().clone() for n, p in base.policy.named_parameters() if p.grad is not None}
            print(f"repeat {repeat + 1}/{args.repeats} {side}: {seconds[side][-1]:.1f} s", flush=True)
    difference = max((updates["skip"][k] - updates["every response"][k]).abs().max().item() for k in updates["skip"])
    largest = max(grad.abs().max().item() for grad in updates["every response"].values())
    skip, full = statistics.median(seconds["skip"]), statistics.median(seconds["every response"])
    print(f"training pass: skip {skip:.1f} s, every response {full:.1f} s: {skip / full:.2f}x the seconds; "
          f"largest gradient difference {difference:.2e} (largest gradient {largest:.2e})")


if __name__ == "__main__":
    main()
