"""A real memory cap (issue 34, item 2): a command started inside a cgroup v1 memory cgroup sees its limit
(:func:`suite.memory.available_memory`), is OOM-killed when it holds more, and the cgroup is gone afterwards.
Skipped, with the reason, where no such cgroup can be made (not root, no cgroup v1 memory controller)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from experiments.cgroups import memory_cgroup, memory_cgroup_unavailable
from tests.support.processes import child_env

MiB = 1 << 20
LIMIT = 256 * MiB

pytestmark = pytest.mark.skipif(memory_cgroup_unavailable() is not None,
                                reason=str(memory_cgroup_unavailable()))

SEES_LIMIT = ("import json, suite.memory as m; a = m.available_memory(); "
              "print(json.dumps({'bytes': a.bytes, 'source': a.source, 'rss': m.current_rss_bytes()}))")


def _python(prefix: list[str], code: str) -> subprocess.CompletedProcess:
    return subprocess.run([*prefix, sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env=child_env())


def test_a_command_in_the_cgroup_sees_its_limit():
    with memory_cgroup(LIMIT) as cgroup:
        done = _python(cgroup.prefix, SEES_LIMIT)
        assert done.returncode == 0, done.stderr
        seen = json.loads(done.stdout)
        assert seen["source"] == "the memory cgroup's limit"
        # the cgroup's headroom plus what the process holds: the limit, less what the wrapper left charged
        assert LIMIT - 32 * MiB <= seen["bytes"] <= LIMIT + seen["rss"], seen
        assert cgroup.processes() == []
    assert not cgroup.path.exists()


def test_outside_the_cgroup_the_limit_is_not_seen():
    done = _python([], SEES_LIMIT)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["bytes"] > 2 * LIMIT


def test_holding_more_than_the_limit_is_killed_and_counted():
    with memory_cgroup(LIMIT) as cgroup:
        done = _python(cgroup.prefix, f"import numpy as np; a = np.ones({2 * LIMIT}, dtype=np.uint8); print(a.sum())")
        assert done.returncode == -9, (done.returncode, done.stderr[-300:])
        assert cgroup.oom_kills >= 1
        assert cgroup.peak_bytes <= cgroup.limit_bytes
    assert not cgroup.path.exists()


def test_a_cgroup_left_with_a_process_is_emptied_and_removed():
    with memory_cgroup(LIMIT) as cgroup:
        sleeper = subprocess.Popen([*cgroup.prefix, "sleep", "60"])
        for _ in range(100):
            if cgroup.processes():
                break
            subprocess.run(["sleep", "0.05"])
        assert cgroup.processes() == [sleeper.pid]
    assert sleeper.wait(timeout=10) == -9
    assert not cgroup.path.exists()
