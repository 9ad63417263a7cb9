"""tiny:general: short chat questions with one right answer (a truncated answer is the worse one)."""

from __future__ import annotations

import random

from cascade_cli.data.tiny.code import WORDS
from cascade_cli.data.tiny.pools import Task

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

# Kinds that look a word up in a table: (table, prompt, answer, thinking), each text formatted with (word, value).
_LOOKUPS: dict[str, tuple[dict[str, str], str, str, str]] = {
    "opposite": (_OPPOSITES, "What is the opposite of {0}?", "The opposite of {0} is {1}.", "{0} -> {1}."),
    "sound": (_ANIMAL_SOUNDS, "What sound does a {0} make?", "A {0} says {1}.", "A {0} makes the sound {1}."),
}


def general_task(rng: random.Random) -> Task:
    kind = rng.choice(("qa", "qa", "hello", "opposite", "day", "sound", "repeat"))
    if kind == "qa":
        prompt, answer = rng.choice(_QA)
        key, thinking = f"general:qa:{prompt}", "A simple question. I answer briefly."
    elif kind == "hello":
        name = rng.choice(_NAMES)
        prompt, answer = f"Say hello to {name}.", f"Hello, {name}! Nice to meet you."
        key, thinking = f"general:hello:{name}", f"Greet {name}."
    elif kind in _LOOKUPS:
        table, *texts = _LOOKUPS[kind]
        word = rng.choice(sorted(table))
        prompt, answer, thinking = (text.format(word, table[word]) for text in texts)
        key = f"general:{kind}:{word}"
    elif kind == "day":
        index = rng.randrange(len(_DAYS))
        following = _DAYS[(index + 1) % len(_DAYS)]
        prompt, answer = f"What day comes after {_DAYS[index]}?", f"{following} comes after {_DAYS[index]}."
        key, thinking = f"general:day:{index}", f"The day after {_DAYS[index]} is {following}."
    else:
        words = rng.sample(WORDS, 3)
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

