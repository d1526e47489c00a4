"""suite.memory: the memory available (MemAvailable, a cgroup v2 limit, --memory-limit), the refusal line, and
``gnnsuite run --dry-run`` / ``--memory-limit`` through the command line (refused runs leave nothing)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from suite.errors import ConfigError, MemoryLimitError
from suite.executors import parse_memory
from suite.memory import (RUNTIME, Available, MemoryEstimate, available_memory, cgroup_headroom_bytes, check_memory,
                          describe, mem_available_bytes)
from tests.support.paths import REPO_ROOT

MiB = 1 << 20


def test_peak_is_resident_plus_the_largest_phase():
    estimate = MemoryEstimate({"a": 10, "b": 5}, {"train": {"x": 3, "y": 4}, "evaluate": {"z": 6}})
    assert estimate.peak_phase == "train" and estimate.peak_bytes == 22
    assert estimate.to_dict()["peak_bytes"] == 22
    assert MemoryEstimate({"a": 1}).peak_bytes == 1 and MemoryEstimate({"a": 1}).peak_phase is None


def test_a_setup_phase_peaks_over_the_runtime_alone():
    resident = {RUNTIME: 10, "buffer": 50}
    before = MemoryEstimate(resident, {"train": {"x": 3}}, setup={"partition": {"sort": 60}})
    assert before.phase_peaks() == {"train": 63, "partition": 70}
    assert before.peak_phase == "partition" and before.peak_bytes == 70
    assert before.to_dict()["setup"] == {"partition": {"sort": 60}}
    small = MemoryEstimate(resident, {"train": {"x": 3}}, setup={"partition": {"sort": 40}})
    assert small.peak_phase == "train" and small.peak_bytes == 63  # the buffer does not exist while it partitions
    assert any("partition" in line for line in describe(before, Available(None, "unknown")))


def test_reclaimable_file_pages_count_in_the_peak_but_need_not_fit():
    estimate = MemoryEstimate({RUNTIME: 10, "buffer": 50}, {"train": {"x": 3}},
                              setup={"partition": {"pages": 100, "sort": 20}}, reclaimable=frozenset({"pages"}))
    assert estimate.peak_phase == "partition" and estimate.peak_bytes == 130  # the resident set holds the pages
    assert estimate.required_phase == "train" and estimate.required_bytes == 63  # the kernel drops them at a limit
    check_memory(estimate, Available(100, "--memory-limit"), "disk")  # 130 > 100, yet it fits
    with pytest.raises(MemoryLimitError, match=r"estimated peak memory 63 B \(during train\) exceeds the 62 B"):
        check_memory(estimate, Available(62, "--memory-limit"), "disk")
    assert describe(estimate, Available(100, "x"))[-1] == "available: 100 B (x) (63 B must fit): fits"


def test_mem_available_parsed_from_meminfo(tmp_path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24683584 kB\nMemFree:  13174168 kB\nMemAvailable:   2048 kB\n")
    assert mem_available_bytes(meminfo) == 2048 * 1024
    assert mem_available_bytes(tmp_path / "absent") is None


def test_cgroup_headroom_is_the_least_along_the_path(tmp_path):
    root = tmp_path / "cgroup"
    leaf = root / "user.slice" / "job"
    leaf.mkdir(parents=True)
    (root / "user.slice" / "memory.max").write_text("1000\n")
    (root / "user.slice" / "memory.current").write_text("600\n")
    (leaf / "memory.max").write_text("max\n")
    (leaf / "memory.current").write_text("100\n")
    cgroup = tmp_path / "self-cgroup"
    cgroup.write_text("0::/user.slice/job\n")
    assert cgroup_headroom_bytes(root, cgroup) == 400
    (leaf / "memory.max").write_text("300\n")
    assert cgroup_headroom_bytes(root, cgroup) == 200
    cgroup.write_text("0::/\n")
    assert cgroup_headroom_bytes(root, cgroup) is None  # the root: no limit file


def test_cgroup_v1_memory_controller(tmp_path):
    root = tmp_path / "cgroup"
    job = root / "memory" / "jobs" / "one"
    job.mkdir(parents=True)
    (root / "memory" / "jobs" / "memory.limit_in_bytes").write_text(f"{9223372036854771712}\n")  # no limit
    (root / "memory" / "jobs" / "memory.usage_in_bytes").write_text("5000\n")
    (job / "memory.limit_in_bytes").write_text("3000\n")
    (job / "memory.usage_in_bytes").write_text("1000\n")
    cgroup = tmp_path / "self-cgroup"
    cgroup.write_text("4:memory:/jobs/one\n1:cpu:/\n0::/\n")
    assert cgroup_headroom_bytes(root, cgroup) == 2000
    (job / "memory.limit_in_bytes").write_text(f"{9223372036854771712}\n")
    assert cgroup_headroom_bytes(root, cgroup) is None


def test_memory_limit_bounds_what_is_available():
    assert available_memory(123) == Available(123, "--memory-limit")
    unbounded = available_memory(None)
    assert unbounded.source in ("MemAvailable", "the memory cgroup's limit", "unknown")


def test_refusal_is_one_line_with_what_would_fit():
    estimate = MemoryEstimate({"features": 300 * MiB}, {"train": {"batch": 100 * MiB}},
                              suggest=lambda budget: f"buffer_capacity: {budget // MiB // 100} would fit")
    check_memory(estimate, Available(400 * MiB, "--memory-limit"), "disk")  # fits exactly: no error
    check_memory(estimate, Available(None, "unknown"), "disk")
    with pytest.raises(MemoryLimitError) as refused:
        check_memory(estimate, Available(399 * MiB, "--memory-limit"), "disk")
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith("system disk: estimated peak memory 400.0 MiB (during train) exceeds the 399.0 MiB "
                              "available (--memory-limit); buffer_capacity: 3 would fit")


def test_describe_lists_parts_and_verdict():
    estimate = MemoryEstimate({"features": 2 * MiB}, {"train": {"batch": MiB}})
    lines = describe(estimate, Available(2 * MiB, "MemAvailable"))
    assert lines[0] == "estimated peak memory: 3.0 MiB (during train)"
    assert any("features" in line and "2.0 MiB" in line for line in lines)
    assert lines[-1] == "available: 2.0 MiB (MemAvailable): does NOT fit"


# ---------------------------------------------------------------------------------------------- command line
def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "suite", *args], capture_output=True, text=True, cwd=REPO_ROOT,
                          timeout=300)


def _cli_in_process(capsys, *args: str) -> subprocess.CompletedProcess:
    """``gnnsuite ARGS`` through the CLI's ``main`` in this process (a dry run starts nothing), as a completed
    process."""
    from suite.cli import main

    capsys.readouterr()
    code = main(list(args))
    captured = capsys.readouterr()
    return subprocess.CompletedProcess(["gnnsuite", *args], code, captured.out, captured.err)


@pytest.fixture(scope="module")
def tiny_spec(tmp_path_factory):
    """A run spec on the tiny synthetic store (generated once into a module cache)."""
    folder = tmp_path_factory.mktemp("memory-cli")
    spec = folder / "spec.yaml"
    spec.write_text(f"dataset: {{name: synthetic, preset: tiny, cache_dir: {folder / 'data'}}}\n"
                    "model: {num_layers: 1, fanouts: [3], hidden_dim: 8}\ntraining: {epochs: 1}\n"
                    "system: {name: in_memory, device: cpu}\n")
    return spec


def test_dry_run_prints_the_estimate_and_writes_nothing(tiny_spec, tmp_path, capsys):
    out = tmp_path / "runs"
    shown = _cli_in_process(capsys, "run", str(tiny_spec), "--out", str(out), "--dry-run")
    assert shown.returncode == 0, shown.stderr
    text = shown.stdout
    assert "dry run (nothing trained or written)" in text and "system in_memory on tiny: 300 nodes" in text
    for part in ("estimated peak memory:", "runtime (interpreter, libraries)", "features (float32 copy)",
                 "during train", "during evaluate", "available:"):
        assert part in text, text
    as_json = json.loads(_cli_in_process(capsys, "run", str(tiny_spec), "--out", str(out), "--dry-run",
                                         "--json").stdout)
    estimate = as_json["memory_estimate"]
    assert estimate["peak_bytes"] == sum(estimate["resident"].values()) + sum(
        estimate["phases"][estimate["peak_phase"]].values())
    assert as_json["fits"] is True and as_json["available_bytes"] >= estimate["peak_bytes"]
    assert not out.exists()


def test_memory_limit_below_the_estimate_stops_before_the_run_folder(tiny_spec, tmp_path, capsys):
    out = tmp_path / "runs"
    limit = 100 * MiB  # below any run's estimate: the interpreter with torch alone holds more
    peak = json.loads(_cli_in_process(capsys, "run", str(tiny_spec), "--dry-run", "--json").stdout)[
        "memory_estimate"]["peak_bytes"]
    assert peak > 2 * limit
    refused = _cli("run", str(tiny_spec), "--out", str(out), "--memory-limit", str(limit))  # a real process
    assert refused.returncode == 2, refused.stderr
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gnnsuite: error: "), refused.stderr
    assert "spec.yaml: system in_memory: estimated peak memory" in lines[0]
    assert "available (--memory-limit); " in lines[0]
    assert not out.exists()
    dry = _cli_in_process(capsys, "run", str(tiny_spec), "--dry-run", "--memory-limit", str(limit))
    assert dry.returncode == 2 and "does NOT fit" in dry.stdout
    with pytest.raises(ConfigError, match="--memory-limit: expected a size like 8G"):  # the option's parser
        parse_memory("lots", "--memory-limit")


FREED_BLOCKS = """
import json, sys
import numpy as np
from suite.memory import bound_allocator, current_rss_bytes
MiB = 1 << 20
threshold = bound_allocator()
warm = np.ones(16 * MiB, np.uint8)
del warm  # a mapped block freed: left to itself, glibc now serves blocks up to 16 MiB from its heaps
before = current_rss_bytes()
keep = []
for _ in range(8):
    block = np.ones(8 * MiB, np.uint8)
    keep.append(np.ones(1024, np.uint8))  # something after it on the heap, so that freeing cannot shrink the heap
    del block
