"""Rollout generation on the local engine: `Generator` (generation.py) samples responses with the transformers
loop (hf_decode.py, token_sampling.py, stop_matching.py) or in-process vLLM (vllm_engine.py), for training,
evaluation, TTS and the pass-rate filter (pass_rate_runner.py).

May import `engines.local.ops` and the lower layers (models, chat, data, records); never `engines.local.train`.
"""
