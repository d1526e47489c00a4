"""Fault injection at every IO operation (SQLite style, issue 34): the real CLI, in a process of its own, with the k-th
file operation failing (``GNNSUITE_FAULT``: ENOSPC, EIO or a short write; :mod:`suite.faults`).

For each command and each k: exit 2 with one line naming the file and the cause, no traceback; nothing left that
looks complete but is not (every store folder verifies, every ``summary.json`` that says completed holds the
reference result, no staging leftovers); the previous state intact (the input store, an existing output, a finished
run folder); and the same command without the fault completes with the reference result. A fault that a command
absorbs (exit 0) must not change its result either.

The default test samples four k of `datasets generate` (first, last, seeded others); ``-m slow`` sweeps every
command at every *site* (each place in the code that asks for one kind of operation, :func:`suite.faults.sites`: its
first operation fails), plus the first and last operation and a seeded sample of 10 others
(``GNNSUITE_FAULT_SWEEP_SIZE``: another number; ``GNNSUITE_FAULT_SWEEP=all``: every k).
``GNNSUITE_FAULT_SWEEP_REPORT=<file>`` writes the counts (operations and sites per command, injected, clean errors,
absorbed, other) as JSON.

The swept commands run in children forked from a server that has imported torch, PyG and the other libraries once
(the ``cli`` fixture, :func:`tests.support.forked_cli.forked_cli`: a tenth of a fresh interpreter's start-up, which
makes sweeping every k affordable); a test checks that a forked command counts the same operations at the same
sites, and fails in the same way, as one started as ``python -m suite``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from suite.data.store import GraphStore
from tests.support.processes import child_env, gnnsuite

KINDS = ("ENOSPC", "EIO", "short")
STAGING_MARKS = (".partial-", ".old-", ".tmp-")


@dataclasses.dataclass(frozen=True)
class Case:
    """One command of the sweep.

    Attributes:
        name: the test id.
        setup: builds the state before the command in a fresh work folder (given the reference store and run).
        argv: the command line, given the work folder.
        result: what a clean run produces, comparable across runs (checksums, metrics).
        intact: the part of the previous state that must never change, given the work folder.
    """

    name: str
    setup: Callable[[Path, Path, Path | None], None]
    argv: Callable[[Path], list[str]]
    result: Callable[[Path], object]
    intact: Callable[[Path], object]


def _store_files(path: Path) -> dict[str, str]:
    """``{key: checksum}`` of a store that verifies (file contents; ``created_at`` is left out)."""
    store = GraphStore.open(path)
    store.verify()
    return {key: entry["checksum"] for key, entry in store.metadata["files"].items()}


def _summary(runs: Path) -> dict:
    (summary,) = runs.glob("*/summary.json")
    data = json.loads(summary.read_text())
    return {"run_id": data["run_id"], "status": data["status"], "metrics": data["metrics"], "loss": data["loss"]}


def _write_spec(work: Path, system: dict, epochs: int = 1, task: str = "nc") -> None:
    spec = {"dataset": {"name": "store", "root": str(work / "store")}, "seed": 0, "system": {"device": "cpu", **system},
            "training": {"epochs": epochs, "batch_size": 64, "checkpoint_every": 1}}
    if task == "nc":
        spec["model"] = {"encoder": "graphsage", "num_layers": 2, "hidden_dim": 16, "fanouts": [5, 5]}
    else:
        spec["model"] = {"encoder": "shallow", "num_layers": 0, "fanouts": [], "decoder": "distmult",
                         "embedding_dim": 8, "learnable_embeddings": True, "dropout": 0.0}
        spec["sampler"] = {"name": "dense", "direction": "both"}
        spec["training"].update(task="link_prediction", optimizer="adagrad", learning_rate=0.1,
                                negatives={"num_chunks": 2, "negatives_per_positive": 10, "degree_fraction": 0.5})
        spec["evaluation"] = {"batch_size": 128}
    (work / "spec.yaml").write_text(yaml.safe_dump(spec))


def _copy_store(ref: Path, work: Path, name: str = "store") -> None:
    shutil.copytree(ref, work / name)


def _run_case(name: str, system: dict, epochs: int = 1, task: str = "nc") -> Case:
    def setup(work: Path, ref: Path, _run: Path | None) -> None:
        _copy_store(ref, work)
        _write_spec(work, system, epochs, task)

    return Case(name, setup, lambda work: ["run", str(work / "spec.yaml"), "--out", str(work / "runs"), "--quiet"],
                lambda work: _summary(work / "runs"), lambda work: _store_files(work / "store"))


def _setup_export(work: Path, ref: Path, run: Path | None) -> None:
    shutil.copytree(run, work / "run")


def _run_folder_bytes(work: Path) -> dict[str, bytes]:
    return {str(p.relative_to(work / "run")): p.read_bytes() for p in sorted((work / "run").rglob("*")) if p.is_file()}


CASES = [
    Case("generate", lambda work, ref, _: _copy_store(ref, work, "out"),  # --overwrite of an existing store
         lambda work: ["datasets", "generate", "--preset", "tiny", "--out", str(work / "out"), "--overwrite",
                       "--quiet"],
         lambda work: _store_files(work / "out"), lambda work: _store_files(work / "out")),
    Case("partition", lambda work, ref, _: _copy_store(ref, work),
         lambda work: ["datasets", "partition", str(work / "store"), "-p", "4", "--out", str(work / "part"),
                       "--overwrite", "--quiet"],  # a fault after the rename leaves a complete output
         lambda work: _store_files(work / "part"), lambda work: _store_files(work / "store")),
    _run_case("run-in-memory-nc", {}),
    _run_case("run-checkpoint-resume", {}, epochs=2),
    _run_case("run-disk-nc", {"name": "disk", "options": {"policy": "sequential", "num_partitions": 4,
                                                           "buffer_capacity": 2}}),
    _run_case("run-disk-lp", {"name": "disk", "options": {"policy": "beta", "num_partitions": 4,
                                                           "buffer_capacity": 2}}, task="lp"),
    Case("export", _setup_export,
         lambda work: ["export", str(work / "run"), "--what", "predictions", "--out", str(work / "pred.npy")],
         lambda work: (work / "pred.npy").read_bytes(), _run_folder_bytes),
]


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> tuple[Path, Path]:
    """The tiny synthetic store and a finished 1-epoch in-memory run on it (with checkpoints), made clean."""
    from suite.data.synthetic import generate

    root = tmp_path_factory.mktemp("faults-ref")
    generate("tiny", root / "store")
    _write_spec(root, {})
    done = gnnsuite(["run", str(root / "spec.yaml"), "--out", str(root / "runs"), "--quiet"], child_env())
    assert done.returncode == 0, done.stderr
    (run,) = (root / "runs").glob("*/summary.json")
    return root / "store", run.parent


def _fault_env(plan: str, report: Path) -> dict[str, str]:
    return child_env({"GNNSUITE_FAULT": plan, "GNNSUITE_FAULT_REPORT": str(report)})


def _leftovers(work: Path) -> list[str]:
    return [str(p) for p in work.rglob("*") if p.name.startswith(".") and any(m in p.name for m in STAGING_MARKS)
            or p.name.endswith(".lock")]


def _looks_complete_but_is_not(work: Path, reference_result: object, case: Case) -> list[str]:
    """Store folders that do not verify, npy folders without metadata, summaries saying completed with another
    result."""
    problems = []
    for meta in work.rglob("metadata.json"):
        try:
            GraphStore.open(meta.parent).verify()
        except Exception as err:  # noqa: BLE001 - any failure is the finding
            problems.append(f"{meta.parent}: store does not verify ({err})")
    for folder in {p.parent for p in work.rglob("*.npy")}:
        inside_run = any(part in ("runs", "run") for part in folder.relative_to(work).parts)
        if folder != work and not inside_run and not (folder / "metadata.json").exists():
            problems.append(f"{folder}: .npy files without metadata.json")
    for summary in work.rglob("summary.json"):
        data = json.loads(summary.read_text())
        if data.get("status") == "completed" and case.name.startswith("run") and _summary(summary.parent.parent) \
                != reference_result:
            problems.append(f"{summary}: says completed with another result")
    return problems


def _sample(total: int, size: int, seed: int, sites: list[dict] = ()) -> list[int]:
    """The k to fail: the first and the last operation, the first operation of every site, and ``size - 2`` others
    drawn with ``seed`` (every k with ``GNNSUITE_FAULT_SWEEP=all`` or when there are no more than ``size``)."""
    if os.environ.get("GNNSUITE_FAULT_SWEEP") == "all" or total <= size:
        return list(range(1, total + 1))
    middle = random.Random(seed).sample(range(2, total), max(size - 2, 0))
    return sorted({1, total, *middle, *(site["first"] for site in sites)})


def _sweep(case: Case, reference: tuple[Path, Path], tmp_path: Path, size: int, cli: Callable,
           site_sweep: bool = False) -> dict:
    store, run = reference
    clean = tmp_path / "clean"
    clean.mkdir()
    case.setup(clean, store, run)
    intact = case.intact(clean)
    report = tmp_path / "report.json"
    done = cli(case.argv(clean), _fault_env("count", report))
    assert done.returncode == 0, done.stderr
    counted = json.loads(report.read_text())
    counts, sites = counted["counts"], counted["sites"] if site_sweep else []
    expected = case.result(clean)
    assert case.intact(clean) == intact or case.name == "generate"
    tally = {"operations": counts, "sites": len(counted["sites"]), "swept": 0, "injected": 0, "clean_errors": 0,
             "absorbed": 0, "other": []}
    for index, k in enumerate(_sample(counts["total"], size, seed=len(case.name), sites=sites)):
        kind = KINDS[index % len(KINDS)]
        work = tmp_path / f"k{k}-{kind}"
        work.mkdir()
        case.setup(work, store, run)
        report.unlink(missing_ok=True)
        failed = cli(case.argv(work), _fault_env(f"k={k},error={kind}", report))
        injected = json.loads(report.read_text())["injected"]
        tally["swept"] += 1
        problems = []
        if injected is None:
            problems += [] if failed.returncode == 0 else [f"no fault injected but exit {failed.returncode}"]
        else:
            tally["injected"] += 1
            if failed.returncode == 0:
                if case.result(work) != expected:
                    problems.append(f"fault at {injected} absorbed with another result")
                else:
                    tally["absorbed"] += 1
            else:
                problems += _error_problems(failed, injected)
        problems += [f"leftover {p}" for p in _leftovers(work)]
        problems += _looks_complete_but_is_not(work, expected, case)
        try:
            if case.intact(work) != intact:
                problems.append("the previous state changed")
        except Exception as err:  # noqa: BLE001
            problems.append(f"the previous state is broken ({err})")
        rerun = cli(case.argv(work), child_env())
        if rerun.returncode != 0:
            problems.append(f"rerun without the fault: exit {rerun.returncode}: {rerun.stderr.strip()[-300:]}")
        elif case.result(work) != expected:
            problems.append("rerun without the fault: another result")
        if problems:
            tally["other"].append({"k": k, "error": kind, "injected": injected, "problems": problems})
        elif injected is not None and failed.returncode != 0:
            tally["clean_errors"] += 1
        shutil.rmtree(work, ignore_errors=True)
    return tally


def _error_problems(done, injected: dict) -> list[str]:
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("gnnsuite: error: ")]
    problems = []
    if done.returncode != 2:
        problems.append(f"exit {done.returncode}, expected 2")
    if "Traceback" in done.stderr or len(errors) != 1:
        problems.append(f"not one error line: {done.stderr.strip()[-400:]}")
        return problems
    enospc = injected["error"] == "ENOSPC" or (injected["error"] == "short" and injected["op"] == "write")
    cause = "(ENOSPC)" if enospc and injected["op"] != "read" else "(EIO)"
    if cause not in errors[0]:
        problems.append(f"cause {cause} not named: {errors[0]}")
    if Path(injected["path"]).name not in errors[0]:
        problems.append(f"file {Path(injected['path']).name} not named: {errors[0]}")
    return problems


def _record(case: Case, tally: dict) -> None:
    target = os.environ.get("GNNSUITE_FAULT_SWEEP_REPORT")
    if target:
        path = Path(target)
        data = json.loads(path.read_text()) if path.exists() else {}
        data[case.name] = tally
        path.write_text(json.dumps(data, indent=2))


@pytest.mark.parametrize("case", [c for c in CASES if c.name == "generate"], ids=lambda c: c.name)
def test_sampled_faults_give_one_line_and_lose_nothing(case, reference, tmp_path, cli):
    """The default run's sample: four k of ``datasets generate`` (every command is swept with -m slow)."""
    size = 4
    tally = _sweep(case, reference, tmp_path, size=size, cli=cli)
    _record(case, tally)
    assert tally["injected"] >= min(size, 3)
    assert not tally["other"], json.dumps(tally["other"], indent=1)


