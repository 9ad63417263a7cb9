"""The local stage trainers: SFT, the reward model, GRPO (RLVR and RLHF) and MOPD distillation, each through
the stage lifecycle of stage.py (checks, init, resume, loading, the manifest), the trainer state of
trainer_state.py and held-out evaluation of heldout.py.

May import `engines.local.rollout`, `engines.local.ops` and the lower layers; nothing imports it but the stage
table (stage_kinds.py) and the tests.
"""
