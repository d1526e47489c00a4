# One-command entry points. Each target sets up the virtual environment first (idempotent).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
DATA ?= data

.PHONY: setup test test-all main reference quickstart clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	# The CPU build of torch first (pinned), so that nothing pulls a multi-GB CUDA build.
	$(BIN)/pip install --quiet torch==2.13.0
	# The scale-out engines (Ray, submitit) too: the executor tests run for real, never skipped, in `make test`.
	$(BIN)/pip install --quiet -e '.[test,scale]'
	touch $@

# GNNSUITE_REQUIRE_ENGINES: the executor tests fail (not skip) when ray or submitit is missing; the run ends with
# an "executor tests" section naming the executors that ran.
test: setup
	GNNSUITE_REQUIRE_ENGINES=ray,submitit $(BIN)/python -m pytest

test-all: setup
	$(BIN)/python -m pytest -m ''

# The quick reproduction: every figure's experiment on small settings into out/reproduce/ (tables, figures,
# REPORT.md with 95 % intervals and verdicts), compared with the committed reference results/ (never written here).
main: setup
	$(BIN)/gnnsuite reproduce --quick --overwrite

# Regenerate the committed quick reference results/ (the only command that writes there).
reference: setup
	$(BIN)/gnnsuite reproduce --quick --overwrite --update-reference

# GraphSAGE vs a features-only MLP on the default synthetic dataset (arxiv-like), recorded under out/quickstart.
quickstart: setup
	$(BIN)/gnnsuite grid experiments/quickstart_grid.yaml --out out/quickstart
	$(BIN)/gnnsuite results out/quickstart --export out/quickstart/runs.csv

clean:
	rm -rf $(VENV) $(DATA) out .pytest_cache
