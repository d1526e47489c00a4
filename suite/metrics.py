"""Measurements shared by all systems: stage timers, classification accuracy, ranking metrics of link prediction
(MRR, Hits@k, filtered and unfiltered), GPU utilization sampling.

Names matter: *compute utilization* is the busy time of the compute stage divided by wall time (what the suite
can measure on any device); *GPU utilization* is NVML's reading, only on CUDA. Summaries say which is which.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import defaultdict
from collections.abc import Iterator

import torch


class StageTimer:
    """Accumulates busy seconds per named stage (``with timer.stage("sample"): ...``).

    On CUDA, pass ``sync_device`` so that a stage's time includes its asynchronous GPU work.
    """

    def __init__(self, sync_device: torch.device | None = None):
        self.busy_s: dict[str, float] = defaultdict(float)
        self._sync = sync_device if sync_device is not None and sync_device.type == "cuda" else None

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Time the block as busy time of ``name``."""
        started = time.perf_counter()
        try:
            yield
        finally:
            if self._sync is not None:
                torch.cuda.synchronize(self._sync)
            self.busy_s[name] += time.perf_counter() - started

    def snapshot(self) -> dict[str, float]:
        """A copy of the busy seconds per stage."""
        return dict(self.busy_s)


def accuracy(logits_or_predictions: torch.Tensor, labels: torch.Tensor) -> float:
    """Fraction of correct predictions, as OGB's node-property Evaluator computes multiclass accuracy (correct count
    over labeled count, in Python floats); nan without labels.

    Computed here rather than through ``ogb.nodeproppred.Evaluator``, whose import (scikit-learn, SciPy, PyG's
    dataset modules) costs about a second in every run's process; tests check that the two agree."""
    predictions = logits_or_predictions
    if predictions.dim() == 2:
        predictions = predictions.argmax(dim=-1)
    if labels.numel() == 0:
        return float("nan")
    return float(int((predictions.view(-1).cpu() == labels.view(-1).cpu()).sum())) / labels.numel()


# ---------------------------------------------------------------------------------------------- ranking
RANK_KS = (1, 3, 10)
"""The k of the Hits@k the suite reports."""


