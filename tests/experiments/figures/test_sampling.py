"""The sampling experiment (experiments/figures/sampling.py) and its figure, on tiny generated graphs."""

from __future__ import annotations

import json
import shutil
from types import SimpleNamespace

import pandas as pd
import pytest
import torch

from experiments.figures import sampling
from systems.sampling.pyg import PygSampler

SAMPLERS = ("naive", "dense", "pyg")


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """One quick run on 3,000-node versions of both settings, 1 to 5 layers: (table read back, csv path)."""
    root = tmp_path_factory.mktemp("sampling")
    csv = root / "sampling.csv"
    sampling.main(["--quick", "--num-nodes", "3000", "--repeats", "1", "--warmup", "0", "--threads", "1",
                   "--data-dir", str(root / "data"), "--csv", str(csv), "--no-plot", "--samplers", *SAMPLERS])
    return pd.read_csv(csv), csv


def test_csv_schema_and_grid(recorded):
    table, _ = recorded
    assert tuple(table.columns) == sampling.COLUMNS
    assert set(table["setting"]) == {"livejournal", "papers"}
    for (setting, layers), rows in table.groupby(["setting", "layers"]):
        assert sorted(rows["sampler"]) == sorted(SAMPLERS), (setting, layers)
    assert sorted(table["layers"].unique()) == [1, 2, 3, 4, 5]
    measured = table[table["sampler"].isin(["naive", "dense"])]
    assert (measured["status"] == "ok").all()
    assert (measured["time_s"] > 0).all() and (measured["repeats"] == 1).all()
    assert (table["threads"] == 1).all() and table["git_sha"].notna().all() and table["torch"].notna().all()
    assert table["date"].notna().all()
    ok = table[table["status"] == "ok"]  # every measured configuration records the machine's foreign load
    assert ok["under_load"].notna().all() and (ok["foreign_cores"] >= 0).all()
    lj = table[table["setting"] == "livejournal"]
    assert (lj["direction"] == "out").all() and (lj["fanouts"].iloc[-1] == "20-20-20-20-20")
    papers = table[table["setting"] == "papers"].sort_values("layers")
    assert list(papers[papers["sampler"] == "dense"]["fanouts"]) == ["15", "15-10", "15-10-5", "15-10-5-5",
                                                                      "15-10-5-5-5"]
    assert (papers["direction"] == "in").all() and (papers["root_pool"] == "train").all()


def test_pyg_row_present_or_skipped_with_reason(recorded):
    table, _ = recorded
    pyg = table[table["sampler"] == "pyg"]
    assert len(pyg) == 10
    if PygSampler.missing_reason() is not None:
        assert (pyg["status"] == "skipped").all()
        assert (pyg["reason"] == "pyg-lib/torch-sparse not installed").all()
        assert pyg["time_s"].isna().all()
    else:
        assert (pyg["status"] == "ok").all()


def test_ratios_are_computed_from_the_rows(recorded):
    table, _ = recorded
    ok = table[table["status"] == "ok"].set_index(["setting", "layers", "sampler"])
    for (setting, layers, sampler), row in ok.iterrows():
        dense = ok.loc[(setting, layers, "dense")]
        mine, theirs = json.loads(row["times_s"]), json.loads(dense["times_s"])
        assert len(mine) == row["repeats"] == 1 and row["paired_repeats"] == 1
        assert row["time_ratio_vs_dense"] == pytest.approx(mine[0] / theirs[0])  # one pair: its ratio...
        assert pd.isna(row["time_ratio_vs_dense_ci_low"])  # ...and no interval
        assert row["edges_ratio_vs_dense"] == pytest.approx(row["sampled_edges"] / dense["sampled_edges"])
        if sampler == "dense":
            assert row["time_ratio_vs_dense"] == pytest.approx(1.0)
    skipped = table[table["status"] == "skipped"]
    assert skipped["time_ratio_vs_dense"].isna().all()


