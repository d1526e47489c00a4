"""Work-depth analysis of GNN models (after Besta and Hoefler, "Parallel and Distributed Graph Neural Networks:
An In-Depth Concurrency Analysis").

The work W of a computation is its number of scalar operations, its depth D the longest chain of dependent
operations; with p processors it runs in ``T_p <= W / p + D`` (Brent). For every model of :data:`MODELS` this
module gives W and D as symbolic (sympy) leading terms in

- ``n`` nodes, ``m`` edges, ``k`` features (every layer ``k`` wide), ``L`` layers, ``d`` maximum (in-)degree,

for one layer, one forward pass and one training iteration (forward, backward and weight update), a table of
them (:func:`work_depth_table`), numerical evaluation (:meth:`ModelFormula.evaluate`), and their check against
the real operator DAG (:func:`count_forward`, :func:`scaling_sweep`, :func:`fit_scaling`): the forward pass is
traced on small random graphs by :mod:`simulators.op_dag`, which counts every scalar operation and the longest
dependency chain (parallel reductions as balanced trees), and the counts must follow the formulas as one of n,
m, k, d, L grows.

Local formulations (a layer is message passing over each node's neighbourhood): GCN, GraphSAGE, GIN, GAT,
vanilla (dot-product) attention and a general MPNN whose messages are an edge MLP. Global formulations (a layer
is a matrix function of the adjacency): linear (``A_hat H W``, GCN in matrix form), polynomial (SGC, ``A_hat^L X
W``; ``L`` is the number of propagation hops) and rational (PPNP, ``alpha (I - (1 - alpha) A_hat)^-1 MLP(X)``,
the inverse applied by an exact Gauss-Jordan solve: ``O(n^3 + n^2 k)`` work at depth ``O(n)``; polylog-depth
inversion (Csanky) would give ``O(log^2 n)`` depth at ``O(n^4)`` work). ``log`` is base 2 when evaluated.

A training iteration has the forward's work up to a constant (the backward pass takes, per operator, the
gradient with respect to each operand: about twice the forward's work; the update touches ``O(L k^2)``
parameters) and adds, per weight layer, a reduction of the weight gradient over all n nodes: depth
``D_fwd + (#weight layers) log n``.

Stage costs (:attr:`ModelFormula.stages`) split a local layer into sparse aggregation, dense update and
non-linearity for the asynchronous pipeline simulator (:mod:`simulators.async_gnn_model`).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Literal

import numpy as np
import pandas as pd
import sympy as sp

from simulators import op_dag
from simulators.op_dag import Count, DagCounter, Graph
from suite.errors import ConfigError
from suite.registry import Registry

n, m, k, L, d = sp.symbols("n m k L d", positive=True)
VARIABLES: dict[str, sp.Symbol] = {"n": n, "m": m, "k": k, "L": L, "d": d}
"""The size variables, by name."""

STAGES = ("aggregate", "update", "activation")
"""Stages of a local layer, in execution order (names shared with the async pipeline simulator)."""


def _log(x: sp.Expr) -> sp.Expr:
    return sp.log(x)


@dataclasses.dataclass(frozen=True)
class StageCost:
    """Work and depth of one stage of a layer (leading terms, per layer, for the whole graph)."""

    work: sp.Expr
    depth: sp.Expr


@dataclasses.dataclass(frozen=True)
class ModelFormula:
    """Work and depth of one GNN model, and the builder of its real forward pass.

    Attributes:
        name: registered name.
        family: ``"local"`` or ``"global"`` formulation.
        description: what one layer computes.
        layer_work: W of one layer (leading terms).
        layer_depth: D of one layer.
        forward_work: W of the forward pass (L layers and model-level terms).
        forward_depth: D of the forward pass.
        weight_layers: number of weight matrices whose gradient is reduced over all nodes in a training iteration.
        parameter_shapes: ``k -> {name: shape}`` of one layer's parameters (for the traced forward pass).
        forward: the traced forward pass ``(counter, graph, x, params) -> Traced`` of :mod:`simulators.op_dag`.
        stages: per-stage costs of a layer (aggregate / update / activation), for the pipeline simulator.
    """

    name: str
    family: Literal["local", "global"]
    description: str
    layer_work: sp.Expr
    layer_depth: sp.Expr
    forward_work: sp.Expr
    forward_depth: sp.Expr
    weight_layers: sp.Expr
    parameter_shapes: Callable[[int], dict[str, tuple[int, ...]]]
    forward: Callable[..., op_dag.Traced]
    stages: Mapping[str, StageCost] | None = None

    @property
    def iteration_work(self) -> sp.Expr:
        """W of one training iteration: the forward's order (backward ~2x forward, update O(L k^2))."""
        return self.forward_work

    @property
    def iteration_depth(self) -> sp.Expr:
        """D of one training iteration: the forward's depth plus a log n reduction per weight layer."""
        return sp.expand(self.forward_depth + self.weight_layers * _log(n))

    def expressions(self) -> dict[str, sp.Expr]:
        """``{"layer_work": ..., "layer_depth": ..., "forward_work": ..., ..., "iteration_depth": ...}``."""
        return {"layer_work": self.layer_work, "layer_depth": self.layer_depth,
                "forward_work": self.forward_work, "forward_depth": self.forward_depth,
                "iteration_work": self.iteration_work, "iteration_depth": self.iteration_depth}

    def evaluate(self, quantity: str, **sizes: float) -> np.ndarray:
        """Evaluate one formula (``"forward_work"``...) at the given sizes (scalars or arrays; ``log`` base 2).

        Args:
            quantity: a key of :meth:`expressions`.
            **sizes: values of n, m, k, L, d (all five).

        Returns:
            float64 array (broadcast over the sizes).
        """
        missing = sorted(set(VARIABLES) - set(sizes))
        if missing:
            raise ConfigError(f"work-depth {self.name}: missing sizes {', '.join(missing)}")
        fn = _lambdified(self.name, quantity)
        values = [np.asarray(sizes[name], dtype=np.float64) for name in VARIABLES]
        return np.asarray(fn(*values), dtype=np.float64) + np.zeros(np.broadcast(*values).shape)

    def stage_cost(self, stage: str, **sizes: float) -> tuple[float, float]:
        """``(work, depth)`` of one stage at the given sizes (n, m, k, d; L is not used).

        Raises:
            ConfigError: the model has no stage split, or the stage is unknown.
        """
        if self.stages is None:
            raise ConfigError(f"work-depth model {self.name!r} has no stage split (models with one: "
                              f"{', '.join(x for x in MODELS if MODELS.get(x).stages)})")
        if stage not in self.stages:
            raise ConfigError(f"unknown stage {stage!r} (known: {', '.join(self.stages)})")
        cost = self.stages[stage]
        subs = {VARIABLES[name]: value for name, value in sizes.items() if name in VARIABLES}
        subs.setdefault(L, 1)
        as_float = functools.partial(_evaluate_log2, subs=subs)
        return as_float(cost.work), as_float(cost.depth)


