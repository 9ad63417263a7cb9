"""The OpenRLHF agent file of a stage (`--train.agent_func_path FILE`): a shim that imports cascade's agent
(engines/openrlhf/agent.py, which needs OpenRLHF) with the stage's settings baked in. Written by the runner
into the stage's output before its jobs run (the settings: jobs.rl_job), and by
`cascade verify --export-agent FILE` by hand. `recipe plan` prints the command that writes it:

    python3 -m cascade_cli.engines.openrlhf.agent_file FILE 'SETTINGS_JSON'
"""

from __future__ import annotations

import json
import shlex
import sys
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


def export(path: str | Path, settings: dict[str, Any], origin: str = "cascade --export-agent") -> Path:
    path = Path(path)
    if path.suffix != ".py":
        raise CascadeUsageError(f"--export-agent {path}: OpenRLHF loads a Python file; the name must end in .py")
    path.parent.mkdir(parents=True, exist_ok=True)
    text = SHIM.format(origin=origin, path=path.resolve(), settings=json.dumps(settings, sort_keys=True))
    path.write_text(text)
    return path.resolve()


def export_command(path: str, settings: dict[str, Any]) -> str:
    """The shell line that writes the agent file (what `recipe plan` prints before the job)."""
    return shlex.join(["python3", "-m", "cascade_cli.engines.openrlhf.agent_file", path, json.dumps(settings, sort_keys=True)])


def main(argv: list[str] | None = None) -> int:
    path, settings = argv if argv is not None else sys.argv[1:]
    print(export(path, json.loads(settings)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
