"""RLHF's reward (rows of domain `general`, Nemotron-Cascade §2.2): no rule verifies them, a Bradley-Terry
reward model scores them. Shared by the local trainer (engines/local/train/rlhf.py), the reward-model
trainer's evaluation (engines/local/train/reward_model.py) and the reward service (serve/rm_rewards.py):

  text      what the RM reads: the rendered prompt, the answer (the text after `</think>`; the whole
            response when it is missing, so unfinished thinking is scored as its own answer), `<|im_end|>`,
            whose position holds the reward;
  score     the `score` head's value there, in batches of similar lengths, one forward at a time, under bf16
            autocast where it pays (`precision`); or the answer of OpenRLHF's `serve_rm` at an http(s) URL
            (`{"query": [...]}` -> `{"rewards": [...]}`);
  penalty   a code-switching response (the `language` verifier) gets the batch's lowest score minus a margin;
  shaping   optional: each group's rewards z-scored, then tanh.

IF-RL's reward-model bonus (the paper's thinking models, §4.4) is defined here too, for the local engine's IF-RL
(engines/local/train/if_rm_bonus.py) and the reward service (`if_rm`): R_IF + sigmoid(z) when the IF verifier passes
(R_IF = 1), else 0, where z is the RM score of the same text as RLHF's, z-scored within the prompt's group.
"""

from __future__ import annotations

import json
import math
import threading
import urllib.request
from pathlib import Path
from typing import Any

from cascade_cli.chat import IM_END, answer_text, render_prompt
from cascade_cli.models.bf16 import autocast, autocast_pays
from cascade_cli.verifiers import Score, verify_batch

RM_DOMAIN = "general"
PRECISIONS = ("auto", "float32")


def scoring_precision(stage_dtype: str) -> str:
    """A training stage's reward-model precision from its `dtype`: `auto` follows the policy's rule (bf16
    autocast where it pays), any explicit dtype scores in fp32."""
    return "auto" if stage_dtype == "auto" else "float32"


# ---- what the reward model reads ----------------------------------------------------------------------


def rm_input(rendered_prompt: str, response: str, strip_thinking: bool = True) -> str:
    """The rendered prompt (ending in the assistant header), the answer and `<|im_end|>`."""
    answer = answer_text(response) if strip_thinking else response.strip()
    return f"{rendered_prompt}{answer}{IM_END}"


def rm_text(prompt: str | list[dict[str, Any]], response: str, mode: str = "no_think", strip_thinking: bool = True) -> str:
    """`rm_input` of a canonical prompt (text or messages) rendered in `mode` with the project's ChatML."""
    return rm_input(render_prompt(prompt, mode), response, strip_thinking)


# ---- scoring texts -------------------------------------------------------------------------------------


def load_reward_model(spec: str | Path, device: str | None = None, dtype: Any = "float32") -> tuple[Any, Any]:
    """(model, tokenizer) through models/loader.py: a reward-model checkpoint as is, or any causal-LM checkpoint
    with a fresh one-output `score` head."""
    from cascade_cli.models.loader import load_model, load_tokenizer

    tokenizer = load_tokenizer(spec)
    return load_model(spec, dtype=dtype, device=device, head="score", pad_id=tokenizer.pad_token_id), tokenizer


def encode(tokenizer: Any, texts: list[str], max_len: int) -> list[list[int]]:
    """Token ids per text, cut from the left to `max_len` (the scored last token is always kept)."""
    ids = tokenizer(texts, add_special_tokens=False)["input_ids"]
    return [seq[-max_len:] for seq in ids]


def rewards_of(model: Any, seqs: list[list[int]], pad_id: int) -> Any:
    """The `score` head's value at each sequence's last token (right padding keeps positions 0..n-1)."""
    import torch

    device = next(model.parameters()).device.type
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for row, seq in enumerate(seqs):
        ids[row, : len(seq)] = torch.tensor(seq, dtype=torch.long)
        mask[row, : len(seq)] = 1
    return model(input_ids=ids.to(device), attention_mask=mask.to(device), use_cache=False).logits[:, 0].float()


def score_texts(model: Any, tokenizer: Any, texts: list[str], max_len: int = 4096, batch_size: int = 32) -> list[float]:
    """The reward of each text, in order; similar lengths share a batch."""
    import torch

    was_training = model.training
    model.eval()
    seqs = encode(tokenizer, texts, max_len)
    order = sorted(range(len(seqs)), key=lambda i: len(seqs[i]))
    out = [0.0] * len(seqs)
    with torch.no_grad():
        for start in range(0, len(order), batch_size):
            chunk = order[start : start + batch_size]
            values = rewards_of(model, [seqs[i] for i in chunk], tokenizer.pad_token_id).tolist()
            for index, value in zip(chunk, values, strict=True):
                out[index] = value
    model.train(was_training)
    return out


