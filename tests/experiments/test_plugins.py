"""The experiments' registration tables: a figure is one module registered by one line (its job, plots, claims and
table specs), a peer one module and one line; the report, the comparison and reproduce read only the tables."""

from __future__ import annotations

import subprocess
import sys

import pytest

from experiments import compare, draw, plugins, report
from experiments.common import SPECS, Figure
from experiments.style import color_of, display_label
from experiments.peers import Peer, split_runnable
from suite.config import load_spec


def test_knowing_the_figures_imports_none_of_them():
    code = ("import sys; from experiments import plugins, reproduce; names = plugins.figure_names(); "
            "assert 'cost' in plugins.FIGURES; "
            "print(sorted(m for m in sys.modules if m.removeprefix('experiments.') in names))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_every_registered_figure_is_one_module_with_its_job_plots_claims_and_tables():
    for name in plugins.figure_names():
        figure = plugins.FIGURES.get(name)
        assert isinstance(figure, Figure) and figure.name == name
        assert plugins.FIGURE_TABLE[name] == f"{figure.experiment}:FIGURE"
        for plot in figure.plots:  # every figure it draws is one of its outputs, from one of its tables
            assert f"{plot.name}.png" in figure.outputs and plot.draw.__module__ == figure.experiment
        for item in figure.claims:
            assert item.check.__module__ == figure.experiment and set(item.source) <= set(figure.outputs)
        assert set(figure.tables) <= set(figure.outputs), name


def test_jobs_that_read_other_jobs_runs_come_after_them():
    names = plugins.figure_names()
    assert names.index("pipeline_validation") > names.index("pipeline")
    assert names[-1] == "cost"


def test_the_report_lists_the_paper_s_claims_then_those_against_peers():
    claims = report.claims().in_order()
    assert [c.peer for c in claims] == sorted(c.peer for c in claims)
    assert [c.name for c in claims if c.peer] == ["dense-vs-pyg", "lp-vs-pbg", "lp-time-to-mrr"]
    assert [c.name for c in claims][:3] == ["dense-speedup", "pipeline-utilization", "async-accuracy"]


def test_the_compared_tables_are_those_the_figures_list():
    tables = compare.tables()
    assert list(tables)[:2] == ["sampling.csv", "pipeline_speed.csv"] and list(tables)[-1] == "cost.csv"
    assert tables["buffer_io.csv"].exact == ("swaps", "bytes_read", "bytes_written", "epoch_time_prefetch_s")


def test_every_plot_is_drawable_by_name():
    assert {"sampling", "disk_nc_timeline", "async_gnn_gantt", "work_depth_check"} <= set(draw.plots())
    with pytest.raises(SystemExit):
        draw.main(["nope"])


def test_a_sampler_appears_by_registration():
    from experiments.figures.sampling import sampler_styles

    styles = sampler_styles(["naive", "dense", "pyg", "naive-torch", "toy"])
    assert styles["dense"][:2] == ("s", "DENSE")
    assert styles["naive-torch"][1] == "naive (layer-wise, DGL-style), torch backend"
    assert styles["toy"][1] == "toy"  # not registered here: its name
    assert len({marker for marker, _, _ in styles.values()}) == len(styles)
    assert display_label("SAMPLERS", "pyg") == "PyG NeighborSampler"
    assert color_of("a-new-policy") == color_of("a-new-policy") != color_of("dense")


def _spec(system: str, sampler: str):
    return load_spec(SPECS / "cora.yaml", [f"system.name={system}", f"sampler.name={sampler}"])


def test_a_peer_is_one_registered_object_that_says_what_it_needs():
    pyg = plugins.PEERS.get("pyg")
    assert isinstance(pyg, Peer) and plugins.PEER_TABLE["pyg"] == "experiments.peers.pyg:PEER"
    spec, peer_spec = _spec("in_memory", "dense"), _spec("in_memory", "pyg")
    assert not pyg.needs(spec) and pyg.needs(peer_spec)
    runnable, skipped = split_runnable([spec, peer_spec])
    reason = pyg.missing_reason()
    assert runnable == ([spec, peer_spec] if reason is None else [spec])
    assert skipped == ([] if reason is None else [(peer_spec, reason)])


def test_the_link_prediction_peers_run_every_registered_peer_s_configurations():
    from experiments.figures import link_prediction_peers

    peers = [plugins.PEERS.get(name) for name in plugins.PEER_TABLE]
    supplied = [c.name for peer in peers for c in peer.link_prediction]
    assert supplied == ["pbg-p1", "pbg-p8", "pykeen"]
    suite = ["suite", "suite-bf16", "suite-bf16-all", "suite-pipelined", "suite-hogwild"]
    assert link_prediction_peers.CONFIGURATIONS.names_in_order() == [*suite, *supplied]
    assert link_prediction_peers.DEFAULT_CONFIGURATIONS == ("suite", "suite-bf16-all", *supplied)
    assert link_prediction_peers.QUICK_CONFIGURATIONS == ("suite", "pbg-p1", "pbg-p8")
    assert not any(peer.needs(_spec("in_memory", "dense")) for peer in peers if peer.link_prediction)


def test_every_registered_figure_is_a_job_of_the_independent_figures_package():
    import tomllib

    from experiments.common import REPO_ROOT

    contracts = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    jobs = next(c for c in contracts if c["name"].startswith("The figure jobs are independent"))
    assert jobs["modules"] == ["experiments.figures.*"]
    modules = [target.split(":")[0] for target in plugins.FIGURE_TABLE.values()]
    assert [m for m in modules if m.rpartition(".")[0] != "experiments.figures"] == []
