"""`cascade tts code`: multi-round test-time scaling for competitive programming (Nemotron-Cascade §5.1,
App. C.3: IOI 2025 with up to 50 rounds, 20 generations per subtask per round, at most 1000 in all).

Each round, for every problem not yet solved:
1. Generate up to G responses to its prompt (the budget N caps generations over all rounds and problems;
   a round that would pass it gives the rest, G at a time, to the problems in file order).
2. Drop responses with no code, then those failing the public tests (tts/problems.py says which they are).
3. Pick one submission with the Tail-10 heuristic (tts/select.py), never one already submitted.
4. Judge it on the hidden tests (the official verdict); a pass solves the problem for good.
The next round's prompt adds the last <= 5 failed submissions with their verdicts and the accepted code of
solved sibling subtasks. The score after a round is the share of points solved so far (IOI keeps a
problem's best submission). Round 1's responses are also judged on the hidden tests, unfiltered, for the
pass@1 baseline at the same sampling settings. Every verdict comes from verifiers/batch.py.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from cascade_cli.chat import render_prompt
from cascade_cli.engines.local.rollout.generation import Completion
from cascade_cli.records import rollout_record, row_prompt
from cascade_cli.tts.problems import Submission, hidden_label, public_label, round_prompt
from cascade_cli.tts.select import Candidate, normalise_code, select_submission
from cascade_cli.verifiers.batch import score_records
from cascade_cli.verifiers.code.extract import extract_program

# (rendered prompts, generations per prompt) -> completions per prompt
Sampler = Callable[[list[str], list[int]], list[list[Completion]]]
RoundHook = Callable[[dict[str, Any]], None]


@dataclass(frozen=True)
class CodeTTSSettings:
    rounds: int = 50  # R
    generations: int = 20  # G per problem per round
    max_generations: int = 1000  # N over all rounds and problems
    public_tests: int = 1  # first k tests are public when a row gives no `public_tests`
    mode: str = "think"
    feedback: bool = True  # add failed submissions and sibling code to the next round's prompt
    options: dict[str, Any] = field(default_factory=dict)  # code verifier options (workers, sandbox)


@dataclass
class ProblemState:
    row: dict[str, Any]
    public: dict[str, Any] | None
    failed: list[Submission] = field(default_factory=list)
    accepted: str | None = None
    solved_round: int | None = None

    @property
    def group(self) -> str | None:
        return self.row.get("problem")

    @property
    def points(self) -> float:
        return float(self.row.get("points", 1.0))


def allocate(budget: int, problems: int, per_problem: int) -> list[int]:
    """Generations per problem this round: `per_problem` each while the budget lasts, in order."""
    counts = []
    for _ in range(problems):
        take = max(0, min(per_problem, budget))
        counts.append(take)
        budget -= take
    return counts


def _siblings(state: ProblemState, states: list[ProblemState]) -> dict[str, str]:
    if state.group is None:
        return {}
    return {
        str(other.row.get("id")): other.accepted
        for other in states
        if other is not state and other.group == state.group and other.accepted is not None
    }


def _score(states: list[ProblemState]) -> float:
    total = sum(state.points for state in states)
    solved = sum(state.points for state in states if state.accepted is not None)
    return 100.0 * solved / total if total else 0.0


def _records(pairs: list[tuple[ProblemState, str]], label_of: Callable[[ProblemState], Any]) -> list[dict[str, Any]]:
    return [
        {**rollout_record(s.row, code, domain="code", mode="think", finish_reason="stop"), "label": label_of(s)}
        for s, code in pairs
    ]


def _judge(
    pairs: list[tuple[ProblemState, str]], label_of: Callable[[ProblemState], Any], options: dict[str, Any]
) -> list[Any]:
    """Verdicts of (problem, response) pairs through the verifiers' batch path; a response repeated for the same
    problem (common: a confident model samples the same program often) is run once."""
    keys = [(id(state), text) for state, text in pairs]
    unique = dict(zip(keys, pairs, strict=True))
    results = dict(zip(unique, score_records(_records(list(unique.values()), label_of), "code", options), strict=True))
    return [results[key] for key in keys]


def _fenced(code: str) -> str:
    return f"```python\n{code}\n```"


def _baseline(
    active: list[ProblemState], outputs: list[list[Completion]], problems: int, options: dict[str, Any]
) -> dict[str, float]:
    """pass@1 and pass@G of round 1's responses on the hidden tests, unfiltered (what TTS is compared with)."""
    flat = [(s, completion.text) for s, completions in zip(active, outputs, strict=True) for completion in completions]
    per_problem: dict[int, list[bool]] = {}
    for (state, _), result in zip(flat, _judge(flat, lambda s: hidden_label(s.row), options), strict=True):
        per_problem.setdefault(id(state), []).append(result.passed)
    return {
        "pass_at_1": round(100.0 * sum(sum(v) / len(v) for v in per_problem.values()) / problems, 2),
        "pass_at_g": round(100.0 * sum(any(v) for v in per_problem.values()) / problems, 2),
    }