def test_dense_samples_no_more_edges_than_naive(recorded):
    table, _ = recorded
    for (setting, layers), rows in table[table["status"] == "ok"].groupby(["setting", "layers"]):
        by = rows.set_index("sampler")
        assert by.loc["dense", "sampled_edges"] <= by.loc["naive", "sampled_edges"], (setting, layers)
        assert by.loc["dense", "one_hop_calls"] <= by.loc["naive", "one_hop_calls"], (setting, layers)
        if layers == 1:  # both sample the roots' neighbourhoods once
            assert by.loc["dense", "sampled_edges"] == by.loc["naive", "sampled_edges"]


def test_per_hop_counts_are_consistent(recorded):
    table, _ = recorded
    for _, row in table[table["status"] == "ok"].iterrows():
        hops = json.loads(row["unique_nodes_per_hop"])
        assert len(hops) == row["layers"] + 1 and hops[0] == row["num_roots"]
        assert sum(hops) == row["total_unique_nodes"]
        if row["sampler"] == "naive":  # the frontier of hop h holds every node within h - 1 hops
            frontiers = [sum(hops[: h + 1]) for h in range(row["layers"])]
            assert row["one_hop_calls"] == sum(frontiers)
        else:  # each node except the outermost delta is sampled once
            assert row["one_hop_calls"] == sum(hops[:-1])


def test_figure_from_the_csv_alone(recorded, tmp_path, monkeypatch):
    _, csv = recorded
    copy = tmp_path / "copy.csv"
    shutil.copy(csv, copy)
    shutil.rmtree(csv.parent / "data")  # nothing left to recompute from

    def forbidden(*args, **kwargs):
        raise AssertionError("the figure must not recompute")

    monkeypatch.setattr(sampling, "run", forbidden)
    monkeypatch.setattr(sampling, "run_setting", forbidden)
    out = sampling.plot_sampling(copy, tmp_path / "fig" / "sampling.png")
    assert out == tmp_path / "fig" / "sampling.png"
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [p.name for p in out.parent.iterdir()] == ["sampling.png"]  # no temporary left behind
    assert [plot.draw for plot in sampling.FIGURE.plots] == [sampling.plot_sampling]


def test_over_budget_configurations_are_skipped_with_an_estimate(tmp_path):
    csv = tmp_path / "s.csv"
    sampling.main(["--num-nodes", "2000", "--settings", "papers", "--layers", "1", "2", "--samplers", "naive",
                   "--repeats", "1", "--warmup", "0", "--max-memory-gib", "1e-6", "--data-dir",
                   str(tmp_path / "data"), "--csv", str(csv), "--no-plot"])
    table = pd.read_csv(csv)
    assert list(table["status"]) == ["skipped", "skipped"]
    first, second = table.iloc[0], table.iloc[1]
    assert first["reason"].startswith("memory: ~") and first["estimated_edges"] > 0
    assert second["reason"] == "memory: 1 layers were already over budget"


def test_settings_match_the_papers_setup():
    full = sampling.make_settings()
    assert full["livejournal"].preset == "livejournal-like" and full["livejournal"].num_roots == 10_000
    assert full["livejournal"].direction == "out" and full["livejournal"].fanouts == (20,) * 5
    assert full["papers"].preset == "papers-like-s" and full["papers"].num_roots == 1_000
    assert full["papers"].direction == "in" and full["papers"].fanouts[:3] == (15, 10, 5)
    assert full["livejournal"].params == {} and full["papers"].params == {}  # the presets as they are
    quick = sampling.make_settings(quick=True)
    assert quick["papers"].params["num_nodes"] == sampling.QUICK_NODES


