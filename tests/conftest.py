"""Shared fixtures: where the real datasets live; the report of the executor tests. Plain helpers shared by tests
are in :mod:`tests.support`."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.paths import shared_dir

# The compiled sampler kernels check every index in the tests (an IndexError instead of a segmentation fault);
# set before any test imports them, inherited by the CLI subprocesses the tests start.
os.environ.setdefault("GNNSUITE_KERNEL_BOUNDSCHECK", "1")


@pytest.fixture(scope="session")
def shared_datasets() -> Path:
    """``shared/datasets``; tests that need it fail loudly (not skip) when it is absent."""
    path = shared_dir() / "datasets"
    assert path.is_dir(), f"{path} is missing: set GNNSUITE_SHARED to the project's shared/ folder"
    return path


# ---------------------------------------------------------------------------------------------- executor report
# Tests marked ``@pytest.mark.executor("NAME")`` run grids on a scale-out executor; the end of the test run says
# which of them ran (passed, failed) or were skipped, per executor, so a CI log shows that they really ran.
_EXECUTOR_OUTCOMES: dict[str, dict[str, list[str]]] = {}


def pytest_collection_modifyitems(items) -> None:
    for item in items:
        marker = item.get_closest_marker("executor")
        if marker is not None:
            item.user_properties.append(("executor", marker.args[0]))


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
    on it; the contention microbenchmark mimics its workload)."""
    from suite.config import spec_from_dict
    from suite.runner import run_spec
    from tests.support.graphs import planted_partition, write_node_store

    root = tmp_path_factory.mktemp("sync-pipelined")
    graph = planted_partition(num_nodes=400, num_classes=3, seed=2)
    write_node_store(root / "store", graph.src, graph.dst, graph.features, graph.labels, graph.splits)
    spec = spec_from_dict({
        "dataset": {"name": "store", "root": str(root / "store")},
        "model": {"encoder": "graphsage", "num_layers": 2, "hidden_dim": 16, "fanouts": [5, 5]},
        "system": {"name": "pipelined", "device": "cpu", "options": {"sync": True}},
        "training": {"batch_size": 16, "epochs": 2}, "evaluation": {"splits": []},
    })
    return spec, run_spec(spec, root / "runs")["run_dir"]