def _evaluate_log2(expr: sp.Expr, subs: dict) -> float:
    fn = sp.lambdify(list(VARIABLES.values()), expr, modules=[{"log": np.log2}, "numpy"])
    return float(fn(*(float(subs.get(symbol, 1)) for symbol in VARIABLES.values())))


MODELS: Registry[ModelFormula] = Registry("work-depth model")
"""Registered models, by name."""


@functools.cache
def _lambdified(name: str, quantity: str) -> Callable[..., np.ndarray]:
    expr = MODELS.get(name).expressions()[quantity]
    return sp.lambdify(list(VARIABLES.values()), expr, modules=[{"log": np.log2}, "numpy"])


def _local(name: str, description: str, work: sp.Expr, depth: sp.Expr, shapes: Callable[[int], dict],
           forward: Callable, stages: Mapping[str, StageCost]) -> ModelFormula:
    return ModelFormula(name=name, family="local", description=description, layer_work=work, layer_depth=depth,
                        forward_work=sp.expand(L * work), forward_depth=sp.expand(L * depth), weight_layers=L,
                        parameter_shapes=shapes, forward=forward, stages=stages)


def _stages(aggregate_work: sp.Expr, aggregate_depth: sp.Expr) -> dict[str, StageCost]:
    return {"aggregate": StageCost(aggregate_work, aggregate_depth),
            "update": StageCost(n * k**2, _log(k)),
            "activation": StageCost(n * k, sp.Integer(1))}


