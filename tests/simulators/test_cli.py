"""``gnnsuite workdepth`` and ``gnnsuite simulate-async`` (simulators/cli.py)."""

from __future__ import annotations

import pytest

from suite.cli import main
from tests.support.paths import REPO_ROOT


def _one_line_error(capsys, *fragments: str) -> None:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("gnnsuite: error: "), err
    for fragment in fragments:
        assert fragment in err[0], err[0]


def test_workdepth_table_evaluated_and_counted(capsys):
    assert main(["workdepth", "--model", "gat", "--n", "64", "--m", "256", "--k", "8", "--L", "2", "--d", "4",
                 "--count"]) == 0
    out = capsys.readouterr().out
    assert "O(L(nk^2 + mk))" in out and "counted_forward_work" in out


def test_workdepth_all_models(capsys):
    assert main(["workdepth"]) == 0
    out = capsys.readouterr().out
    for model in ("gcn", "graphsage", "gin", "gat", "attention", "mpnn", "linear", "sgc", "ppnp"):
        assert any(line.split()[:1] == [model] for line in out.splitlines()), model


@pytest.mark.parametrize("argv,fragments", [
    (["workdepth", "--model", "transformer"], ["unknown work-depth model 'transformer'", "gcn"]),
    (["workdepth", "--n", "10"], ["give all of --n --m --k --L --d", "--m"]),
    (["workdepth", "--n", "10", "--m", "100", "--k", "4", "--L", "1", "--d", "3", "--count"], ["d <= m <= n d"]),
])
def test_workdepth_errors(capsys, argv, fragments):
    assert main(argv) == 2
    _one_line_error(capsys, *fragments)


def test_simulate_async_writes_outputs(tmp_path, capsys):
    spec = tmp_path / "spec.yaml"
    spec.write_text("graph: {kind: uniform, num_nodes: 400, num_edges: 4000, max_degree: 20, num_partitions: 4}\n"
                    "durations: {source: fixed, forward: {aggregate: 1.0, update: 2.0, activation: 0.5}}\n"
                    "pipeline: {layers: 2, iterations: 2}\n")
    assert main(["simulate-async", str(spec), "--out", str(tmp_path / "out"), "--set", "pipeline.staleness_bound=2"]
                ) == 0
    out = capsys.readouterr().out
    assert "async-async" in out and "sync-sync" in out
    assert (tmp_path / "out" / "summary.csv").exists() and (tmp_path / "out" / "tasks.csv").exists()


def test_simulate_async_bad_field_is_one_line(tmp_path, capsys):
    spec = tmp_path / "bad.yaml"
    spec.write_text("graph: {kind: uniform, num_nodes: 400, num_edges: 4000, max_degree: 20, num_partitions: 4}\n"
                    "durations: {source: fixed, forward: {aggregate: 1.0, update: 2.0, activation: 0.5}}\n"
                    "pipeline: {layers: 2, staleness_bound: -1}\n")
    assert main(["simulate-async", str(spec)]) == 2
    _one_line_error(capsys, f"{spec}: pipeline.staleness_bound:")
    assert main(["simulate-async", str(tmp_path / "missing.yaml")]) == 2
    _one_line_error(capsys, "missing.yaml: file not found")


def test_shipped_spec_validates():
    from simulators.async_gnn import load_async_spec

    spec = load_async_spec(REPO_ROOT / "experiments" / "specs" / "async_gnn.yaml")
    assert spec.graph.num_partitions == 4 and len(spec.modes) == 4