print(json.dumps([threshold, (current_rss_bytes() - before) / MiB]))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator")
def test_the_bounded_allocator_gives_freed_tensors_back_and_yields_to_glibcs_own_setting():
    def freed(env: dict) -> tuple:
        done = subprocess.run([sys.executable, "-c", FREED_BLOCKS], capture_output=True, text=True, cwd=REPO_ROOT,
                              env={**os.environ, **env}, timeout=120, check=True)
        return tuple(json.loads(done.stdout))

    threshold, held_mib = freed({})
    assert threshold == 4 << 20
    assert held_mib < 1  # eight 8 MiB blocks freed: none of them still resident
    threshold, _ = freed({"MALLOC_MMAP_THRESHOLD_": str(1 << 20)})  # the user's setting stays
    assert threshold is None
    assert freed({"GNNSUITE_MMAP_THRESHOLD": "0"})[0] is None  # glibc's own, rising threshold
    assert freed({"GNNSUITE_MMAP_THRESHOLD": str(8 << 20)})[0] == 8 << 20


def test_a_bad_mmap_threshold_is_a_one_line_error(monkeypatch):
    from suite.memory import bound_allocator

    monkeypatch.setenv("GNNSUITE_MMAP_THRESHOLD", "4M")
    with pytest.raises(ConfigError, match="GNNSUITE_MMAP_THRESHOLD: expected a number of bytes, got '4M'"):
        bound_allocator()
