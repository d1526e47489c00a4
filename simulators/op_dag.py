"""The scalar operator DAG of a GNN forward pass, counted exactly on small graphs.

Every tensor of a forward pass is carried as a :class:`Traced` pair: its values (float64, so the result can be
compared with the real PyG layer) and, element by element, the *depth* of that scalar in the DAG of scalar
operations (the length of the longest dependency chain ending at it; inputs and weights have depth 0). Each
primitive of :class:`DagCounter` computes its outputs, their depths and the number of scalar operations it adds
to the DAG (its *work*), per operator and vectorized, without materializing the DAG:

- an elementwise operation costs one operation per output element and adds 1 to the depth;
- a reduction of ``c`` operands (a dot product, a sum or max over a neighbourhood) is a balanced binary tree:
  ``c - 1`` operations and ``ceil(log2 c)`` levels above its deepest operand;
- a matrix product ``(r x c) @ (c x q)`` is ``r*q*c`` multiplications and ``r*q*(c-1)`` additions; element
  ``(i, j)`` has depth ``max(depth of row i, depth of column j) + 1 + ceil(log2 c)``;
- gathers, concatenations and reshapes move data and cost nothing.

Totals: :attr:`DagCounter.work` is the work W of the pass and :attr:`DagCounter.depth` the depth D (the longest
chain over every scalar created). Graph preprocessing that a layer does not repeat (self-loops, degree
normalization of GCN's ``A_hat``, the dense matrix of PPNP) is a constant of depth 0.

The forward builders (``forward_<model>``) implement the layers as PyG does (same equations, same parameter
layout), so the traced output can be checked against ``torch_geometric.nn`` layers with the same weights.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Callable

import numpy as np

__all__ = ["Count", "DagCounter", "Graph", "Traced", "random_graph", "tree_levels"]


def tree_levels(count: np.ndarray | int) -> np.ndarray:
    """Levels of a balanced binary reduction tree over ``count`` operands: ``ceil(log2 count)``, 0 for 0 or 1.

    Args:
        count: operand counts (array or scalar), non-negative.

    Returns:
        int64 levels of the same shape (exact: the bit length of ``count - 1``).
    """
    count = np.maximum(np.asarray(count, dtype=np.int64), 1)
    return np.frexp((count - 1).astype(np.float64))[1].astype(np.int64)


@dataclasses.dataclass(frozen=True)
class Traced:
    """A tensor of the traced forward pass.

    Attributes:
        value: float64 values.
        depth: int64 depth of every element in the scalar DAG (same shape as ``value``).
    """

    value: np.ndarray
    depth: np.ndarray

    @property
    def shape(self) -> tuple[int, ...]:
        """Shape of the tensor."""
        return self.value.shape


@dataclasses.dataclass(frozen=True)
class Graph:
    """A small directed graph for counting: messages flow ``src[e] -> dst[e]``.

    Attributes:
        num_nodes: n.
        src: int64 source of every edge.
        dst: int64 destination of every edge (the node that aggregates).
    """

    num_nodes: int
    src: np.ndarray
    dst: np.ndarray

    @property
    def num_edges(self) -> int:
        """m, the number of directed edges."""
        return int(self.src.shape[0])

    def in_degrees(self) -> np.ndarray:
        """In-degree of every node (its fan-in in an aggregation)."""
        return np.bincount(self.dst, minlength=self.num_nodes).astype(np.int64)

    @property
    def max_degree(self) -> int:
        """d, the maximum in-degree."""
        return int(self.in_degrees().max(initial=0))

    def with_self_loops(self) -> "Graph":
        """The graph without its self-loop edges, plus one self-loop per node (PyG's ``add_self_loops``)."""
        keep = self.src != self.dst
        loops = np.arange(self.num_nodes, dtype=np.int64)
        return Graph(self.num_nodes, np.concatenate([self.src[keep], loops]), np.concatenate([self.dst[keep], loops]))

    def edge_index(self) -> np.ndarray:
        """``(2, m)`` int64 ``(src, dst)`` as PyG expects."""
        return np.stack([self.src, self.dst])


def random_graph(num_nodes: int, max_degree: int, num_edges: int | None = None,
                 rng: np.random.Generator | None = None) -> Graph:
    """A random graph with given n, m and maximum in-degree d (no self-loops, no duplicate edges).

    Node 0 has in-degree exactly ``max_degree``; the other ``num_edges - max_degree`` edges are spread as evenly as
    possible over the other nodes (each at most ``max_degree``), their sources drawn uniformly without
    replacement. Without ``num_edges``, every node has in-degree ``max_degree`` (m = n d).

    Args:
        num_nodes: n (at least ``max_degree + 1``).
        max_degree: d.
        num_edges: m (between d and n d), default n d.
        rng: numpy generator (default seeded with 0).

    Returns:
        The graph.

    Raises:
        ValueError: the sizes are inconsistent.
    """
    rng = rng if rng is not None else np.random.default_rng(0)
    num_edges = num_nodes * max_degree if num_edges is None else num_edges
    if not 0 < max_degree < num_nodes or not max_degree <= num_edges <= num_nodes * max_degree:
        raise ValueError(f"need 0 < d < n and d <= m <= n d, got n={num_nodes}, d={max_degree}, m={num_edges}")
    rest, others = num_edges - max_degree, num_nodes - 1
    degrees = np.full(num_nodes, rest // others, dtype=np.int64)
    degrees[1:1 + rest % others] += 1  # base + 1 <= d whenever there is a remainder, since rest <= others * d
    degrees[0] = max_degree
    keys = rng.random((num_nodes, num_nodes))
    np.fill_diagonal(keys, np.inf)  # never pick the node itself
    order = np.argsort(keys, axis=1)
    take = np.arange(num_nodes)[None, :] < degrees[:, None]
    dst = np.repeat(np.arange(num_nodes, dtype=np.int64), degrees)
    src = order[take].astype(np.int64)
    return Graph(num_nodes, src, dst)


@dataclasses.dataclass(frozen=True)
class Count:
    """Work and depth of one traced forward pass.

    Attributes:
        work: scalar operations W.
        depth: longest dependency chain D.
        output: the traced output values.
        work_by_op: W split by primitive (``matmul``, ``segment_sum``, ``elementwise``...).
    """

    work: int
    depth: int
    output: np.ndarray
    work_by_op: dict[str, int]


class DagCounter:
    """Builds a traced forward pass and counts its scalar operations and DAG depth (see the module docstring)."""

    def __init__(self) -> None:
        self.work = 0
        self.depth = 0
        self.work_by_op: collections.Counter[str] = collections.Counter()

    # ------------------------------------------------------------------------------------------- bookkeeping
    def _emit(self, op: str, work: int, value: np.ndarray, depth: np.ndarray) -> Traced:
        self.work += int(work)
        self.work_by_op[op] += int(work)
        if depth.size:
            self.depth = max(self.depth, int(depth.max()))
        return Traced(value, depth)

    def result(self, output: Traced) -> Count:
        """The counts so far, with ``output``'s values."""
        return Count(self.work, self.depth, output.value, dict(self.work_by_op))

    @staticmethod
    def const(value: np.ndarray) -> Traced:
        """An input, weight or precomputed constant (depth 0, no work)."""
        value = np.asarray(value, dtype=np.float64)
        return Traced(value, np.zeros(value.shape, dtype=np.int64))

    # ------------------------------------------------------------------------------------------- data movement
    @staticmethod
    def gather(a: Traced, index: np.ndarray) -> Traced:
        """Rows ``a[index]`` (free)."""
        return Traced(a.value[index], a.depth[index])

    @staticmethod
    def concat(parts: list[Traced], axis: int = -1) -> Traced:
        """Concatenation along ``axis`` (free)."""
        return Traced(np.concatenate([p.value for p in parts], axis=axis),
                      np.concatenate([p.depth for p in parts], axis=axis))

    # ------------------------------------------------------------------------------------------- arithmetic
    def elementwise(self, fn: Callable[..., np.ndarray], *args: Traced, op: str = "elementwise") -> Traced:
        """``fn`` applied elementwise (with broadcasting): one operation per output element, depth + 1."""
        value = np.asarray(fn(*(a.value for a in args)), dtype=np.float64)
        depth = np.broadcast_to(np.maximum.reduce([np.broadcast_to(a.depth, value.shape) for a in args])
                                if len(args) > 1 else args[0].depth, value.shape) + 1
        return self._emit(op, value.size, value, np.ascontiguousarray(depth))

    def matmul(self, a: Traced, b: Traced) -> Traced:
        """``a @ b`` for ``a`` (r x c) and ``b`` (c x q): ``r q (2c - 1)`` operations."""
        rows, inner = a.shape
        value = a.value @ b.value
        ready = np.maximum(a.depth.max(axis=1, initial=0)[:, None], b.depth.max(axis=0, initial=0)[None, :])
        depth = ready + 1 + int(tree_levels(inner))
        return self._emit("matmul", rows * b.shape[1] * (2 * inner - 1), value, depth)

    def row_sum(self, a: Traced) -> Traced:
        """Sum over the last axis (a balanced tree per row), keeping it as width 1."""
        width = a.shape[-1]
        value = a.value.sum(axis=-1, keepdims=True)
        depth = a.depth.max(axis=-1, keepdims=True, initial=0) + int(tree_levels(width))
        return self._emit("reduction", value.size * (width - 1), value, depth)

    def segment(self, a: Traced, index: np.ndarray, num_segments: int, reduce: str = "sum") -> Traced:
        """Reduce the rows of ``a`` into ``num_segments`` rows by ``index`` (a neighbourhood sum or max).

        Empty segments are 0 at depth 0. A segment of ``c`` rows costs ``c - 1`` operations per column and
        ``ceil(log2 c)`` levels.
        """
        counts = np.bincount(index, minlength=num_segments)
        shape = (num_segments, *a.shape[1:])
        if reduce == "sum":
            value = np.zeros(shape)
            np.add.at(value, index, a.value)
        elif reduce == "max":
            value = np.full(shape, -np.inf)
            np.maximum.at(value, index, a.value)
            value[counts == 0] = 0.0
        else:
            raise ValueError(f"reduce must be 'sum' or 'max', got {reduce!r}")
        ready = np.zeros(shape, dtype=np.int64)
        np.maximum.at(ready, index, a.depth)
        levels = tree_levels(counts).reshape((-1,) + (1,) * (len(shape) - 1))
        width = int(np.prod(shape[1:], dtype=np.int64))
        work = int(np.maximum(counts - 1, 0).sum()) * width
        return self._emit(f"segment_{reduce}", work, value, ready + levels)

    def segment_softmax(self, scores: Traced, index: np.ndarray, num_segments: int) -> Traced:
        """Softmax of edge scores over each destination's incoming edges (max, subtract, exp, sum, divide)."""
        top = self.segment(scores, index, num_segments, "max")
        shifted = self.elementwise(np.subtract, scores, self.gather(top, index))
        expd = self.elementwise(np.exp, shifted)
        total = self.segment(expd, index, num_segments, "sum")
        return self.elementwise(np.divide, expd, self.gather(total, index))

    def linear(self, x: Traced, weight: Traced, bias: Traced | None = None) -> Traced:
        """``x @ weight + bias`` (weight stored ``in x out``)."""
        out = self.matmul(x, weight)
        return out if bias is None else self.elementwise(np.add, out, bias, op="bias")

    def relu(self, x: Traced) -> Traced:
        """ReLU."""
        return self.elementwise(lambda v: np.maximum(v, 0.0), x, op="activation")

    # ------------------------------------------------------------------------------------------- dense solve
    def gauss_jordan_solve(self, matrix: Traced, rhs: Traced) -> Traced:
        """Solve ``matrix @ z = rhs`` by Gauss-Jordan elimination without pivoting (matrix SPD or diagonally
        dominant), one pivot at a time; each pivot step is vectorized.

        Pivot ``p``: row ``p`` (its columns right of ``p`` and the right-hand sides) is divided by the pivot, then
        every other row subtracts its multiple of it (a multiplication and a subtraction per element). Work
        ``~ n^3 + 2 n^2 k``, depth ``3n``.
        """
        size = matrix.shape[0]
        aug_v = np.concatenate([matrix.value, rhs.value], axis=1)
        aug_d = np.concatenate([matrix.depth, rhs.depth], axis=1)
        work = 0
        for p in range(size):
            cols = np.r_[p + 1:aug_v.shape[1]]
            pivot_v, pivot_d = aug_v[p, p], aug_d[p, p]
            row_v = aug_v[p, cols] / pivot_v
            row_d = np.maximum(aug_d[p, cols], pivot_d) + 1
            work += cols.size
            others = np.r_[0:p, p + 1:size]
            factor_v, factor_d = aug_v[others, p][:, None], aug_d[others, p][:, None]
            product_d = np.maximum(factor_d, row_d[None, :]) + 1
            aug_v[np.ix_(others, cols)] -= factor_v * row_v[None, :]
            aug_d[np.ix_(others, cols)] = np.maximum(aug_d[np.ix_(others, cols)], product_d) + 1
            work += 2 * others.size * cols.size
            aug_v[p, cols], aug_d[p, cols] = row_v, row_d
            aug_v[p, p], aug_v[others, p] = 1.0, 0.0
        value, depth = aug_v[:, size:], aug_d[:, size:]
        return self._emit("solve", work, np.ascontiguousarray(value), np.ascontiguousarray(depth))


# ---------------------------------------------------------------------------------------------- forward passes
Params = list[dict[str, np.ndarray]]
"""One dict of weights per layer (weights stored ``in x out``, as ``x @ W``; biases ``(out,)``)."""


def _glorot(rng: np.random.Generator, rows: int, cols: int) -> np.ndarray:
    bound = np.sqrt(6.0 / (rows + cols))
    return rng.uniform(-bound, bound, size=(rows, cols))


def _bias(rng: np.random.Generator, width: int) -> np.ndarray:
    return rng.uniform(-0.1, 0.1, size=(width,))


def init_params(shapes: dict[str, tuple[int, ...]], num_layers: int, rng: np.random.Generator) -> Params:
    """Random weights: ``shapes`` maps a parameter name to its shape (2-D: Glorot, 1-D: small uniform)."""
    return [{name: (_glorot(rng, *shape) if len(shape) == 2 else _bias(rng, *shape))
             for name, shape in shapes.items()} for _ in range(num_layers)]


def gcn_norm(graph: Graph) -> tuple[Graph, np.ndarray]:
    """``A_hat = D^-1/2 (A + I) D^-1/2`` as PyG's ``gcn_norm``: the graph with self-loops and one weight per edge
    (``D``: in-degrees with the self-loop)."""
    looped = graph.with_self_loops()
    inv_sqrt = 1.0 / np.sqrt(looped.in_degrees().astype(np.float64))
    return looped, inv_sqrt[looped.src] * inv_sqrt[looped.dst]


def propagate(counter: DagCounter, graph: Graph, weights: np.ndarray | None, h: Traced,
              reduce: str = "sum") -> Traced:
    """Sparse aggregation ``out_i = reduce_{e: dst_e = i} w_e h_{src_e}`` (SpMM with the sparse ``A``): a
    multiplication per edge and column (when weighted), then a reduction tree per destination."""
    messages = counter.gather(h, graph.src)
    if weights is not None:
        messages = counter.elementwise(np.multiply, messages, counter.const(weights[:, None]), op="message")
    return counter.segment(messages, graph.dst, graph.num_nodes, reduce)


def forward_gcn(counter: DagCounter, graph: Graph, x: Traced, params: Params) -> Traced:
    """GCN (PyG ``GCNConv``): ``relu(A_hat (H W) + b)`` per layer; ``A_hat`` precomputed."""
    looped, norm = gcn_norm(graph)
    h = x
    for layer in params:
        z = counter.matmul(h, counter.const(layer["weight"]))
        h = counter.relu(counter.elementwise(np.add, propagate(counter, looped, norm, z),
                                             counter.const(layer["bias"]), op="bias"))
    return h


def forward_graphsage(counter: DagCounter, graph: Graph, x: Traced, params: Params) -> Traced:
    """GraphSAGE, mean aggregator (PyG ``SAGEConv``): ``relu(mean_N(i) h W_l + b + h_i W_r)``."""
    degrees = counter.const(np.maximum(graph.in_degrees(), 1)[:, None].astype(np.float64))
    h = x
    for layer in params:
        mean = counter.elementwise(np.divide, propagate(counter, graph, None, h), degrees, op="normalize")
        neigh = counter.matmul(mean, counter.const(layer["weight_l"]))
        root = counter.matmul(h, counter.const(layer["weight_r"]))
        out = counter.elementwise(np.add, counter.elementwise(np.add, neigh, root), counter.const(layer["bias"]),
                                  op="bias")
        h = counter.relu(out)
    return h


def forward_gin(counter: DagCounter, graph: Graph, x: Traced, params: Params, eps: float = 0.0) -> Traced:
    """GIN (PyG ``GINConv`` with a 2-layer MLP): ``relu(MLP((1 + eps) h_i + sum_N(i) h_j))``."""
    h = x
    for layer in params:
        own = counter.elementwise(lambda v: (1.0 + eps) * v, h, op="scale")
        total = counter.elementwise(np.add, propagate(counter, graph, None, h), own)
        hidden = counter.relu(counter.linear(total, counter.const(layer["weight1"]), counter.const(layer["bias1"])))
        h = counter.relu(counter.linear(hidden, counter.const(layer["weight2"]), counter.const(layer["bias2"])))
    return h


def forward_gat(counter: DagCounter, graph: Graph, x: Traced, params: Params, slope: float = 0.2) -> Traced:
    """GAT, one head (PyG ``GATConv``, self-loops added): ``alpha_ij = softmax_j(LeakyReLU(a_s.z_j + a_d.z_i))``,
    ``relu(sum_j alpha_ij z_j + b)`` with ``z = h W``."""
    looped = graph.with_self_loops()
    h = x
    for layer in params:
        z = counter.matmul(h, counter.const(layer["weight"]))
        score_src = counter.row_sum(counter.elementwise(np.multiply, z, counter.const(layer["att_src"]), op="score"))
        score_dst = counter.row_sum(counter.elementwise(np.multiply, z, counter.const(layer["att_dst"]), op="score"))
        scores = counter.elementwise(np.add, counter.gather(score_src, looped.src),
                                     counter.gather(score_dst, looped.dst), op="score")
        scores = counter.elementwise(lambda v: np.where(v > 0, v, slope * v), scores, op="score")
        alpha = counter.segment_softmax(scores, looped.dst, looped.num_nodes)
        messages = counter.elementwise(np.multiply, counter.gather(z, looped.src), alpha, op="message")
        out = counter.segment(messages, looped.dst, looped.num_nodes, "sum")
        h = counter.relu(counter.elementwise(np.add, out, counter.const(layer["bias"]), op="bias"))
    return h


def forward_attention(counter: DagCounter, graph: Graph, x: Traced, params: Params) -> Traced:
    """Vanilla (dot-product) attention over neighbourhoods (PyG ``TransformerConv``, one head, no root weight):
    ``alpha_ij = softmax_j(q_i . k_j / sqrt(k))``, ``relu(sum_j alpha_ij v_j)``."""
    h = x
    for layer in params:
        query = counter.linear(h, counter.const(layer["weight_q"]), counter.const(layer["bias_q"]))
        key = counter.linear(h, counter.const(layer["weight_k"]), counter.const(layer["bias_k"]))
        value = counter.linear(h, counter.const(layer["weight_v"]), counter.const(layer["bias_v"]))
        scale = 1.0 / np.sqrt(layer["weight_q"].shape[1])
        products = counter.elementwise(np.multiply, counter.gather(query, graph.dst), counter.gather(key, graph.src),
                                       op="score")
        scores = counter.elementwise(lambda v: v * scale, counter.row_sum(products), op="score")
        alpha = counter.segment_softmax(scores, graph.dst, graph.num_nodes)
        messages = counter.elementwise(np.multiply, counter.gather(value, graph.src), alpha, op="message")
        h = counter.relu(counter.segment(messages, graph.dst, graph.num_nodes, "sum"))
    return h


def forward_mpnn(counter: DagCounter, graph: Graph, x: Traced, params: Params) -> Traced:
    """General MPNN with an edge MLP: ``m_ij = MLP_e([h_i || h_j])`` (2 layers), ``relu([h_i || sum_j m_ij] U + c)``."""
    h = x
    for layer in params:
        pairs = counter.concat([counter.gather(h, graph.dst), counter.gather(h, graph.src)])
        hidden = counter.relu(counter.linear(pairs, counter.const(layer["edge_weight1"]),
                                             counter.const(layer["edge_bias1"])))
        messages = counter.linear(hidden, counter.const(layer["edge_weight2"]), counter.const(layer["edge_bias2"]))
        total = counter.segment(messages, graph.dst, graph.num_nodes, "sum")
        h = counter.relu(counter.linear(counter.concat([h, total]), counter.const(layer["update_weight"]),
                                        counter.const(layer["update_bias"])))
    return h


def forward_sgc(counter: DagCounter, graph: Graph, x: Traced, params: Params) -> Traced:
    """SGC, a polynomial filter (PyG ``SGConv`` with ``K = L``): ``A_hat^L X W + b``; ``params`` holds the
    single linear layer and one empty dict per extra hop."""
    looped, norm = gcn_norm(graph)
    h = x
    for _ in params:
        h = propagate(counter, looped, norm, h)
    return counter.linear(h, counter.const(params[0]["weight"]), counter.const(params[0]["bias"]))


def ppnp_matrix(graph: Graph, alpha: float) -> np.ndarray:
    """``I - (1 - alpha) A_rw`` with ``A_rw = D^-1 (A + I)`` (rows of a destination's in-neighbours and itself):
    strictly diagonally dominant, so elimination needs no pivoting."""
    looped = graph.with_self_loops()
    dense = np.zeros((graph.num_nodes, graph.num_nodes))
    np.add.at(dense, (looped.dst, looped.src), 1.0)
    dense /= dense.sum(axis=1, keepdims=True)
    return np.eye(graph.num_nodes) - (1.0 - alpha) * dense


def forward_ppnp(counter: DagCounter, graph: Graph, x: Traced, params: Params, alpha: float = 0.1) -> Traced:
    """PPNP, a rational filter: ``Z = alpha (I - (1 - alpha) A_rw)^-1 MLP(X)``, an L-layer MLP (ReLU between
    layers) and an exact solve by Gauss-Jordan elimination (the dense matrix is precomputed)."""
    h = x
    for index, layer in enumerate(params):
        h = counter.linear(h, counter.const(layer["weight"]), counter.const(layer["bias"]))
        if index < len(params) - 1:
            h = counter.relu(h)
    scaled = counter.elementwise(lambda v: alpha * v, h, op="scale")
    return counter.gauss_jordan_solve(counter.const(ppnp_matrix(graph, alpha)), scaled)
