"""IF-RL's reward-model bonus on the local engine (`rlvr --domain if`, `if_rm_bonus: true`): the same rows get
the same rewards from the local hook as from the reward service (`cascade verify --serve --reward-model`, real
HTTP on loopback), and a local IF-RL run trains on R_IF + sigmoid(group z of the RM score)."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

from cascade_cli.chat import render_prompt
from cascade_cli.config.grpo import RLVRConfig
from cascade_cli.engines.local.train import if_rm_bonus
from cascade_cli.engines.local.train.grpo import run_rlvr
from cascade_cli.engines.local.train.if_rm_bonus import IfRewardModelBonus
from cascade_cli.engines.local.train.rl_rewards import VerifierReward
from cascade_cli.jsonl import write_jsonl
from cascade_cli.manifest import read_manifest, read_metrics
from cascade_cli.records import rollout_record
from cascade_cli.serve.server import RewardService
from cascade_cli.verifiers.reward_model import if_rm_rewards, needs_rm_score

sys.path.insert(0, str(Path(__file__).parent))
from service_thread import ServiceThread  # noqa: E402
from test_reward_service_rm import post, tiny_rm  # noqa: E402, F401  (tiny_rm: the module's trained RM fixture)

NO_COMMA = {"instruction_id_list": ["punctuation:no_comma"], "kwargs": [{}]}
# (prompt, answers): Ann's group mixes passes and a comma; Bo's all pass, so only the RM tells them apart;
# Cy's all fail, so the RM need not read them
GROUPS = [
    ("Greet Ann.", ["Hello Ann!", "Hello Ann nice day", "Hello, Ann!", "Go away Ann."]),
    ("Greet Bo.", ["Hello Bo!", "Go away Bo.", "<think>\nBe kind, Bo is nice.\n</think>\n\nHi Bo, welcome!"]),
    ("Greet Cy.", ["Hi, Cy.", "Hey, Cy, hello!"]),
]


def local_records() -> list[dict]:
    """The rollout records the GRPO trainer builds for these groups (grpo.group_records' shape)."""
    return [
        rollout_record(
            {"id": f"row{g}", "prompt": prompt, "label": NO_COMMA},
            answer,
            domain="if",
            mode="no_think",
            finish_reason="stop",
            record_id=f"row{g}#{j}",
        )  # fmt: skip
        for g, (prompt, answers) in enumerate(GROUPS)
        for j, answer in enumerate(answers)
    ]


def service_body() -> dict:
    """The same rows as cascade's OpenRLHF agent sends them: rendered prompt + answer + <|im_end|>."""
    label = json.dumps({"domain": "if", **NO_COMMA})
    query, prompts = [], []
    for prompt, answers in GROUPS:
        rendered = render_prompt(prompt, "no_think")
        query += [rendered + answer + "<|im_end|>" for answer in answers]
        prompts += [rendered] * len(answers)
    return {"query": query, "prompts": prompts, "labels": [label] * len(query), "cascade": {"if_rm": True}}


def test_local_hook_and_reward_service_give_the_same_rewards(tiny_rm):  # noqa: F811
    hook = IfRewardModelBonus(VerifierReward("if"), tiny_rm, batch_size=2)
    hook.load("cpu")
    records = local_records()
    # scored in two chunks as the trainer scores a round while it generates; finalize sees the whole round
    scores = hook.finalize(records, hook.score(records[:3]) + hook.score(records[3:]))
    hook.close()
    service = ServiceThread(RewardService(workers=1, timeout_s=60.0, reward_model=str(tiny_rm)))
    try:
        reply = post(service.url, service_body())
    finally:
        service.close()
    local = [s.reward for s in scores]
    assert local == pytest.approx(reply["rewards"], abs=1e-5)
    assert [s.details["score"] for s in scores] == reply["scores"]  # R_IF beside the reward, as the service
    # the rule itself: a comma fails (0), a pass earns 1 + sigmoid(z) with z within its prompt's group
    passed = [s.passed for s in scores]
    assert passed == [True, True, False, True, True, True, False, False, False]
    assert all((1 < r < 2) if ok else r == 0 for r, ok in zip(local, passed, strict=True))
    # a group where nothing passes is not scored by the RM: its rewards are 0 whatever it would say
    assert [s.details["rm_score"] is None for s in scores] == [False] * 7 + [True] * 2
    bo = [s.details["rm_score"] for s in scores[4:7]]
    mean = sum(bo) / 3
    std = math.sqrt(sum((v - mean) ** 2 for v in bo) / 2)
    assert local[4] == pytest.approx(1 + 1 / (1 + math.exp(-(bo[0] - mean) / (std + 1e-6))), abs=1e-6)
    assert local[4] > local[5]  # the trained RM prefers the greeting over "Go away": so does the reward


def test_unscored_groups_change_no_reward():
    """Scoring only the groups with a passing response (needs_rm_score) gives every reward and z that scoring
    them all gives; a group with a passing response left unscored is an error, never a silent 0."""
    r_if = [1.0, 0.5, 1.0, 0.0, 0.0, 0.5, 0.0, 1.0, 1.0]
    passed = [True, False, True, False, False, False, False, True, True]
    keys = ["a", "a", "a", "b", "b", "b", "c", "d", "d"]
    every = [0.3, -1.2, 2.0, 0.7, 0.1, -0.4, 5.0, 1.0, 1.5]
    needed = needs_rm_score(r_if, passed, keys)
    assert needed == [True, True, True, False, False, False, False, True, True]
    only_needed = [value if need else None for value, need in zip(every, needed, strict=True)]
    full, partial = if_rm_rewards(r_if, passed, every, keys), if_rm_rewards(r_if, passed, only_needed, keys)
    assert [reward for reward, _ in partial] == [reward for reward, _ in full]
    assert [z for z, need in zip(partial, needed, strict=True) if need] == [
        z for z, need in zip(full, needed, strict=True) if need
    ]
    with pytest.raises(ValueError, match="not scored by the RM"):
        if_rm_rewards(r_if, passed, [None] * len(keys), keys)


def test_rlvr_on_the_local_engine_trains_with_the_bonus(tmp_path, tiny_rm, monkeypatch):  # noqa: F811
    loaded_on: list[str] = []
    load = IfRewardModelBonus.load
    monkeypatch.setattr(
        IfRewardModelBonus, "load", lambda self, device: (loaded_on.append(device), load(self, device))
    )
    rows = [{"id": f"if-{i}", "domain": "if", "prompt": f"Greet {name}.", "label": NO_COMMA}
            for i, name in enumerate(["Ann", "Bo", "Cy", "Di", "Ed", "Flo"])]  # fmt: skip
    write_jsonl(tmp_path / "train.jsonl", rows)
    config = RLVRConfig(
        domain="if", init="tiny", data=str(tmp_path / "train.jsonl"), out=str(tmp_path / "out"), steps=2,
        prompts_per_step=3, group_size=4, max_response_len=8, truncated_reward=None, mode="no_think", lr=1e-3,
        seed=0, if_rm_bonus=True, reward_model=str(tiny_rm), rm_batch_size=4,
    )  # fmt: skip
    config.check()
    run_rlvr(config)
    assert loaded_on == ["cpu"]  # once, on the policy's device
    metrics = read_metrics(tmp_path / "out")
    assert [m["step"] for m in metrics] == [1, 2] and read_manifest(tmp_path / "out")["status"] == "completed"
    for step in metrics:  # a passing answer earns 1 + sigmoid(z) in (1, 2), a failing one 0
        p = step["pass_rate"]
        assert p > 0 and p < step["reward_mean"] < 2 * p, step


def test_config_needs_a_reward_model_on_the_local_engine():
    from cascade_cli.errors import CascadeUsageError

    with pytest.raises(CascadeUsageError, match=r"if_rm_bonus: the local engine needs reward_model=CKPT"):
        RLVRConfig(domain="if", init="tiny", data="d", out="o", if_rm_bonus=True).check()
    with pytest.raises(CascadeUsageError, match=r"if_rm_bonus: only for domain if"):
        RLVRConfig(domain="math", init="tiny", data="d", out="o", if_rm_bonus=True, reward_model="r").check()
    assert if_rm_bonus.rendered({"prompt": "Hi", "mode": "think"}) == render_prompt("Hi", "think")
