"""Confidence intervals and verdicts: the statistics behind every table, claim and error bar of the suite.

Computation only (as rliable separates it from plotting): the tables (``experiments/*.py``), the report
(``experiments/report.py``) and the figures' error bars (``experiments/style.py``) all call these functions, so a
number and its interval mean the same thing everywhere.

Intervals (95 % by default, :data:`CONFIDENCE`):

- :func:`mean_interval`: Student's t interval of a mean (accuracy over seeds; a timing over repeats);
- :func:`difference_interval`: the mean difference of two samples, paired (by seed: ``a[i] - b[i]``) or not
  (Welch's t);
- :func:`ratio_interval`: a ratio of timings as the geometric mean of paired ratios (t interval of the mean log
  ratio, exponentiated), or unpaired (Welch's t on the logs): the shape that suits positive, skewed timings;
- :func:`bootstrap_interval`: a percentile bootstrap (``scipy.stats.bootstrap``, seeded, so the same data always
  gives the same interval) of any statistic, e.g. a median;
- :func:`slope_interval`: the least-squares slope of ``y`` on ``x`` with its t interval (a trend).

Fewer than two values give an :class:`Interval` whose bounds are NaN: an interval that is not defined, from which
no verdict follows (a point estimate decides nothing).

Verdicts (:data:`VERDICTS`): :data:`HOLDS`, :data:`FAILS` (``does not hold``), :data:`INCONCLUSIVE` (the interval
straddles the threshold, or is not defined) and :data:`NOT_TESTABLE` (``not testable here``, with a reason).
:func:`above` and :func:`below` decide one interval against a threshold; :func:`combine` joins the verdicts of
the parts of a claim.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as _scipy_stats

CONFIDENCE = 0.95
"""The confidence level of every interval the suite reports."""

HOLDS, FAILS, INCONCLUSIVE, NOT_TESTABLE = "holds", "does not hold", "inconclusive", "not testable here"
VERDICTS = (HOLDS, FAILS, INCONCLUSIVE, NOT_TESTABLE)
"""The only verdicts a claim can have."""

BOOTSTRAP_RESAMPLES = 4999
BOOTSTRAP_SEED = 0


@dataclass(frozen=True)
class Interval:
    """An estimate with its confidence interval.

    Attributes:
        estimate: the point estimate (mean, geometric-mean ratio, median, slope...).
        low / high: the interval's bounds (NaN when not defined: fewer than two values).
        n: how many values (seeds, repeats, paired differences) it comes from.
        method: how it was computed (``t``, ``paired t``, ``Welch t``, ``paired log t``, ``bootstrap``...).
        confidence: its level (0.95).
    """

    estimate: float
    low: float
    high: float
    n: int
    method: str
    confidence: float = CONFIDENCE

    @property
    def defined(self) -> bool:
        """Whether both bounds are finite numbers (at least two values, no NaN)."""
        return math.isfinite(self.low) and math.isfinite(self.high)

    def overlaps(self, other: Interval) -> bool:
        """Whether the two intervals share a point (undefined intervals overlap everything: no evidence)."""
        if not (self.defined and other.defined):
            return True
        return self.low <= other.high and other.low <= self.high

    def scaled(self, factor: float) -> Interval:
        """The same interval times a positive constant (e.g. a unit change)."""
        return Interval(self.estimate * factor, self.low * factor, self.high * factor, self.n, self.method,
                        self.confidence)

    def format(self, decimals: int = 3, percent: bool = False) -> str:
        """``1.470 [1.300, 1.650]`` (``percent``: values x 100, then `` %``); ``[no interval: n=1]`` when the
        interval is not defined."""
        scale, suffix = (100.0, " %") if percent else (1.0, "")

        def number(value: float) -> str:
            value *= scale
            if abs(value) >= 10_000:
                return f"{value:,.0f}"
            if 0 < abs(value) < 0.01:  # small values (seconds per batch): significant digits, not 0.001
                return f"{value:.{decimals}g}"
            return f"{value:.{decimals}f}"

        if not math.isfinite(self.estimate):
            return "n/a"
        if not self.defined:
            return f"{number(self.estimate)}{suffix} [no interval: n={self.n}]"
        return f"{number(self.estimate)} [{number(self.low)}, {number(self.high)}]{suffix}"

    def __str__(self) -> str:
        return self.format()


def _clean(values: Iterable[float]) -> np.ndarray:
    array = np.asarray([float(v) for v in values], dtype=float)
    return array[np.isfinite(array)]


def _undefined(estimate: float, n: int, method: str) -> Interval:
    return Interval(float(estimate), math.nan, math.nan, n, method)


def _t_bounds(mean: float, sem: float, df: float, confidence: float) -> tuple[float, float]:
    if sem == 0.0:
        return mean, mean
    half = float(_scipy_stats.t.ppf(0.5 + confidence / 2, df)) * sem
    return mean - half, mean + half


def mean_interval(values: Iterable[float], confidence: float = CONFIDENCE) -> Interval:
    """Mean of ``values`` (NaN dropped) with Student's t interval; undefined with fewer than two values."""
    x = _clean(values)
    if len(x) == 0:
        return _undefined(math.nan, 0, "t")
    mean = float(x.mean())
    if len(x) < 2:
        return _undefined(mean, 1, "t")
    low, high = _t_bounds(mean, float(x.std(ddof=1) / math.sqrt(len(x))), len(x) - 1, confidence)
    return Interval(mean, low, high, len(x), "t", confidence)


