# One-command entry points. Each target sets up the virtual environment first (idempotent).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
DATA ?= data
# The peers (issue 17): prebuilt torch-sparse/torch-scatter wheels (torch 2.13.0, CPython 3.11) beside the
# checkout, and PyTorch-BigGraph in an environment of its own (it imports pkg_resources: setuptools < 70).
WHEELS ?= ../shared/wheels
PBG_VENV ?= .venv-pbg
# pip byte-compiles what it installs one file at a time (about 35 s of a fresh set-up on 2 cores). It installs with
# --no-compile instead, and compileall byte-compiles the environment on every core after each install (files already
# compiled are skipped): set-up 46 s instead of 57 s, measured from a fresh clone. Leaving the compilation out would
# cost more: where PYTHONDONTWRITEBYTECODE is set (these machines set it), every process would then compile every
# module it imports (tried: `make main` took 52 s longer). Like pip, compileall cannot compile the few files of newer
# Python syntax (torch's py312 test helpers); its status is ignored, as pip ignores them.
PIP := $(BIN)/pip install --quiet --no-compile
COMPILE = $(1)/bin/python -m compileall -q -j 0 $(1)/lib > /dev/null || true

.PHONY: setup peers quick-peers test test-all main reference quickstart clean

setup: $(VENV)/.installed

# The package and its run-time dependencies: what `make main` needs.
$(VENV)/.base: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) --upgrade pip
	# The CPU build of torch first (pinned), so that nothing pulls a multi-GB CUDA build.
	$(PIP) torch==2.13.0
	$(PIP) -e .
	$(call COMPILE,$(VENV))
	touch $@

# The test tools and the scale-out engines (Ray, submitit) too: the executor tests run for real, never skipped, in
# `make test` (about 25 s of installing that `make main` skips).
$(VENV)/.installed: $(VENV)/.base
	$(PIP) -e '.[test,scale]'
	$(call COMPILE,$(VENV))
	touch $@

# The peer systems the experiments compare with: PyG's samplers (torch-sparse + torch-scatter), PyKEEN, and
# PyTorch-BigGraph in $(PBG_VENV), which sees the suite's torch and numpy through a .pth file and has its own
# setuptools < 70, h5py and torchbiggraph. Without $(WHEELS), torch-sparse/torch-scatter build from source
# (about 15 minutes). `quick-peers` leaves PyKEEN out: the quick reproduction does not run it.
peers: $(VENV)/.peers $(PBG_VENV)/.installed
quick-peers: $(VENV)/.pyg $(PBG_VENV)/.installed

$(VENV)/.pyg: $(VENV)/.base
	if [ -d "$(WHEELS)" ]; then \
	  $(PIP) --no-deps $(WHEELS)/torch_scatter-2.1.2-*.whl $(WHEELS)/torch_sparse-0.6.18-*.whl; \
	else \
	  echo "$(WHEELS) not found: building torch-scatter and torch-sparse from source (about 15 minutes)"; \
	  $(PIP) --no-build-isolation torch-scatter==2.1.2 torch-sparse==0.6.18; \
	fi
	$(call COMPILE,$(VENV))
	touch $@

$(VENV)/.peers: $(VENV)/.pyg
	$(PIP) -e '.[peers]'
	$(call COMPILE,$(VENV))
	touch $@

$(PBG_VENV)/.installed: $(VENV)/.base
	$(PYTHON) -m venv $(PBG_VENV)
	$(BIN)/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])" > \
	  "$$($(PBG_VENV)/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")/gnnsuite-main.pth"
	$(PBG_VENV)/bin/pip install --quiet --no-compile --no-deps 'setuptools<70' h5py==3.16.0 torchbiggraph==1.0.0
	$(call COMPILE,$(PBG_VENV))
	$(PBG_VENV)/bin/python -c "import torchbiggraph.train, torch; print('PyTorch-BigGraph', torchbiggraph.__version__, 'torch', torch.__version__)"
	touch $@

# The test command (.ci/run calls it): installs the peers first when the prebuilt wheels are there, so the peer
# tests run (PyG sampler and system, PBG and PyKEEN on a few hundred triples) rather than skip.
# GNNSUITE_REQUIRE_ENGINES: the executor tests fail (not skip) when ray or submitit is missing; the run ends with
# an "executor tests" section naming the executors that ran. The tests run on $(TEST_WORKERS) pytest-xdist
# workers, a module's tests on one worker (tests/conftest.py says how they are shared out): three on two cores,
# because many tests wait on processes they start, kill or time (measured here: 7 min 12 s with three workers;
# 8 min 7 s with two, with about 60 s of tests more, since moved to -m slow; later, on a slower machine, from a
# fresh clone: pytest 8 min 16 s with three, 9 min 36 s with four).
TEST_WORKERS ?= 3
test: setup
	if [ -d "$(WHEELS)" ]; then $(MAKE) peers; else echo "$(WHEELS) not found: peer tests will be skipped"; fi
	# numba's kernels compiled once into their caches (tests/support/warm_kernels.py) beside the layer contracts of
	# pyproject.toml (lint-imports; tests/test_architecture.py checks them too): on a fresh clone, the test workers
	# and their processes would otherwise each compile them.
	$(BIN)/python -m tests.support.warm_kernels & warm=$$!; $(BIN)/lint-imports && wait $$warm
	GNNSUITE_REQUIRE_ENGINES=ray,submitit $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

test-all: setup
	$(BIN)/python -m pytest -m ''

# The quick reproduction: every figure's experiment on small settings into out/reproduce/ (tables, figures,
# REPORT.md with 95 % intervals and verdicts), compared with the committed reference results/ (never written here).
main: $(VENV)/.base
	if [ -d "$(WHEELS)" ]; then $(MAKE) quick-peers; fi
	$(BIN)/gnnsuite reproduce --quick --overwrite

# Regenerate the committed quick reference results/ (the only command that writes there).
reference: $(VENV)/.base
	if [ -d "$(WHEELS)" ]; then $(MAKE) quick-peers; fi
	$(BIN)/gnnsuite reproduce --quick --overwrite --update-reference

# GraphSAGE vs a features-only MLP on the default synthetic dataset (arxiv-like), recorded under out/quickstart.
quickstart: setup
	$(BIN)/gnnsuite grid experiments/specs/quickstart_grid.yaml --out out/quickstart
	$(BIN)/gnnsuite results out/quickstart --export out/quickstart/runs.csv

clean:
	rm -rf $(VENV) $(PBG_VENV) $(DATA) out .pytest_cache
