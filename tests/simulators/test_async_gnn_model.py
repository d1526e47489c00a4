"""The SimPy asynchronous GNN pipeline simulator (simulators/async_gnn_model/: spec, partitions, durations, simulation,
tables)."""

from __future__ import annotations

import numpy as np
import pytest

from simulators.async_gnn_model.durations import stage_durations
from simulators.async_gnn_model.partitions import partition_graph
from simulators.async_gnn_model.simulation import simulate, simulate_modes
from simulators.async_gnn_model.spec import MODE_NAMES, async_spec_from_dict
from simulators.async_gnn_model.tables import summary_table, tasks_table
from suite.errors import ConfigError

FORWARD = {"aggregate": 1.0, "update": 2.0, "activation": 0.5}


def spec(partitions=1, layers=1, iterations=1, backward=False, **pipeline):
    return async_spec_from_dict({
        "graph": {"kind": "uniform", "num_nodes": 100 * partitions, "num_edges": 1000 * partitions,
                  "max_degree": 10, "num_partitions": partitions},
        "durations": {"source": "fixed", "forward": FORWARD},
        "pipeline": {"layers": layers, "iterations": iterations, "backward": backward, **pipeline}})


@pytest.mark.parametrize("mode", MODE_NAMES)
def test_one_layer_one_partition_makespan_is_the_sum_of_stages(mode):
    result = simulate(spec(), mode)
    assert result.summary["makespan_s"] == pytest.approx(sum(FORWARD.values()))
    assert len(result.tasks) == 3


def test_sync_pipeline_by_hand():
    # micro-sync, macro-sync, 2 partitions, 2 layers, forward only, 1 worker per (layer, stage):
    # each stage runs its 2 partitions back to back: 2 * (1 + 2 + 0.5) per layer, 2 layers.
    result = simulate(spec(partitions=2, layers=2), "sync-sync")
    assert result.summary["makespan_s"] == pytest.approx(2 * 2 * 3.5)


def test_micro_async_pipelines_the_stages_over_partitions():
    # 1 layer, P partitions, stage times 1, 2, 0.5: the update worker is the bottleneck: 1 + 2P + 0.5.
    result = simulate(spec(partitions=4), "async-sync")
    assert result.summary["makespan_s"] == pytest.approx(1 + 2 * 4 + 0.5)


@pytest.mark.parametrize("backward,fb", [(False, False), (True, False), (True, True)])
def test_async_never_slower_and_staleness_bounded(backward, fb):
    s = spec(partitions=4, layers=3, iterations=3, backward=backward, staleness_bound=2, fb_pipeline=fb, jitter=0.3)
    results = {r.mode: r for r in simulate_modes(s)}
    sync = results["sync-sync"].summary
    for mode, result in results.items():
        assert result.summary["makespan_s"] <= sync["makespan_s"] + 1e-9, mode
        reads = result.reads
        if mode.endswith("-sync"):
            assert (reads.loc[reads["kind"] != "weight", "staleness"] == 0).all()
        assert reads["staleness"].between(0, 2).all()
    assert sync["feature_staleness_max"] == 0 and sync["gradient_staleness_max"] == 0
    if not fb:
        assert all(r.summary["weight_staleness_max"] == 0 for r in results.values())
    assert results["async-async"].summary["makespan_s"] < sync["makespan_s"]


def test_staleness_bound_zero_is_dataflow_without_staleness():
    result = simulate(spec(partitions=4, layers=2, iterations=3, backward=True, staleness_bound=0), "async-async")
    assert (result.reads["staleness"] == 0).all()


def test_staleness_grows_with_the_bound_and_throughput_too():
    times = []
    for bound in (0, 1, 4):
        result = simulate(spec(partitions=4, layers=2, iterations=6, backward=True, staleness_bound=bound,
                               fb_pipeline=bound > 0), "async-async")
        assert result.reads["staleness"].max() <= bound
        times.append(result.summary["makespan_s"])
    assert times[0] >= times[1] >= times[2]