def difference_interval(a: Sequence[float], b: Sequence[float], paired: bool = True,
                        confidence: float = CONFIDENCE) -> Interval:
    """Mean of ``a - b``: paired (``a[i] - b[i]``, e.g. the same seed; pairs with a NaN dropped) with a t interval
    of the differences, or unpaired with Welch's t interval."""
    if paired:
        if len(a) != len(b):
            raise ValueError(f"paired samples differ in length ({len(a)} vs {len(b)})")
        differences = [x - y for x, y in zip(a, b)]
        interval = mean_interval(differences, confidence)
        return Interval(interval.estimate, interval.low, interval.high, interval.n, "paired t", confidence)
    x, y = _clean(a), _clean(b)
    if len(x) == 0 or len(y) == 0:
        return _undefined(math.nan, 0, "Welch t")
    estimate = float(x.mean() - y.mean())
    if len(x) < 2 or len(y) < 2:
        return _undefined(estimate, min(len(x), len(y)), "Welch t")
    vx, vy = x.var(ddof=1) / len(x), y.var(ddof=1) / len(y)
    sem = math.sqrt(vx + vy)
    df = (vx + vy) ** 2 / ((vx ** 2 / (len(x) - 1) if vx else 0) + (vy ** 2 / (len(y) - 1) if vy else 0)) \
        if sem else 1.0
    low, high = _t_bounds(estimate, sem, df, confidence)
    return Interval(estimate, low, high, min(len(x), len(y)), "Welch t", confidence)


def ratio_interval(numerator: Sequence[float], denominator: Sequence[float], paired: bool = True,
                   confidence: float = CONFIDENCE) -> Interval:
    """Ratio of two positive samples (timings) as the exponentiated mean log ratio, with its t interval.

    Paired (the same repeat measured both ways, e.g. the same roots): the geometric mean of ``num[i] / den[i]``.
    Unpaired: ``exp(mean log num - mean log den)`` with Welch's t interval. Non-positive values are dropped.
    """
    def logs(values: Sequence[float]) -> list[float]:
        return [math.log(v) if v is not None and math.isfinite(v) and v > 0 else math.nan for v in values]

    interval = difference_interval(logs(numerator), logs(denominator), paired=paired, confidence=confidence)
    method = "paired log t" if paired else "Welch log t"
    return Interval(math.exp(interval.estimate) if math.isfinite(interval.estimate) else math.nan,
                    math.exp(interval.low) if math.isfinite(interval.low) else math.nan,
                    math.exp(interval.high) if math.isfinite(interval.high) else math.nan, interval.n, method,
                    confidence)


_AXIS_STATISTICS = (np.median, np.mean)
"""Statistics that reduce along an axis themselves (the same numbers as row by row, without a Python call per
resample: 10,000 resamples of np.median took 0.14 s row by row)."""


def _along_axis(statistic: Callable[[np.ndarray], float]) -> Callable[..., np.ndarray]:
    """``statistic`` as a reduction along ``axis``, as ``scipy.stats.bootstrap(vectorized=True)`` calls it."""
    if statistic in _AXIS_STATISTICS:
        return lambda sample, axis=-1: statistic(sample, axis=axis)
    return lambda sample, axis=-1: np.apply_along_axis(statistic, axis, sample)


def bootstrap_interval(values: Iterable[float], statistic: Callable[[np.ndarray], float] = np.median,
                       confidence: float = CONFIDENCE, resamples: int = BOOTSTRAP_RESAMPLES,
                       seed: int = BOOTSTRAP_SEED) -> Interval:
    """``statistic`` of ``values`` with a percentile bootstrap interval (``scipy.stats.bootstrap``; seeded, so
    deterministic for the same data); undefined with fewer than two values."""
    x = _clean(values)
    if len(x) == 0:
        return _undefined(math.nan, 0, "bootstrap")
    estimate = float(statistic(x))
    if len(x) < 2:
        return _undefined(estimate, 1, "bootstrap")
    if np.all(x == x[0]):
        return Interval(estimate, estimate, estimate, len(x), "bootstrap", confidence)
    result = _scipy_stats.bootstrap((x,), _along_axis(statistic),
                                    confidence_level=confidence, n_resamples=resamples, method="percentile",
                                    vectorized=True, rng=np.random.default_rng(seed))
    return Interval(estimate, float(result.confidence_interval.low), float(result.confidence_interval.high),
                    len(x), "bootstrap", confidence)


