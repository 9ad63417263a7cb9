"""MOPD (`cascade distill`): the loss against closed forms, routing by domain, teachers frozen and loaded once,
a self-copy teacher that teaches nothing, a teacher that answers a tiny math task pulling the student to it,
the tokenizer check, and `recipe plan` on engine openrlhf."""

from __future__ import annotations

import json
import math
import shutil
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from safetensors.torch import load_file

from cascade_cli import verifiers
from cascade_cli.config.distill import DistillConfig
from cascade_cli.config.sft import SFTConfig
from cascade_cli.engines.local.ops.logprobs import response_hidden, token_logprobs
from cascade_cli.engines.local.ops.losses import mopd_loss
from cascade_cli.engines.local.ops.optim import linear_warmup
from cascade_cli.engines.local.train import distill
from cascade_cli.engines.local.train.grpo import load_frozen
from cascade_cli.engines.local.train.grpo_step import TrainSequence, sequence_logprobs
from cascade_cli.engines.local.train.rl_data import DomainMixSampler, render_row
from cascade_cli.engines.local.train.sft import run_sft
from cascade_cli.jsonl import write_jsonl
from cascade_cli.manifest import read_manifest, read_metrics
from cascade_cli.models.loader import load_model, load_tokenizer
from cascade_cli.template_choice import choose_template

sys.path.insert(0, str(Path(__file__).parent))
from test_chat_templates import LLAMA3  # noqa: E402
from test_grpo_support import build_model_dir, toy_rows  # noqa: E402

pytestmark = pytest.mark.usefixtures("single_thread")  # conftest.py, as `toy_verifier`


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("distill-models")
    return {seed: build_model_dir(root / f"tiny-{seed}", seed=seed) for seed in (0, 1, 2)}


# ---- the loss ---------------------------------------------------------------------------------------------


def test_loss_on_a_toy_vocabulary_matches_its_closed_form():
    """Student, teacher and rollout distributions over 4 tokens; every gradient is -w a (onehot - p) / N."""
    torch.manual_seed(0)
    logits = torch.randn(2, 3, 4, requires_grad=True)  # the student's, per position
    teacher = torch.randn(2, 3, 4).log_softmax(-1)
    tokens = torch.tensor([[0, 1, 2], [3, 3, 0]])
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])  # the last token is padding (its ratio inside the gate)
    student_all = logits.log_softmax(-1)
    logprobs = student_all.gather(-1, tokens[..., None]).squeeze(-1)
    teacher_logprobs = teacher.gather(-1, tokens[..., None]).squeeze(-1)
    rollout = logprobs.detach() - torch.tensor([[0.0, 0.3, -0.4], [0.1, 0.0, 0.2]])  # ratios e^0, e^.3, ...
    loss, stats = mopd_loss(logprobs, teacher_logprobs, rollout, mask, normaliser=5)

    advantage = (teacher_logprobs - logprobs).detach()
    weight = torch.exp(logprobs.detach() - rollout)  # all inside [0.5, 2]: only the mask silences the padding
    expected_loss = -(weight * advantage * logprobs * mask).sum() / 5
    assert float(loss.detach()) == pytest.approx(float(expected_loss), rel=1e-6)
    (grad,) = torch.autograd.grad(loss, logits)
    onehot = torch.nn.functional.one_hot(tokens, 4).float()
    closed_form = -(weight * advantage * mask / 5)[..., None] * (onehot - student_all.exp().detach())
    assert torch.allclose(grad, closed_form, atol=1e-7)
    assert grad[1, 2].abs().sum() == 0  # the masked token moves nothing
    # The sign: where the teacher likes the sampled token more than the student, a gradient step raises it.
    raised = advantage * mask > 0
    assert raised.any() and (~raised & (mask > 0)).any()
    step = -grad  # gradient descent's direction on the logits
    chosen = (step * onehot).sum(-1)
    assert torch.all(chosen[raised] > 0) and torch.all(chosen[~raised & (mask > 0)] < 0)
    assert stats["teacher_advantage_sum"] == pytest.approx(float((advantage * mask).sum()), rel=1e-6)
    assert stats["gated_out_sum"] == 0