class RewardModelScorer:
    """Scores texts with a reward model in this process (frozen, one forward at a time: callers may be threads),
    or forwards them to OpenRLHF's `serve_rm` when `source` is an http(s) URL.

    `precision`: "auto" scores under bf16 autocast over fp32 weights where that pays (models/bf16.py: native
    bf16 and a 50M+ parameter model, the rule the policy's training pass and the reward model's own training
    follow); "float32" always in fp32 (an evaluation compared with earlier fp32 scores)."""

    def __init__(
        self, source: str | Path, batch_size: int = 32, max_len: int = 4096, device: str | None = None,
        precision: str = "auto",
    ) -> None:  # fmt: skip
        if precision not in PRECISIONS:
            raise ValueError(f"precision: expected one of {', '.join(PRECISIONS)}; found {precision!r}")
        self.source, self.batch_size, self.max_len = str(source), batch_size, max_len
        self.url = self.source if self.source.startswith(("http://", "https://")) else None
        self._lock = threading.Lock()
        self.model = self.tokenizer = None
        self.device, self.bf16 = "cpu", False
        if self.url is None:
            self.model, self.tokenizer = load_reward_model(source, device=device)
            self.model.eval().requires_grad_(False)
            self.device = next(self.model.parameters()).device.type
            params = sum(p.numel() for p in self.model.parameters())
            self.bf16 = precision == "auto" and autocast_pays(self.device, params)

    def scores(self, texts: list[str]) -> list[float]:
        if self.url is not None:
            request = urllib.request.Request(
                self.url, json.dumps({"query": texts}).encode(), {"Content-Type": "application/json"}
            )
            with urllib.request.urlopen(request, timeout=600) as reply:
                rewards = json.loads(reply.read())["rewards"]
            return [float(value) for value in (rewards if isinstance(rewards, list) else [rewards])]
        # one autocast region for the whole call: the weights' bf16 copies are cast once, not per batch
        with self._lock, autocast(self.device, self.bf16):
            return score_texts(self.model, self.tokenizer, texts, self.max_len, self.batch_size)

    def close(self) -> None:
        self.model = None


# ---- the reward from the scores ------------------------------------------------------------------------


def code_switch_checks(records: list[dict[str, Any]]) -> list[Score]:
    """The `language` verifier's verdict per record (details["code_switch"]: prompt vs whole response)."""
    return verify_batch(records, domain="language")


def apply_code_switch_penalty(rewards: list[float], switched: list[bool], margin: float) -> list[float]:
    """Code-switching responses get min(rewards of the batch) - margin; others keep theirs."""
    if not any(switched):
        return list(rewards)
    floor = min(rewards) - margin
    return [floor if s else r for r, s in zip(rewards, switched, strict=True)]


def group_z(values: list[float], eps: float = 1e-6) -> list[float]:
    """z-scores within one group (sample std + eps); a group of one scores 0."""
    if len(values) < 2:
        return [0.0] * len(values)
    mean = sum(values) / len(values)
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
    return [(v - mean) / (std + eps) for v in values]


def zscore_tanh(rewards: list[float], eps: float = 1e-6) -> list[float]:
    """One group's rewards z-scored within the group, then squashed to (-1, 1); a group of one as it is."""
    if len(rewards) < 2:
        return list(rewards)
    return [math.tanh(z) for z in group_z(rewards, eps)]


def shape(rewards: list[float], shaping: str) -> list[float]:
    """One group's rewards under `shaping` (none | zscore_tanh)."""
    return zscore_tanh(rewards) if shaping == "zscore_tanh" else list(rewards)


def earns_bonus(r_if: float, passed: bool) -> bool:
    """A response that passes every instruction (R_IF = 1): the only kind the RM bonus pays."""
    return passed and r_if >= 1.0


def needs_rm_score(r_if: list[float], passed: list[bool], group_keys: list[Any]) -> list[bool]:
    """Which responses the reward model must score for `if_rm_rewards`: every response of a group in which
    some response earns the bonus (z is taken over the whole group). In a group where none does, every
    reward is 0 whatever the RM says, so scoring it would be wasted: early in IF-RL that is most groups."""
    earning = {
        key for reward, ok, key in zip(r_if, passed, group_keys, strict=True) if earns_bonus(reward, ok)
    }
    return [key in earning for key in group_keys]


def if_rm_rewards(
    r_if: list[float], passed: list[bool], rm_scores: list[float | None], group_keys: list[Any]
) -> list[tuple[float, float]]:
    """(reward, z) per response: R_IF + sigmoid(z) for a response that passes every instruction (R_IF = 1),
    else 0; z: its RM score z-scored among the responses with the same group key (one prompt's samples).
    A group left unscored (None: `needs_rm_score` said no response of it earns the bonus) gets z = 0."""
    members: dict[Any, list[int]] = {}
    for index, key in enumerate(group_keys):
        members.setdefault(key, []).append(index)
    z = [0.0] * len(rm_scores)
    for group in members.values():
        values = [rm_scores[i] for i in group]
        if any(value is None for value in values):
            if any(earns_bonus(r_if[i], passed[i]) for i in group):
                raise ValueError("a group with a response that earns the RM bonus was not scored by the RM")
            continue
        for index, value in zip(group, group_z(values), strict=True):
            z[index] = value
    return [
        (reward + 1.0 / (1.0 + math.exp(-zi)) if earns_bonus(reward, ok) else 0.0, zi)
        for reward, ok, zi in zip(r_if, passed, z, strict=True)
    ]