def slope_interval(x: Sequence[float], y: Sequence[float], confidence: float = CONFIDENCE) -> Interval:
    """Least-squares slope of ``y`` on ``x`` (pairs with a NaN dropped) with its t interval (n - 2 degrees of
    freedom); undefined with fewer than three points or a single ``x`` value."""
    pairs = [(float(a), float(b)) for a, b in zip(x, y) if math.isfinite(float(a)) and math.isfinite(float(b))]
    if len(pairs) < 3 or len({a for a, _ in pairs}) < 2:
        return _undefined(math.nan, len(pairs), "OLS slope t")
    xs, ys = np.array([a for a, _ in pairs]), np.array([b for _, b in pairs])
    fit = _scipy_stats.linregress(xs, ys)
    low, high = _t_bounds(float(fit.slope), float(fit.stderr), len(pairs) - 2, confidence)
    return Interval(float(fit.slope), low, high, len(pairs), "OLS slope t", confidence)


# ---------------------------------------------------------------------------------------------- verdicts
def above(interval: Interval, threshold: float, min_n: int = 2) -> str:
    """``holds`` when the whole interval lies above ``threshold``, ``does not hold`` when it lies at or below it,
    ``inconclusive`` when it straddles it, is not defined, or comes from fewer than ``min_n`` values."""
    if not interval.defined or interval.n < min_n:
        return INCONCLUSIVE
    if interval.low > threshold:
        return HOLDS
    if interval.high <= threshold:
        return FAILS
    return INCONCLUSIVE


def below(interval: Interval, threshold: float, min_n: int = 2) -> str:
    """``holds`` when the whole interval lies below ``threshold``, ``does not hold`` when it lies at or above it,
    else ``inconclusive`` (as :func:`above`)."""
    if not interval.defined or interval.n < min_n:
        return INCONCLUSIVE
    if interval.high < threshold:
        return HOLDS
    if interval.low >= threshold:
        return FAILS
    return INCONCLUSIVE


def combine(verdicts: Iterable[str]) -> str:
    """The verdict of a claim made of parts that must all hold: ``does not hold`` if any part does not hold;
    else ``inconclusive`` if any part is inconclusive, or only some parts are testable; ``not testable here`` if
    none is (or there are no parts); ``holds`` when every part holds."""
    parts = list(verdicts)
    unknown = [v for v in parts if v not in VERDICTS]
    if unknown:
        raise ValueError(f"not a verdict: {unknown[0]!r} (verdicts: {', '.join(VERDICTS)})")
    if not parts or all(v == NOT_TESTABLE for v in parts):
        return NOT_TESTABLE
    if FAILS in parts:
        return FAILS
    if INCONCLUSIVE in parts or NOT_TESTABLE in parts:
        return INCONCLUSIVE
    return HOLDS


def any_of(verdicts: Iterable[str]) -> str:
    """The verdict of a claim that needs one of its parts to hold: ``holds`` if any part holds; ``does not hold``
    if every testable part does not hold; else ``inconclusive`` (``not testable here`` when none is testable)."""
    parts = list(verdicts)
    if not parts or all(v == NOT_TESTABLE for v in parts):
        return NOT_TESTABLE
    if HOLDS in parts:
        return HOLDS
    testable = [v for v in parts if v != NOT_TESTABLE]
    if all(v == FAILS for v in testable) and len(testable) == len(parts):
        return FAILS
    return INCONCLUSIVE


def within(interval: Interval, bound: float, min_n: int = 2) -> str:
    """``holds`` when the whole interval lies inside (-bound, bound), ``does not hold`` when it lies outside,
    else ``inconclusive`` (as :func:`above` and :func:`below`)."""
    return combine([below(interval, bound, min_n), above(interval, -bound, min_n)])


def p90(values: np.ndarray) -> float:
    """The 90th percentile."""
    return float(np.quantile(values, 0.9))


def error_summary(errors: Iterable[float]) -> dict[str, Interval]:
    """Relative errors (signed; NaN left out) summarized, each with its 95 % bootstrap interval over the values:
    ``median_abs`` and ``p90_abs`` (of the absolute errors), ``bias`` (the mean signed error) and ``spread`` (the
    signed errors' standard deviation)."""
    signed = np.asarray([e for e in errors if math.isfinite(e)], dtype=float)
    return {"median_abs": bootstrap_interval(np.abs(signed)), "p90_abs": bootstrap_interval(np.abs(signed), p90),
            "bias": bootstrap_interval(signed, np.mean),
            "spread": bootstrap_interval(signed, lambda x: float(np.std(x, ddof=1)) if len(x) > 1 else 0.0)}


__all__ = ["CONFIDENCE", "FAILS", "HOLDS", "INCONCLUSIVE", "Interval", "NOT_TESTABLE", "VERDICTS", "above",
           "any_of", "below", "bootstrap_interval", "combine", "difference_interval", "error_summary",
           "mean_interval", "p90", "ratio_interval", "slope_interval", "within"]
