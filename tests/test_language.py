"""Code-switch detection (verifiers/code_switch.py) and its generic hook in Verifier.score."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from cascade_cli.verifiers.base import Score, Verifier
from cascade_cli.verifiers.code_switch import detect_code_switch, guess_latin_language

EN_PROMPT = "Find the sum of all integers $x$ such that $x^2 < 10$. Put your final answer in \\boxed{}."


@pytest.mark.parametrize(
    "response",
    [
        "<think>\nWe need $x^2<10$, so $x \\in \\{-3,\\dots,3\\}$.\n</think>\n\nThe sum is $\\boxed{0}$.",
        "Let $\\alpha$ and $\\beta$ be the roots; α+β = 0 and Σ = 0, so the area is πr², θ = 30°.",
        "x ∈ ℝ, ∀ε>0, ∑_{k} a_k ≤ ∫ f dμ, so the answer is 0 (≈ 0.0 ± 0.1).",
        "The naïve approach works, like a café résumé façade. By Poincaré and Erdős–Szekeres the sum is 0.",
        "Vis-à-vis the constraint, we get 0, a déjà vu of the last problem.",
        "```python\nprint('привет, 世界')\n```\nRunning it confirms the answer 0.",
        "Also, the die shows 3 per roll; then plus 2 gives 5, so in total the answer is 0.",
        "Use the `Ωmega` helper from https://example.org/中文/page to check: 0.",
        "",
    ],
)
def test_english_math_reasoning_with_symbols_names_and_code_is_not_a_switch(response: str) -> None:
    result = detect_code_switch(EN_PROMPT, response)
    assert not result.switched, result


@pytest.mark.parametrize(
    ("response", "script"),
    [
        ("Let me think. 所以答案是 0. \\boxed{0}", "han"),
        ("We have x = 3. 即 the answer is 0.", "han"),
        ("Next, つまり the sum is 0.", "kana"),
        ("그래서 the answer is 0.", "hangul"),
        ("Итак, ответ 0.", "cyrillic"),
        ("The answer, أي الجواب, is 0.", "arabic"),
        ("So คำตอบ is 0.", "thai"),
        ("Thus उत्तर is 0.", "indic"),
        ("The roots are distinct; και τα δύο είναι ακέραια, so 0.", "greek"),
    ],
)
def test_foreign_script_in_an_english_response_is_a_switch(response: str, script: str) -> None:
    result = detect_code_switch(EN_PROMPT, response)
    assert result.switched, result
    assert script in result.foreign_scripts
    assert result.prompt_script == "latin" and result.prompt_language == "en"
    assert 0 < result.foreign_fraction <= 1
    assert result.samples


def test_one_stray_cyrillic_letter_is_not_but_one_han_character_is() -> None:
    assert not detect_code_switch(EN_PROMPT, "The value of х is 0.").switched  # Cyrillic х look-alike
    assert detect_code_switch(EN_PROMPT, "The value 答 is 0.").switched


@pytest.mark.parametrize(
    ("response", "language"),
    [
        ("Donc, nous avons la somme des entiers qui est égale à zéro. The answer is 0.", "fr"),
        ("Entonces tenemos que la suma es cero, porque los números se cancelan.", "es"),
        ("Wir sehen, dass die Summe der Zahlen gleich null ist und nicht mehr.", "de"),
        ("Então temos que a soma dos números é zero, não é?", "pt"),
        ("Vậy tổng của các số nguyên là không. Đáp án là 0.", "other"),
    ],
)
def test_latin_script_in_another_language_is_a_switch(response: str, language: str) -> None:
    result = detect_code_switch(EN_PROMPT, response)
    assert result.switched and result.foreign_language == language, result


def test_one_short_foreign_phrase_is_not_a_switch() -> None:
    assert not detect_code_switch(EN_PROMPT, "Et voilà: the sum of the integers is 0, as expected.").switched


def test_non_english_prompts_use_their_own_script_and_language() -> None:
    chinese = "求所有满足 $x^2 < 10$ 的整数 $x$ 之和。"
    assert not detect_code_switch(chinese, "因为 $x^2<10$，所以 x 取 -3 到 3，和为 \\boxed{0}。").switched
    english_answer = detect_code_switch(
        chinese, "We need all integers with x squared below ten; they cancel, so 0."
    )
    assert english_answer.switched and english_answer.prompt_script == "han"
    japanese = "次の整数の和を求めよ。"
    assert not detect_code_switch(japanese, "整数の和は 0 です。").switched  # kana + kanji together
    french = "Calculez la somme des entiers qui sont positifs et pairs."
    assert guess_latin_language(french) == "fr"
    assert not detect_code_switch(french, "La somme est égale à zéro, donc la réponse est 0.").switched
    english = detect_code_switch(french, "The sum of the integers is zero, so the answer is 0.")
    assert english.switched and english.foreign_language == "en"


def test_a_script_the_prompt_itself_uses_is_allowed() -> None:
    prompt = "What does the character 中 mean, and how many strokes does it have?"
    assert not detect_code_switch(prompt, "The character 中 means middle; it has 4 strokes.").switched


def test_result_is_json_serialisable_and_fast_on_long_responses() -> None:
    result = detect_code_switch(EN_PROMPT, "所以 the answer is 0.")
    assert json.loads(json.dumps(result.to_dict()))["switched"] is True
    long_response = ("We expand $(x+1)^2 = x^2 + 2x + 1$ and simplify the sum term by term. " * 2000) + "答"
    started = time.perf_counter()
    assert detect_code_switch(EN_PROMPT, long_response).switched
    assert time.perf_counter() - started < 2.0  # ~140 KB; typically a few tens of ms


class _EchoVerifier(Verifier):
    """A minimal verifier: reward = label, to see the generic hook act on any domain."""

    domain = "echo"

    def __init__(self, code_switch_reward: float | None = None) -> None:
        self.code_switch_reward = code_switch_reward

    def verify_one(self, record: dict[str, Any]) -> Score:
        if "response" not in record:
            from cascade_cli.verifiers.base import RecordError

            raise RecordError("missing field 'response'")
        return Score(float(record["label"]), bool(record["label"]), {"echo": True})


def test_verifier_score_applies_the_code_switch_reward_generically() -> None:
    switched = {"prompt": EN_PROMPT, "response": "答案是 0", "label": 1}
    clean = {"prompt": EN_PROMPT, "response": "The answer is 0", "label": 1}
    assert _EchoVerifier().score(switched).reward == 1.0  # off by default in the base class
    penalised = _EchoVerifier(code_switch_reward=0.0).score(switched)
    assert (penalised.reward, penalised.passed) == (0.0, False)
    assert penalised.details["echo"] and penalised.details["code_switch"] is True
    assert (
        penalised.details["reward_before_code_switch"] == 1.0
        and "han" in penalised.details["code_switch_reason"]
    )
    assert _EchoVerifier(code_switch_reward=0.0).score(clean).details["code_switch"] is False
    messages = [{"role": "system", "content": "你是助手"}, {"role": "user", "content": EN_PROMPT}]
    assert _EchoVerifier(code_switch_reward=-1.0).score({**switched, "prompt": messages}).reward == -1.0
    no_prompt = _EchoVerifier(code_switch_reward=-1.0).score({"response": "答案是 0", "label": 1})
    assert no_prompt.reward == 1.0 and "code_switch" not in no_prompt.details  # nothing to compare with
    broken = _EchoVerifier(code_switch_reward=-1.0).score({"prompt": EN_PROMPT, "label": 1})
    assert broken.reward == 0.0 and "missing field 'response'" in broken.details["error"]


def test_language_domain_scores_code_switching_through_the_batch_path():
    from cascade_cli.verifiers import known_domains, verify_batch

    assert "language" in known_domains()
    records = [
        {"prompt": [{"role": "system", "content": "你好"}, {"role": "user", "content": "What is two plus two?"}],
         "response": "The answer is four.", "label": None},
        {"prompt": "What is two plus two?", "response": "答案是四，二加二等于四。", "label": None},
        {"prompt": "What is two plus two?", "label": None},
    ]
    kept, switched, broken = verify_batch(records, domain="language")
    assert kept.passed and kept.reward == 1.0 and kept.details["code_switch"] is False
    assert not switched.passed and switched.reward == 0.0 and "script" in switched.details["code_switch_reason"]
    assert not broken.passed and "response" in broken.details["error"]