@pytest.mark.slow
@pytest.mark.timeout(3600)
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_fault_sweep(case, reference, tmp_path, cli):
    tally = _sweep(case, reference, tmp_path, size=int(os.environ.get("GNNSUITE_FAULT_SWEEP_SIZE", "10")), cli=cli,
                   site_sweep=True)
    _record(case, tally)
    assert not tally["other"], json.dumps(tally["other"], indent=1)


@pytest.mark.parametrize("case", [c for c in CASES if c.name == "run-disk-nc"], ids=lambda c: c.name)
def test_a_forked_command_counts_what_a_fresh_interpreter_counts(case, reference, tmp_path, cli):
    """The sweep's forked commands are the commands: the same operations at the same sites, the same result, and a
    fault at the same k gives the same error line as in ``python -m suite``."""
    store, run = reference
    outcomes = []
    for runner in (gnnsuite, cli):  # in the same folders, so that paths and run ids agree
        work, faulted = tmp_path / "work", tmp_path / "faulted"
        for folder in (work, faulted):
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            case.setup(folder, store, run)
        report = tmp_path / "report.json"
        done = runner(case.argv(work), _fault_env("count", report))
        assert done.returncode == 0, done.stderr
        counted = json.loads(report.read_text())
        k = counted["sites"][len(counted["sites"]) // 2]["first"]
        failed = runner(case.argv(faulted), _fault_env(f"k={k},error=EIO", tmp_path / "faulted.json"))
        outcomes.append((counted["counts"], [(s["op"], s["caller"], s["first"], s["n"]) for s in counted["sites"]],
                         case.result(work), failed.returncode, failed.stderr))
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][3] == 2 and "(EIO)" in outcomes[0][4]


