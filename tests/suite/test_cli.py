"""The gnnsuite command line: datasets, run, grid and results commands; exit codes and one-line errors."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from suite.cli import main
from tests.support.paths import REPO_ROOT
from tests.support.processes import child_env


def _one_line_error(result: subprocess.CompletedProcess, *fragments: str) -> None:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gnnsuite: error: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def test_generate_info_verify_and_partition(tmp_path, capsys):
    out = tmp_path / "tiny"
    assert main(["datasets", "generate", "--preset", "tiny", "--num-nodes", "200", "--out", str(out), "--quiet",
                 "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["num_nodes"] == 200 and info["name"] == "tiny"
    assert main(["datasets", "info", str(out), "--verify", "--json", "--quiet"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["verified"] is True and info["open_s"] < 1
    assert main(["datasets", "partition", str(out), "-p", "4", "--order", "random", "--quiet", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["partitioning"]["num_partitions"] == 4
    assert (tmp_path / "tiny-p4-random" / "bucket_row_offsets.npy").exists()


def test_prepare_real_datasets(tmp_path, shared_datasets, capsys):
    assert main(["datasets", "prepare", "cora", "--root", str(shared_datasets / "planetoid"),
                 "--out", str(tmp_path / "cora"), "--json", "--quiet"]) == 0
    cora = json.loads(capsys.readouterr().out)
    assert (cora["num_nodes"], cora["num_edges"], cora["train_nodes"]) == (2708, 10556, 140)
    assert main(["datasets", "prepare", "fb15k237", "--root", str(shared_datasets / "fb15k237"),
                 "--out", str(tmp_path / "fb"), "--json", "--quiet"]) == 0
    fb = json.loads(capsys.readouterr().out)
    assert (fb["num_nodes"], fb["num_relations"], fb["train_edges"]) == (14541, 237, 272115)


def test_bad_input_exits_2_with_one_line(tmp_path, cli):
    def command(*args: str) -> subprocess.CompletedProcess:
        return cli(list(args), child_env(), cwd=REPO_ROOT)

    _one_line_error(command("datasets", "generate", "--preset", "nope", "--out", str(tmp_path / "x")),
                    "unknown preset 'nope'", "tiny")
    _one_line_error(command("datasets", "generate", "--num-nodes", "-5", "--out", str(tmp_path / "x")), "num_nodes")
    _one_line_error(command("datasets", "info", str(tmp_path)), f"{tmp_path}/metadata.json: missing")
    _one_line_error(command("datasets", "prepare", "imagenet", "--root", str(tmp_path), "--out", str(tmp_path / "y")),
                    "unknown dataset loader 'imagenet'")
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()


def test_run_errors_name_file_and_field_and_leave_no_run(tmp_path, cli):
    def command(*args: str) -> subprocess.CompletedProcess:
        return cli(list(args), child_env(), cwd=REPO_ROOT)

    spec = tmp_path / "spec.yaml"
    spec.write_text("dataset: {name: synthetic, preset: tiny}\nsystem: {name: warp}\n")
    _one_line_error(command("run", str(spec), "--out", str(tmp_path / "runs")), "spec.yaml: system.name", "'warp'")
    spec.write_text(f"dataset: {{name: cora, root: {tmp_path / 'absent'}}}\n")
    _one_line_error(command("run", str(spec), "--out", str(tmp_path / "runs")), "spec.yaml: dataset.root", "absent")
    _one_line_error(command("run", str(spec), "--set", "model.fanouts=[1]", "--out", str(tmp_path / "runs")),
                    "spec.yaml: model.fanouts: expected 2 entries")
    assert not (tmp_path / "runs").exists()


def test_run_grid_and_results(tmp_path, capsys):
    spec = tmp_path / "spec.yaml"
    spec.write_text(f"dataset: {{name: synthetic, preset: tiny, cache_dir: {tmp_path / 'data'}}}\n"
                    "model: {num_layers: 1, fanouts: [3], hidden_dim: 8}\ntraining: {epochs: 1}\n")
    assert main(["run", str(spec), "--out", str(tmp_path / "runs"), "--quiet"]) == 0
    assert "completed" in capsys.readouterr().out
    grid = tmp_path / "grid.yaml"
    grid.write_text("base: spec.yaml\naxes: {seed: [0, 1]}\n")
    assert main(["grid", str(grid), "--out", str(tmp_path / "runs"), "--quiet"]) == 0
    assert "1 ran, 1 already complete, 0 failed" in capsys.readouterr().out
    assert main(["results", str(tmp_path / "runs"), "--export", str(tmp_path / "runs.csv"),
                 "--export-epochs", str(tmp_path / "epochs.parquet")]) == 0
    printed = capsys.readouterr().out
    assert printed.count("completed") == 2
    assert (tmp_path / "runs.csv").read_text().count("\n") == 3 and (tmp_path / "epochs.parquet").exists()


def _as_from_a_shell() -> None:
    """In the child before exec: SIGINT delivered and at its default, as a command started from a shell has it (a
    test runner's worker may ignore or block it, and a child inherits that: twice in full runs the generation went
    on to the end after its SIGINT, while the test alone passed)."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_interrupted_generation_leaves_no_store(tmp_path, sig):
    out = tmp_path / "big"
    process = subprocess.Popen(
        [sys.executable, "-m", "suite", "datasets", "generate", "--preset", "arxiv-like", "--num-nodes", "1000000",
         "--out", str(out), "--quiet"], cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=_as_from_a_shell)
    deadline = time.monotonic() + 60
    while not any(p.name.startswith(".big.partial") for p in tmp_path.iterdir()):
        assert time.monotonic() < deadline and process.poll() is None, "generation did not start"
        time.sleep(0.05)
    time.sleep(1.0)
    process.send_signal(sig)
    _, stderr = process.communicate(timeout=60)
    # failed once, with 2.5 times more work than cores, for a reason not found: say what the process did
    assert not out.exists(), f"exit {process.returncode}: {stderr[-2000:]}"
    if sig == signal.SIGINT:
        assert process.returncode == 130 and "interrupted" in stderr
        assert os.listdir(tmp_path) == []  # the staging folder was removed too
    else:
        assert process.returncode == -signal.SIGKILL  # the staging folder stays hidden, never at `out`


