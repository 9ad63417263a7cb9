"""The package's import graph, read from the source (every import: function-local ones and those under
`if TYPE_CHECKING:` included, so a type-only import cannot hide a circle): no circles, arrows only downward
(docs/architecture.md: cli -> recipe -> stage_kinds -> engines -> models, data, verifiers, chat, records; inside
the local engine train -> rollout -> ops), and every package says its job in its docstring."""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import pytest

import cascade_cli

SRC = Path(cascade_cli.__file__).parent.parent
PACKAGE = "cascade_cli"

# The small core and the parts below the engines: they never import what runs stages.
LOWER = ("verifiers", "chat", "records", "config", "errors", "data", "models", "jsonl", "files", "console", "progress")
UPPER = ("engines", "evaluation", "recipe", "cli", "serve", "tts", "stage_kinds", "hub")
# Inside the local engine (engines/local/__init__.py): a package imports only those after it.
LOCAL = ("train", "rollout", "ops")
KNOWN_UPWARD = {
    # prepare-data's decontamination compares against a benchmark named on its command line: the registry's rows
    ("cascade_cli.data.decontaminate", "cascade_cli.evaluation.benchmarks"),
}


def module_files() -> dict[str, Path]:
    files = {}
    for path in sorted((SRC / PACKAGE).rglob("*.py")):
        parts = path.relative_to(SRC).with_suffix("").parts
        files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return files


MODULES = module_files()


def owner(name: str) -> str | None:
    """The module of ours that `name` (a module, or a name inside one) lives in."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(path: Path) -> set[str]:
    """The modules of ours `path` imports (function-local and type-only imports included)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        found.update(filter(None, (owner(name) for name in names if name.startswith(f"{PACKAGE}."))))
    return found


def graph() -> dict[str, set[str]]:
    """Module -> the modules of ours it imports. A package's own __init__ importing its submodules is its
    public face, not an arrow: `from pkg.sub import x` also runs pkg/__init__, which is not counted."""
    return {name: imports_of(path) - {name} for name, path in MODULES.items()}


def layer(module: str) -> str:
    return module.split(".")[1] if "." in module else module


def test_no_import_circles():
    try:
        order = list(graphlib.TopologicalSorter(graph()).static_order())
    except graphlib.CycleError as error:
        pytest.fail(f"import circle: {' -> '.join(error.args[1])}")
    assert set(order) == set(MODULES)


def test_arrows_point_down():
    upward = {
        (module, target)
        for module, targets in graph().items()
        for target in targets
        if layer(module) in LOWER and layer(target) in UPPER
    }
    assert upward <= KNOWN_UPWARD, sorted(upward - KNOWN_UPWARD)


def local_part(module: str) -> str | None:
    parts = module.split(".")
    return parts[3] if parts[1:3] == ["engines", "local"] and len(parts) > 3 else None


def test_the_local_engine_imports_train_then_rollout_then_ops():
    """ops/ never imports rollout/ or train/; rollout/ never imports train/; nothing else imports train/ but the
    stage table, which names its entry points."""
    wrong = set()
    for module, targets in graph().items():
        for target in targets:
            source, part = local_part(module), local_part(target)
            if part is None or source == part:
                continue
            if source is not None and LOCAL.index(part) < LOCAL.index(source):
                wrong.add((module, target))
            if source is None and part == "train":
                wrong.add((module, target))
    assert not wrong, sorted(wrong)
    assert {local_part(name) for name in MODULES} >= set(LOCAL)


def test_no_module_over_450_lines():
    long = {name: n for name, path in MODULES.items() if (n := len(path.read_text().splitlines())) > 450}
    assert not long, long


def test_nothing_imports_the_cli_and_openrlhf_never_imports_the_local_engine():
    for module, targets in graph().items():
        if layer(module) != "cli" and module != "cascade_cli.__main__":
            assert not [t for t in targets if layer(t) == "cli"], module
        if module.startswith("cascade_cli.engines.openrlhf"):
            assert not [t for t in targets if t.startswith("cascade_cli.engines.local")], module


def test_the_reward_service_lives_in_serve_and_models_in_models():
    top_level = {name.split(".")[1] for name in MODULES if name.count(".") == 1}
    moved = {"serve_workers", "serve_auth", "reward_protocol", "scoring", "rm_rewards", "model_specs", "model_cache",
             "real_models", "tiny"}
    assert not top_level & moved


def test_every_package_says_its_job():
    for name, path in MODULES.items():
        if path.name == "__init__.py":
            doc = ast.get_docstring(ast.parse(path.read_text()))
            assert doc and doc.splitlines()[0].strip(), f"{name}: no docstring"