def target_ranks(scores: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Rank of each row's target among all the row's candidates, ties at their mean rank.

    Convention ("realistic" rank, as OGB's link Evaluator): ``rank = 1 + #{c: s_c > s_t} + #{c != t: s_c = s_t} / 2``,
    i.e. the mean of the optimistic and the pessimistic rank, so a constant scorer gets the rank of a random guess
    in expectation rather than 1. Candidates with score ``-inf`` (filtered out) never outrank a finite target.

    Args:
        scores: ``(B, N)`` score of every candidate.
        targets: ``(B,)`` the true candidate's column in each row.

    Returns:
        ``(B,)`` float64 ranks, 1 = best.
    """
    from suite import rank_kernels  # numba's import only where ranks are computed

    if rank_kernels.compiled(scores):
        greater, ties = rank_kernels.above_and_ties(scores, targets)  # one pass over the rows, no bool matrices
    else:
        target_scores = scores.gather(1, targets.view(-1, 1))
        greater = _row_count(scores > target_scores)
        ties = _row_count(scores == target_scores) - 1  # the target itself is not a tie
    return 1.0 + greater.to(torch.float64) + 0.5 * ties.to(torch.float64)


def _row_count(mask: torch.Tensor) -> torch.Tensor:
    """The number of true entries in each row of the ``(B, N)`` bool ``mask``.

    Summed in int32 (exact for rows of fewer than 2**31 entries): a bool tensor's default sum widens every entry
    to int64 first, which made these counts 4-5x slower on a CPU (measured on 488 x 14,541 score rows: 35.5 ms
    against 7.8 ms a count). Used where the compiled pass (:mod:`suite.rank_kernels`) does not apply: sampled
    negatives' ranks, and all-entity scores off the CPU or in other dtypes.
    """
    return mask.sum(dim=1, dtype=torch.int32)


def sampled_target_ranks(positive: torch.Tensor, negative: torch.Tensor) -> torch.Tensor:
    """Rank of each positive score among its row of negative scores (same tie convention as :func:`target_ranks`).

    Args:
        positive: ``(B,)`` scores of the true triples.
        negative: ``(B, K)`` scores of the candidates each is ranked against.
    """
    positive = positive.view(-1, 1)
    greater = _row_count(negative > positive)
    ties = _row_count(negative == positive)
    return 1.0 + greater.to(torch.float64) + 0.5 * ties.to(torch.float64)


def ranking_metrics(ranks: torch.Tensor, ks: tuple[int, ...] = RANK_KS, prefix: str = "") -> dict[str, float]:
    """``{prefix}mrr`` (mean reciprocal rank) and ``{prefix}hits@k`` (fraction ranked <= k) of ``ranks``.

    NaN for no ranks.
    """
    if ranks.numel() == 0:
        return {f"{prefix}mrr": float("nan"), **{f"{prefix}hits@{k}": float("nan") for k in ks}}
    ranks = ranks.to(torch.float64)
    metrics = {f"{prefix}mrr": float((1.0 / ranks).mean())}
    metrics.update({f"{prefix}hits@{k}": float((ranks <= k).to(torch.float64).mean()) for k in ks})
    return metrics


def ogb_ranking_metrics(positive: torch.Tensor, negative: torch.Tensor, prefix: str = "") -> dict[str, float]:
    """MRR and Hits@1/3/10 of positives against sampled negatives as OGB's link Evaluator computes them
    (``ogbl-wikikg2``: each positive ranked among its row of negatives, ties at the mean rank, in float32), the
    per-triple values then averaged in float64.

    Computed here rather than through ``ogb.linkproppred.Evaluator``, whose import (scikit-learn, SciPy, PyG's
    dataset modules) costs about three seconds in every run's process; tests check that the two agree exactly.

    Args:
        positive: ``(B,)`` scores of the true triples.
        negative: ``(B, K)`` scores of their negatives (``-inf`` for filtered-out candidates).
        prefix: prepended to every key.
    """
    if positive.numel() == 0:
        return ranking_metrics(torch.empty(0), prefix=prefix)
    positive = positive.detach().cpu().float().view(-1, 1)
    negative = negative.detach().cpu().float()
    ranks = 0.5 * ((negative > positive).sum(dim=1) + (negative >= positive).sum(dim=1)) + 1  # float32, as OGB
    lists = {f"hits@{k}": (ranks <= k).to(torch.float) for k in RANK_KS}
    lists["mrr"] = 1.0 / ranks.to(torch.float)
    return {f"{prefix}{key}": float(value.to(torch.float64).mean()) for key, value in lists.items()}


class _Groups:
    """Values grouped by an int64 key, sorted by ``(key, value)``; vectorized lookups of whole groups."""

    def __init__(self, keys: torch.Tensor, values: torch.Tensor, num_values: int):
        self.num_values = num_values
        combined = torch.unique(keys.to(torch.int64) * num_values + values.to(torch.int64))  # sorted, no repeats
        self.combined = combined
        self.keys = torch.div(combined, num_values, rounding_mode="floor")
        self.values = combined - self.keys * num_values

    def members(self, queries: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """All ``(row, value)`` pairs with ``value`` in the group of ``queries[row]``."""
        low = torch.searchsorted(self.keys, queries, right=False)
        high = torch.searchsorted(self.keys, queries, right=True)
        counts = high - low
        rows = torch.repeat_interleave(torch.arange(len(queries), device=queries.device), counts)
        starts = torch.repeat_interleave(low - (torch.cumsum(counts, 0) - counts), counts)
        positions = torch.arange(len(rows), device=queries.device) + starts
        return rows, self.values[positions]

    def contains(self, queries: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        """``(B, K)`` bool: whether ``candidates[b, k]`` is in the group of ``queries[b]``."""
        if len(self.combined) == 0:
            return torch.zeros_like(candidates, dtype=torch.bool)
        wanted = queries.view(-1, 1) * self.num_values + candidates
        where = torch.searchsorted(self.combined, wanted).clamp_(max=len(self.combined) - 1)
        return self.combined[where] == wanted


class TripleFilter:
    """The known true triples ``(src, rel, dst)``, indexed for filtered ranking.

    Filtered ranking (Bordes et al., 2013) ranks the true entity of a query ``(h, r, ?)`` only against candidates
    ``t'`` for which ``(h, r, t')`` is not a known triple (and likewise for ``(?, r, t)``). Lookups are sorted
    searches over ``(query key, entity)`` pairs (no Python loop per triple).

    Args:
        triples: ``(k, 3)`` int64 ``(src, rel, dst)`` of every known triple (train + valid + test).
        num_nodes: number of entities.
        num_relations: number of relation types.
    """

    def __init__(self, triples: torch.Tensor, num_nodes: int, num_relations: int):
        triples = triples.to(torch.int64)
        src, rel, dst = triples[:, 0], triples[:, 1], triples[:, 2]
        self.num_relations = num_relations
        self._tails = _Groups(src * num_relations + rel, dst, num_nodes)
        self._heads = _Groups(dst * num_relations + rel, src, num_nodes)

    def true_tails(self, src: torch.Tensor, rel: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(row, tail)`` of every known ``(src[row], rel[row], tail)``."""
        return self._tails.members(src * self.num_relations + rel)

    def true_heads(self, dst: torch.Tensor, rel: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(row, head)`` of every known ``(head, rel[row], dst[row])``."""
        return self._heads.members(dst * self.num_relations + rel)

    def is_true_tail(self, src: torch.Tensor, rel: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        """``(B, K)`` bool: whether ``(src[b], rel[b], candidates[b, k])`` is a known triple."""
        return self._tails.contains(src * self.num_relations + rel, candidates)

    def is_true_head(self, dst: torch.Tensor, rel: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        """``(B, K)`` bool: whether ``(candidates[b, k], rel[b], dst[b])`` is a known triple."""
        return self._heads.contains(dst * self.num_relations + rel, candidates)


def filtered_scores(scores: torch.Tensor, targets: torch.Tensor, rows: torch.Tensor,
                    columns: torch.Tensor) -> torch.Tensor:
    """A copy of ``scores`` with the known true candidates ``(rows, columns)`` set to ``-inf``, except each row's
    target (whose score is kept)."""
    filtered = scores.clone()
    filtered[rows, columns] = float("-inf")
    index = torch.arange(len(targets), device=scores.device)
    filtered[index, targets] = scores[index, targets]
    return filtered


def filtered_target_ranks(scores: torch.Tensor, targets: torch.Tensor, rows: torch.Tensor,
                          columns: torch.Tensor, unfiltered: torch.Tensor | None = None) -> torch.Tensor:
    """:func:`target_ranks` of ``filtered_scores(scores, targets, rows, columns)``, without copying ``scores``.

    The known true candidates ``(rows, columns)`` (each pair at most once) that outrank or tie a row's target are
    subtracted from its unfiltered rank: ``unfiltered`` when the caller has computed ``target_ranks(scores,
    targets)`` already (the pass over every score is the costly part), else computed here.
    """
    target_scores = scores.gather(1, targets.view(-1, 1)).squeeze(1)
    known, threshold = scores[rows, columns], target_scores[rows]
    other = columns != targets[rows]
    weight = ((known > threshold) & other).to(torch.float64) + 0.5 * ((known == threshold) & other).to(torch.float64)
    if unfiltered is None:
        unfiltered = target_ranks(scores, targets)
    return unfiltered.to(scores.device) - torch.bincount(rows, weights=weight, minlength=len(targets))


class GpuUtilizationSampler:
    """Samples NVML GPU utilization in a background thread while active; ``mean()`` is None without CUDA/NVML."""

    def __init__(self, device: torch.device, interval_s: float = 0.1):
        self.samples: list[float] = []
        self._handle = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.interval_s = interval_s
        if device.type == "cuda":
            try:
                import pynvml

                pynvml.nvmlInit()
                index = device.index if device.index is not None else torch.cuda.current_device()
                self._handle = pynvml.nvmlDeviceGetHandleByIndex(index)
                self._nvml = pynvml
            except Exception:  # NVML missing or unusable: report None rather than guess
                self._handle = None

    def __enter__(self) -> "GpuUtilizationSampler":
        if self._handle is not None:
            self._thread = threading.Thread(target=self._loop, name="nvml-sampler", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.samples.append(self._nvml.nvmlDeviceGetUtilizationRates(self._handle).gpu / 100.0)

    def mean(self) -> float | None:
        """Mean utilization in [0, 1], or None when not measured."""
        return sum(self.samples) / len(self.samples) if self.samples else None
