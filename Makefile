# The two commands a newcomer runs: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
DEMO   := build/demo
EXAMPLES := build/examples

.PHONY: install demo test lint typecheck pytest example-repository browser clean

install: $(STAMP)

# Re-runs only when pyproject.toml or this Makefile changes; the editable install picks up code changes.
$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev,torch]'
	touch $(STAMP)

$(EXAMPLES)/%.onnx: | $(STAMP)
	$(BIN)/tritongen example $* -o $@

# Convert the example models (the MLP also from PyTorch, into ONNX, TorchScript and TVM),
# serve them on the embedded Triton server, run inferences, then load-test the MLP.
demo: install $(EXAMPLES)/mlp.onnx $(EXAMPLES)/text.onnx
	rm -rf $(DEMO)
	$(BIN)/tritongen convert $(EXAMPLES)/mlp.onnx --name mlp --repo $(DEMO)/model_repository \
		--preferred-batch-sizes 4,8,16 --max-queue-delay-us 500
	$(BIN)/tritongen convert $(EXAMPLES)/text.onnx --name text --repo $(DEMO)/model_repository
	$(BIN)/tritongen convert tritongen.examples.torch_models:mlp --name mlp_pt --repo $(DEMO)/model_repository \
		--formats onnx,torchscript,tvm --input-spec input:FP32:-1,16 --output-names logits
	$(BIN)/tritongen compose $(DEMO)/model_repository -o $(DEMO)/compose.yaml
	@echo; echo "== $(DEMO)/model_repository/mlp_onnx/config.pbtxt"; cat $(DEMO)/model_repository/mlp_onnx/config.pbtxt; echo
	$(BIN)/tritongen infer mlp_onnx --serve $(DEMO)/model_repository --batch-size 4
	$(BIN)/tritongen infer text_onnx --serve $(DEMO)/model_repository --batch-size 2 \
		--shape input_ids=16 --shape attention_mask=16
	$(BIN)/tritongen infer mlp_pt_tvm --serve $(DEMO)/model_repository --batch-size 4
	$(BIN)/tritongen loadtest mlp_onnx --serve $(DEMO)/model_repository --concurrency 1,8,32 \
		--duration 10s --warmup 2s --json $(DEMO)/loadtest.json --plot $(DEMO)/loadtest.png

test: install
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/pytest

lint: install
	$(BIN)/ruff check .

typecheck: install
	$(BIN)/mypy

pytest: install
	$(BIN)/pytest

# Regenerate the committed example repository and compose.yaml (a test checks they are current).
example-repository: install
	$(BIN)/python -m tritongen.examples.repository model_repository compose.yaml

# Debian's Chromium, for the test that renders the HTML report (skipped without it).
browser:
	@command -v chromium >/dev/null || { \
		SUDO=$$( [ "$$(id -u)" -eq 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && \
		$$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null; }
	@chromium --version

clean:
	rm -rf build .pytest_cache .mypy_cache .ruff_cache
