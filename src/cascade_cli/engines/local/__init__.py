"""The local engine: training and generation in this process, on this machine's CPU or GPU (docs/architecture.md).

Three packages, imports pointing one way only (tests/test_import_graph.py holds it, type-only imports included):

    train/    -> rollout/, ops/     the stage trainers and their lifecycle (stage.py)
    rollout/  -> ops/               generating responses: the transformers loop or vLLM
    ops/      -> (neither)          numeric building blocks: losses, log-probs, LoRA, optimizers, precision
"""
