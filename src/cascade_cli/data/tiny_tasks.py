"""Seeded synthetic tasks for the embedded tiny model (`--source tiny:DOMAIN`).

Sized for a ~2-5M-parameter character-level model with a ~512-character context: short prompts, short
answers, small numbers, a few templates. Every RL row's label is checkable by its domain's verifier
(math: boxed answer, if: IFEval instruction ids + kwargs, code: HumanEval-style assert tests).

Disjointness by construction: every problem has a key (its operation and numbers, its function template,
its topic and constraints) and a hash of that key puts the problem in exactly one pool: `sft` (the SFT mix),
`rl` (the per-domain RL prompts) or `heldout` (evaluation); code splits each function template's constants
across the pools (`stratified_pools`), so a held-out code problem is a known operation with a new constant. A
`train` draw of `tiny:sft` reads only the sft pool, a `train` draw of any other domain only the rl pool, and
every `heldout` draw only the heldout pool, so SFT prompts, RL prompts and held-out prompts never share a
problem whatever the seeds (the paper keeps SFT and RL prompts strictly disjoint).
"""

from __future__ import annotations

import functools
import hashlib
import json
import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from cascade_cli.chat import format_response

TINY_DOMAINS: tuple[str, ...] = ("math", "code", "if", "pref", "general", "sft")
SPLITS: tuple[str, ...] = ("train", "heldout")
# The mode each domain's rows get when none is asked for (paper: IF-RL non-thinking, math/code thinking).
DEFAULT_MODES: dict[str, str] = {"math": "think", "code": "think", "if": "no_think"}
DEFAULT_SFT_MIX: dict[str, float] = {"math": 0.35, "code": 0.25, "if": 0.2, "general": 0.2}
# SFT tasks whose prompts get parallel thinking and non-thinking answers (paper §3.1.1: general domain).
PARALLEL_MODE_TASKS: tuple[str, ...] = ("if", "general")

_POOL_SHARES = (("sft", 50), ("rl", 35), ("heldout", 15))


def _key_hash(key: str) -> int:
    return int(hashlib.sha256(key.encode()).hexdigest()[:8], 16)


def pool_of(key: str) -> str:
    """The one pool a problem key belongs to (stable across Python versions and machines)."""
    bucket = _key_hash(key) % 100
    for pool, share in _POOL_SHARES:
        if bucket < share:
            return pool
        bucket -= share
    raise AssertionError("unreachable")


@functools.lru_cache(maxsize=256)
def stratified_pools(keys: tuple[str, ...], heldout_share: float, rl_share: float) -> dict[str, str]:
    """Pools for the keys of one family of problems (a code template's constants), split within the family.

    Hashing each key on its own can leave a small family with no SFT key at all (then its held-out problems
    test an operation the model never saw) or with no RL key (then RL cannot improve it). Here the keys are
    ranked by their hash and split by the shares, so a family of three or more keys has at least one key in
    every pool; a smaller family goes to SFT only.
    """
    ranked = sorted(keys, key=_key_hash)
    if len(ranked) < 3:
        return dict.fromkeys(ranked, "sft")
    n_heldout = max(1, round(len(ranked) * heldout_share))
    n_rl = max(1, round(len(ranked) * rl_share))
    pools = ["heldout"] * n_heldout + ["rl"] * n_rl
    pools += ["sft"] * (len(ranked) - len(pools))
    return dict(zip(ranked, pools, strict=True))


def pool_for(domain: str, split: str) -> str:
    if split == "heldout":
        return "heldout"
    return "sft" if domain == "sft" else "rl"


@dataclass
class Task:
    """One problem: a prompt, its label, a right answer and (when the domain has one) a wrong answer."""

    task: str  # math | code | if | general
    key: str
    prompt: str
    label: dict[str, Any]
    answer: str
    thinking: str
    wrong_answer: str | None = None
    wrong_thinking: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    pool: str = ""  # sft | rl | heldout; by default `pool_of(key)`

    def __post_init__(self) -> None:
        self.pool = self.pool or pool_of(self.key)

    def response(self, mode: str, correct: bool = True) -> str:
        answer = self.answer if correct or self.wrong_answer is None else self.wrong_answer
        thinking = self.thinking if correct or self.wrong_thinking is None else self.wrong_thinking
        return format_response(answer, thinking if mode == "think" else None)


# ---------------------------------------------------------------------------------------------------------
# math: small arithmetic, answers in \boxed{}
# ---------------------------------------------------------------------------------------------------------

_MATH_TEMPLATES = (
    "What is {a}{op}{b}?",
    "Compute {a}{op}{b}.",
    "Calculate {a} {op} {b}.",
)
_WORD_TEMPLATES = {
    "+": "Tom has {a} apples and gets {b} more. How many apples does he have?",
    "-": "Tom has {a} apples and eats {b}. How many apples are left?",
    "*": "There are {a} bags with {b} apples each. How many apples in total?",
}
MAX_OPERAND = 99  # two-digit numbers; the multiplier of `*` is one digit


