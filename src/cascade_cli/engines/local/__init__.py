"""The `local` engine: every trainer (SFT, reward model, GRPO for RLHF and RLVR) in this process on a CPU or one
GPU, and the rollout generator the evaluation and TTS also use."""
