"""IFEval-style scoring of one response: strict and loose verdicts per instruction, reward from strict.

Loose mode is IFEval's: an instruction passes when any of eight variants of the response passes it (the
response, without its first line, without its last line, without both, and each of those with `*` removed).

The empty rule: an answer that is empty or only whitespace (after the think block) follows no instruction,
strict or loose, whatever the instruction (even one an empty text would satisfy, such as `punctuation:no_comma`
or "less than 5 sentences"); its `details.verdict` is `empty` rather than `fail`. IFEval's reference does
the same per variant (`response.strip() and check(response)`), so a loose variant that is empty fails too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from cascade_cli.chat import answer_text
from cascade_cli.verifiers.base import RecordError, Score, Verifier, parse_label, require_response
from cascade_cli.verifiers.instruction import ifbench, ifeval  # noqa: F401  (registers the instructions)
from cascade_cli.verifiers.instruction.registry import bind

VERDICTS = ("pass", "fail", "empty")


def is_empty(text: str) -> bool:
    """The empty rule's test: nothing but whitespace."""
    return not text.strip()


@dataclass(frozen=True)
class Evaluation:
    instruction_ids: list[str]
    strict: list[bool]
    loose: list[bool]
    empty: bool = False

    @property
    def verdict(self) -> str:
        return "empty" if self.empty else "pass" if self.prompt_strict else "fail"

    @property
    def prompt_strict(self) -> bool:
        return all(self.strict)

    @property
    def prompt_loose(self) -> bool:
        return all(self.loose)


def loose_variants(text: str) -> list[str]:
    """IFEval's eight response variants, duplicates dropped, the response itself first."""
    lines = text.split("\n")
    trimmed = [
        text,
        "\n".join(lines[1:]).strip(),
        "\n".join(lines[:-1]).strip(),
        "\n".join(lines[1:-1]).strip(),
    ]
    variants = trimmed + [variant.replace("*", "") for variant in trimmed]
    return list(dict.fromkeys(variants))


def parse_instructions(label: Any) -> tuple[list[str], list[dict[str, Any]]]:
    """The label's instruction ids and kwargs (IFEval's field names), shape-checked."""
    if not isinstance(label, dict) or "instruction_id_list" not in label:
        raise RecordError(
            'label must be an object {"instruction_id_list": [...], "kwargs": [{...}, ...]}; '
            f"found {type(label).__name__}"
            + (f" with keys {sorted(label)}" if isinstance(label, dict) else "")
        )
    ids = label["instruction_id_list"]
    if not isinstance(ids, list) or not ids:
        raise RecordError(f"label 'instruction_id_list' must be a non-empty list of ids; found {ids!r}")
    kwargs = label.get("kwargs")
    if kwargs is None:
        kwargs = [{} for _ in ids]
    if not isinstance(kwargs, list) or len(kwargs) != len(ids):
        raise RecordError(
            f"label 'kwargs' must be a list with one object per instruction ({len(ids)}); found {kwargs!r}"
        )
    return ids, [entry if entry is not None else {} for entry in kwargs]


def bind_all(ids: Sequence[str], kwargs: Sequence[dict[str, Any]]) -> list[Callable[[str], bool]]:
    checkers = []
    for index, (instruction_id, entry) in enumerate(zip(ids, kwargs, strict=True)):
        try:
            checkers.append(bind(instruction_id, entry))
        except RecordError as error:
            raise RecordError(f"label instruction {index}: {error}") from None
    return checkers


def _passes(check: Callable[[str], bool], text: str) -> bool:
    return not is_empty(text) and bool(check(text))


def evaluate(
    text: str, ids: Sequence[str], kwargs: Sequence[dict[str, Any]], loose: bool = True
) -> Evaluation:
    """Strict (and loose) verdicts of `text` against each instruction; RecordError for a bad label."""
    checkers = bind_all(ids, kwargs)  # a bad label is an error even when the text is empty
    if is_empty(text):
        return Evaluation(list(ids), [False] * len(ids), [False] * len(ids), empty=True)
    strict = [_passes(check, text) for check in checkers]
    if not loose:
        return Evaluation(list(ids), strict, list(strict))
    variants: list[str] | None = None
    loose_verdicts = []
    for check, passed in zip(checkers, strict, strict=True):
        if not passed:
            variants = variants if variants is not None else loose_variants(text)
            passed = any(_passes(check, variant) for variant in variants[1:])
        loose_verdicts.append(passed)
    return Evaluation(list(ids), strict, loose_verdicts)


def accuracy(evaluations: Iterable[Evaluation]) -> dict[str, float]:
    """IFEval's four numbers, in percent: prompt- and instruction-level, strict and loose."""
    evaluations = list(evaluations)
    strict = [verdict for evaluation in evaluations for verdict in evaluation.strict]
    loose = [verdict for evaluation in evaluations for verdict in evaluation.loose]
    count = max(len(evaluations), 1)
    return {
        "prompt_level_strict": 100.0 * sum(e.prompt_strict for e in evaluations) / count,
        "inst_level_strict": 100.0 * sum(strict) / max(len(strict), 1),
        "prompt_level_loose": 100.0 * sum(e.prompt_loose for e in evaluations) / count,
        "inst_level_loose": 100.0 * sum(loose) / max(len(loose), 1),
    }


REWARDS = ("all", "fraction")


class InstructionVerifier(Verifier):
    """Domain `if`: reward 1 when every instruction passes in strict mode, else 0 (`reward="all"`, the
    paper's); `reward="fraction"` pays the fraction of instructions followed (strict) instead, a denser signal
    for a weak model whose groups would otherwise mostly all fail. `passed` is all-pass either way.

    `details.verdict`: pass | fail | empty (the empty rule above: every instruction fails).

    `loose=False` skips the loose verdicts (they never change the reward) for the fastest RL scoring.
    """

    domain = "if"

    def __init__(self, loose: bool = True, reward: str = "all") -> None:
        if reward not in REWARDS:
            raise ValueError(f"reward: expected one of {', '.join(REWARDS)}, found {reward!r}")
        self.loose = loose
        self.reward = reward

    def check_label(self, label: Any) -> str | None:
        try:
            bind_all(*parse_instructions(label))
        except RecordError as error:
            return str(error)
        return None

    def verify_one(self, record: dict[str, Any]) -> Score:
        response = require_response(record)
        ids, kwargs = parse_instructions(parse_label(record))
        evaluation = evaluate(answer_text(response), ids, kwargs, loose=self.loose)
        details = {
            "verdict": evaluation.verdict,
            "prompt_strict": evaluation.prompt_strict,
            "prompt_loose": evaluation.prompt_loose,
            "instructions": [
                {"id": instruction_id, "strict": strict, "loose": loose}
                for instruction_id, strict, loose in zip(
                    ids, evaluation.strict, evaluation.loose, strict=True
                )
            ],
        }
        passed = evaluation.prompt_strict
        if self.reward == "fraction":
            reward = sum(evaluation.strict) / len(evaluation.strict)
        else:
            reward = 1.0 if passed else 0.0
        return Score(reward=reward, passed=passed, details=details)
