"""Stage configs: one dataclass per stage kind, shared by the CLI, recipes and every engine.

These are OmegaConf structured configs: unknown keys and wrong types fail at load time.
"""