# ---------------------------------------------------------------------------------------------- the seam itself
def test_fault_plans_parse_and_bad_ones_name_the_variable():
    from suite.faults import FaultPlan, parse_plan

    assert parse_plan("count") == FaultPlan()
    assert parse_plan("k=17,error=EIO,op=fsync") == FaultPlan(k=17, op="fsync", error="EIO")
    for bad in ("k=0", "k=x", "k=3,error=EPERM", "k=3,op=seek", "17"):
        with pytest.raises(ValueError, match="GNNSUITE_FAULT"):
            parse_plan(bad)


def test_count_mode_reports_each_site_with_its_first_and_last_operation(tmp_path):
    """Two call sites of one helper are two sites; a site's operations keep its first and last k."""
    import subprocess
    import sys

    script = tmp_path / "tests" / "writer.py"
    script.parent.mkdir()
    script.write_text(
        "import sys\n"
        "from suite import io\n"
        "def write(path):\n"
        "    io.atomic_write_bytes(path, b'x')\n"
        "out = sys.argv[1]\n"
        "for i in range(3):\n"
        "    write(f'{out}/a{i}')\n"
        "write(f'{out}/b')\n")
    report = tmp_path / "report.json"
    env = {**child_env(), "GNNSUITE_FAULT": "count", "GNNSUITE_FAULT_REPORT": str(report),
           "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    done = subprocess.run([sys.executable, str(script), str(tmp_path)], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    counted = json.loads(report.read_text())
    per_write = counted["counts"]["total"] // 4
    assert counted["counts"]["total"] == 4 * per_write
    by_caller = {}
    for site in counted["sites"]:
        by_caller.setdefault(site["caller"], []).append(site)
    # the seam's helper is called by write() (line 4), which is called from two places: the loop (7) and line 8
    assert set(by_caller) == {"tests/writer.py:write:4 < tests/writer.py:<module>:7",
                              "tests/writer.py:write:4 < tests/writer.py:<module>:8"}
    loop, last = (by_caller[f"tests/writer.py:write:4 < tests/writer.py:<module>:{line}"] for line in (7, 8))
    assert len(loop) == len(last) == per_write                  # one site per kind of operation of each caller
    assert all(site["n"] == 3 for site in loop) and all(site["n"] == 1 for site in last)
    assert sorted(site["first"] for site in loop) == list(range(1, per_write + 1))
    assert sorted(site["last"] for site in loop) == list(range(2 * per_write + 1, 3 * per_write + 1))
    assert sorted(site["first"] for site in last) == list(range(3 * per_write + 1, 4 * per_write + 1))


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full (a device that is always full)")
def test_a_real_full_device_is_an_error_naming_the_file():
    """/dev/full answers every write with ENOSPC: the buffered write's error (which names no file) gets its name."""
    import errno

    from suite.errors import os_error_line
    from suite.io import writing, write_to

    with pytest.raises(OSError) as caught:
        with writing("/dev/full", "wb") as handle:
            write_to(handle, b"x" * (1 << 20), "/dev/full")
    assert caught.value.errno == errno.ENOSPC and caught.value.filename == "/dev/full"
    assert os_error_line(caught.value) == "/dev/full: no space left on device (ENOSPC)"


def test_the_cli_prints_an_os_error_as_one_line(tmp_path):
    """An OSError under a command, even one naming no file, is one line and exit status 2 (no traceback)."""
    store = tmp_path / "store"
    done = gnnsuite(["datasets", "generate", "--preset", "tiny", "--out", str(store), "--quiet"],
                    child_env({"GNNSUITE_FAULT": "k=1,op=fsync,error=EIO"}))
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].startswith("gnnsuite: error: ")
    assert "input/output error (EIO)" in done.stderr and "Traceback" not in done.stderr
    assert not store.exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".store.partial-")]
