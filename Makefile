# One-command entry points. Each target sets up the virtual environment first (idempotent).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
DATA ?= data

.PHONY: setup test test-all main clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	# The CPU build of torch first (pinned), so that nothing pulls a multi-GB CUDA build.
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

test: setup
	$(BIN)/python -m pytest

test-all: setup
	$(BIN)/python -m pytest -m ''

main: setup
	$(BIN)/gnnsuite datasets generate --preset arxiv-like --out $(DATA)/arxiv-like --overwrite --quiet
	$(BIN)/gnnsuite datasets info $(DATA)/arxiv-like --verify --quiet

clean:
	rm -rf $(VENV) $(DATA) .pytest_cache
