"""A real full disk (issue 34, item 2): ``datasets generate``, ``datasets partition`` and ``run`` write into a
size-limited tmpfs until it is full, through the real CLI in a process of its own (forked from a server that has
the libraries imported: the ``cli`` fixture).

Each time: exit 2 with one line naming a file on the full disk and ENOSPC, no traceback; nothing left that looks
complete but is not (every store folder on the disk verifies, no ``summary.json`` says completed, no staging
leftovers); then the same command, once space is freed (the filler file deleted, or the tmpfs grown), completes with
the result of a run on an ordinary disk. Skipped, with the reason, where a tmpfs cannot be mounted (not root, mount
refused).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from suite.data.store import GraphStore
from tests.support.processes import child_env
from tests.support.tmpfs import PAGE, fill, resize, tmpfs, tmpfs_unavailable, tree_bytes

STAGING_MARKS = (".partial-", ".old-", ".tmp-")
MOUNT_BYTES = 4 << 20


@pytest.fixture(scope="module")
def mountable(tmp_path_factory) -> None:
    reason = tmpfs_unavailable(tmp_path_factory.mktemp("tmpfs-probe"))
    if reason:
        pytest.skip(reason)


@dataclass(frozen=True)
class Command:
    """A command writing ``output`` (a folder on the disk under test), and what a complete output holds."""

    name: str
    argv: Callable[[Path, Path], list[str]]  # (inputs, disk) -> argv
    output: str
    result: Callable[[Path], object]


def _store_checksums(path: Path) -> dict[str, str]:
    store = GraphStore.open(path)
    store.verify()
    return {key: entry["checksum"] for key, entry in store.metadata["files"].items()}


def _run_result(runs: Path) -> dict:
    (summary,) = runs.glob("*/summary.json")
    data = json.loads(summary.read_text())
    return {"status": data["status"], "metrics": data["metrics"], "loss": data["loss"]}


COMMANDS = [
    Command("generate", lambda inputs, disk: ["datasets", "generate", "--preset", "tiny", "--out", str(disk / "out"),
                                              "--quiet"], "out", _store_checksums),
    Command("partition", lambda inputs, disk: ["datasets", "partition", str(inputs / "store"), "-p", "4", "--out",
                                               str(disk / "out"), "--quiet"], "out", _store_checksums),
    Command("run", lambda inputs, disk: ["run", str(inputs / "spec.yaml"), "--out", str(disk / "out"), "--quiet"],
            "out", _run_result),
]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    """The tiny store and a 2-epoch in-memory run spec with checkpoints, on an ordinary disk."""
    from suite.data.synthetic import generate

    root = tmp_path_factory.mktemp("full-disk-inputs")
    generate("tiny", root / "store")
    spec = {"dataset": {"name": "store", "root": str(root / "store")}, "seed": 0, "system": {"device": "cpu"},
            "model": {"encoder": "graphsage", "num_layers": 2, "hidden_dim": 16, "fanouts": [5, 5]},
            "training": {"epochs": 2, "batch_size": 64, "checkpoint_every": 1}}
    (root / "spec.yaml").write_text(yaml.safe_dump(spec))
    return root


@pytest.fixture(scope="module")
def references(inputs, tmp_path_factory, cli) -> dict[str, tuple[object, int]]:
    """Each command's result and output size on an ordinary disk."""
    out = {}
    for command in COMMANDS:
        disk = tmp_path_factory.mktemp(f"reference-{command.name}")
        done = cli(command.argv(inputs, disk), child_env())
        assert done.returncode == 0, done.stderr
        out[command.name] = (command.result(disk / command.output), tree_bytes(disk / command.output))
    return out


def _problems_left(disk: Path) -> list[str]:
    """What on the disk looks complete but is not, and staging leftovers."""
    problems = []
    for meta in disk.rglob("metadata.json"):
        try:
            GraphStore.open(meta.parent).verify()
        except Exception as err:  # noqa: BLE001 - any failure is the finding
            problems.append(f"{meta.parent}: store does not verify ({err})")
    for summary in disk.rglob("summary.json"):
        if json.loads(summary.read_text()).get("status") == "completed":
            problems.append(f"{summary}: says completed on a disk that filled up")
    problems += [f"leftover {p}" for p in disk.rglob("*") if any(m in p.name for m in STAGING_MARKS)]
    return problems


def _check_one_line_enospc(done, disk: Path) -> None:
    assert done.returncode == 2, f"exit {done.returncode}: {done.stderr[-600:]}"
    assert "Traceback" not in done.stderr, done.stderr[-600:]
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("gnnsuite: error: "), done.stderr
    assert "ENOSPC" in lines[0] or "No space left" in lines[0], lines[0]
    assert str(disk) in lines[0], f"no file on the full disk named: {lines[0]}"


@pytest.mark.parametrize("fraction", [0.3, pytest.param(0.7, marks=pytest.mark.slow)])  # 0.7: with -m slow
@pytest.mark.parametrize("command", [c if c.name == "run" else pytest.param(c, marks=pytest.mark.slow)
                                     for c in COMMANDS], ids=lambda c: c.name)  # store commands: -m slow
def test_full_disk_gives_one_line_loses_nothing_and_completes_once_freed(
        command, fraction, mountable, inputs, references, tmp_path, cli):
    expected, size = references[command.name]
    leave = max(int(size * fraction) // PAGE * PAGE, PAGE)
    with tmpfs(tmp_path / "disk", MOUNT_BYTES) as disk:
        filler = fill(disk, leave)
        failed = cli(command.argv(inputs, disk), child_env())
        _check_one_line_enospc(failed, disk)
        assert _problems_left(disk) == []
        filler.unlink()
        if (disk / command.output).exists():  # what a failed command leaves must not block its rerun
            assert not (disk / command.output / "metadata.json").exists()
        done = cli(command.argv(inputs, disk), child_env())
        assert done.returncode == 0, done.stderr[-600:]
        assert command.result(disk / command.output) == expected


@pytest.mark.slow
def test_a_grown_disk_lets_the_same_run_complete(mountable, inputs, references, tmp_path, cli):
    """The run again, this time freed by growing the tmpfs (``mount -o remount,size=``) rather than deleting."""
    expected, size = references["run"]
    mount = tmp_path / "disk"
    with tmpfs(mount, size // 2 // PAGE * PAGE) as disk:
        failed = cli(["run", str(inputs / "spec.yaml"), "--out", str(disk / "out"), "--quiet"], child_env())
        _check_one_line_enospc(failed, disk)
        assert _problems_left(disk) == []
        resize(disk, 4 * size)
        done = cli(["run", str(inputs / "spec.yaml"), "--out", str(disk / "out"), "--quiet"], child_env())
        assert done.returncode == 0, done.stderr[-600:]
        assert _run_result(disk / "out") == expected
        shutil.rmtree(disk / "out")