_LOCAL_WORK = m * k + n * k**2
_LOCAL_DEPTH = _log(k) + _log(d)

for _model in (
    _local("gcn", "relu(A_hat H W + b), A_hat = D^-1/2 (A + I) D^-1/2", _LOCAL_WORK, _LOCAL_DEPTH,
           lambda k: {"weight": (k, k), "bias": (k,)}, op_dag.forward_gcn, _stages(m * k, _log(d))),
    _local("graphsage", "relu(mean_N(i) h_j W_l + h_i W_r + b)", _LOCAL_WORK, _LOCAL_DEPTH,
           lambda k: {"weight_l": (k, k), "weight_r": (k, k), "bias": (k,)}, op_dag.forward_graphsage,
           _stages(m * k, _log(d))),
    _local("gin", "relu(MLP_2((1 + eps) h_i + sum_N(i) h_j))", _LOCAL_WORK, _LOCAL_DEPTH,
           lambda k: {"weight1": (k, k), "bias1": (k,), "weight2": (k, k), "bias2": (k,)}, op_dag.forward_gin,
           _stages(m * k, _log(d))),
    _local("gat", "relu(sum_j softmax_j(LeakyReLU(a . [z_i || z_j])) z_j + b), z = h W (one head)", _LOCAL_WORK,
           _LOCAL_DEPTH, lambda k: {"weight": (k, k), "att_src": (k,), "att_dst": (k,), "bias": (k,)},
           op_dag.forward_gat, _stages(m * k, _log(k) + _log(d))),
    _local("attention", "relu(sum_j softmax_j(q_i . k_j / sqrt(k)) v_j), q, k, v = h W_q, h W_k, h W_v",
           _LOCAL_WORK, _LOCAL_DEPTH,
           lambda k: {f"{kind}_{p}": (k, k) if kind == "weight" else (k,)
                      for p in "qkv" for kind in ("weight", "bias")},
           op_dag.forward_attention, _stages(m * k, _log(k) + _log(d))),
    _local("mpnn", "relu([h_i || sum_j MLP_e([h_i || h_j])] U + c), a 2-layer edge MLP", m * k**2 + n * k**2,
           _LOCAL_DEPTH,
           lambda k: {"edge_weight1": (2 * k, k), "edge_bias1": (k,), "edge_weight2": (k, k), "edge_bias2": (k,),
                      "update_weight": (2 * k, k), "update_bias": (k,)},
           op_dag.forward_mpnn, _stages(m * k**2, _log(k) + _log(d))),
):
    MODELS.register(_model.name, _model)

MODELS.register("linear", ModelFormula(
    name="linear", family="global", description="relu(A_hat (H W) + b): sparse A_hat times dense H W per layer",
    layer_work=_LOCAL_WORK, layer_depth=_LOCAL_DEPTH, forward_work=sp.expand(L * _LOCAL_WORK),
    forward_depth=sp.expand(L * _LOCAL_DEPTH), weight_layers=L, parameter_shapes=lambda k: {"weight": (k, k),
                                                                                          "bias": (k,)},
    forward=op_dag.forward_gcn, stages=_stages(m * k, _log(d))))
MODELS.register("sgc", ModelFormula(
    name="sgc", family="global", description="A_hat^L X W + b (polynomial filter; a layer = one hop A_hat H)",
    layer_work=m * k, layer_depth=_log(d), forward_work=L * m * k + n * k**2, forward_depth=L * _log(d) + _log(k),
    weight_layers=sp.Integer(1), parameter_shapes=lambda k: {"weight": (k, k), "bias": (k,)},
    forward=op_dag.forward_sgc))