def test_importance_gate_keeps_ratios_from_half_to_two():
    """r_t = 0.49 and 2.01 carry no loss (nor gradient); 0.5, 1 and 2.0 are weighted by themselves."""
    ratios = [0.49, 0.5, 1.0, 2.0, 2.01]
    logprobs = torch.log(torch.tensor([ratios])).requires_grad_(True)  # rollout log-probs 0: r_t = e^logprob
    teacher = logprobs.detach() + 1.0  # a_t = 1 everywhere
    loss, stats = mopd_loss(logprobs, teacher, torch.zeros(1, 5), torch.ones(1, 5), normaliser=5)
    (grad,) = torch.autograd.grad(loss, logprobs)
    expected = torch.tensor([[0.0, 0.5, 1.0, 2.0, 0.0]]) * -1.0 / 5  # -w_t a_t / N
    assert torch.allclose(grad, expected, atol=1e-7)
    assert stats["gated_out_sum"] == 2
    assert float(loss.detach()) == pytest.approx(-sum(w * math.log(r) for w, r in zip([0, 0.5, 1, 2, 0], ratios, strict=True)) / 5)


def test_task_reward_adds_its_group_advantage_with_its_weight():
    logprobs = torch.log(torch.tensor([[0.2, 0.5], [0.4, 0.1]])).requires_grad_(True)
    teacher = logprobs.detach().clone()  # a_t = 0 from the teacher
    mask = torch.ones(2, 2)
    group = torch.tensor([1.0, -1.0])
    without, _ = mopd_loss(logprobs, teacher, logprobs.detach(), mask, 4, group, reward_weight=0.0)
    assert torch.autograd.grad(without, logprobs)[0].abs().sum() == 0
    loss, _ = mopd_loss(logprobs, teacher, logprobs.detach(), mask, 4, group, reward_weight=0.5)
    (grad,) = torch.autograd.grad(loss, logprobs)
    assert torch.allclose(grad, torch.tensor([[-0.125, -0.125], [0.125, 0.125]]))


def test_learning_rate_warms_up_linearly_then_holds():
    lrs = [linear_warmup(step, 2e-6, 2e-7, 30) for step in (0, 15, 30, 49)]
    assert lrs == pytest.approx([2e-7, 1.1e-6, 2e-6, 2e-6])
    assert linear_warmup(0, 1e-3, 0.0, 0) == 1e-3


# ---- the prompt mix ---------------------------------------------------------------------------------------


def test_domain_weights_split_every_step_by_the_weights_whatever_the_row_counts():
    domains = ["math"] * 90 + ["if"] * 10
    sampler = DomainMixSampler(domains, {"if": 1.0, "math": 1.0}, seed=0)
    draws = [sampler.next() for _ in range(40)]
    for start in range(0, 40, 8):  # every 8-prompt step: 4 of each
        assert sorted(domains[i] for i in draws[start : start + 8]) == ["if"] * 4 + ["math"] * 4
    if_rows = [i for i in draws if domains[i] == "if"]
    assert sorted(if_rows[:10]) == list(range(90, 100))  # a domain walks all its rows before repeating one
    assert sampler.epoch == 1  # if's 10 rows were walked twice, math's 90 not once
    weighted = DomainMixSampler(domains, {"if": 1.0, "math": 3.0}, seed=0)
    assert sum(domains[weighted.next()] == "if" for _ in range(100)) == 25


def test_domain_mix_resumes_where_it_stopped():
    domains = ["math"] * 7 + ["if"] * 3
    sampler = DomainMixSampler(domains, {"if": 2.0, "math": 1.0}, seed=5)
    for _ in range(11):
        sampler.record(sampler.next(), 1, 4)
    restored = DomainMixSampler(domains, {"if": 2.0, "math": 1.0}, seed=5)
    restored.load_state(json.loads(json.dumps(sampler.state())))
    assert [restored.next() for _ in range(20)] == [sampler.next() for _ in range(20)]


