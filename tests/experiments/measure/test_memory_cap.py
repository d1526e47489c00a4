"""One case of experiments/measure/memory_cap.py, small: under a real cgroup v1 memory limit, the in-memory system
refuses up front (exit 2, one line naming the cgroup's limit) a link-prediction run whose embedding table is larger
than the limit; the cgroup is removed afterwards. Skipped where no memory cgroup can be made."""

from __future__ import annotations

from pathlib import Path

import pytest

from experiments.cgroups import memory_cgroup_unavailable
from experiments.measure.memory_cap import LIMITS, Case, generate, lp_spec, run_argv, run_case

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(memory_cgroup_unavailable() is not None, reason=str(memory_cgroup_unavailable()))]

DIM = 1024  # 200,000 nodes x 1024 x 4 B x 2 (embeddings, Adagrad state) = 1.6 GB > the 1 GiB limit


def test_in_memory_link_prediction_is_refused_under_a_cap_below_its_table(tmp_path: Path):
    def prepare(work: Path) -> None:
        generate(work, "lp-store", "--preset", "livejournal-like", "--num-nodes", "200000", "--avg-degree", "2")

    case = Case("in_memory-lp-small", "lp", lambda w: run_argv(w, lp_spec(w / "lp-store", "in_memory", False, DIM)),
                "refused", prepare=prepare)
    row = run_case(case, tmp_path)
    assert row["outcome"] == "refused", row
    assert "the memory cgroup's limit" in row["error"] and "in_memory" in row["error"], row["error"]
    assert row["oom_kills"] == 0 and row["cgroup_peak_mib"] <= LIMITS["lp"] / 2**20
    assert not list(Path("/sys/fs/cgroup/memory").glob("gnnsuite-memcap-*-in_memory-lp-small"))
    assert not list((tmp_path / "runs").glob("*/summary.json"))  # stopped before the run folder
