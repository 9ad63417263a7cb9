"""`chat_template: auto | model | cascade`: a stock ChatML model (SmolLM2, its own template from the GGUF), a
Llama-3-style template and a checkpoint cascade trained each render the exact first prompt expected; eval and
training stages record the choice and the first prompt; a recipe mixing the choices validates."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from cascade_cli import chat
from cascade_cli.config.eval import EvalSettings
from cascade_cli.errors import CascadeUsageError
from cascade_cli.models.loader import load_tokenizer
from cascade_cli.template_choice import choose_template, resolve_choice

sys.path.insert(0, str(Path(__file__).parent))
from test_chat_templates import LLAMA3, model_with_template  # noqa: E402

QUESTION = "What is 2+2?"
SMOL_SYSTEM = (
    "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
)
CHATML_FLAGGED = "<|im_start|>user\nWhat is 2+2? /no_think<|im_end|>\n<|im_start|>assistant\n"
CHATML_PLAIN = "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n"
LLAMA_HEAD = "<|start_header_id|>user<|end_header_id|>\n\n"
LLAMA_TAIL = "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"

EXPECTED = {  # model -> choice -> (resolved, first prompt of a no_think benchmark)
    "smollm2": {
        "auto": ("model", SMOL_SYSTEM + CHATML_PLAIN),
        "model": ("model", SMOL_SYSTEM + CHATML_PLAIN),
        "cascade": ("cascade", CHATML_FLAGGED),
    },
    "llama3": {
        "auto": ("model", f"{LLAMA_HEAD}{QUESTION}{LLAMA_TAIL}"),
        "model": ("model", f"{LLAMA_HEAD}{QUESTION}{LLAMA_TAIL}"),
        "cascade": ("cascade", f"{LLAMA_HEAD}{QUESTION} /no_think{LLAMA_TAIL}"),
    },
    "tiny": {
        "auto": ("cascade", CHATML_FLAGGED),
        "model": ("model", CHATML_PLAIN),
        "cascade": ("cascade", CHATML_FLAGGED),
    },
}


@pytest.fixture(scope="module")
def model_dirs(smollm2_dir: Path, tmp_path_factory) -> dict[str, Path]:
    from cascade_cli.models.resolve import resolve_model

    llama = model_with_template(smollm2_dir, tmp_path_factory.mktemp("llama") / "model", LLAMA3)
    return {"smollm2": smollm2_dir, "llama3": llama, "tiny": resolve_model("tiny")}


def test_the_converted_smollm2_keeps_its_own_template(smollm2_dir: Path):
    saved = chat.saved_template(smollm2_dir)
    assert (
        saved is not None
        and "You are a helpful AI assistant named SmolLM" in saved
        and saved != chat.CHAT_TEMPLATE
    )


@pytest.mark.parametrize("model", sorted(EXPECTED))
@pytest.mark.parametrize("choice", ["auto", "model", "cascade"])
def test_each_model_renders_the_expected_first_prompt(model_dirs, model, choice):
    tokenizer = load_tokenizer(model_dirs[model])
    use = choose_template(tokenizer, choice, model_dir=model_dirs[model])
    resolved, prompt = EXPECTED[model][choice]
    assert use.used == resolved and use.mode_flags == (resolved == "cascade")
    mode = "no_think" if use.mode_flags else chat.NO_FLAG
    assert chat.render_prompt(QUESTION, mode, tokenizer) == prompt
    # the renderer itself drops the flag under the model's own template, whatever mode a caller passes
    assert chat.render_prompt(QUESTION, "no_think", tokenizer) == prompt


def test_a_llama_checkpoint_cascade_trained_keeps_the_flags_under_auto(model_dirs, tmp_path):
    trained = model_with_template(model_dirs["smollm2"], tmp_path / "trained", LLAMA3)
    record = {"chat_template": {"choice": "auto", "used": "cascade"}}
    (trained / "cascade_stage.json").write_text(json.dumps(record))
    tokenizer = load_tokenizer(trained)
    assert choose_template(tokenizer, "auto", model_dir=trained).used == "cascade"
    assert chat.render_prompt(QUESTION, "no_think", tokenizer) == EXPECTED["llama3"]["cascade"][1]


def test_a_checkpoint_cascade_trained_under_its_own_template_says_so(model_dirs, tmp_path):
    """smol-if's IF-RL output: a stock model cascade trained under its own template renders that way under auto,
    and the reason names the stage manifest, not "a model cascade did not train"."""
    trained = model_with_template(model_dirs["smollm2"], tmp_path / "trained", chat.saved_template(model_dirs["smollm2"]))
    (trained / "cascade_stage.json").write_text(json.dumps({"chat_template": {"choice": "auto", "used": "model"}}))
    use = choose_template(load_tokenizer(trained), "auto", model_dir=trained)
    assert use.used == "model" and use.why == "its stage manifest says cascade trained it with the model's own template"
    stock = choose_template(load_tokenizer(model_dirs["smollm2"]), "auto", model_dir=model_dirs["smollm2"])
    assert stock.why == "a model cascade did not train renders with its own template"


def test_sft_auto_adopts_cascades_template_on_a_stock_model(smollm2_dir: Path):
    own = chat.saved_template(smollm2_dir)
    use = resolve_choice(own, "auto", model_dir=smollm2_dir, sft=True)
    assert use.used == "cascade" and "SFT adopts cascade's template" in use.why
    assert resolve_choice(own, "model", sft=True).used == "model"


def test_model_without_a_template_cannot_render_as_model(model_dirs):
    tokenizer = load_tokenizer(model_dirs["tiny"])
    setattr(tokenizer, chat.OWN_TEMPLATE, None)
    assert choose_template(tokenizer, "auto").used == "cascade"
    with pytest.raises(CascadeUsageError, match="no chat template of its own"):
        choose_template(tokenizer, "model")


def test_settings_take_mode_none_and_refuse_a_bad_choice():
    assert EvalSettings(mode="none", chat_template="model").mode == "none"
    with pytest.raises(CascadeUsageError, match="chat_template"):
        EvalSettings(chat_template="ours")


def test_eval_records_the_choice_and_first_prompt(cli, tmp_path):
    for choice, prompt_has_flag in (("auto", True), ("model", False)):
        out = tmp_path / choice
        result = cli(
            [
                "eval",
                "--model",
                "tiny",
                "--benchmarks",
                "tiny_if",
                "--limit",
                "1",
                "--k",
                "1",
                "--max-tokens",
                "4",
                "--chat-template",
                choice,
                "--out",
                out,
            ]
        )
        assert result.exit_code == 0, result.output
        record = json.loads((out / "results.json").read_text())["chat_template"]
        assert record["choice"] == choice and record["mode_flags"] is prompt_has_flag
        assert record["first_prompt"].startswith("<|im_start|>user\n")
        assert record["first_prompt"].endswith(
            "/no_think<|im_end|>\n<|im_start|>assistant\n"
            if prompt_has_flag
            else "<|im_end|>\n<|im_start|>assistant\n"
        )
        assert ("/no_think" in record["first_prompt"]) is prompt_has_flag


def test_sft_records_the_choice_and_first_prompt(cli, tmp_path):
    data = tmp_path / "sft.jsonl"
    row = {
        "messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}],
        "mode": "no_think",
    }
    data.write_text(json.dumps(row) + "\n")
    out = tmp_path / "sft"
    result = cli(
        [
            "sft",
            "--init",
            "tiny",
            "--data",
            data,
            "--out",
            out,
            "--chat-template",
            "cascade",
            "max_steps=1",
            "batch_size=1",
            "max_seq_len=64",
            "bf16=false",
        ]
    )
    assert result.exit_code == 0, result.output
    assert "chat template of tiny: cascade's" in " ".join(result.output.split())
    record = json.loads((out / "cascade_stage.json").read_text())["chat_template"]
    assert record == {
        "choice": "cascade",
        "used": "cascade",
        "mode_flags": True,
        "why": "set explicitly",
        "first_prompt": "<|im_start|>user\nHi /no_think<|im_end|>\n<|im_start|>assistant\n",
    }


RECIPE = """
name: mixed
model: tiny
run_dir: {run_dir}
eval:
  after_each_stage: true
  benchmarks: [tiny_if]
  chat_template: {eval_choice}
stages:
  data:
    kind: prepare_data
    source: tiny:sft
    n: 20
  sft:
    kind: sft
    data: ${{stages.data.out}}
    chat_template: cascade
  rl:
    kind: rlvr
    domain: if
    data: {rl_data}
    chat_template: model
"""


def test_a_recipe_mixing_template_choices_validates(tmp_path):
    from cascade_cli.recipe.loader import load_recipe

    text = RECIPE.format(run_dir=tmp_path / "run", rl_data=tmp_path / "rl.jsonl", eval_choice="auto")
    (tmp_path / "r.yaml").write_text(text)
    recipe = load_recipe(str(tmp_path / "r.yaml"))
    by_name = {stage.name: stage for stage in recipe.stages}
    assert by_name["sft"].config.chat_template == "cascade" and by_name["rl"].config.chat_template == "model"
    (tmp_path / "bad.yaml").write_text(text.replace("chat_template: model", "chat_template: theirs"))
    with pytest.raises(CascadeUsageError, match="chat_template"):
        load_recipe(str(tmp_path / "bad.yaml"))