def test_only_the_subcommands_that_need_torch_import_it_to_build_their_parser():
    code = ("import json, sys; from suite.cli import build_parser; args = build_parser(sys.argv[1:])"
            ".parse_args(sys.argv[1:]); print(json.dumps(['torch' in sys.modules, args.command]))")

    def parsed(*argv: str) -> tuple[bool, str]:
        done = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, cwd=REPO_ROOT,
                              timeout=300, check=True)
        return tuple(json.loads(done.stdout))

    assert parsed("results", "out") == (False, "results")
    assert parsed("run", "spec.yaml") == (False, "run")
    assert parsed("eval", "out/run") == (False, "eval")
    assert parsed("datasets", "partition", "data/x", "-p", "4") == (True, "datasets")  # lists loaders, orderings
    assert parsed("export", "out/run", "--what", "embeddings", "--out", "e.npy") == (True, "export")


def test_a_command_line_imports_only_the_upper_layer_module_of_its_subcommand():
    from importlib.metadata import entry_points

    from suite.cli import COMMANDS_GROUP

    code = ("import json, sys; from suite.cli import build_parser; build_parser(sys.argv[1:]); print(json.dumps("
            "sorted(m for m in sys.modules if m.split('.')[0] in ('experiments', 'simulators'))))")

    def upper_modules(*argv: str) -> set[str]:
        done = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, cwd=REPO_ROOT,
                              timeout=300, check=True)
        return set(json.loads(done.stdout))

    assert upper_modules("run", "spec.yaml") == set()
    assert upper_modules("workdepth", "--help") == {"simulators", "simulators.commands"}
    assert {"experiments.reproduce", "experiments.simulator_commands", "simulators.commands"} <= upper_modules("--help")
    for entry in entry_points(group=COMMANDS_GROUP):  # each entry point is named after a subcommand it adds
        from suite.cli import build_parser

        commands = build_parser([entry.name])._subparsers._group_actions[0].choices  # noqa: SLF001
        assert entry.name in commands, entry