def _submit(picks: list[tuple[ProblemState, Candidate]], number: int, options: dict[str, Any]) -> int:
    """Judge the round's submissions on the hidden tests; a pass solves its problem, a failure joins its
    history (with the verdict the next prompt shows). Returns how many passed."""
    verdicts = _judge([(s, _fenced(c.code)) for s, c in picks], lambda s: hidden_label(s.row), options)
    for (state, pick), result in zip(picks, verdicts, strict=True):
        details = result.details
        if result.passed:
            state.accepted, state.solved_round = pick.code, number
            continue
        verdict = str(details.get("verdict", result.error or "error"))
        state.failed.append(
            Submission(pick.code, verdict, int(details.get("tests_passed", 0)), int(details.get("tests_total", 0)))
        )
    return sum(result.passed for result in verdicts)


def run_code_tts(
    rows: list[dict[str, Any]], sample: Sampler, settings: CodeTTSSettings, on_round: RoundHook | None = None
) -> dict[str, Any]:
    """Run the rounds; returns {"rounds": [...], "problems": [...], "pass_at_1", "pass_at_g", "score", ...}."""
    states = [ProblemState(row, public_label(row, settings.public_tests)) for row in rows]
    options = {"code": dict(settings.options)}
    used = 0
    baseline: dict[str, float] = {}
    rounds: list[dict[str, Any]] = []
    for number in range(1, settings.rounds + 1):
        active = [s for s in states if s.accepted is None]
        counts = allocate(settings.max_generations - used, len(active), settings.generations)
        active, counts = [s for s, c in zip(active, counts, strict=True) if c], [c for c in counts if c]
        if not active:
            break
        prompts = [
            render_prompt(round_prompt(s.row, s.failed, _siblings(s, states)) if settings.feedback else row_prompt(s.row),
                          settings.mode)
            for s in active
        ]
        outputs = sample(prompts, counts)
        used += sum(counts)

        # Filter: code, then the public tests (one batch through the scoring path).
        with_code: list[tuple[ProblemState, Candidate]] = []
        for state, completions in zip(active, outputs, strict=True):
            for index, completion in enumerate(completions):
                code = extract_program(completion.text)
                if code is not None:
                    with_code.append((state, Candidate(index, code, completion.logprob_sum, len(completion.token_ids))))
        checked = [(s, c) for s, c in with_code if s.public is not None]
        public_results = _judge([(s, _fenced(c.code)) for s, c in checked], lambda s: s.public, options)
        failed_public = {id(c) for (_, c), r in zip(checked, public_results, strict=True) if not r.passed}
        survivors = [(s, c) for s, c in with_code if id(c) not in failed_public]

        if number == 1:
            baseline = _baseline(active, outputs, len(states), options)

        picks: list[tuple[ProblemState, Candidate]] = []
        for state in active:
            submitted = {normalise_code(s.code) for s in state.failed}
            pick = select_submission([c for s, c in survivors if s is state], submitted)
            if pick is not None:
                picks.append((state, pick))
        accepted = _submit(picks, number, options)
        report = {
            "round": number,
            "problems_tried": len(active),
            "generations": sum(counts),
            "generations_total": used,
            "with_code": len(with_code),
            "passed_public": len(survivors),
            "submitted": len(picks),
            "accepted": accepted,
            "solved": sum(s.accepted is not None for s in states),
            "score": round(_score(states), 2),
        }
        rounds.append(report)
        if on_round:
            on_round(report)
    return {
        "problems": [
            {
                "id": s.row.get("id"),
                "problem": s.group,
                "points": s.points,
                "solved_round": s.solved_round,
                "submissions": len(s.failed) + (s.accepted is not None),
                "accepted_code": s.accepted,
                "failed": [vars(f) for f in s.failed],
            }
            for s in states
        ],
        "rounds": rounds,
        **baseline,
        "score": round(_score(states), 2),
        "generations": used,
        "settings": {k: v for k, v in vars(settings).items() if k != "options"},
    }
