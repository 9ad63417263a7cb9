"""The OpenRLHF agent file of a stage (`--train.agent_func_path FILE`): a shim that imports cascade's agent
(engines/openrlhf/agent.py, which needs OpenRLHF) with the stage's settings baked in. Written by the runner
into the stage's output before its jobs run, and by `cascade rlvr|rlhf --export-agent FILE`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cascade_cli.errors import CascadeUsageError

SHIM = '''"""OpenRLHF agent file written by cascade ({origin}).

Use: --train.agent_func_path {path}   (the cascade package must be installed where OpenRLHF runs)
"""

import json

from cascade_cli.engines.openrlhf.agent import AgentExecutor, configure  # noqa: F401

configure(**json.loads({settings!r}))
'''


def agent_settings(config: Any, reward_urls: list[str], outcomes_dir: str | None = None) -> dict[str, Any]:
    """The agent's settings from a GRPO stage config (RLVR or RLHF): sampling, loss mask, reward options."""
    reward_options: dict[str, Any] = {}
    if config.kind == "rlhf":
        reward_options = {
            "code_switch_penalty": bool(config.code_switch_penalty),
            "code_switch_margin": float(config.code_switch_margin),
            "shaping": str(config.reward_shaping),
        }
    elif getattr(config, "if_rm_reward", False):
        reward_options = {"if_rm": True}
    return {
        "reward_urls": [str(url) for url in reward_urls],
        "top_k": int(config.top_k),
        "top_p": float(config.top_p),
        "overlong_filter": False,  # per phase: see phase_settings
        "reward_options": reward_options,
        "outcomes_dir": outcomes_dir,
    }


def export(path: str | Path, settings: dict[str, Any], origin: str = "cascade --export-agent") -> Path:
    path = Path(path)
    if path.suffix != ".py":
        raise CascadeUsageError(f"--export-agent {path}: OpenRLHF loads a Python file; the name must end in .py")
    path.parent.mkdir(parents=True, exist_ok=True)
    text = SHIM.format(origin=origin, path=path.resolve(), settings=json.dumps(settings, sort_keys=True))
    path.write_text(text)
    return path.resolve()
