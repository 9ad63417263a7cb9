"""Build tests/data/math_reading_fidelity.jsonl: math responses in many answer styles, each labelled by
math-verify on the whole response and the gold answer (the reference reading of issue 34).

Row: `{"id", "style", "expected", "response", "answer", "source", "math_verify", "math_verify_read"}`.
`expected` is the truth by construction (the builder wrote the right or a wrong answer; null for real model
responses), and
`math_verify` is `verify(parse(f"${answer}$"), parse(response))` with `[LatexExtractionConfig(),
ExprExtractionConfig()]`, the way math-verify's authors call it (`math_verify_read`: the text it read, null
when it read nothing). Styles:

  from GSM8K test answers    gsm8k_hashes, prose_number, currency, thousands, bold, percent, decimal_comma
  from MATH-500 answers      boxed, answer_phrase, bare_span, units, several_boxes, thinking_early_box
  generated golds            relations, intervals, sets, matrices
  adversarial negatives      joined_boxes (`\\boxed{32} and \\boxed{349}` for 32349), answer_in_thinking,
                             issue21_negative (every negative of tests/data/math_fidelity_checkset.jsonl)
  documented classes         near_boxes (`\\boxed{7} is too big; the answer is \\boxed{6}`), answer_in_thinking
  real responses             real_gsm8k, real_math500: SmolLM2-135M-Instruct's greedy GSM8K (<= 512 tokens)
                             and sampled MATH-500 (t=0.6, <= 1024 tokens) responses, 300 of each
                             (tests/data/smollm2_math_responses.jsonl, drawn by `--sample-real SAMPLES.jsonl`
                             from `cascade eval --model smollm2-135m --benchmarks gsm8k,math500 --backend vllm`)

Run: PYTHONPATH=src python tests/data/build_math_reading_fidelity.py [--out PATH]
     PYTHONPATH=src python tests/data/build_math_reading_fidelity.py --sample-real RUN/samples.jsonl
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from build_math_checkset import DEFAULT_SOURCE, think  # noqa: E402  (MATH-500's path, the think block)
from build_math_fidelity_checkset import bump  # noqa: E402

DEFAULT_OUT = HERE / "math_reading_fidelity.jsonl"
REAL = HERE / "smollm2_math_responses.jsonl"
ISSUE21 = HERE / "math_fidelity_checkset.jsonl"
GSM8K = DEFAULT_SOURCE.parents[1] / "real" / "gsm8k" / "test.jsonl"
REAL_PER_BENCHMARK = 300
INTEGER = re.compile(r"^\d+$")
NOUNS = ("dollars", "eggs", "minutes", "pages", "miles", "apples", "students", "hours")


def row(style: str, key: str, expected: bool | None, response: str, answer: str, source: str) -> dict:
    return {"id": f"{style}/{key}", "style": style, "expected": expected, "response": response,
            "answer": answer, "source": source}  # fmt: skip


def math_verify(answer: str, response: str) -> tuple[bool, str | None]:
    """(math-verify's verdict, the text it read: the fallback string of its first match, None if none)."""
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

    config = [LatexExtractionConfig(), ExprExtractionConfig()]
    predicted = parse(response, extraction_config=config)
    read = str(predicted[-1]) if predicted else None
    return bool(verify(parse(f"${answer}$", extraction_config=config), predicted)), read


# ---- GSM8K: integer answers in prose ---------------------------------------------------------------------


def gsm8k_problems() -> list[tuple[str, str, str]]:
    """(key, worked solution without the `####` line and calculator notes, final answer)."""
    from cascade_cli.data.formats_real import gsm8k_solution

    problems = []
    for line, text in enumerate(GSM8K.read_text(encoding="utf-8").splitlines()):
        solution, final = gsm8k_solution(json.loads(text)["answer"])
        problems.append((str(line), solution, final))
    return problems


def gsm8k_styles(solution: str, final: str, other: str, rng: random.Random) -> dict[str, tuple[str, str, str]]:
    """style -> (gold, right response, wrong response); `other` is a wrong final answer."""
    noun = rng.choice(NOUNS)
    value, wrong = int(final), int(other)
    cents = rng.randint(1, 99)
    styles = {
        "gsm8k_hashes": (final, f"{solution}\n#### {final}", f"{solution}\n#### {other}"),
        "prose_number": (final, f"{solution}\nSo the answer is {final} {noun} in all.",
                         f"{solution}\nSo the answer is {other} {noun} in all."),
        "currency": (final, f"{solution}\nThat means she makes ${final} per day.",
                     f"{solution}\nThat means she makes ${other} per day."),
        "bold": (final, f"{solution}\n\nSo the total is **{final}**.", f"{solution}\n\nSo the total is **{other}**."),
        "percent": (f"{final}\\%", f"{solution}\nThat is {final}% of the whole.",
                    f"{solution}\nThat is {other} percent of the whole."),
        "decimal_comma": (f"{final}.{cents:02d}", f"Altogether it comes to {final},{cents:02d} euros.",
                          f"Altogether it comes to {final},{(cents % 98) + 1:02d} euros."),
    }  # fmt: skip
    if value >= 1000:
        styles["thousands"] = (final, f"{solution}\nThe total is {value:,}.", f"{solution}\nThe total is {wrong:,}.")
    return styles


def gsm8k_rows(problems: list[tuple[str, str, str]]) -> list[dict]:
    rows = []
    names = ("gsm8k_hashes", "prose_number", "currency", "bold", "percent", "decimal_comma")
    for index, (key, solution, final) in enumerate(problems):
        if not INTEGER.match(final):
            continue
        rng = random.Random(f"gsm8k:{key}")
        other = str(int(final) + rng.randint(1, 9))
        styles = gsm8k_styles(solution, final, other, rng)
        style = "thousands" if "thousands" in styles and index % 2 else names[index % len(names)]
        gold, right, wrong = styles[style]
        rows += [row(style, f"{key}/right", True, right, gold, f"gsm8k/{key}"),
                 row(style, f"{key}/wrong", False, wrong, gold, f"gsm8k/{key}")]  # fmt: skip
    return rows


# ---- MATH-500: LaTeX answers -------------------------------------------------------------------------------

PHRASES = (
    "The final answer is ${}$. I hope it is correct.",
    "**Answer:** ${}$",
    "Therefore, the answer is ${}$.",
    "Final Answer: ${}$",
)
SPANS = ("${}$", "\\({}\\)", "\\[{}\\]", "$${}$$")
UNITS = ("\\text{ cm}", "\\text{ meters}", "\\text{ dollars}", "\\text{ square units}")
WORKING = "First we set up the equation from the conditions, then simplify both sides and solve."


def math500_styles(answer: str, wrong: str, rng: random.Random) -> dict[str, tuple[str, str]]:
    """style -> (right response, wrong response) for one MATH-500 answer."""
    phrase, span = rng.choice(PHRASES), rng.choice(SPANS)
    guess = bump(wrong) if re.search(r"\d", wrong) else "0"
    styles = {
        "boxed": (think(f"{WORKING} So the answer is $\\boxed{{{answer}}}$."),
                  think(f"{WORKING} So the answer is $\\boxed{{{wrong}}}$.")),
        "answer_phrase": (f"{WORKING}\n\n{phrase.format(answer)}", f"{WORKING}\n\n{phrase.format(wrong)}"),
        "bare_span": (span.format(answer), span.format(wrong)),
        # an early guess boxed in the thinking, the answer boxed after it
        "thinking_early_box": (
            f"<think>\nMaybe it is $\\boxed{{{guess}}}$? No, that double counts.\n</think>\n\n"
            f"So the answer is $\\boxed{{{answer}}}$.",
            f"<think>\nMaybe it is $\\boxed{{{answer}}}$? No, that double counts.\n</think>\n\n"
            f"So the answer is $\\boxed{{{wrong}}}$.",
        ),
        # a first box in the working, far from the final one
        "several_boxes": (
            f"A first try gives $\\boxed{{{guess}}}$. {WORKING} Checking every case again, we find "
            f"that the answer is $\\boxed{{{answer}}}$.",
            f"A first try gives $\\boxed{{{answer}}}$. {WORKING} Checking every case again, we find "
            f"that the answer is $\\boxed{{{wrong}}}$.",
        ),
    }  # fmt: skip
    if INTEGER.match(answer):
        unit = rng.choice(UNITS)
        styles["units"] = (f"{WORKING} The length is ${answer}{unit}$.", f"{WORKING} The length is ${wrong}{unit}$.")
    return styles


def math500_rows(problems: list[dict]) -> list[dict]:
    rows = []
    names = ("boxed", "answer_phrase", "bare_span", "thinking_early_box", "several_boxes", "units")
    for index, problem in enumerate(problems):
        answer, key = problem["answer"], problem["unique_id"]
        if not re.search(r"\d", answer):
            continue
        rng = random.Random(f"math500:{key}")
        styles = math500_styles(answer, bump(answer), rng)
        style = names[index % len(names)]
        if style not in styles:
            style = "boxed"
        right, wrong = styles[style]
        rows += [row(style, f"{key}/right", True, right, answer, key),
                 row(style, f"{key}/wrong", False, wrong, answer, key)]  # fmt: skip
    return rows


# ---- generated golds: relations, intervals, sets, matrices ------------------------------------------------

RELATIONS = ("\\ge", "\\le", ">", "<")


def generated_rows(count: int = 60) -> list[dict]:
    rng = random.Random("generated golds")
    rows = []
    for index in range(count):
        a, b, c = rng.randint(-9, 9), rng.randint(10, 30), rng.randint(31, 60)
        relation = rng.choice(RELATIONS)
        left, right = rng.choice("[("), rng.choice("])")
        flipped = {"[": "(", "(": "["}[left]
        matrix = f"\\begin{{pmatrix}} {a} \\\\ {b} \\end{{pmatrix}}"
        wrong_matrix = f"\\begin{{pmatrix}} {a} \\\\ {b + 1} \\end{{pmatrix}}"
        cases = {
            "relations": (f"x {relation} {a}", f"Therefore $x {relation} {a}$ is the solution.",
                          f"Therefore $x {relation} {a + 1}$ is the solution."),
            "intervals": (f"{left}{a}, {b}{right}", f"The solution set is ${left}{a}, {b}{right}$.",
                          f"The solution set is ${flipped}{a}, {b}{right}$."),
            "sets": (f"\\{{{a}, {b}, {c}\\}}", f"The solutions are ${a}$, ${b}$ and ${c}$.",
                     f"The solutions are ${a}$, ${b}$ and ${c + 1}$."),
            "matrices": (matrix, f"Multiplying out, the vector is ${matrix}$.",
                         f"Multiplying out, the vector is ${wrong_matrix}$."),
        }  # fmt: skip
        for style, (gold, right_response, wrong_response) in cases.items():
            rows += [row(style, f"{index}/right", True, right_response, gold, "generated"),
                     row(style, f"{index}/wrong", False, wrong_response, gold, "generated")]  # fmt: skip
    return rows


# ---- adversarial negatives ---------------------------------------------------------------------------------


def joined_box_rows(problems: list[tuple[str, str, str]]) -> list[dict]:
    """A 4+ digit answer split over two boxes: math-verify joins them into `32,349` and reads 32349."""
    rows = []
    for key, _, final in problems:
        if INTEGER.match(final) and int(final) >= 1000 and len(rows) < 20:
            head, tail = final[:-3], final[-3:]
            response = (f"The two parts are \\boxed{{{head}}} and \\boxed{{{tail}}}." if len(rows) % 2
                        else f"So we get $\\boxed{{{head}}}, \\boxed{{{tail}}}$.")  # fmt: skip
            rows.append(row("joined_boxes", key, False, response, final, f"gsm8k/{key}"))
    return rows


def documented_class_rows(problems: list[dict], count: int = 10) -> list[dict]:
    """The classes where cascade reads otherwise than math-verify (verifiers/math.py): a guess boxed close
    before the answer's box (math-verify reads the two as a set), the answer only in the thinking, and a
    thinking that never ends (math-verify reads the guess inside it)."""
    rows = []
    integers = [p for p in problems if INTEGER.match(p["answer"])][: 2 * count]
    for problem in integers[:count]:
        answer, key = problem["answer"], problem["unique_id"]
        guess = bump(answer)
        near = f"\\boxed{{{guess}}} is too big; the answer is \\boxed{{{answer}}}."
        rows.append(row("near_boxes", key, True, near, answer, key))
        rows.append(row("answer_in_thinking", f"{key}/closed", False,
                        f"<think>\nIt should be $\\boxed{{{answer}}}$.\n</think>\n\nI could not finish this one.",
                        answer, key))
    for problem in integers[count:]:
        answer, key = problem["answer"], problem["unique_id"]
        rows.append(row("answer_in_thinking", f"{key}/unfinished", False,
                        f"<think>\nIt should be $\\boxed{{{answer}}}$, but let me check the second case",
                        answer, key))
    return rows


def issue21_rows() -> list[dict]:
    """Every negative of issue 21's check set (lists posing as thousands, bare numbers, wrong final phrases)."""
    rows = [json.loads(line) for line in ISSUE21.read_text(encoding="utf-8").splitlines()]
    return [row("issue21_negative", f"{r['category']}/{r['id']}", False, r["response"], r["answer"], r["source"])
            for r in rows if not r["expected"]]  # fmt: skip


def real_rows() -> list[dict]:
    rows = [json.loads(line) for line in REAL.read_text(encoding="utf-8").splitlines()]
    return [row(f"real_{r['benchmark']}", r["id"], None, r["response"], r["answer"], r["benchmark"]) for r in rows]


def sample_real(samples: Path, out: Path = REAL) -> None:
    """Keep REAL_PER_BENCHMARK responses per benchmark of a `cascade eval` samples.jsonl (seeded; those cut at
    the token limit too: a verifier meets them in every eval and RL step)."""
    kept = []
    records = [json.loads(line) for line in samples.read_text(encoding="utf-8").splitlines()]
    for benchmark in ("gsm8k", "math500"):
        pool = [r for r in records if r["benchmark"] == benchmark]
        for record in random.Random(f"real:{benchmark}").sample(pool, min(REAL_PER_BENCHMARK, len(pool))):
            kept.append({"id": f"{record['id']}#{record.get('sample_index', 0)}", "benchmark": benchmark,
                         "response": record["response"], "answer": record["label"]["answer"],
                         "finish_reason": record.get("finish_reason")})  # fmt: skip
    kept.sort(key=lambda r: (r["benchmark"], r["id"]))
    out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in kept), encoding="utf-8")
    print(f"wrote {len(kept)} real responses to {out}")


def build(source: Path = DEFAULT_SOURCE) -> list[dict]:
    math500 = [json.loads(line) for line in source.read_text(encoding="utf-8").splitlines()]
    gsm8k = gsm8k_problems()
    rows = gsm8k_rows(gsm8k) + math500_rows(math500) + generated_rows()
    rows += joined_box_rows(gsm8k) + documented_class_rows(math500)
    rows += issue21_rows() + real_rows()
    for entry in rows:
        entry["math_verify"], entry["math_verify_read"] = math_verify(entry["answer"], entry["response"])
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE, help="MATH-500 test.jsonl")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--sample-real", type=Path, help="a cascade eval samples.jsonl: rewrite " + REAL.name)
    args = parser.parse_args()
    if args.sample_real:
        sample_real(args.sample_real)
        return
    rows = build(args.source)
    args.out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    print(f"wrote {len(rows)} rows in {len({r['style'] for r in rows})} styles to {args.out}")


if __name__ == "__main__":
    main()
