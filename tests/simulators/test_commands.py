"""``gnnsuite workdepth`` (simulators/commands.py) and the shipped asynchronous-pipeline spec."""

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


def test_shipped_spec_validates():
    from simulators.async_gnn_model import load_async_spec

    spec = load_async_spec(REPO_ROOT / "experiments" / "specs" / "async_gnn.yaml")
    assert spec.graph.num_partitions == 4 and len(spec.modes) == 4
