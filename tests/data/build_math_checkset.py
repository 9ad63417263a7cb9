"""Build tests/data/math_checkset.jsonl: labelled math-verifier cases from the real MATH-500 answers.

Every row is `{"id", "category", "expected": true|false, "response", "answer", "source"}`; `expected` says
whether the response's final answer equals `answer`. Positives: each reference answer boxed in a response
(and each full reference solution), plus equivalent rewritings (fractions, decimals, `\\dfrac`, degrees,
units, `x = ...`, thousands separators, interval and set notation, reordered unordered lists, text
wrappers, answer-phrase and math-span fallbacks). Negatives: perturbed numbers, wrong signs, flipped
fractions, swapped ordered tuples, other problems' answers, open/closed interval ends, unfinished thinking,
the right answer only inside the thinking. Rewrites are applied only where they are valid for that
answer; nothing is dropped for being hard.

Run: PYTHONPATH=src python tests/data/build_math_checkset.py [--source PATH] [--out PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import re
from fractions import Fraction
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
# shared/ sits beside the checkout (CI, /work/main) or inside it; $CASCADE_SHARED_DATA overrides (tests/conftest.py).
SOURCE_CANDIDATES = [
    Path(base) / "math500" / "test.jsonl"
    for base in (
        os.environ.get("CASCADE_SHARED_DATA", ""),
        REPO.parent / "shared" / "data",
        REPO / "shared" / "data",
        "/work/shared/data",
    )
    if base
]
DEFAULT_SOURCE = next((path for path in SOURCE_CANDIDATES if path.exists()), SOURCE_CANDIDATES[-1])
DEFAULT_OUT = HERE / "math_checkset.jsonl"

INTEGER = re.compile(r"^-?\d+$")
FRACTION = re.compile(r"^(-?)\\[dt]?frac\{(\d+)\}\{(\d+)\}$")
UNITS = re.compile(
    r"\b(?:how many|in|number of)\s+(inches|feet|centimeters|meters|miles|cents|dollars|units|square units|"
    r"square feet|square inches|degrees|minutes|hours|seconds|days)\b",
    re.IGNORECASE,
)
ORDERED = re.compile(r"ordered (?:pair|triple|quadruple)|\(r,\s*\\theta\)|form \$\(|point|coordinates", re.I)
UNORDERED_LIST = re.compile(
    r"separated by commas|all (?:the )?(?:real |possible |integer )?(?:solutions|values|roots)", re.I
)


def think(answer_part: str, thinking: str = "Let me work through the problem step by step.") -> str:
    return f"<think>\n{thinking}\n</think>\n\n{answer_part}"


def boxed(answer: str) -> str:
    return think(f"Putting it together, the final answer is $\\boxed{{{answer}}}$.")


def perturb_first_integer(answer: str) -> str | None:
    """The answer with its first integer literal increased by 1 (a different value almost always)."""
    match = re.search(r"\d+", answer)
    if not match:
        return None
    value = int(match.group(0)) + 1
    return answer[: match.start()] + str(value) + answer[match.end() :]


def numeric_value(answer: str) -> Fraction | None:
    if INTEGER.match(answer):
        return Fraction(int(answer))
    fraction = FRACTION.match(answer)
    if fraction:
        value = Fraction(int(fraction.group(2)), int(fraction.group(3)))
        return -value if fraction.group(1) else value
    if re.fullmatch(r"-?\d+\.\d+", answer):
        return Fraction(answer)
    return None


def terminating_decimal(value: Fraction) -> str | None:
    denominator = value.denominator
    for prime in (2, 5):
        while denominator % prime == 0:
            denominator //= prime
    if denominator != 1 or value.denominator == 1:
        return None
    text = f"{float(value):.10f}".rstrip("0")
    return text if Fraction(text) == value else None


def positives(row: dict, index: int) -> list[tuple[str, str]]:
    answer, problem = row["answer"], row["problem"]
    out: list[tuple[str, str]] = [
        ("reference_boxed", boxed(answer)),
        ("reference_solution", row["solution"]),
    ]
    if index % 3 == 0:
        out.append(("fbox", think(f"So the result is \\fbox{{{answer}}}.")))
    if index % 3 == 1:
        out.append(("no_think_block", f"We compute carefully.\n\nThe final answer is $\\boxed{{{answer}}}$."))
    if index % 3 == 2:
        out.append(
            ("nested_braces_context", think(f"Note $\\{{x\\}}$ and {{braces}}: $\\boxed{{{answer}}}$ is it."))
        )
    if index % 4 == 0:
        out.append(
            (
                "answer_phrase",
                think(f"Checking again, everything is consistent.\n\nThe answer is ${answer}$."),
            )
        )
    if index % 4 == 1:
        out.append(("answer_colon", think(f"**Answer:** ${answer}$")))
    if index % 4 == 2:
        out.append(("final_math_span", think(f"Therefore the quantity asked for equals ${answer}$")))
    if index % 4 == 3:
        out.append(
            (
                "boxed_after_guess_in_thinking",
                think(f"So, $\\boxed{{{answer}}}$.", "First try: \\boxed{0}? No."),
            )
        )
    value = numeric_value(answer)
    fraction = FRACTION.match(answer)
    if fraction:
        sign, numerator, denominator = fraction.groups()
        out.append(("dfrac", boxed(f"{sign}\\dfrac{{{numerator}}}{{{denominator}}}")))
        out.append(("slash_fraction", boxed(f"{sign}{numerator}/{denominator}")))
        if len(numerator) == 1 and len(denominator) == 1:
            out.append(("frac_shorthand", boxed(f"{sign}\\frac{numerator}{denominator}")))
    if value is not None:
        decimal = terminating_decimal(value)
        if decimal:
            out.append(("decimal_of_fraction", boxed(decimal)))
        if value.denominator == 1:
            out.append(("integer_as_decimal", boxed(f"{int(value)}.0")))
            out.append(("integer_as_fraction", boxed(f"\\frac{{{2 * int(value)}}}{{2}}")))
            if abs(value) >= 1000:
                out.append(("thousands_separator", boxed(f"{int(value):,}")))
                out.append(("thousands_separator_latex", boxed(f"{int(value):,}".replace(",", "{,}"))))
        if re.search(r"\b(?:find|solve for|value of|what is)\s+\$([a-z])\$", problem, re.I):
            variable = re.search(r"\b(?:find|solve for|value of|what is)\s+\$([a-z])\$", problem, re.I).group(
                1
            )
            out.append(("assignment", boxed(f"{variable} = {answer}")))
        unit = UNITS.search(problem)
        if unit and value.denominator == 1:
            word = unit.group(1).lower()
            rendered = f"{answer}^\\circ" if word == "degrees" else f"{answer} \\text{{ {word}}}"
            out.append(("units", boxed(rendered)))
        if "dollar" in problem.lower() or "\\$" in problem:
            out.append(("dollar_sign", boxed(f"\\${answer}")))
        if re.fullmatch(r"-?\d+(?:\.\d+)?", answer):
            out.append(("text_wrapper", boxed(f"\\text{{{answer}}}")))
    if "^\\circ" in answer:
        out.append(("degrees_dropped", boxed(answer.replace("^\\circ", ""))))
        out.append(("degree_symbol", boxed(answer.replace("^\\circ", "°"))))
    if ",\\!" in answer or "{,}" in answer:
        out.append(("thousands_plain", boxed(answer.replace(",\\!", "").replace("\\$", "").replace(" ", ""))))
    if "\\left" in answer:
        out.append(("no_left_right", boxed(answer.replace("\\left", "").replace("\\right", ""))))
    elif answer.startswith(("(", "[")) and answer.endswith((")", "]")):
        out.append(("left_right_added", boxed(f"\\left{answer[0]} {answer[1:-1]} \\right{answer[-1]}")))
    if "\\frac" in answer and not fraction:
        out.append(("dfrac_inside", boxed(answer.replace("\\frac", "\\dfrac"))))
    if answer.startswith("\\text{(") and answer.endswith(")}"):
        out.append(("choice_letter_bare", boxed(answer[len("\\text{(") : -2])))
        out.append(("choice_letter_parens", boxed(answer[len("\\text{") : -1])))
    elif answer.startswith("\\text{"):
        out.append(("text_unwrapped", boxed(answer[len("\\text{") : -1])))
    if "," in answer and not re.search(r"[()\[\]]|\\in|\\\$|\\{|\d,\\?!?\s?\d{3}", answer):
        parts = [part.strip() for part in answer.split(",")]
        if len(set(parts)) > 1:
            out.append(("unordered_list_reordered", boxed(", ".join(reversed(parts)))))
            out.append(("unordered_list_as_set", boxed("\\{" + ", ".join(reversed(parts)) + "\\}")))
    if answer.startswith("x \\in "):
        out.append(("interval_without_variable", boxed(answer[len("x \\in ") :])))
    if "\\cup" in answer:
        out.append(("union_spacing", boxed(answer.replace(" \\cup ", "\\cup").replace(", ", ","))))
    if re.fullmatch(r"-?\d*\\sqrt\{\d+\}", answer):
        coefficient, radicand = re.fullmatch(r"(-?\d*)\\sqrt\{(\d+)\}", answer).groups()
        factor = int(coefficient) if coefficient not in ("", "-") else (-1 if coefficient == "-" else 1)
        if abs(factor) > 1:
            absorbed = f"{'-' if factor < 0 else ''}\\sqrt{{{factor * factor * int(radicand)}}}"
            out.append(("sqrt_absorbed", boxed(absorbed)))
    if "\\pi" in answer and re.fullmatch(r"\\frac\{(\d*)\\pi\}\{(\d+)\}", answer):
        numerator, denominator = re.fullmatch(r"\\frac\{(\d*)\\pi\}\{(\d+)\}", answer).groups()
        out.append(("pi_factored", boxed(f"\\frac{{{numerator or 1}}}{{{denominator}}}\\pi")))
    if value is not None and value.denominator > 1 and abs(value) > 1 and answer.startswith("\\frac"):
        whole = int(value)  # a mixed number: 2\frac{1}{2} means 5/2 in school notation
        rest = value - whole
        out.append(("mixed_number", boxed(f"{whole}\\frac{{{rest.numerator}}}{{{rest.denominator}}}")))
    if value is not None and value.denominator == 1 and abs(value) >= 1000 and int(value) % 10 == 0:
        digits = str(abs(int(value))).rstrip("0")
        exponent = len(str(abs(int(value)))) - 1
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        out.append(
            ("scientific_notation", boxed(f"{'-' if value < 0 else ''}{mantissa} \\times 10^{{{exponent}}}"))
        )
    if value is not None and value.denominator == 1 and 4 <= abs(value) <= 10**6:
        n = abs(int(value))
        factor = next((d for d in range(2, 100) if n % d == 0 and n // d > 1), None)
        if factor:
            out.append(
                ("product_unevaluated", boxed(f"{'-' if value < 0 else ''}{factor} \\cdot {n // factor}"))
            )
    if "^\\circ" in answer:
        out.append(("degrees_word", boxed(answer.replace("^\\circ", "\\text{ degrees}"))))
        out.append(("degrees_braced", boxed(answer.replace("^\\circ", "^{\\circ}"))))
    if "\\sqrt{" in answer and re.search(r"\\sqrt\{\d\}", answer):
        out.append(("sqrt_shorthand", boxed(re.sub(r"\\sqrt\{(\d)\}", r"\\sqrt\1", answer))))
    if "\\frac{\\pi}{" in answer:
        out.append(("pi_slash", boxed(re.sub(r"\\frac\{\\pi\}\{(\d+)\}", r"\\pi/\1", answer))))
    rewritten = sympy_rewrite(answer)
    if rewritten:
        out.append(("sympy_rewritten", boxed(rewritten[0])))
    return out


def sympy_parse(answer: str):
    """The answer as a plain sympy expression (not a set, tuple or relation), or None."""
    import sympy
    from latex2sympy2_extended import latex2sympy

    if (
        numeric_value(answer) is not None
        or "," in answer
        or "\\text" in answer
        or "\\mbox" in answer
        or "=" in answer
    ):
        return None
    try:
        expr = latex2sympy(answer)
    except Exception:
        return None
    if not isinstance(expr, sympy.Expr) or isinstance(expr, sympy.Integer):
        return None
    return expr


def sympy_rewrite(answer: str) -> tuple[str, str] | None:
    """(an equivalent form rendered by sympy, a different one: expression + 1) for symbolic answers."""
    import sympy

    expr = sympy_parse(answer)
    if expr is None:
        return None
    for form in (sympy.expand(expr), sympy.factor(expr), sympy.nsimplify(expr), expr):
        text = sympy.latex(form)
        if text.replace(" ", "") != answer.replace(" ", ""):
            return text, sympy.latex(expr + 1)
    return None


def replace_last_box(text: str, content: str) -> str | None:
    """`text` with the argument of its last `\\boxed{...}` replaced by `content` (None without a box)."""
    start = text.rfind("\\boxed{")
    if start < 0:
        return None
    depth, index = 0, start + len("\\boxed")
    while index < len(text):
        if text[index] == "\\":
            index += 2
            continue
        depth += {"{": 1, "}": -1}.get(text[index], 0)
        if depth == 0:
            return text[: start + len("\\boxed{")] + content + text[index:]
        index += 1
    return None


def negatives(row: dict, index: int, others: list[str]) -> list[tuple[str, str]]:
    answer, problem = row["answer"], row["problem"]
    out: list[tuple[str, str]] = []
    perturbed = perturb_first_integer(answer)
    if perturbed and perturbed != answer:
        out.append(("perturbed_number", boxed(perturbed)))
    value = numeric_value(answer)
    if value is not None and value != 0:
        negated = answer[1:] if answer.startswith("-") else f"-{answer}"
        out.append(("wrong_sign", boxed(negated)))
        out.append(
            (
                "doubled",
                boxed(
                    str(value * 2)
                    if value.denominator == 1
                    else f"\\frac{{{value.numerator * 2}}}{{{value.denominator}}}"
                ),
            )
        )
    fraction = FRACTION.match(answer)
    if fraction and fraction.group(2) != fraction.group(3):
        sign, numerator, denominator = fraction.groups()
        out.append(("fraction_flipped", boxed(f"{sign}\\frac{{{denominator}}}{{{numerator}}}")))
    other = others[(index * 7 + 13) % len(others)]
    out.append(("other_problem_answer", boxed(other)))
    tuple_match = re.fullmatch(r"(\\left)?\(\s*(.+?)\s*(\\right)?\)", answer)
    if tuple_match and ORDERED.search(problem) and "," in tuple_match.group(2):
        parts = [part.strip() for part in tuple_match.group(2).split(",")]
        if len(set(parts)) > 1:
            out.append(("ordered_tuple_swapped", boxed("(" + ", ".join(reversed(parts)) + ")")))
    if (
        re.search(r"[\[(].*,.*[\])]", answer)
        and not ORDERED.search(problem)
        and ("\\infty" in answer or "]" in answer or "[" in answer or "\\cup" in answer)
    ):
        flipped = answer.translate(str.maketrans({"(": "[", "[": "(", ")": "]", "]": ")"}))
        flipped = flipped.replace("[-\\infty", "(-\\infty").replace("\\infty]", "\\infty)")
        if flipped != answer:
            out.append(("interval_ends_flipped", boxed(flipped)))
    if "," in answer and not re.search(r"[()\[\]]|\\in|\\\$|\d,\\?!?\s?\d{3}", answer):
        parts = [part.strip() for part in answer.strip("\\{}").split(",")]
        if len(parts) > 1:
            out.append(("list_missing_element", boxed(", ".join(parts[:-1]))))
    if "\\sqrt" in answer:
        dropped = re.sub(
            r"\\sqrt\{([^{}]*)\}|\\sqrt(\d)", lambda m: m.group(1) or m.group(2), answer, count=1
        )
        if dropped != answer:
            out.append(("sqrt_dropped", boxed(dropped)))
    if "\\pi" in answer:
        dropped = answer.replace("\\pi", "", 1).strip()
        if dropped and not dropped.endswith(("{", "(", ",")):
            out.append(("pi_dropped", boxed(dropped.replace("{}", "{1}"))))
    if answer.startswith("\\text{(") and answer.endswith(")}"):
        letter = answer[len("\\text{(") : -2]
        other_letter = "A" if letter != "A" else "B"
        out.append(("other_choice", boxed(f"\\text{{({other_letter})}}")))
    rewritten = sympy_rewrite(answer)
    if rewritten:
        out.append(("sympy_plus_one", boxed(rewritten[1])))
    if INTEGER.match(answer) and len(answer.lstrip("-")) >= 2 and answer[-1] != answer[-2]:
        out.append(("digits_transposed", boxed(answer[:-2] + answer[-1] + answer[-2])))
    if value is not None and value.denominator not in (1,) and terminating_decimal(value) is None:
        out.append(("coarse_decimal", boxed(f"{float(value):.2f}")))
    if "\\circ" in answer:
        out.append(("degrees_perturbed", boxed(perturbed or answer)))
    if re.fullmatch(r"\\?\{?[^()\[\]]*,[^()\[\]]*\\?\}?", answer) and not re.search(
        r"\d,\\?!?\s?\d{3}", answer
    ):
        out.append(
            (
                "list_extra_element",
                boxed(answer.rstrip("\\}").rstrip() + ", 100" + ("\\}" if answer.endswith("\\}") else "")),
            )
        )
    swapped = replace_last_box(row["solution"], other)
    if swapped:
        out.append(("reference_solution_other_answer", swapped))
    if index % 5 == 0:
        out.append(
            (
                "unfinished_thinking",
                f"<think>\nWorking... I think it is $\\boxed{{{answer}}}$ but let me double check",
            )
        )
    if index % 5 == 1:
        out.append(
            (
                "answer_only_in_thinking",
                think(f"So the answer is $\\boxed{{{other}}}$.", f"Maybe \\boxed{{{answer}}}."),
            )
        )
    if index % 5 == 2:
        out.append(("no_final_answer", think("I could not finish this one.", f"Candidate {answer}?")))
    if index % 5 == 3 and perturbed:
        out.append(("answer_phrase_wrong", think(f"The answer is ${perturbed}$.")))
    if index % 5 == 4:
        out.append(("empty_box", think("The answer is $\\boxed{}$.")))
    return out


def build(source: Path) -> list[dict]:
    rows = [json.loads(line) for line in source.read_text().splitlines() if line.strip()]
    answers = [row["answer"] for row in rows]
    out: list[dict] = []
    for index, row in enumerate(rows):
        answer = row["answer"]
        gold_value = numeric_value(answer)
        # another problem's answer that differs from this one in text and, for numbers, in value
        others = [
            other
            for other in answers
            if other.replace(" ", "") != answer.replace(" ", "")
            and (gold_value is None or numeric_value(other) is None or numeric_value(other) != gold_value)
        ]
        for expected, cases in ((True, positives(row, index)), (False, negatives(row, index, others))):
            for category, response in cases:
                out.append(
                    {
                        "id": f"{row['unique_id']}#{category}",
                        "category": category,
                        "expected": expected,
                        "response": response,
                        "answer": answer,
                        "source": row["unique_id"],
                    }
                )
    return out


def write_checkset(rows: list[dict], out: Path) -> None:
    with out.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    positives_count = sum(row["expected"] for row in rows)
    print(
        f"wrote {len(rows)} rows ({positives_count} positive, {len(rows) - positives_count} negative) to {out}"
    )


def main(build_rows=None, default_out: Path = DEFAULT_OUT, description: str = __doc__) -> None:
    """`--source MATH500 --out FILE`: build the rows (this module's `build`, or another builder's) and write them."""
    parser = argparse.ArgumentParser(description=description.splitlines()[0])
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    parser.add_argument("--out", type=Path, default=default_out)
    args = parser.parse_args()
    write_checkset((build_rows or build)(args.source), args.out)


if __name__ == "__main__":
    main()