@pytest.mark.parametrize(
    ("weights", "message"),
    [
        ("math=1,code=1", "domain_weights.code: expected one of the teachers' domains (math), found 'code'"),
        ("math=0", "domain_weights.math: expected a number above 0, found 0"),
    ],
)
def test_bad_domain_weights_are_usage_errors(tmp_path, models, cli, toy_verifier, weights, message):
    write_jsonl(tmp_path / "rows.jsonl", toy_rows(3))
    result = cli(["distill", "--init", models[0], "--teachers", f"math={models[1]}", "--data", tmp_path / "rows.jsonl",
                  "--out", tmp_path / "out", "--domain-weights", weights])  # fmt: skip
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())


def test_a_teacher_without_a_weight_is_a_usage_error(tmp_path, models, cli, toy_verifier):
    write_jsonl(tmp_path / "rows.jsonl", toy_rows(3))
    result = cli(["distill", "--init", models[0], "--teachers", f"math={models[1]},if={models[2]}",
                  "--data", tmp_path / "rows.jsonl", "--out", tmp_path / "out", "--domain-weights", "math=1"])  # fmt: skip
    assert result.exit_code == 2, result.output
    assert "domain_weights: expected a weight for every teacher's domain, missing if" in " ".join(result.output.split())


def test_a_weighted_run_trains_on_each_domain_in_its_share(tmp_path, models, toy_verifier, monkeypatch):
    """9 math rows to 3 if rows, weighted 1:1: each 4-prompt step has 2 of each (per-domain metrics every
    step), where the unweighted draw leaves if out of some steps."""
    monkeypatch.setitem(verifiers._REGISTRY, "if", "test_grpo_support:LetterVerifier")
    rows = toy_rows(9) + [{**row, "id": f"if-{row['id']}", "domain": "if"} for row in toy_rows(3)]
    write_jsonl(tmp_path / "rows.jsonl", rows)
    teachers = {"math": models[1], "if": models[2]}
    distill.run_distill(distill_config(tmp_path, models[0], teachers, tmp_path / "rows.jsonl", steps=3,
                                       domain_weights={"if": 1.0, "math": 1.0}))  # fmt: skip
    assert all("teacher_advantage_if" in m and "teacher_advantage_math" in m for m in read_metrics(tmp_path / "out"))


# ---- routing and teachers ---------------------------------------------------------------------------------


def test_each_response_is_scored_by_its_own_domains_teacher(models):
    """A micro-batch mixing two domains: every row's teacher log-probs equal its domain's teacher alone on it."""
    math_teacher = load_model(models[1], device="cpu").eval()
    if_teacher = load_model(models[2], device="cpu").eval()
    with torch.no_grad():  # random-init models are all near uniform: make this one's distribution peaked
        if_teacher.get_output_embeddings().weight.mul_(30.0)
    run = SimpleNamespace(config=DistillConfig(), device="cpu", bf16=False, pad_id=0)
    prompt_a, prompt_b = [5, 6, 7], [8, 9]
    micro = [
        TrainSequence(prompt_a, [11, 12, 13], 0.0, True, "math"),
        TrainSequence(prompt_a, [14, 15], 0.0, True, "math"),
        TrainSequence(prompt_b, [16, 17, 18, 19], 0.0, True, "if"),
        TrainSequence(prompt_a, [20], 0.0, True, "math"),
    ]
    with torch.no_grad():
        routed = distill.teacher_logprobs({"math": math_teacher, "if": if_teacher}, micro, run, width=4)
    for row, sequence in enumerate(micro):
        teacher = math_teacher if sequence.domain == "math" else if_teacher
        other = if_teacher if sequence.domain == "math" else math_teacher
        with torch.no_grad():
            hidden, tokens, _ = response_hidden(teacher, [sequence.prompt_ids], [sequence.response_ids], 0, "cpu")
            alone = token_logprobs(hidden, teacher.get_output_embeddings(), tokens)[0][0]
            wrong = sequence_logprobs(other, [sequence], 1.0, run)[0][0]
        width = len(sequence.response_ids)
        assert torch.allclose(routed[row, :width], alone, atol=1e-5)
        assert (routed[row, :width] - wrong).abs().max() > 0.1
        assert routed[row, width:].abs().sum() == 0