MODELS.register("ppnp", ModelFormula(
    name="ppnp", family="global",
    description="alpha (I - (1 - alpha) A_hat)^-1 MLP_L(X) (rational filter; a layer = one MLP layer; exact solve)",
    layer_work=n * k**2, layer_depth=_log(k), forward_work=n**3 + n**2 * k + L * n * k**2,
    forward_depth=n + L * _log(k), weight_layers=L, parameter_shapes=lambda k: {"weight": (k, k), "bias": (k,)},
    forward=op_dag.forward_ppnp))


# ---------------------------------------------------------------------------------------------- table
_PRINT_ORDER = ("L", "m", "n", "k", "d")


def _format_monomial(term: sp.Expr) -> str:
    coeff, factors = term.as_coeff_mul()
    powers: dict[str, int] = {}
    logs: list[str] = []
    for factor in factors:
        base, exponent = factor.as_base_exp()
        if isinstance(base, sp.log):
            logs.append(f"log {format_expr(base.args[0])}")
        else:
            powers[str(base)] = powers.get(str(base), 0) + int(exponent)
    text = "".join(f"{name}^{powers[name]}" if powers[name] != 1 else name
                   for name in sorted(powers, key=lambda name: _PRINT_ORDER.index(name)))
    text = " ".join(part for part in (text, *logs) if part)
    return f"{sp.sstr(coeff)} {text}".strip() if coeff != 1 or not text else text


def format_expr(expr: sp.Expr) -> str:
    """A compact plain-text form, ``L`` factored out when every term has it: ``L*k*m + L*k**2*n`` ->
    ``L(mk + nk^2)``, ``log(k)`` -> ``log k``."""
    expr = sp.expand(expr)
    terms = sp.Add.make_args(expr)
    factor_l = len(terms) > 1 and all(L in sp.Mul.make_args(term) for term in terms)
    if factor_l:
        terms = sp.Add.make_args(sp.expand(expr / L))
    ordered = sorted(terms, key=lambda term: (-sp.Poly(term.subs({sp.log(v): 1 for v in VARIABLES.values()}),
                                                       *VARIABLES.values()).total_degree(), str(term)))
    body = " + ".join(_format_monomial(term) for term in ordered)
    return f"L({body})" if factor_l else body


def work_depth_table(models: Sequence[str] | None = None, sizes: Mapping[str, float] | None = None) -> pd.DataFrame:
    """The work-depth table: one row per model, formulas as ``O(...)`` text and, with ``sizes``, evaluated.

    Args:
        models: registered names (default: all, local ones first).
        sizes: n, m, k, L, d at which to evaluate every formula (adds ``<quantity>_value`` columns).

    Returns:
        Columns ``model, family, description, layer_work, layer_depth, forward_work, forward_depth,
        iteration_work, iteration_depth`` (and the values).
    """
    names = list(models) if models is not None else sorted(MODELS.names(),
                                                          key=lambda x: (MODELS.get(x).family != "local", x))
    rows = []
    for name in names:
        model = MODELS.get(name)
        row = {"model": name, "family": model.family, "description": model.description}
        row.update({key: f"O({format_expr(expr)})" for key, expr in model.expressions().items()})
        if sizes is not None:
            row.update({f"{key}_value": float(model.evaluate(key, **sizes)) for key in model.expressions()})
        rows.append(row)
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------------- counting
def count_forward(model: str, graph: Graph, features: int, layers: int, seed: int = 0) -> Count:
    """Trace one forward pass of ``model`` on ``graph`` with random inputs and weights; count W and D.

    Args:
        model: registered name.
        graph: the graph (messages ``src -> dst``).
        features: k (input and every layer's width).
        layers: L.
        seed: seed of the inputs and weights.

    Returns:
        The counted work and depth, and the output values.
    """
    formula = MODELS.get(model)
    rng = np.random.default_rng(seed)
    x = DagCounter.const(rng.standard_normal((graph.num_nodes, features)))
    params = op_dag.init_params(formula.parameter_shapes(features), layers, rng)
    counter = DagCounter()
    return counter.result(formula.forward(counter, graph, x, params))


