"""Shared fixtures: where the real datasets live; the report of the executor tests; how a parallel run
(pytest-xdist, as ``make test`` runs it) shares the tests out. Plain helpers shared by tests are in
:mod:`tests.support`."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.paths import shared_dir

# The compiled sampler kernels check every index in the tests (an IndexError instead of a segmentation fault);
# set before any test imports them, inherited by the CLI subprocesses the tests start.
os.environ.setdefault("GNNSUITE_KERNEL_BOUNDSCHECK", "1")


@pytest.fixture(scope="session")
def cli():
    """``cli(argv, env, cwd=None, timeout=300)``: ``python -m suite ARGV`` forked from a server that has imported
    torch, PyG and the other libraries once (about 1 s a command instead of 5); for tests that run many commands
    and wait for each (:func:`tests.support.forked_cli.forked_cli`)."""
    from tests.support.forked_cli import forked_cli

    return forked_cli()


@pytest.fixture(scope="session")
def shared_datasets() -> Path:
    """``shared/datasets``; tests that need it fail loudly (not skip) when it is absent."""
    path = shared_dir() / "datasets"
    assert path.is_dir(), f"{path} is missing: set GNNSUITE_SHARED to the project's shared/ folder"
    return path


# ---------------------------------------------------------------------------------------------- parallel runs
# `make test` runs the tests on three pytest-xdist workers on two cores (``-n 3 --dist loadfile
# --no-loadscope-reorder``; the Makefile says why). A
# module's tests run on one worker, so its module-scoped fixtures (a trained run, a Ray cluster, a prepared store)
# are built once; SPLIT names the exceptions. Modules start longest first (LONGEST_FIRST, then in collection
# order), so that no long one is left to run alone at the end. (The scheduler reads node ids only: pytest 9 ignores
# the node ids xdist's own ``xdist_group`` marks rewrite.)
SPLIT = {
    "tests/test_docs.py::test_documented_commands_run_as_written": "apart",  # each page, in parallel
    "tests/suite/test_executors.py::test_ray_cluster": "together",  # the tests of the 2-node Ray cluster fixture
    "tests/systems/test_checkpoints.py::test_killed_run_resumes": "apart",
    "tests/systems/test_distributed.py": "apart",  # long multi-rank runs with nothing shared but a tiny store
}
"""Node-id prefix -> ``"apart"`` (each of its tests a unit of its own) or ``"together"`` (its tests one unit)."""
LONGEST_FIRST = (
    "tests/experiments/figures/test_link_prediction_peers.py",  # its set-up trains PBG (twice) and PyKEEN
    "tests/test_docs.py::test_documented_commands_run_as_written[commands.md]",
    "tests/suite/test_executors.py::test_ray_cluster",
    "tests/suite/test_executors.py",
    "tests/test_docs.py::test_documented_commands_run_as_written[pipeline.md]",
    "tests/test_docs.py::test_documented_commands_run_as_written[README.md]",
    "tests/suite/test_bad_input_sweep.py",
    "tests/suite/test_fault_injection.py",
    "tests/suite/test_full_disk.py",
    "tests/test_extension.py",
    "tests/systems/test_checkpoints.py::test_killed_run_resumes",
    "tests/suite/test_cli.py",
    "tests/suite/test_concurrency.py",
    "tests/systems/test_distributed.py",
    "tests/systems/disk/test_disk_link_prediction.py",
    "tests/test_docs.py::test_documented_commands_run_as_written",
    "tests/suite/test_io_positional.py",
    "tests/notebooks/test_notebooks.py",
    "tests/suite/test_grid.py",
    "tests/suite/test_bad_input_properties.py",
)
"""Node-id prefixes of the units that take longest, slowest first (from ``--durations``): they start first."""


def unit_of(nodeid: str) -> str:
    """The unit of scheduling ``nodeid`` belongs to: its module, unless SPLIT says otherwise."""
    for prefix, how in SPLIT.items():
        if nodeid.startswith(prefix):
            return nodeid if how == "apart" else prefix
    return nodeid.split("::", 1)[0]


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadfile``, with the units of :func:`unit_of`."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class ByUnit(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

    return ByUnit(config, log)


def pytest_configure(config) -> None:
    """On an xdist worker: torch's intra-op threads share the cores with the other workers (two workers with a
    thread per core each would oversubscribe them, and OpenMP's barriers spin). Runs size their own threads
    (suite.threads), unchanged."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if os.environ.get("PYTEST_XDIST_WORKER") and workers > 1:
        import torch

        torch.set_num_threads(max(1, len(os.sched_getaffinity(0)) // workers))


def pytest_collection_modifyitems(items) -> None:
    for item in items:
        marker = item.get_closest_marker("executor")
        if marker is not None:
            item.user_properties.append(("executor", marker.args[0]))
    if os.environ.get("PYTEST_XDIST_WORKER"):  # the order the workers report is the order units are handed out
        items.sort(key=lambda item: _rank(item.nodeid))  # stable: collection order otherwise


def _rank(nodeid: str) -> int:
    """Where ``nodeid`` comes in LONGEST_FIRST (its first matching prefix; after all of them if none)."""
    return next((i for i, prefix in enumerate(LONGEST_FIRST) if nodeid.startswith(prefix)), len(LONGEST_FIRST))


# ---------------------------------------------------------------------------------------------- executor report
# Tests marked ``@pytest.mark.executor("NAME")`` run grids on a scale-out executor; the end of the test run says
# which of them ran (passed, failed) or were skipped, per executor, so a CI log shows that they really ran.
_EXECUTOR_OUTCOMES: dict[str, dict[str, list[str]]] = {}


def pytest_runtest_logreport(report) -> None:
    executor = dict(report.user_properties).get("executor")
    if executor is None:
        return
    outcomes = _EXECUTOR_OUTCOMES.setdefault(executor, {})
    name = report.nodeid.rsplit("::", 1)[-1]
    if report.failed:
        outcomes.setdefault("failed", []).append(f"{name} ({report.when})")
    elif report.skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        outcomes.setdefault("skipped", []).append(f"{name}: {reason}")
    elif report.when == "call":
        outcomes.setdefault("passed", []).append(f"{name} ({report.duration:.1f} s)")


def pytest_terminal_summary(terminalreporter) -> None:
    if not _EXECUTOR_OUTCOMES:
        return
    import importlib.metadata as metadata

    write = terminalreporter.write_line
    terminalreporter.section("executor tests")
    engines = []
    for package in ("ray", "submitit"):
        try:
            engines.append(f"{package} {metadata.version(package)}")
        except metadata.PackageNotFoundError:
            engines.append(f"{package} not installed")
    required = os.environ.get("GNNSUITE_REQUIRE_ENGINES", "")
    write(f"engines: {', '.join(engines)}; required (GNNSUITE_REQUIRE_ENGINES): {required or 'none'}")
    for executor in sorted(_EXECUTOR_OUTCOMES):
        outcomes = _EXECUTOR_OUTCOMES[executor]
        counts = ", ".join(f"{len(outcomes[k])} {k}" for k in ("passed", "failed", "skipped") if outcomes.get(k))
        write(f"executor {executor}: {counts}")
        for kind in ("passed", "failed", "skipped"):
            for entry in outcomes.get(kind, []):
                write(f"    {kind}: {entry}")


# ---------------------------------------------------------------------------------------------- recorded runs
@pytest.fixture(scope="session")
def sync_pipelined_run(tmp_path_factory):
    """A real sync pipelined run on a small planted-partition store: ``(spec, run_dir)`` (the simulators calibrate
    on it; the contention microbenchmark mimics its workload); recorded once per test run, shared by the workers."""
    from suite.config import spec_from_dict
    from suite.runner import run_spec
    from tests.support.graphs import planted_partition, write_node_store
    from tests.support.shared import built_once

    def spec_in(root: Path):
        return spec_from_dict({
            "dataset": {"name": "store", "root": str(root / "store")},
            "model": {"encoder": "graphsage", "num_layers": 2, "hidden_dim": 16, "fanouts": [5, 5]},
            "system": {"name": "pipelined", "device": "cpu", "options": {"sync": True}},
            "training": {"batch_size": 16, "epochs": 2}, "evaluation": {"splits": []},
        })

    def record(root: Path) -> None:
        graph = planted_partition(num_nodes=400, num_classes=3, seed=2)
        write_node_store(root / "store", graph.src, graph.dst, graph.features, graph.labels, graph.splits)
        run_spec(spec_in(root), root / "runs")

    root = built_once(tmp_path_factory, "sync-pipelined", record)
    spec = spec_in(root)
    return spec, str(root / "runs" / spec.run_id)  # as run_spec returns it

