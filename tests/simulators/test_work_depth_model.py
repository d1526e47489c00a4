"""Work-depth formulas and the counted operator DAG (simulators/work_depth_model.py, simulators/op_dag.py)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from simulators import op_dag
from simulators.op_dag import DagCounter, Graph, random_graph, tree_levels
from simulators.work_depth_model import (MODELS, count_forward, default_sweeps, fit_scaling, format_expr, scaling_sweep,
                                   work_depth_table)
from suite.errors import ConfigError

PATH3 = Graph(3, np.array([0, 1]), np.array([1, 2]))  # 0 -> 1 -> 2


def test_tree_levels_are_ceil_log2():
    assert tree_levels(np.array([0, 1, 2, 3, 4, 5, 8, 9, 1024, 1025])).tolist() == [0, 0, 1, 2, 2, 3, 3, 4, 10, 11]


def test_matmul_counts_by_hand():
    counter = DagCounter()
    out = counter.matmul(counter.const(np.ones((3, 4))), counter.const(np.ones((4, 2))))
    assert counter.work == 3 * 2 * (4 + 3)  # 4 multiplications + 3 additions per output
    assert counter.depth == 1 + 2 and np.all(out.value == 4)


def test_gcn_on_a_3_node_path_by_hand():
    # k = 1, L = 1. With self-loops: node 0 has 1 in-edge (itself), nodes 1 and 2 have 2.
    # z = x W: 3 outputs, 1 mult each (no adds) -> 3 ops, depth 1.
    # messages w_e * z_src: 5 edges -> 5 ops, depth 2.
    # sums: nodes 1, 2 add 2 messages -> 2 ops, depth 3 (node 0: depth 2).
    # + bias: 3 ops; relu: 3 ops -> depth 5. Total W = 3 + 5 + 2 + 3 + 3 = 16.
    count = count_forward("gcn", PATH3, features=1, layers=1)
    assert (count.work, count.depth) == (16, 5)
    assert count.work_by_op == {"matmul": 3, "message": 5, "segment_sum": 2, "bias": 3, "activation": 3}


def test_gin_on_a_3_node_path_by_hand():
    # k = 1, L = 1, no self-loops: node 0 has no in-edge, nodes 1 and 2 one each (no addition: a copy).
    # (1+eps) h: 3, + agg: 3 (depth 2), linear1: 3 + bias 3 (depth 4), relu 3 (5), linear2 3 + bias 3 (7), relu 3 (8).
    count = count_forward("gin", PATH3, features=1, layers=1)
    assert (count.work, count.depth) == (24, 8)


@pytest.mark.parametrize("model", ["gcn", "graphsage", "gin", "gat", "attention", "sgc"])
def test_traced_forward_equals_pyg(model):
    """The counted DAG computes what the real PyG layers compute, with the same weights."""
    from torch_geometric import nn as pyg

    rng = np.random.default_rng(3)
    graph = random_graph(12, 3, 30, rng)
    k, layers = 5, 2
    formula = MODELS.get(model)
    x = rng.standard_normal((12, k))
    params = op_dag.init_params(formula.parameter_shapes(k), layers, rng)
    traced = formula.forward(DagCounter(), graph, DagCounter.const(x), params).value
    edge_index = torch.from_numpy(graph.edge_index())
    h = torch.from_numpy(x)

    def t(a):
        return torch.from_numpy(np.ascontiguousarray(a))

    with torch.no_grad():
        if model == "sgc":
            conv = pyg.SGConv(k, k, K=layers).double()
            conv.lin.weight.copy_(t(params[0]["weight"].T))
            conv.lin.bias.copy_(t(params[0]["bias"]))
            h = conv(h, edge_index)
        for layer in params if model != "sgc" else []:
            if model == "gcn":
                conv = pyg.GCNConv(k, k).double()
                conv.lin.weight.copy_(t(layer["weight"].T))
                conv.bias.copy_(t(layer["bias"]))
            elif model == "graphsage":
                conv = pyg.SAGEConv(k, k).double()
                conv.lin_l.weight.copy_(t(layer["weight_l"].T))
                conv.lin_l.bias.copy_(t(layer["bias"]))
                conv.lin_r.weight.copy_(t(layer["weight_r"].T))
            elif model == "gin":
                mlp = torch.nn.Sequential(torch.nn.Linear(k, k), torch.nn.ReLU(), torch.nn.Linear(k, k)).double()
                conv = pyg.GINConv(mlp)  # resets the MLP's parameters: set them after
                mlp[0].weight.copy_(t(layer["weight1"].T))
                mlp[0].bias.copy_(t(layer["bias1"]))
                mlp[2].weight.copy_(t(layer["weight2"].T))
                mlp[2].bias.copy_(t(layer["bias2"]))
            elif model == "gat":
                conv = pyg.GATConv(k, k, heads=1).double()
                conv.lin.weight.copy_(t(layer["weight"].T))
                conv.att_src.copy_(t(layer["att_src"]).view(1, 1, k))
                conv.att_dst.copy_(t(layer["att_dst"]).view(1, 1, k))
                conv.bias.copy_(t(layer["bias"]))
            else:
                conv = pyg.TransformerConv(k, k, heads=1, root_weight=False).double()
                for p, lin in (("q", conv.lin_query), ("k", conv.lin_key), ("v", conv.lin_value)):
                    lin.weight.copy_(t(layer[f"weight_{p}"].T))
                    lin.bias.copy_(t(layer[f"bias_{p}"]))
            h = torch.relu(conv(h, edge_index))
    np.testing.assert_allclose(traced, h.numpy(), rtol=1e-9, atol=1e-9)


def test_ppnp_solve_equals_numpy():
    rng = np.random.default_rng(0)
    graph = random_graph(20, 4, 60, rng)
    counter = DagCounter()
    rhs = rng.standard_normal((20, 3))
    out = counter.gauss_jordan_solve(counter.const(op_dag.ppnp_matrix(graph, 0.1)), counter.const(rhs))
    np.testing.assert_allclose(out.value, np.linalg.solve(op_dag.ppnp_matrix(graph, 0.1), rhs), rtol=1e-10)
    assert counter.depth == 3 * 20  # per pivot: division, multiplication, subtraction


def test_random_graph_sizes():
    graph = random_graph(50, 7, 200, np.random.default_rng(1))
    assert (graph.num_nodes, graph.num_edges, graph.max_degree) == (50, 200, 7)
    assert not np.any(graph.src == graph.dst)
    assert len(set(zip(graph.src.tolist(), graph.dst.tolist()))) == 200


def test_table_has_every_model_and_the_paper_forms():
    table = work_depth_table().set_index("model")
    assert set(table.index) == set(MODELS.names())
    assert table.loc["gcn", "forward_work"] == "O(L(nk^2 + mk))"
    assert table.loc["gcn", "forward_depth"] == "O(L(log d + log k))"
    assert table.loc["gcn", "iteration_depth"] == "O(L(log d + log k + log n))"
    assert table.loc["mpnn", "layer_work"] == "O(mk^2 + nk^2)"
    assert table.loc["ppnp", "forward_work"] == "O(n^3 + n^2k + Lnk^2)" or "n^3" in table.loc["ppnp", "forward_work"]
    assert set(table["family"]) == {"local", "global"}


def test_evaluate_uses_log2():
    gcn = MODELS.get("gcn")
    assert gcn.evaluate("forward_depth", n=10, m=10, k=16, L=2, d=8) == pytest.approx(2 * (4 + 3))
    with pytest.raises(ConfigError, match="missing sizes"):
        gcn.evaluate("forward_depth", n=10)


def test_stage_costs_sum_to_the_layer_leading_terms():
    for name in MODELS.names():
        model = MODELS.get(name)
        if model.stages is None:
            continue
        sizes = {"n": 1e5, "m": 1e6, "k": 256, "d": 100}
        work = sum(model.stage_cost(s, **sizes)[0] for s in model.stages)
        assert 1.0 <= work / model.evaluate("layer_work", L=1, **sizes) <= 1.01, name


def test_format_expr():
    from simulators.work_depth_model import L, k, m, n

    assert format_expr(L * m * k + L * n * k**2) == "L(nk^2 + mk)"


def test_counts_follow_the_formulas_leading_terms():
    """Fitted log-log slopes of the counts match the formulas' along every sweep (quick sizes)."""
    table = scaling_sweep(["gcn", "gat", "mpnn", "sgc", "ppnp"], default_sweeps(quick=True))
    fit = fit_scaling(table)
    assert fit["passed"].all(), fit[~fit["passed"]].to_string()
    work = fit[fit["quantity"] == "work"].set_index(["model", "variable"])
    assert work.loc[("gcn", "n"), "slope_counted"] == pytest.approx(1.0, abs=0.02)
    assert work.loc[("gcn", "L"), "slope_counted"] == pytest.approx(1.0, abs=0.02)
    assert work.loc[("mpnn", "k"), "slope_counted"] == pytest.approx(2.0, abs=0.1)
    assert work.loc[("ppnp", "n"), "slope_counted"] > 2.3  # n^3 with an n^2 k term at these sizes
    depth = fit[fit["quantity"] == "depth"].set_index(["model", "variable"])
    assert abs(depth.loc[("gcn", "n"), "slope_counted"]) < 1e-9  # forward depth does not depend on n
    assert depth.loc[("ppnp", "n"), "slope_counted"] > 0.85  # Gauss-Jordan: linear depth
