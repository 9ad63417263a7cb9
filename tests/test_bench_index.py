"""benchmarks/ holds what a user or `make bench` runs, each script a row of benchmarks/README.md; experiments/
holds the one-off drivers, each a row of experiments/README.md; every script `make bench` runs is in benchmarks/."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def scripts(folder: str) -> set[str]:
    return {p.name for p in (ROOT / folder).iterdir() if p.suffix in (".py", ".sh")}


def test_every_benchmark_and_experiment_has_its_row():
    for folder in ("benchmarks", "experiments"):
        index = (ROOT / folder / "README.md").read_text()
        missing = {name for name in scripts(folder) if f"`{name}`" not in index and f"`{name.split('.')[0]}." not in index}
        assert not missing, f"{folder}/README.md lacks {sorted(missing)}"


def test_make_bench_runs_only_benchmarks():
    makefile = (ROOT / "Makefile").read_text()
    bench = makefile[makefile.index("\nbench:") :].split("\n\n")[0]
    named = set(re.findall(r"(\w+)/(\w+\.py)", bench))
    assert named and all(folder == "benchmarks" for folder, _ in named), named
    assert {name for _, name in named} <= scripts("benchmarks")