# The thinking is column arithmetic: a ones step and a tens step, each a one-digit fact (with the carry or
# borrow written out). A held-out problem is then new only as a combination: its one-digit facts recur across
# the SFT problems, which is what lets a tiny model generalise to prompts it never saw. A wrong answer makes
# the typical slip (a dropped carry or borrow, or a ones step off by one), which RL can learn to fix.
def _add_steps(a: int, b: int, slip: str = "") -> tuple[str, int]:
    ones = a % 10 + b % 10 + (1 if slip == "ones" else 0)
    carry = 0 if slip == "carry" else ones // 10
    tens = a // 10 + b // 10 + carry
    return f"{a % 10}+{b % 10}={ones}, {a // 10}+{b // 10}+{carry}={tens}", tens * 10 + ones % 10


def _sub_steps(a: int, b: int, slip: str = "") -> tuple[str, int]:
    borrow = 1 if a % 10 < b % 10 else 0
    ones = borrow * 10 + a % 10 - b % 10 + (1 if slip == "ones" else 0)
    written_borrow = 0 if slip == "carry" else borrow
    tens = a // 10 - b // 10 - written_borrow
    first = f"{'1' if borrow else ''}{a % 10}-{b % 10}={ones}"
    return f"{first}, {a // 10}-{b // 10}-{written_borrow}={tens}", tens * 10 + ones % 10