def test_teachers_load_once_frozen_and_shared_by_domains_naming_one_checkpoint(models):
    teachers = load_frozen({"if": models[1], "math": models[1], "code": models[2]}, "auto", "cpu")
    assert teachers["if"] is teachers["math"] and teachers["code"] is not teachers["if"]
    for teacher in teachers.values():
        assert not teacher.training and not any(p.requires_grad for p in teacher.parameters())


def test_a_row_whose_domain_has_no_teacher_is_a_usage_error(tmp_path, models, cli, toy_verifier):
    write_jsonl(tmp_path / "rows.jsonl", toy_rows(3) + [{"id": "x", "domain": "code", "prompt": "p", "label": {}}])
    result = cli(["distill", "--init", models[0], "--teachers", f"math={models[1]}", "--data", tmp_path / "rows.jsonl",
                  "--out", tmp_path / "out"])  # fmt: skip
    assert result.exit_code == 2
    assert "rows.jsonl: row 4 (id 'x'): domain: expected one of math (the teachers' domains), found 'code'" in result.output


def test_a_teacher_with_another_tokenizer_is_an_exit_2_error_naming_both(tmp_path, models, smollm2_dir, cli):
    write_jsonl(tmp_path / "rows.jsonl", toy_rows(4))
    result = cli(["distill", "--init", models[0], "--teachers", f"math={smollm2_dir}", "--data", tmp_path / "rows.jsonl",
                  "--out", tmp_path / "out"])  # fmt: skip
    assert result.exit_code == 2, result.output
    message = " ".join(result.output.split())
    assert f"teachers.math: {smollm2_dir} has another tokenizer than the student {models[0]}" in message
    assert not (tmp_path / "out").exists()  # nothing was loaded or written


def stock_copy(model_dir: Path, out: Path) -> Path:
    """`model_dir` as a stock model: the same weights and vocabulary, its tokenizer saved with a template of its
    own (Llama 3's), so `chat_template: auto` renders it with that template and no mode flag."""
    shutil.copytree(model_dir, out)
    tokenizer = load_tokenizer(model_dir)
    tokenizer.chat_template = LLAMA3
    tokenizer.save_pretrained(out)
    return out


def test_each_teacher_reads_the_prompt_in_its_own_template(tmp_path, models):
    """A stock student (its own template); an IF teacher that renders as it does and a math teacher cascade
    trained (ChatML, mode flag): the math teacher scores the student's tokens after its own rendering."""
    student = stock_copy(models[0], tmp_path / "stock")
    teachers = {"if": student, "math": models[1]}
    prompts = distill.TeacherPrompts(teachers)
    assert {d: use.used for d, use in prompts.templates.items()} == {"if": "model", "math": "cascade"}
    tokenizer = load_tokenizer(student)
    choose_template(tokenizer, "auto", model_dir=student)
    rows = [{"domain": "if", "mode": "no_think", "prompt": "Write digits."},
            {"domain": "math", "mode": "think", "prompt": "Write digits."}]  # fmt: skip
    student_ids = [tokenizer.encode(render_row(r, r["mode"], tokenizer), add_special_tokens=False) for r in rows]
    micro = [TrainSequence(student_ids[i], [11, 12, 13], 0.0, True, r["domain"], None, i, r["mode"]) for i, r in enumerate(rows)]
    assert tokenizer.decode(student_ids[1]) == "<|start_header_id|>user<|end_header_id|>\n\nWrite digits.<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
    math_ids = prompts.ids("math", micro[1], rows)
    assert tokenizer.decode(math_ids) == "<|im_start|>user\nWrite digits. /think<|im_end|>\n<|im_start|>assistant\n"
    assert prompts.ids("if", micro[0], rows) is student_ids[0]  # renders as the student: the student's own ids
    assert prompts.ids("math", micro[1], rows) is math_ids  # once per row and mode: a group shares one list

    loaded = {d: load_model(path, device="cpu").eval() for d, path in teachers.items()}
    run = SimpleNamespace(config=DistillConfig(), device="cpu", bf16=False, pad_id=0, rows=rows)
    with torch.no_grad():
        routed = distill.teacher_logprobs(loaded, micro, run, width=3, prompts=prompts)
        own = sequence_logprobs(loaded["math"], [TrainSequence(math_ids, [11, 12, 13], 0.0, True)], 1.0, run)[0][0]
        as_student = distill.teacher_logprobs(loaded, micro, run, width=3)
    assert torch.allclose(routed[1], own, atol=1e-5)
    assert (routed[1] - as_student[1]).abs().max() > 1e-3  # the rendering changes what the teacher says
    assert torch.equal(routed[0], as_student[0])


