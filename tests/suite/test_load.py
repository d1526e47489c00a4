"""Foreign load (suite/load.py): other processes' CPU time over a window, our own time left out."""

from __future__ import annotations

import math
import subprocess
import sys
import time

import pandas as pd
import pytest

from suite import load
from suite.load import LoadMonitor, MachineLoad

pytestmark = pytest.mark.skipif(load.machine_busy_seconds() is None, reason="needs /proc/stat (Linux)")


def _spin(seconds: float) -> None:
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def test_a_busy_other_process_counts_as_foreign_load():
    # a grandchild of a shell that has exited is no descendant of ours: foreign (a live child would be our own)
    subprocess.run(["sh", "-c", f"{sys.executable} -c 'import time\nend = time.process_time() + 0.6\n"
                    f"while time.process_time() < end: pass' &"], check=True)
    with LoadMonitor() as monitor:
        time.sleep(1.0)  # the other process burns 0.6 s of CPU while we sleep
    result = monitor.result
    assert result.foreign_cpu_s >= 0.4  # other processes can only add to it
    assert result.foreign_cores == pytest.approx(result.foreign_cpu_s / 1.0, rel=0.2)
    assert result.under_load is True


def test_a_live_child_is_our_own_work():
    busy = subprocess.Popen([sys.executable, "-c",
                             "import time\nend = time.process_time() + 3\nwhile time.process_time() < end: pass"])
    try:
        time.sleep(0.3)  # the interpreter has started
        before = load.own_cpu_seconds() - time.process_time()  # what this process itself spends does not count
        deadline = time.monotonic() + 10.0  # a busy machine (parallel tests) gives the child a sliver of a core
        while (during := load.own_cpu_seconds() - time.process_time() - before) < 0.3 and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        busy.kill()
        busy.wait()
    assert during >= 0.3  # the live child's CPU time


def test_a_child_waited_for_inside_the_window_is_our_own_work():
    own_before = load.own_cpu_seconds()
    subprocess.run([sys.executable, "-c",
                    "import time\nend = time.process_time() + 0.5\nwhile time.process_time() < end: pass"],
                   check=True)
    assert load.own_cpu_seconds() - own_before >= 0.45


def test_own_cpu_time_is_not_foreign():
    busy_before, own_before = load.machine_busy_seconds(), load.own_cpu_seconds()
    with LoadMonitor() as monitor:
        _spin(0.5)
    busy_after, own_after = load.machine_busy_seconds(), load.own_cpu_seconds()
    assert own_after - own_before >= 0.45
    # the monitor's foreign time is the machine's busy time minus ours (0.1 s of tick and timing slack)
    assert monitor.result.foreign_cpu_s <= (busy_after - busy_before) - (own_after - own_before) + 0.1


def test_threshold_and_record():
    assert load.machine_load(1.0, 10.0) == MachineLoad(1.0, 0.1, False)
    assert load.machine_load(5.0, 10.0).under_load is True
    assert load.machine_load(-0.01, 1.0).foreign_cpu_s == 0.0  # jiffy rounding never gives negative load
    assert load.machine_load(2.5, 10.0).under_load is True  # exactly the threshold counts as loaded


def test_reading_the_field_from_summaries_and_table_rows():
    nested = {"machine_load": {"foreign_cpu_s": 3.0, "foreign_cores": 0.3, "under_load": True}}
    flat = {"machine_load.foreign_cpu_s": 0.5, "machine_load.foreign_cores": 0.05, "machine_load.under_load": False}
    assert load.load_of(nested) == MachineLoad(3.0, 0.3, True)
    assert load.load_of(flat) == MachineLoad(0.5, 0.05, False)
    assert load.load_of({}) is None and load.load_of({"machine_load.foreign_cores": math.nan}) is None
    assert load.load_of({"machine_load": {"foreign_cores": "x"}}) is None
    assert load.load_columns(nested) == {"foreign_cores": 0.3, "under_load": True}
    unknown = load.load_columns(None)
    assert math.isnan(unknown["foreign_cores"]) and unknown["under_load"] is None


@pytest.mark.parametrize("cell, flagged", [(True, True), ("True", True), (False, False), ("False", False),
                                           (None, False), (math.nan, False), (pd.NA, False)])
def test_under_load_cells(cell, flagged):
    assert load.measured_under_load(cell) is flagged
