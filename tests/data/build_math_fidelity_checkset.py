"""Build tests/data/math_fidelity_checkset.jsonl: the answer-format classes of issue 21, from MATH-500 answers.

Rows have the fields of math_checkset.jsonl (`id, category, expected, response, answer, source`). Classes:
several final boxes for a multi-part label (and one part missing or wrong), a final-answer sentence
(`Final Answer: The largest $n$ is 34.`), an early box in the working beaten by a later final-answer phrase,
comma+space lists posing as thousands (`\\boxed{32, 349}` for 32349: adversarial negatives), and bare
answers with no box and no phrase (no answer). HAND_WRITTEN adds real-looking responses for each class.

Run: python tests/data/build_math_fidelity_checkset.py [--source PATH] [--out PATH]
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import build_math_checkset  # noqa: E402  (the first check set's builder: MATH-500's path, think(), the writer)
from build_math_checkset import think  # noqa: E402

DEFAULT_OUT = HERE / "math_fidelity_checkset.jsonl"
INTEGER = re.compile(r"^\d+$")
SIMPLE_ITEM = re.compile(r"^-?[\d\\a-z{}\s.+/^]+$")


def bump(answer: str) -> str:
    match = re.search(r"\d+", answer)
    assert match
    return answer[: match.start()] + str(int(match.group(0)) + 1) + answer[match.end() :]


def split_items(answer: str) -> tuple[str, list[str], str] | None:
    """Top-level comma items of a plain list `a, b` or a tuple `(a, b)`; None for intervals and the rest."""
    text = answer.replace("\\left", "").replace("\\right", "").strip()
    opening = closing = ""
    if text.startswith("(") and text.endswith(")") and text.count("(") == 1:
        opening, closing, text = "(", ")", text[1:-1]
    if "\\infty" in text or any(char in text for char in "()[]") or re.search(r"\d,\d{3}|\\[{}]|^[^,]*$", text):
        return None
    items = [item.strip() for item in text.split(",")]
    return (opening, items, closing) if all(SIMPLE_ITEM.match(item) for item in items) else None


def row(problem: dict, category: str, expected: bool, response: str) -> dict:
    source = problem["unique_id"]
    return {"id": f"{source}#{category}", "category": category, "expected": expected, "response": response,
            "answer": problem["answer"], "source": source}


def rows_for(problem: dict) -> list[dict]:
    answer = problem["answer"]
    rows = []
    parts = split_items(answer)
    if parts:
        _, items, _ = parts
        names = "xyzw"
        boxes = ", ".join(f"${names[i % 4]} = \\boxed{{{item}}}$" for i, item in enumerate(items))
        rows.append(row(problem, "multi_box", True, think(f"Solving both conditions gives {boxes}.")))
        wrong_items = [bump(items[0]) if re.search(r"\d", items[0]) else items[0], *items[1:]]
        wrong = ", ".join(f"$\\boxed{{{item}}}$" for item in wrong_items)
        if re.search(r"\d", items[0]):
            rows.append(row(problem, "multi_box_part_wrong", False, think(f"So the parts are {wrong}.")))
        rows.append(row(problem, "multi_box_part_missing", False,
                        think(f"The first part is $\\boxed{{{items[0]}}}$.")))
    if re.search(r"\d", answer) and "," not in answer:
        rows.append(row(problem, "final_answer_sentence", True,
                        think(f"Checking the cases above.\n\nFinal Answer: The value we want is ${answer}$.")))
        rows.append(row(problem, "final_answer_sentence_wrong", False,
                        think(f"Checking the cases above.\n\nFinal Answer: The value we want is ${bump(answer)}$.")))
        rows.append(row(problem, "early_box_then_final_phrase", True, think(
            f"A first guess is $\\boxed{{{bump(answer)}}}$, but that double counts.\n\n"
            f"Correcting for it, the final answer is ${answer}$.")))
        rows.append(row(problem, "right_box_then_wrong_final_phrase", False, think(
            f"A first guess is $\\boxed{{{answer}}}$, but that double counts.\n\n"
            f"Correcting for it, the final answer is ${bump(answer)}$.")))
    if INTEGER.match(answer):
        rows.append(row(problem, "bare_number", False,
                        think(f"We set $n = {answer}$ and count the cases that remain.\n\n{int(answer) + 7}")))
        if int(answer) >= 1000:
            digits = answer
            listed = ", ".join(
                [digits[: len(digits) % 3 or 3]] + re.findall(r"\d{3}", digits[len(digits) % 3 or 3 :]))
            rows.append(row(problem, "list_not_thousands", False, think(f"So we get $\\boxed{{{listed}}}$.")))
            if len(digits) > 2:
                rows.append(row(problem, "list_split_digits", False,
                                think(f"So we get $\\boxed{{{digits[:2]}, {digits[2:]}}}$.")))
    return rows


def hand(category: str, expected: bool, response: str, answer: str, number: int) -> dict:
    return {"id": f"hand/{category}/{number}", "category": category, "expected": expected,
            "response": response, "answer": answer, "source": "hand"}


HAND_WRITTEN = [
    ("multi_box", True, "The pairs are $\\boxed{(2, 2)}$ and $\\boxed{(6, 2)}$.", "(2, 2), (6, 2)"),
    ("multi_box", True, "Hence $x = \\boxed{3}$ and $y = \\boxed{4}$.", "(3, 4)"),
    ("multi_box", True, "The roots are \\boxed{-2} and \\boxed{5}.", "-2, 5"),
    ("multi_box", True, "The roots are \\boxed{5} and \\boxed{-2}.", "-2, 5"),
    ("multi_box_part_wrong", False, "Hence $x = \\boxed{3}$ and $y = \\boxed{5}$.", "(3, 4)"),
    ("multi_box_part_wrong", False, "Hence $x = \\boxed{4}$ and $y = \\boxed{3}$.", "(3, 4)"),
    ("multi_box_part_missing", False, "The pairs are $\\boxed{(2, 2)}$.", "(2, 2), (6, 2)"),
    ("multi_box_single_label", True, "First $\\boxed{7}$ is too big; the answer is $\\boxed{6}$.", "6"),
    ("multi_box_single_label", False, "First $\\boxed{6}$ looked right, but recounting gives $\\boxed{7}$.", "6"),
    ("final_answer_sentence", True, "Final Answer: The largest $n$ is 34.", "34"),
    ("final_answer_sentence", True, "Final Answer: The final answer is $\\frac{3}{8}$. I hope it is correct.",
     "\\frac{3}{8}"),
    ("final_answer_sentence", True, "**Final Answer:** There are 12 ways to do it.", "12"),
    ("final_answer_sentence", True, "Final Answer: The day of the week is Tuesday.", "\\text{Tuesday}"),
    ("final_answer_sentence", True, "Final Answer: We get $m + n = 127$.", "127"),
    ("final_answer_sentence_wrong", False, "Final Answer: The largest $n$ is 35.", "34"),
    ("final_answer_sentence_wrong", False, "Final Answer: The smallest $k$ with $k > 2$ is 9.", "2"),
    ("early_box_then_final_phrase", True,
     "Trying $\\boxed{10}$ first fails the check.\n\nThe final answer is $12$.", "12"),
    ("early_box_then_final_phrase", True, "So \\boxed{x=2} in the first case.\n\n**Final Answer:** 5", "5"),
    ("right_box_then_wrong_final_phrase", False,
     "Trying $\\boxed{12}$ first.\n\nFinal Answer: The answer is 10.", "12"),
    ("box_then_prose_phrase", True, "So the count is $\\boxed{12}$. I double checked and the answer is correct.",
     "12"),
    ("list_not_thousands", False, "The answer is $\\boxed{32, 349}$.", "32349"),
    ("list_not_thousands", False, "The answer is $\\boxed{1, 234}$.", "1234"),
    ("list_not_thousands", False, "The answer is $\\boxed{1234}$.", "1, 234"),
    ("thousands_separator", True, "The answer is $\\boxed{32,349}$.", "32349"),
    ("thousands_separator", True, "The answer is $\\boxed{1,234}$.", "1234"),
    ("bare_number", False, "We have $x = 5$ and $y = 7$, so there are 12 of them.", "5"),
    ("bare_number", False, "Let $k = 3$. Counting gives\n\n42", "3"),
    ("bare_number", False, "Take $a = 9$ and check the remaining 4 cases by hand.", "9"),
    ("concluding_span", True, "Adding the two areas, the total is $\\frac{7}{2}$.", "\\frac{7}{2}"),
]


def build(source: Path) -> list[dict]:
    problems = [json.loads(line) for line in source.read_text(encoding="utf-8").splitlines()]
    rows = [generated for problem in problems for generated in rows_for(problem)]
    rows += [hand(category, expected, think(response), answer, number)
             for number, (category, expected, response, answer) in enumerate(HAND_WRITTEN)]
    return rows


def main() -> None:
    build_math_checkset.main(build, DEFAULT_OUT, __doc__)


if __name__ == "__main__":
    main()