@dataclasses.dataclass(frozen=True)
class Sweep:
    """One variable swept from a base point.

    Attributes:
        variable: ``"n"``, ``"m"``, ``"k"``, ``"d"`` or ``"L"``.
        values: the values of the swept variable.
        base: n, k, L, d (and optionally m; default m = n d) of the other variables.
    """

    variable: str
    values: tuple[int, ...]
    base: Mapping[str, int]


def default_sweeps(quick: bool = False) -> tuple[Sweep, ...]:
    """The sweeps of the counted-vs-formula check (``quick``: smaller sizes, for tests).

    ``n`` grows with d fixed (so m = n d grows too); ``m`` grows with n and d fixed; ``d`` grows with n and m fixed
    (node 0 gets the maximum degree); ``k`` and ``L`` grow alone.
    """
    if quick:
        base = {"n": 64, "k": 8, "L": 2, "d": 4}
        return (Sweep("n", (16, 32, 64, 128), base), Sweep("m", (128, 256, 512, 1024), {**base, "d": 16}),
                Sweep("k", (4, 8, 16, 32), base), Sweep("d", (4, 8, 16, 32), {**base, "m": 256}),
                Sweep("L", (1, 2, 3, 4), base))
    base = {"n": 256, "k": 16, "L": 2, "d": 8}
    return (Sweep("n", (32, 64, 128, 256, 512), base), Sweep("m", (512, 1024, 2048, 4096, 8192), {**base, "d": 32}),
            Sweep("k", (4, 8, 16, 32, 64), base), Sweep("d", (8, 16, 32, 64, 128), {**base, "m": 2048}),
            Sweep("L", (1, 2, 3, 4, 5), base))


def scaling_sweep(models: Sequence[str], sweeps: Sequence[Sweep], seed: int = 0) -> pd.DataFrame:
    """Count W and D of each model's forward pass along each sweep, beside the formulas' values.

    Args:
        models: registered names.
        sweeps: the sweeps.
        seed: seed of the graphs, inputs and weights.

    Returns:
        Tidy table: ``model, variable, value, n, m, k, L, d, counted_work, counted_depth, formula_work,
        formula_depth`` (m and d as realized by the graph).
    """
    rows = []
    for sweep in sweeps:
        for value in sweep.values:
            sizes = {**sweep.base, sweep.variable: value}
            if sweep.variable != "m" and "m" not in sweep.base:
                sizes["m"] = sizes["n"] * sizes["d"]
            graph = op_dag.random_graph(sizes["n"], sizes["d"], sizes["m"], np.random.default_rng(seed))
            realized = {"n": graph.num_nodes, "m": graph.num_edges, "k": sizes["k"], "L": sizes["L"],
                        "d": graph.max_degree}
            for model in models:
                count = count_forward(model, graph, sizes["k"], sizes["L"], seed)
                formula = MODELS.get(model)
                rows.append({"model": model, "variable": sweep.variable, "value": value, **realized,
                             "counted_work": count.work, "counted_depth": count.depth,
                             "formula_work": float(formula.evaluate("forward_work", **realized)),
                             "formula_depth": float(formula.evaluate("forward_depth", **realized))})
    return pd.DataFrame(rows)


def _slope(x: np.ndarray, y: np.ndarray) -> float:
    return float(np.polyfit(np.log(x), np.log(y), 1)[0])


def fit_terms(model: str, quantity: Literal["work", "depth"]) -> tuple[sp.Expr, ...]:
    """The terms fitted to the counts: the forward formula's leading terms, then lower-order ones: for work,
    each leading term with one power of k less (per-element work such as a softmax per edge, ``m``, or a bias
    per node and feature, ``nk``); for depth, ``L`` and ``1`` (a constant number of elementwise steps per layer
    and per pass, below every logarithm)."""
    formula = MODELS.get(model)
    expr = formula.forward_work if quantity == "work" else formula.forward_depth
    terms = list(sp.Add.make_args(sp.expand(expr)))
    lower = [sp.Integer(1), L] if quantity == "depth" else [term / k for term in terms if term.has(k)]
    return tuple(terms + [term for term in lower if term not in terms])


