"""The reward service: OpenRLHF's reward protocol over HTTP, its auth and worker pool, reward-model rewards, and
the reward_func file OpenRLHF can load instead."""