def test_distill_records_each_teachers_template_and_first_prompt(tmp_path, models, toy_verifier):
    """A stock student taught by its own weights under cascade's template: the teacher's context differs, so
    its advantage is not zero (a self-copy under one template's is: test above), and the manifest says why."""
    student = stock_copy(models[0], tmp_path / "stock")
    write_jsonl(tmp_path / "rows.jsonl", toy_rows(8))
    config = distill_config(tmp_path, student, {"math": models[0]}, tmp_path / "rows.jsonl", steps=1, lr=0.0)
    distill.run_distill(config)
    record = read_manifest(tmp_path / "out")["teacher_chat_templates"]["math"]
    assert record["teacher"] == str(models[0]) and record["used"] == "cascade" and record["mode_flags"]
    assert record["first_prompt"].startswith("<|im_start|>user\nWrite ") and " /think<|im_end|>" in record["first_prompt"]
    assert read_manifest(tmp_path / "out")["chat_template"]["used"] == "model"
    assert read_metrics(tmp_path / "out")[0]["teacher_advantage"] != 0.0


def test_distill_on_engine_openrlhf_plans_exit_2_naming_the_missing_piece(cli):
    result = cli(["recipe", "plan", "tiny", "--only", "distill", "stages.distill.engine=openrlhf"])
    assert result.exit_code == 2
    message = " ".join(result.output.split())
    assert "engine openrlhf: OpenRLHF 0.11.2 has no per-sample teacher" in message
    assert "an experience maker holding one reference group per domain" in message


# ---- what training does -----------------------------------------------------------------------------------


def distill_config(tmp_path: Path, student: Path, teachers: dict[str, Path], rows: Path, **overrides) -> DistillConfig:
    values = dict(
        init=str(student), teachers={k: str(v) for k, v in teachers.items()}, data=[str(rows)], out=str(tmp_path / "out"),
        steps=3, prompts_per_step=4, group_size=4, max_response_len=8, lr=1e-2, warmup_steps=0, seed=0,
    )
    values.update(overrides)
    return DistillConfig(**values)


def test_a_self_copy_teacher_has_zero_advantage_and_the_student_does_not_move(tmp_path, models, toy_verifier):
    write_jsonl(tmp_path / "rows.jsonl", toy_rows(16))
    summary = distill.run_distill(distill_config(tmp_path, models[0], {"math": models[0]}, tmp_path / "rows.jsonl"))
    metrics = read_metrics(tmp_path / "out")
    assert [m["step"] for m in metrics] == [1, 2, 3] and summary["steps"] == 3
    assert all(m["teacher_advantage"] == 0.0 and m["gated_out"] == 0.0 and m["loss_tokens"] > 0 for m in metrics)
    assert all(m["importance_ratio"] == 1.0 for m in metrics)  # the hf loop samples from the trained module
    assert all(m["grad_norm"] == 0.0 for m in metrics)
    before, after = load_file(models[0] / "model.safetensors"), load_file(tmp_path / "out" / "model.safetensors")
    assert all(after[name].equal(before[name]) for name in before)
    assert read_manifest(tmp_path / "out")["kind"] == "distill"