def _term_matrix(terms: Sequence[sp.Expr], table: pd.DataFrame) -> np.ndarray:
    columns = []
    for term in terms:
        fn = sp.lambdify(list(VARIABLES.values()), term, modules=[{"log": np.log2}, "numpy"])
        values = fn(*(table[name].to_numpy(dtype=np.float64) for name in VARIABLES))
        columns.append(np.broadcast_to(np.asarray(values, dtype=np.float64), (len(table),)))
    return np.stack(columns, axis=1)


def fit_constants(model: str, quantity: Literal["work", "depth"], table: pd.DataFrame) -> np.ndarray:
    """Non-negative constants ``c`` with ``counted ~ sum_j c_j term_j`` over every row of ``table`` (one model),
    minimizing the relative error (``scipy.optimize.nnls`` on rows scaled by 1 / counted)."""
    from scipy.optimize import nnls

    design = _term_matrix(fit_terms(model, quantity), table)
    counted = table[f"counted_{quantity}"].to_numpy(dtype=np.float64)
    scale = 1.0 / np.maximum(counted, 1.0)
    return nnls(design * scale[:, None], counted * scale)[0]


def leading_exponent(model: str, quantity: Literal["work", "depth"], variable: str) -> str:
    """The formula's growth in one variable, other sizes fixed: the highest power (``"2"``), ``"log"`` when it
    grows only logarithmically, ``"0"`` when it does not depend on it."""
    formula = MODELS.get(model)
    expr = sp.expand(formula.forward_work if quantity == "work" else formula.forward_depth)
    symbol = VARIABLES[variable]
    if not expr.has(symbol):
        return "0"
    polynomial = expr.subs({sp.log(symbol): 0})
    power = sp.Poly(polynomial.subs({sp.log(v): 1 for v in VARIABLES.values()}), symbol).degree() \
        if polynomial.has(symbol) else 0
    return str(power) if power > 0 else "log"


def fit_scaling(table: pd.DataFrame, slope_tolerance: float = 0.1, error_tolerance: float = 0.15) -> pd.DataFrame:
    """Check that the counts of :func:`scaling_sweep` follow the formulas' leading terms.

    Per model and quantity, one set of non-negative constants for the formula's terms is fitted to *all* its
    counts (every sweep at once, :func:`fit_constants`). Then, per swept variable: the log-log slope of the
    counts and of the fitted formula over the same points (with the formula's asymptotic exponent in that
    variable beside them), and the largest relative error of the fitted formula. A row passes when the slopes
    agree within ``slope_tolerance`` and the error is at most ``error_tolerance``.

    Returns:
        ``model, variable, quantity, exponent, slope_counted, slope_formula, max_rel_error, constants, passed``.
    """
    rows = []
    for model, per_model in table.groupby("model", sort=False):
        for quantity in ("work", "depth"):
            terms = fit_terms(model, quantity)
            constants = fit_constants(model, quantity, per_model)
            fitted_all = _term_matrix(terms, per_model) @ constants
            label = " + ".join(f"{c:.3g}*{format_expr(t)}" for c, t in zip(constants, terms))
            for variable, group in per_model.assign(fitted=fitted_all).groupby("variable", sort=False):
                group = group.sort_values("value")
                x = group["value"].to_numpy(dtype=np.float64)
                counted = group[f"counted_{quantity}"].to_numpy(dtype=np.float64)
                fitted = group["fitted"].to_numpy(dtype=np.float64)
                slope_counted, slope_formula = _slope(x, counted), _slope(x, fitted)
                error = float(np.max(np.abs(fitted - counted) / counted))
                rows.append({"model": model, "variable": variable, "quantity": quantity,
                             "exponent": leading_exponent(model, quantity, variable),
                             "slope_counted": slope_counted, "slope_formula": slope_formula,
                             "max_rel_error": error, "constants": label,
                             "passed": bool(abs(slope_counted - slope_formula) <= slope_tolerance
                                            and error <= error_tolerance)})
    return pd.DataFrame(rows)


__all__ = ["MODELS", "STAGES", "VARIABLES", "ModelFormula", "StageCost", "Sweep", "count_forward", "default_sweeps",
           "fit_constants", "fit_scaling", "fit_terms", "leading_exponent", "format_expr", "scaling_sweep", "work_depth_table"]