def test_utilization_and_worker_names():
    result = simulate(spec(partitions=2, layers=2, iterations=2, backward=True, workers={"aggregate": 2,
                                                                                         "update": 1,
                                                                                         "activation": 1}),
                      "async-async")
    utilization = result.summary["worker_utilization"]
    assert set(utilization) == {f"L{l}/{s}/{w}" for l in range(2) for s, n in
                                (("aggregate", 2), ("update", 1), ("activation", 1)) for w in range(n)}
    assert all(0 < u <= 1 for u in utilization.values())
    # no worker runs two tasks at once
    for _, rows in result.tasks.groupby("worker"):
        rows = rows.sort_values("start")
        assert (rows["start"].to_numpy()[1:] >= rows["end"].to_numpy()[:-1] - 1e-12).all()


def test_workdepth_durations_and_partitions_of_a_graph():
    edges = np.array([[0, 1, 2, 3, 4, 5], [1, 2, 3, 4, 5, 0]])
    graph = partition_graph(edges, 6, 3, "contiguous")
    assert graph.nodes.tolist() == [2, 2, 2] and graph.edges.tolist() == [2, 2, 2]
    assert graph.reads.tolist() == [[True, False, True], [True, True, False], [False, True, True]]
    s = async_spec_from_dict({"graph": {"kind": "uniform", "num_nodes": 1000, "num_edges": 8000, "max_degree": 16,
                                        "num_partitions": 2},
                              "durations": {"source": "workdepth", "model": "gcn", "features": 64,
                                            "ops_per_s": {"aggregate": 1e9, "update": 1e9, "activation": 1e9},
                                            "op_latency_s": 0.0},
                              "pipeline": {"layers": 1, "iterations": 1, "backward": False}, "modes": ["sync-sync"]})
    result = simulate(s, "sync-sync")
    # per partition: m k + n k^2 + n k = 4000*64 + 500*64^2 + 500*64 operations at 1e9/s, two partitions in turn
    expected = 2 * (4000 * 64 + 500 * 64**2 + 500 * 64) / 1e9
    assert result.summary["makespan_s"] == pytest.approx(expected)


def test_summary_table_has_one_row_per_mode_with_the_speedup_over_the_first():
    results = simulate_modes(spec(partitions=2, layers=2, iterations=2, backward=True))
    table = summary_table(results)
    assert list(table["mode"]) == list(MODE_NAMES) and table["speedup"].iloc[0] == 1.0
    assert (table["speedup"] == table["makespan_s"].iloc[0] / table["makespan_s"]).all()
    tasks = tasks_table(results)
    assert list(tasks.columns[:1]) == ["mode"] and set(tasks["mode"]) == set(MODE_NAMES)


def test_measured_durations_are_not_timed_by_the_simulator():
    s = async_spec_from_dict({"graph": {"kind": "dataset", "dataset": {"name": "synthetic", "preset": "tiny"},
                                        "num_partitions": 2}, "durations": {"source": "measured"}})
    graph = partition_graph(np.array([[0, 1, 2], [1, 2, 0]]), 3, 2)
    with pytest.raises(ConfigError, match="experiments.measure.kernel_timing"):
        stage_durations(s, graph)


@pytest.mark.parametrize("patch,fragment", [
    ({"pipeline": {"layers": 0}}, "pipeline.layers"),
    ({"pipeline": {"workers": {"aggregate": 1}}}, "pipeline.workers: missing stage(s) update, activation"),
    ({"modes": ["fast-slow"]}, "modes.0"),
    ({"durations": {"source": "table", "forward": {"aggregate": [1.0], "update": [1.0], "activation": [1.0]}}},
     "durations: forward.aggregate: expected 4 values"),
    ({"durations": {"source": "workdepth", "model": "ppnp"}}, "durations.model"),
    ({"graph": {"kind": "uniform", "num_nodes": 10}}, "graph.uniform.num_edges: required field is missing"),
    ({"bogus": 1}, "bogus: unknown field"),
])
def test_spec_errors_name_the_field(patch, fragment):
    data = {"graph": {"kind": "uniform", "num_nodes": 100, "num_edges": 100, "max_degree": 4, "num_partitions": 4},
            "durations": {"source": "fixed", "forward": FORWARD}}
    data.update(patch)
    with pytest.raises(ConfigError) as err:
        async_spec_from_dict(data, source="spec.yaml")
    message = str(err.value)
    assert message.startswith("spec.yaml: ") and fragment in message and "\n" not in message, message