def _mul_steps(a: int, b: int, slip: str = "") -> tuple[str, int]:
    ones = (a % 10) * b + (1 if slip == "ones" else 0)
    carry = 0 if slip == "carry" else ones // 10
    tens = (a // 10) * b + carry
    return f"{a % 10}*{b}={ones}, {a // 10}*{b}+{carry}={tens}", tens * 10 + ones % 10


_STEPS = {"+": _add_steps, "-": _sub_steps, "*": _mul_steps}


def math_task(rng: random.Random) -> Task:
    op = rng.choice("++-*")
    a = rng.randint(0, MAX_OPERAND)
    b = rng.randint(0, 9) if op == "*" else rng.randint(0, a if op == "-" else MAX_OPERAND)
    steps, c = _STEPS[op](a, b)
    template = _WORD_TEMPLATES[op] if rng.random() < 0.2 else rng.choice(_MATH_TEMPLATES)
    for slip in rng.sample(("carry", "ones"), 2):
        wrong_steps, wrong = _STEPS[op](a, b, slip)
        if wrong != c and wrong >= 0:
            break
    return Task(
        task="math",
        key=f"math:{a}{op}{b}",
        prompt=template.format(a=a, b=b, op=op),
        label={"answer": str(c)},
        answer=f"\\boxed{{{c}}}",
        thinking=f"{a}{op}{b}: {steps}",  # restating the operands first is a plain copy, then digits are near
        wrong_answer=f"\\boxed{{{wrong}}}",
        wrong_thinking=f"{a}{op}{b}: {wrong_steps}",
    )


# ---------------------------------------------------------------------------------------------------------
# code: one-line Python functions with HumanEval-style assert tests
# ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _CodeTemplate:
    name: str
    args: str  # x | a, b | xs | s
    phrase: str  # what the function returns; may use {k}
    body: str  # the return expression; may use {k}
    k_range: tuple[int, int] = (1, 9)


_CODE_TEMPLATES: tuple[_CodeTemplate, ...] = (
    _CodeTemplate("add", "x", "returns x plus {k}", "x + {k}"),
    _CodeTemplate("sub", "x", "returns x minus {k}", "x - {k}"),
    _CodeTemplate("mul", "x", "returns x times {k}", "x * {k}", (2, 9)),
    _CodeTemplate("mod", "x", "returns x modulo {k}", "x % {k}", (2, 9)),
    _CodeTemplate("div", "x", "returns x divided by {k}, rounded down", "x // {k}", (2, 9)),
    _CodeTemplate("max", "x", "returns the larger of x and {k}", "max(x, {k})"),
    _CodeTemplate("min", "x", "returns the smaller of x and {k}", "min(x, {k})"),
    _CodeTemplate("gt", "x", "returns True if x is greater than {k}", "x > {k}"),
    _CodeTemplate("divisible", "x", "returns True if x is divisible by {k}", "x % {k} == 0", (2, 9)),
    _CodeTemplate("square_add", "x", "returns x squared plus {k}", "x * x + {k}"),
    _CodeTemplate("twice_add", "x", "returns twice x plus {k}", "2 * x + {k}"),
    _CodeTemplate("add3", "a, b", "returns a plus b plus {k}", "a + b + {k}"),
    _CodeTemplate("mul_add", "a, b", "returns a times b plus {k}", "a * b + {k}"),
    _CodeTemplate("sum_add", "xs", "returns the sum of the list xs plus {k}", "sum(xs) + {k}"),
    _CodeTemplate("len_add", "xs", "returns the length of the list xs plus {k}", "len(xs) + {k}"),
    _CodeTemplate("count", "xs", "returns how many items of the list xs equal {k}", "xs.count({k})"),
    _CodeTemplate("repeat", "s", "returns the string s repeated {k} times", "s * {k}", (2, 5)),
    _CodeTemplate("prefix", "s", "returns the first {k} characters of the string s", "s[:{k}]", (1, 4)),
    _CodeTemplate("drop", "s", "returns the string s without its first {k} characters", "s[{k}:]", (1, 4)),
    _CodeTemplate(
        "bang", "s", "returns the string s followed by {k} exclamation marks", "s + '!' * {k}", (1, 4)
    ),
    _CodeTemplate("upper", "s", "returns the string s in upper case", "s.upper()", (0, 0)),
    _CodeTemplate("reverse", "s", "returns the string s reversed", "s[::-1]", (0, 0)),
)
# Shares of each template's constants: held-out gets two of eight or nine, so the held-out prompts are ~36
# distinct problems, every one of an operation that SFT taught with other constants and RL trains.
_CODE_HELDOUT_SHARE, _CODE_RL_SHARE = 0.25, 0.3


def _code_key(template: _CodeTemplate, k: int) -> str:
    return f"code:{template.name}:{k}"


def _code_pools(template: _CodeTemplate) -> dict[str, str]:
    keys = tuple(_code_key(template, k) for k in range(template.k_range[0], template.k_range[1] + 1))
    return stratified_pools(keys, _CODE_HELDOUT_SHARE, _CODE_RL_SHARE)


_FUNCTION_NAMES = ("f", "g", "h", "solve")
_WORDS = ("cat", "dog", "sun", "tree", "bird", "hello", "code", "moon", "fish", "star")


def _code_inputs(args: str, k: int, rng: random.Random) -> list[tuple[Any, ...]]:
    if args == "x":
        values = rng.sample(range(0, 20), 3) + [k, k + 1]
        return [(value,) for value in dict.fromkeys(values)]
    if args == "a, b":
        return [(rng.randint(0, 9), rng.randint(0, 9)) for _ in range(3)]
    if args == "xs":
        lists = [[rng.randint(0, 9) for _ in range(rng.randint(1, 4))] for _ in range(3)]
        lists.append([k, 1, k])
        return [(xs,) for xs in lists]
    return [(word,) for word in rng.sample(_WORDS, 3)]


@functools.lru_cache(maxsize=1024)
def _compiled(args: str, body: str) -> Callable[..., Any]:
    # Our own generated one-liners, evaluated to compute the expected outputs of the tests.
    return eval(f"lambda {args}: {body}")  # noqa: S307


def _call(args: str, body: str, inputs: tuple[Any, ...]) -> Any:
    function = _compiled(args, body)
    return function(*[list(value) if isinstance(value, list) else value for value in inputs])


def _assert_test(cases: list[tuple[tuple[Any, ...], Any]]) -> str:
    lines = ["def check(candidate):"]
    for inputs, output in cases:
        lines.append(f"    assert candidate({', '.join(repr(value) for value in inputs)}) == {output!r}")
    return "\n".join(lines) + "\n"


def code_block(name: str, args: str, body: str) -> str:
    return f"```python\ndef {name}({args}):\n    return {body}\n```"


def code_task(rng: random.Random) -> Task:
    template = rng.choice(_CODE_TEMPLATES)
    k = rng.randint(*template.k_range)
    name = rng.choice(_FUNCTION_NAMES)
    body = template.body.format(k=k)
    inputs = _code_inputs(template.args, k, rng)
    outputs = [_call(template.args, body, case) for case in inputs]
    # A wrong answer: another template's body with the same signature, or the constant off by one, that fails
    # at least one test.
    candidates = [
        t.body.format(k=k) for t in _CODE_TEMPLATES if t.args == template.args and t is not template
    ]
    candidates += [template.body.format(k=k + 1)] if "{k}" in template.body else []
    rng.shuffle(candidates)
    wrong_body = None
    for candidate in candidates:
        try:
            if any(
                _call(template.args, candidate, case) != out
                for case, out in zip(inputs, outputs, strict=True)
            ):
                wrong_body = candidate
                break
        except Exception:
            wrong_body = candidate
            break
    phrase = template.phrase.format(k=k)
    key = _code_key(template, k)
    return Task(
        task="code",
        key=key,
        pool=_code_pools(template)[key],
        prompt=f"Write a Python function {name}({template.args}) that {phrase}.",
        label={
            "kind": "assert",
            "test": _assert_test(list(zip(inputs, outputs, strict=True))),
            "entry_point": name,
        },
        answer=code_block(name, template.args, body),
        # Short on purpose: the tiny model's responses stay within ~70 tokens.
        thinking=f"{name} returns {body}.",
        wrong_answer=code_block(name, template.args, wrong_body) if wrong_body else None,
        wrong_thinking=f"{name} returns {wrong_body}." if wrong_body else None,
    )


# ---------------------------------------------------------------------------------------------------------
# if: IFEval-style constraints with IFEval's instruction ids and kwargs
# ---------------------------------------------------------------------------------------------------------

# Facts carry no commas (so `punctuation:no_comma` needs no rewriting) and are plain English sentences.
_TOPICS: dict[str, tuple[str, ...]] = {
    "cats": (
        "Cats like to sleep in the sun.",
        "A cat can jump very high.",
        "Cats clean their fur every day.",
    ),
    "dogs": (
        "Dogs are loyal friends to people.",
        "A dog likes to run in the park.",
        "Dogs can learn many tricks.",
    ),
    "the sea": ("The sea is deep and blue.", "Many fish live in the sea.", "The waves move all the time."),
    "rain": ("Rain falls from the clouds.", "Plants need rain to grow.", "After the rain the air is fresh."),
    "books": ("Books tell us many stories.", "You can learn a lot from a book.", "A library has many books."),
    "the moon": (
        "The moon shines at night.",
        "The moon goes around the earth.",
        "People walked on the moon.",
    ),
    "trees": (
        "Trees give us shade in summer.",
        "Birds build nests in trees.",
        "Some trees live for a long time.",
    ),
    "music": ("Music can make people happy.", "Many people play the piano.", "A song has words and a tune."),
    "bread": (
        "Bread is made from flour and water.",
        "Fresh bread smells good.",
        "People eat bread every day.",
    ),
    "winter": ("Winter is the coldest season.", "Snow falls in the winter.", "Days are short in the winter."),
    "trains": (
        "Trains run on long metal tracks.",
        "A train can carry many people.",
        "Some trains go very fast.",
    ),
    "the sun": ("The sun is a star.", "The sun gives us light and heat.", "The sun rises in the east."),
    "coffee": (
        "Coffee is made from beans.",
        "Many people drink coffee in the morning.",
        "Coffee tastes bitter.",
    ),
    "school": (
        "Children learn to read at school.",
        "A teacher helps the class.",
        "School starts in the morning.",
    ),
    "apples": (
        "Apples grow on trees in the garden.",
        "An apple can be red or green.",
        "Apples are sweet and healthy.",
    ),
    "birds": ("Birds have feathers and wings.", "Most birds can fly.", "Birds sing in the morning."),
}
_END_PHRASES = ("Is there anything else?", "That is all.", "Thank you for reading.", "Have a nice day.")
_POSTSCRIPTS = ("P.S. Have a great day.", "P.S. Thanks for asking.", "P.S. I hope this helps.")
_KEYWORD_SENTENCES = {
    "happy": "This makes me happy.",
    "blue": "My favorite color is blue.",
    "friend": "A friend told me this.",
    "simple": "It is simple to learn.",
}
_FORBIDDEN_SENTENCES = {
    "really": "I really like it.",
    "very": "It is very interesting.",
    "maybe": "Maybe you know this.",
    "totally": "It is totally true.",
}

# IFEval's `change_case:english_capital` is left out: its language check (langdetect) rejects short
# all-capital English, so even a right answer would often fail.
# (instruction id, short note for the thinking text). Case, ending, wrapping and layout groups exclude each
# other so that every combination is satisfiable and the reference answer stays easy to check.
_IF_CONSTRAINTS: dict[str, str] = {
    "change_case:english_lowercase": "lowercase",
    "punctuation:no_comma": "no commas",
    "startend:end_checker": "end phrase",
    "startend:quotation": "quotes",
    "detectable_format:title": "title",
    "length_constraints:number_words": "word count",
    "length_constraints:number_sentences": "sentence count",
    "detectable_content:postscript": "postscript",
    "detectable_format:number_bullet_lists": "bullets",
    "keywords:existence": "keyword",
    "keywords:forbidden_words": "forbidden word",
    "detectable_format:json_format": "json",
    "detectable_format:number_highlighted_sections": "highlights",
}
INSTRUCTION_IDS: tuple[str, ...] = tuple(_IF_CONSTRAINTS)
_CONFLICTS: tuple[frozenset[str], ...] = (
    # what the answer ends with / is wrapped in
    frozenset(
        {
            "startend:end_checker",
            "startend:quotation",
            "detectable_content:postscript",
            "detectable_format:json_format",
        }
    ),
    # layout
    frozenset(
        {
            "detectable_format:number_bullet_lists",
            "detectable_format:number_highlighted_sections",
            "detectable_format:json_format",
            "startend:quotation",
        }
    ),
    frozenset({"length_constraints:number_words", "length_constraints:number_sentences"}),
    # sentence counting stays unambiguous on plain prose only
    frozenset({"length_constraints:number_sentences", "detectable_format:title"}),
    frozenset({"length_constraints:number_sentences", "detectable_content:postscript"}),
    frozenset({"length_constraints:number_sentences", "detectable_format:number_bullet_lists"}),
    frozenset({"length_constraints:number_sentences", "detectable_format:json_format"}),
    frozenset({"length_constraints:number_sentences", "detectable_format:number_highlighted_sections"}),
    frozenset({"detectable_format:title", "detectable_format:json_format"}),
    frozenset({"detectable_format:title", "startend:quotation"}),
)


def _compatible(chosen: list[str], candidate: str) -> bool:
    for group in _CONFLICTS:
        if candidate in group and any(other in group for other in chosen):
            return False
    return candidate not in chosen


def count_words(text: str) -> int:
    return len(re.findall(r"\w+", text))


def count_sentences(text: str) -> int:
    return len([part for part in re.split(r"(?<=[.!?])\s+", text.strip()) if part])


@dataclass
class _IfPlan:
    topic: str
    ids: list[str]
    kwargs: list[dict[str, Any]]
    sentences: list[str]


def _render_if(plan: _IfPlan, broken: str | None = None) -> str:
    """The answer for a plan; `broken` names one instruction id whose transformation is skipped or inverted."""
    ids = [i for i in plan.ids if i != broken]
    kwargs = {i: k for i, k in zip(plan.ids, plan.kwargs, strict=True)}
    sentences = list(plan.sentences)
    if "keywords:existence" in ids:
        keyword_sentence = _KEYWORD_SENTENCES[kwargs["keywords:existence"]["keywords"][0]]
        if "detectable_format:number_bullet_lists" in ids:  # inside the last bullet: the count stays exact
            sentences[-1] = f"{sentences[-1]} {keyword_sentence}"
        else:
            sentences.append(keyword_sentence)
    if broken == "keywords:forbidden_words":
        sentences.append(_FORBIDDEN_SENTENCES[kwargs[broken]["forbidden_words"][0]])
    if broken == "punctuation:no_comma":
        sentences[0] = "Well, " + sentences[0][0].lower() + sentences[0][1:]
    if broken == "length_constraints:number_words":
        relation = kwargs[broken]["relation"]
        sentences = sentences[:1] if relation == "at least" else sentences + list(_TOPICS[plan.topic]) * 2
    if broken == "length_constraints:number_sentences":
        relation = kwargs[broken]["relation"]
        sentences = sentences[:1] if relation == "at least" else sentences + list(_TOPICS[plan.topic]) * 2
    if "detectable_format:number_bullet_lists" in ids:
        body = "\n".join(f"* {sentence}" for sentence in sentences)
    elif broken == "detectable_format:number_bullet_lists":
        body = "\n".join(f"* {sentence}" for sentence in sentences[:-1]) or sentences[0]
    elif "detectable_format:number_highlighted_sections" in ids:
        wanted = kwargs["detectable_format:number_highlighted_sections"]["num_highlights"]
        body = " ".join(f"*{s}*" if index < wanted else s for index, s in enumerate(sentences))
    else:
        body = " ".join(sentences)
    if "startend:end_checker" in ids:
        body = f"{body} {kwargs['startend:end_checker']['end_phrase']}"
    if "detectable_content:postscript" in ids:
        body = f"{body}\n\n{plan_postscript(plan)}"
    if "detectable_format:title" in ids:
        body = f"<<{plan.topic.title()}>>\n{body}"
    if "startend:quotation" in ids:
        body = f'"{body}"'
    if "detectable_format:json_format" in ids:
        body = json.dumps({"answer": body})
    if "change_case:english_lowercase" in ids:
        body = body.lower()
    return body


def plan_postscript(plan: _IfPlan) -> str:
    return _POSTSCRIPTS[sum(map(ord, plan.topic)) % len(_POSTSCRIPTS)]


def _if_phrase(instruction_id: str, kwargs: dict[str, Any]) -> str:
    relation = "fewer than" if kwargs.get("relation") == "less than" else "at least"
    phrases = {
        "change_case:english_lowercase": "Use only lowercase letters.",
        "punctuation:no_comma": "Do not use any commas.",
        "startend:end_checker": f'End your answer with "{kwargs.get("end_phrase")}"',
        "startend:quotation": "Wrap your whole answer in double quotes.",
        "detectable_format:title": "Add a title in double angular brackets, like <<title>>.",
        "length_constraints:number_words": f"Use {relation} {kwargs.get('num_words')} words.",
        "length_constraints:number_sentences": f"Use {relation} {kwargs.get('num_sentences')} sentences.",
        "detectable_content:postscript": "End with a postscript starting with P.S.",
        "detectable_format:number_bullet_lists": f"Use exactly {kwargs.get('num_bullets')} bullet points like * this.",
        "keywords:existence": f'Include the word "{(kwargs.get("keywords") or [""])[0]}".',
        "keywords:forbidden_words": f'Do not use the word "{(kwargs.get("forbidden_words") or [""])[0]}".',
        "detectable_format:json_format": "Wrap your whole answer in JSON.",
        "detectable_format:number_highlighted_sections": (
            f"Highlight at least {kwargs.get('num_highlights')} parts with *stars*."
        ),
    }
    return phrases[instruction_id]


def if_task(rng: random.Random) -> Task:
    topic = rng.choice(sorted(_TOPICS))
    wanted = 1 if rng.random() < 0.6 else 2
    ids: list[str] = []
    while len(ids) < wanted:
        candidate = rng.choice(INSTRUCTION_IDS)
        if _compatible(ids, candidate):
            ids.append(candidate)
    ids.sort(key=INSTRUCTION_IDS.index)
    facts = list(_TOPICS[topic])
    length: dict[str, str | None] = dict.fromkeys(ids)
    n_sentences = rng.randint(1, 2)
    kwargs: dict[str, dict[str, Any]] = {}
    for instruction_id in ids:
        if instruction_id == "startend:end_checker":
            kwargs[instruction_id] = {"end_phrase": rng.choice(_END_PHRASES)}
        elif instruction_id == "detectable_content:postscript":
            kwargs[instruction_id] = {"postscript_marker": "P.S."}
        elif instruction_id == "detectable_format:number_bullet_lists":
            n_sentences = rng.randint(2, 3)
            kwargs[instruction_id] = {"num_bullets": n_sentences}
        elif instruction_id == "detectable_format:number_highlighted_sections":
            n_sentences = rng.randint(1, 2)
            kwargs[instruction_id] = {"num_highlights": n_sentences}
        elif instruction_id == "keywords:existence":
            # a keyword the facts do not already contain, so leaving its sentence out breaks the rule
            absent = [w for w in sorted(_KEYWORD_SENTENCES) if w not in " ".join(facts).lower()]
            kwargs[instruction_id] = {"keywords": [rng.choice(absent)]}
        elif instruction_id == "keywords:forbidden_words":
            absent = [w for w in sorted(_FORBIDDEN_SENTENCES) if w not in " ".join(facts).lower()]
            kwargs[instruction_id] = {"forbidden_words": [rng.choice(absent)]}
        elif instruction_id.startswith("length_constraints:"):
            relation = rng.choice(("less than", "at least"))
            length[instruction_id] = relation
            n_sentences = 1 if relation == "less than" else 3
            kwargs[instruction_id] = {"relation": relation}
        else:
            kwargs[instruction_id] = {}
    if "change_case:english_lowercase" in ids:
        n_sentences = max(n_sentences, 2)  # IFEval's language check is shaky on one short sentence
    plan = _IfPlan(topic, ids, [kwargs[i] for i in ids], facts[:n_sentences])
    answer = _render_if(plan)
    # Length thresholds are set from the finished answer, with a margin.
    for instruction_id, relation in length.items():
        if relation is None:
            continue
        if instruction_id == "length_constraints:number_words":
            words = count_words(answer)
            kwargs[instruction_id]["num_words"] = (
                words + rng.randint(3, 8) if relation == "less than" else max(1, words - rng.randint(2, 5))
            )
        else:
            sentences = count_sentences(answer)
            kwargs[instruction_id]["num_sentences"] = (
                sentences + 2 if relation == "less than" else max(1, sentences - 1)
            )
    plan.kwargs = [kwargs[i] for i in ids]
    broken = rng.choice(ids)
    wrong = _render_if(plan, broken=broken)
    if wrong == answer:
        wrong = None
    notes = ", ".join(_IF_CONSTRAINTS[i] for i in ids)
    key_kwargs = json.dumps(plan.kwargs, sort_keys=True)
    return Task(
        task="if",
        key=f"if:{topic}:{','.join(ids)}:{key_kwargs}",
        prompt=f"Write about {topic}. " + " ".join(_if_phrase(i, kwargs[i]) for i in ids),
        label={"instruction_id_list": ids, "kwargs": plan.kwargs},
        answer=answer,
        thinking=f"Topic: {topic}. Rules: {notes}.",
        wrong_answer=wrong,
        wrong_thinking=f"Topic: {topic}.",
    )


# ---------------------------------------------------------------------------------------------------------
# general chat
# ---------------------------------------------------------------------------------------------------------

_QA: tuple[tuple[str, str], ...] = (
    ("Hi!", "Hello! How can I help you today?"),
    ("How are you?", "I am doing well, thank you. How can I help?"),
    ("What color is the sky?", "The sky is blue on a clear day."),
    ("What color is grass?", "Grass is green."),
    ("What is the capital of France?", "The capital of France is Paris."),
    ("What is the capital of Japan?", "The capital of Japan is Tokyo."),
    ("What is the capital of Italy?", "The capital of Italy is Rome."),
    ("How many days are in a week?", "There are seven days in a week."),
    ("How many legs does a spider have?", "A spider has eight legs."),
    ("What do bees make?", "Bees make honey."),
    ("What is ice made of?", "Ice is frozen water."),
    ("Name a fruit.", "An apple is a fruit."),
    ("Name a planet.", "Mars is a planet."),
    ("What do cows drink?", "Cows drink water."),
    ("Thank you!", "You are welcome! Happy to help."),
    ("Tell me a fun fact.", "Octopuses have three hearts."),
)
_NAMES = ("Ana", "Bob", "Cleo", "Dan", "Eva", "Finn", "Gus", "Ivy", "Leo", "Mia", "Noor", "Sam")
_OPPOSITES = {
    "hot": "cold",
    "big": "small",
    "up": "down",
    "fast": "slow",
    "day": "night",
    "happy": "sad",
    "open": "closed",
    "old": "new",
    "wet": "dry",
    "light": "dark",
    "early": "late",
    "full": "empty",
}
_DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_ANIMAL_SOUNDS = {"dog": "bark", "cat": "meow", "cow": "moo", "duck": "quack", "sheep": "baa", "lion": "roar"}


def general_task(rng: random.Random) -> Task:
    kind = rng.choice(("qa", "qa", "hello", "opposite", "day", "sound", "repeat"))
    if kind == "qa":
        prompt, answer = rng.choice(_QA)
        key, thinking = f"general:qa:{prompt}", "A simple question. I answer briefly."
    elif kind == "hello":
        name = rng.choice(_NAMES)
        prompt, answer = f"Say hello to {name}.", f"Hello, {name}! Nice to meet you."
        key, thinking = f"general:hello:{name}", f"Greet {name}."
    elif kind == "opposite":
        word = rng.choice(sorted(_OPPOSITES))
        prompt, answer = f"What is the opposite of {word}?", f"The opposite of {word} is {_OPPOSITES[word]}."
        key, thinking = f"general:opposite:{word}", f"{word} -> {_OPPOSITES[word]}."
    elif kind == "day":
        index = rng.randrange(len(_DAYS))
        following = _DAYS[(index + 1) % len(_DAYS)]
        prompt, answer = f"What day comes after {_DAYS[index]}?", f"{following} comes after {_DAYS[index]}."
        key, thinking = f"general:day:{index}", f"The day after {_DAYS[index]} is {following}."
    elif kind == "sound":
        animal = rng.choice(sorted(_ANIMAL_SOUNDS))
        prompt, answer = f"What sound does a {animal} make?", f"A {animal} says {_ANIMAL_SOUNDS[animal]}."
        key, thinking = f"general:sound:{animal}", f"A {animal} makes the sound {_ANIMAL_SOUNDS[animal]}."
    else:
        words = rng.sample(_WORDS, 3)
        phrase = " ".join(words)
        prompt, answer = f"Repeat after me: {phrase}", phrase
        key, thinking = f"general:repeat:{phrase}", "Repeat the words exactly."
    return Task(
        task="general",
        key=key,
        prompt=prompt,
        label={"reference": answer},
        answer=answer,
        thinking=thinking,
        wrong_answer=answer[: max(1, len(answer) // 3)],  # truncated: objectively worse
    )


_TASK_BUILDERS: dict[str, Callable[[random.Random], Task]] = {
    "math": math_task,
    "code": code_task,
    "if": if_task,
    "general": general_task,
}


# ---------------------------------------------------------------------------------------------------------
# rows
# ---------------------------------------------------------------------------------------------------------


def _draw(
    builder: Callable[[random.Random], Task],
    rng: random.Random,
    pool: str,
    seen: set[str],
    exhausted: set[str],
) -> Task:
    """A task from `pool`; prefers prompts not drawn yet, and repeats once a small space looks exhausted.

    A builder is marked exhausted (in `exhausted`) after a draw that found only seen prompts for a while; from
    then on the first task of the right pool is taken, which keeps large `n` on small spaces fast.
    """
    fallback: Task | None = None
    misses = 0
    for _ in range(2000):
        task = builder(rng)
        if task.pool != pool:
            continue
        if builder.__name__ in exhausted:
            return task
        if task.prompt not in seen:
            seen.add(task.prompt)
            return task
        fallback = fallback or task
        misses += 1
        if misses >= 40:
            exhausted.add(builder.__name__)
            return fallback
    raise RuntimeError(f"no task of pool {pool!r} found in 2000 draws")


def _base_row(row_id: str, domain: str, mode: str, source: str, task: Task) -> dict[str, Any]:
    return {"id": row_id, "domain": domain, "mode": mode, "source": source, "task": task.task}


def _rl_row(row_id: str, domain: str, mode: str, source: str, task: Task) -> dict[str, Any]:
    row = _base_row(row_id, domain, mode, source, task)
    row.update(prompt=task.prompt, label=task.label, reference=task.response(mode))
    return row


def _sft_row(row_id: str, mode: str, source: str, task: Task, correct: bool) -> dict[str, Any]:
    row = _base_row(row_id, "sft", mode, source, task)
    messages = [
        {"role": "user", "content": task.prompt},
        {"role": "assistant", "content": task.response(mode, correct)},
    ]
    row.update(messages=messages, label=task.label, correct=correct or task.wrong_answer is None)
    return row


def _pref_row(row_id: str, mode: str, source: str, task: Task) -> dict[str, Any]:
    row = _base_row(row_id, "pref", mode, source, task)
    row.update(prompt=task.prompt, chosen=task.response(mode), rejected=task.response(mode, correct=False))
    return row


def _weighted_choice(rng: random.Random, weights: dict[str, float]) -> str:
    names = sorted(weights)
    return rng.choices(names, weights=[weights[name] for name in names], k=1)[0]


def generate(
    domain: str,
    n: int,
    seed: int = 0,
    split: str = "train",
    mode: str | None = None,
    wrong_fraction: float = 0.2,
    mix: dict[str, float] | None = None,
) -> list[dict[str, Any]]:
    """`n` canonical rows of `tiny:DOMAIN`, deterministic for (domain, n, seed, split, options).

    math/code/if/general rows carry `prompt`, `label` and a correct `reference` response; `sft` rows carry
    `messages` (a `wrong_fraction` of math/code/if answers are wrong, leaving RL headroom; `correct` says
    which); `pref` rows carry `prompt`, `chosen` (right, complete) and `rejected` (wrong or truncated).
    """
    if domain not in TINY_DOMAINS:
        raise ValueError(f"unknown tiny domain {domain!r}; expected one of {', '.join(TINY_DOMAINS)}")
    if split not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(SPLITS)}; found {split!r}")
    if not 0.0 <= wrong_fraction <= 1.0:
        raise ValueError(f"wrong_fraction must be within [0, 1]; found {wrong_fraction}")
    pool = pool_for(domain, split)
    source = f"tiny:{domain}"
    rng = random.Random(f"cascade-tiny:{domain}:{split}:{seed}")
    seen: set[str] = set()
    exhausted: set[str] = set()
    rows: list[dict[str, Any]] = []
    mix = dict(mix or DEFAULT_SFT_MIX)
    for name in mix:
        if name not in _TASK_BUILDERS:
            raise ValueError(f"mix: unknown task {name!r}; expected some of {', '.join(_TASK_BUILDERS)}")
    while len(rows) < n:
        row_id = f"tiny-{domain}-{split}-{seed}-{len(rows):06d}"
        if domain == "sft":
            task = _draw(_TASK_BUILDERS[_weighted_choice(rng, mix)], rng, pool, seen, exhausted)
            correct = rng.random() >= wrong_fraction
            if mode is None and task.task in PARALLEL_MODE_TASKS:
                # Parallel thinking and non-thinking answers to the same prompt (paper §3.1.1).
                rows.append(_sft_row(row_id, "think", source, task, correct))
                if len(rows) < n:
                    rows.append(
                        _sft_row(
                            f"tiny-{domain}-{split}-{seed}-{len(rows):06d}",
                            "no_think",
                            source,
                            task,
                            rng.random() >= wrong_fraction,
                        )
                    )
                continue
            rows.append(_sft_row(row_id, mode or "think", source, task, correct))
        elif domain == "pref":
            builder = _TASK_BUILDERS[rng.choice(("math", "if", "general", "general"))]
            task = _draw(builder, rng, pool, seen, exhausted)
            if task.wrong_answer is None:
                continue
            row_mode = mode or ("think" if len(rows) % 2 == 0 else "no_think")  # RLHF: half and half
            rows.append(_pref_row(row_id, row_mode, source, task))
        else:
            task = _draw(_TASK_BUILDERS[domain], rng, pool, seen, exhausted)
            row_mode = mode or DEFAULT_MODES.get(domain) or ("think" if len(rows) % 2 == 0 else "no_think")
            rows.append(_rl_row(row_id, domain, row_mode, source, task))
    return rows
