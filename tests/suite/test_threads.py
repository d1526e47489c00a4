"""Thread budgets and the foreign-load meter: sizing by hand, giving way to foreign load, and a real busy process
measured as foreign (while this process's own threads and children are not)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import torch

from suite.load import LoadMonitor, MachineLoad, own_cpu_seconds
import pytest

from suite.errors import ConfigError
from suite.threads import (CORES_ENV, OMP_ENV, adapt_budget, apply_budget, budget_applied,
                           plan_budget, usable_cores)

SPIN = "import time\nend = time.time() + {seconds}\nwhile time.time() < end: pass"


def test_budgets_by_hand():
    assert plan_budget(0, cores=2).compute == 2
    assert plan_budget(1, cores=2).compute == 1
    assert plan_budget(4, cores=2).compute == 1  # never below one thread
    assert plan_budget(1, cores=8, foreign_cores=2.6).compute == 4  # 3 cores busy elsewhere
    assert plan_budget(0, cores=2, foreign_cores=0.4).compute == 2  # light load is not a core
    pinned = plan_budget(0, requested=3, cores=2)
    assert (pinned.compute, pinned.source) == (3, "option")


@pytest.fixture
def every_core(monkeypatch: pytest.MonkeyPatch) -> int:
    """The usable cores with neither bound set."""
    monkeypatch.delenv(CORES_ENV, raising=False)
    monkeypatch.delenv(OMP_ENV, raising=False)
    return usable_cores()


@pytest.mark.parametrize("variable", [CORES_ENV, OMP_ENV])  # a pool worker's share; the user's OMP_NUM_THREADS
def test_a_bound_on_the_cores_caps_the_budget_and_never_adds_cores(monkeypatch: pytest.MonkeyPatch, every_core: int,
                                                                    variable: str) -> None:
    monkeypatch.setenv(variable, "1")
    assert usable_cores() == 1 and plan_budget(0).compute == 1
    monkeypatch.setenv(variable, str(every_core + 5))
    assert usable_cores() == every_core


def test_omp_num_threads_is_read_as_openmp_reads_it(monkeypatch: pytest.MonkeyPatch, every_core: int) -> None:
    monkeypatch.setenv(OMP_ENV, "1,4")  # a nested list: the outer level
    assert usable_cores() == 1
    for ignored in ("", "0", "many"):  # what OpenMP itself would not read leaves the cores as they are
        monkeypatch.setenv(OMP_ENV, ignored)
        assert usable_cores() == every_core
    monkeypatch.setenv(OMP_ENV, "4")
    monkeypatch.setenv(CORES_ENV, "1")
    assert usable_cores() == 1  # the smaller bound wins


def test_a_malformed_share_is_a_config_error(monkeypatch: pytest.MonkeyPatch, every_core: int) -> None:
    monkeypatch.setenv(CORES_ENV, "half")
    with pytest.raises(ConfigError, match=f"{CORES_ENV}: expected a positive number of cores, got 'half'"):
        usable_cores()


def test_a_grids_pool_workers_plan_with_their_share(tmp_path) -> None:
    # two runs at a time on this machine's cores: each worker's runs plan their budget with half of them
    from suite.grid import expand_grid, run_grid

    grid = Path(__file__).resolve().parents[2] / "experiments" / "specs" / "quickstart_grid.yaml"
    specs = expand_grid(grid, ["dataset.preset=tiny", "training.epochs=1", f"dataset.cache_dir={tmp_path / 'data'}"])[:2]
    summaries = run_grid(specs, tmp_path / "runs", jobs=2, progress=False)
    share = max(1, usable_cores() // 2)
    assert all(summary["status"] == "completed" for summary in summaries)
    assert all(summary["threads"]["cores"] == share for summary in summaries)


def test_a_budget_gives_way_to_foreign_load_measured_long_enough():
    budget = plan_budget(0, cores=2)
    busy = MachineLoad(foreign_cpu_s=1.6, foreign_cores=0.8, under_load=True, wall_s=2.0)
    assert adapt_budget(budget, busy).compute == 1
    assert adapt_budget(adapt_budget(budget, busy), MachineLoad(0.0, 0.0, False, wall_s=2.0)).compute == 2
    assert adapt_budget(budget, MachineLoad(0.08, 0.8, True, wall_s=0.1)).compute == 2  # too short to tell
    pinned = plan_budget(0, requested=2, cores=2)
    assert adapt_budget(pinned, busy) is pinned


def test_applying_a_budget_sizes_torch_and_restores_it():
    before = torch.get_num_threads()
    with budget_applied(plan_budget(0, requested=1)) as applied:
        assert torch.get_num_threads() == 1 and applied.compute == 1
    assert torch.get_num_threads() == before
    assert apply_budget(plan_budget(0, requested=before)).compute == before


def test_a_busy_foreign_process_is_measured_and_our_own_child_is_not():
    # A spinning grandchild of a detached shell is no descendant of ours once the shell exits: it is foreign.
    detached = subprocess.Popen(["sh", "-c", f"{sys.executable} -c '{SPIN.format(seconds=1.3)}' &"])
    detached.wait()
    with LoadMonitor() as meter:
        time.sleep(1.0)
    assert meter.result.wall_s >= 1.0
    assert meter.result.foreign_cores >= 0.5 and meter.result.under_load
    time.sleep(0.4)  # the foreign spinner has ended
    # A child's CPU time is our own (whatever else the machine is doing meanwhile).
    before = own_cpu_seconds()
    subprocess.run([sys.executable, "-c", "import time\nend = time.process_time() + 1.0\n"
                    "while time.process_time() < end: pass"], check=True)
    assert own_cpu_seconds() - before >= 0.8
    assert usable_cores() >= 1
