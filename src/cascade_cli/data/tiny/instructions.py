"""tiny:if: IFEval-style constraints with IFEval's instruction ids and kwargs."""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from typing import Any

from cascade_cli.data.tiny.pools import Task

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