def test_pyg_stats_recovers_hops_from_the_edge_order():
    # torch-sparse's order on the graph 0->{1,2}, 1->{3}, 2->{3,4}, 3->{0}, roots [0], 3 hops (checked against
    # torch.ops.torch_sparse.neighbor_sample): targets visited hop by hop, new nodes appended.
    out = SimpleNamespace(row=torch.tensor([1, 2, 3, 3, 4, 0]), col=torch.tensor([0, 0, 1, 2, 2, 3]),
                          num_sampled_nodes=None)
    stats = PygSampler.counts((torch.tensor([0]), out, 3))
    assert stats.sampled_edges == 6
    assert stats.unique_nodes_per_hop == [1, 2, 2, 0]
    assert stats.one_hop_calls == 5


def test_short_configurations_get_extra_rounds_up_to_the_cap(tmp_path):
    csv = tmp_path / "s.csv"
    common = ["--num-nodes", "2000", "--settings", "papers", "--layers", "1", "--samplers", "naive", "dense",
              "--repeats", "2", "--warmup", "0", "--threads", "1", "--data-dir", str(tmp_path / "data"),
              "--csv", str(csv), "--no-plot"]
    sampling.main(common + ["--min-seconds", "1e9", "--max-repeats", "4"])  # always short: rounds up to the cap
    assert list(pd.read_csv(csv)["repeats"]) == [4, 4]
    sampling.main(common + ["--min-seconds", "0"])  # never short: the planned rounds only
    assert list(pd.read_csv(csv)["repeats"]) == [2, 2]


def test_a_newly_registered_sampler_gets_its_rows_and_its_line_in_the_figure(tmp_path, monkeypatch):
    import suite.registry
    from suite.registry import Registry
    from systems import plugins
    from systems.sampling.naive import NaiveSampler

    class EveryOtherRootSampler(NaiveSampler):
        """A toy: the naive sampler on half the roots (registered here only)."""

        label = "every other root"
        variants = {}

        def sample(self, roots, generator):
            return super().sample(roots[::2], generator)

    samplers = Registry("sampler", table=plugins.SAMPLERS)
    samplers.register("toy", EveryOtherRootSampler)
    monkeypatch.setattr(suite.registry, "SAMPLERS", samplers)
    csv = tmp_path / "s.csv"
    sampling.main(["--num-nodes", "2000", "--settings", "papers", "--layers", "1", "--repeats", "1", "--warmup", "0",
                   "--threads", "1", "--data-dir", str(tmp_path / "data"), "--csv", str(csv),
                   "--png", str(tmp_path / "s.png")])
    table = pd.read_csv(csv)
    assert list(table["sampler"]) == ["naive", "dense", "pyg", "toy"]
    toy = table.set_index("sampler").loc["toy"]
    assert toy["status"] == "ok" and toy["unique_nodes_per_hop"].startswith(f"[{(toy['num_roots'] + 1) // 2},")
    assert toy["backend"].startswith(f"{__name__} (")
    assert sampling.sampler_styles(["naive", "toy"])["toy"][1] == "every other root"
    assert (tmp_path / "s.png").is_file()


def test_a_slow_peer_does_not_stop_the_extra_rounds_of_the_compared_samplers():
    # The extra rounds are decided on the compared samplers' own time: a peer whose two calls alone exceed
    # min_seconds used to end every configuration at the planned rounds (papers, 5 layers: 5 naive/DENSE pairs).
    import time

    from systems.sampling.sampler import SampleCounts

    class Toy:
        def __init__(self, seconds: float):
            self.seconds = seconds

        def build(self, graph, fanouts, replace):
            def sample(roots, seed):
                time.sleep(self.seconds)
                return roots

            return sample

        def stats(self, result):
            return SampleCounts(len(result), [len(result)], 1)

    adapters = {"naive": Toy(0.0), "dense": Toy(0.0), "peer": Toy(0.05)}
    plans = {"naive": (0, 2, True), "dense": (0, 2, True), "peer": (0, 2, False)}
    measured = sampling.measure_interleaved(None, (2,), adapters, plans, torch.arange(10), 4, seed=0, replace=False,
                                            min_seconds=0.05, max_repeats=6)
    assert [len(measured[name].times) for name in ("naive", "dense", "peer")] == [6, 6, 2]