def test_each_teachers_gap_is_logged_over_its_own_domains_tokens(tmp_path, models, toy_verifier, monkeypatch):
    """math's teacher is the student itself (no gap), if's another model: teacher_advantage_math is 0,
    teacher_advantage_if is the whole gap, and the overall mean spreads it over both domains' tokens."""
    monkeypatch.setitem(verifiers._REGISTRY, "if", "test_grpo_support:LetterVerifier")
    rows = toy_rows(8) + [{**row, "id": f"if-{row['id']}", "domain": "if"} for row in toy_rows(8)]
    write_jsonl(tmp_path / "rows.jsonl", rows)
    config = distill_config(tmp_path, models[0], {"math": models[0], "if": models[1]}, tmp_path / "rows.jsonl",
                            steps=1, prompts_per_step=8)  # fmt: skip
    distill.run_distill(config)
    (step,) = read_metrics(tmp_path / "out")
    assert step["teacher_advantage_math"] == pytest.approx(0.0, abs=1e-6)  # padding beside the if rows
    assert abs(step["teacher_advantage_if"]) > 1e-3
    assert 0 < step["teacher_advantage"] / step["teacher_advantage_if"] < 1


def test_the_student_moves_toward_a_teacher_that_answers_a_tiny_math_task(tmp_path, models, toy_verifier):
    """The teacher is the student's init fine-tuned to answer `\\boxed{5}`; distilling raises the student's
    likelihood of that answer and lowers its reverse KL to the teacher on its own samples."""
    prompts = [f"Calculate {a} + {b}." for a, b in ((2, 3), (1, 4), (4, 1), (3, 2))]
    messages = [[{"role": "user", "content": p}, {"role": "assistant", "content": "\\boxed{5}"}] for p in prompts]
    write_jsonl(tmp_path / "sft.jsonl", [{"messages": m, "mode": "no_think"} for m in messages] * 20)
    run_sft(SFTConfig(init=str(models[0]), data=str(tmp_path / "sft.jsonl"), out=str(tmp_path / "teacher"),
                      lr=3e-3, max_steps=60, batch_size=8, bf16=False))  # fmt: skip
    rows = [{"id": f"m{i}", "domain": "math", "mode": "no_think", "prompt": p, "label": {"answer": "5"}}
            for i, p in enumerate(prompts)]  # fmt: skip
    write_jsonl(tmp_path / "rows.jsonl", rows)
    config = distill_config(tmp_path, models[0], {"math": tmp_path / "teacher"}, tmp_path / "rows.jsonl",
                            steps=12, max_response_len=12, lr=1e-2)  # fmt: skip
    distill.run_distill(config)

    def answer_logprob(model_dir: Path) -> float:
        tokenizer, model = load_tokenizer(model_dir), load_model(model_dir, device="cpu").eval()
        from cascade_cli.chat import render_prompt

        total = 0.0
        for prompt in prompts:
            ids = tokenizer.encode(render_prompt(prompt, "no_think", tokenizer), add_special_tokens=False)
            answer = tokenizer.encode("\\boxed{5}<|im_end|>", add_special_tokens=False)
            with torch.no_grad():
                hidden, tokens, _ = response_hidden(model, [ids], [answer], 0, "cpu")
                total += float(token_logprobs(hidden, model.get_output_embeddings(), tokens)[0].sum())
        return total / len(prompts)

    before, after, teacher = (answer_logprob(p) for p in (models[0], tmp_path / "out", tmp_path / "teacher"))
    assert teacher > -1.0  # the teacher answers the task
    assert after > before + 5.0, (before, after)  # the student moved toward it
    reverse_kl = [-m["teacher_advantage"] for m in read_metrics(tmp_path / "out")]
    assert sum(reverse_kl[-3:]) < 0.8 * sum(reverse_kl[:3]), reverse_kl
