"""Confidence intervals and verdicts (suite/stats.py), checked against values computed by hand."""

from __future__ import annotations

import math

import pytest

from suite import stats
from suite.stats import FAILS, HOLDS, INCONCLUSIVE, NOT_TESTABLE, Interval


def test_t_interval_of_three_values_by_hand():
    interval = stats.mean_interval([1.0, 2.0, 3.0])
    # mean 2, sd 1, sem 1/sqrt(3), t(0.975, 2) = 4.302653
    half = 4.302653 / math.sqrt(3)
    assert interval.estimate == pytest.approx(2.0)
    assert (interval.low, interval.high) == pytest.approx((2 - half, 2 + half), rel=1e-5)
    assert interval.n == 3 and interval.method == "t" and interval.defined


def test_one_value_gives_no_interval_and_no_verdict():
    interval = stats.mean_interval([0.7])
    assert interval.estimate == 0.7 and not interval.defined and interval.n == 1
    assert stats.above(interval, 0.0) == INCONCLUSIVE and stats.below(interval, 1.0) == INCONCLUSIVE
    assert "no interval" in interval.format()


def test_identical_values_give_a_zero_width_interval():
    interval = stats.mean_interval([0.25, 0.25, 0.25])
    assert (interval.low, interval.high) == (0.25, 0.25)
    assert stats.above(interval, 0.2) == HOLDS


def test_paired_difference_is_the_t_interval_of_the_differences():
    a, b = [0.80, 0.82, 0.81], [0.79, 0.80, 0.80]
    paired = stats.difference_interval(a, b)
    direct = stats.mean_interval([x - y for x, y in zip(a, b)])
    assert (paired.estimate, paired.low, paired.high) == pytest.approx((direct.estimate, direct.low, direct.high))
    assert paired.method == "paired t"
    with pytest.raises(ValueError, match="length"):
        stats.difference_interval([1.0, 2.0], [1.0])


def test_welch_interval_by_hand():
    a, b = [10.0, 12.0, 14.0], [7.0, 8.0, 9.0]
    interval = stats.difference_interval(a, b, paired=False)
    va, vb = 4.0 / 3, 1.0 / 3  # variances of the means
    df = (va + vb) ** 2 / (va ** 2 / 2 + vb ** 2 / 2)
    from scipy.stats import t

    half = t.ppf(0.975, df) * math.sqrt(va + vb)
    assert interval.estimate == pytest.approx(4.0)
    assert (interval.low, interval.high) == pytest.approx((4 - half, 4 + half))


def test_paired_ratio_is_the_geometric_mean_of_the_ratios():
    interval = stats.ratio_interval([2.0, 4.0, 3.0], [1.0, 2.0, 1.0])
    assert interval.estimate == pytest.approx((2 * 2 * 3) ** (1 / 3))
    assert interval.low < interval.estimate < interval.high
    assert stats.ratio_interval([1.0, -1.0], [1.0, 1.0]).n == 1  # non-positive timings are dropped


def test_bootstrap_is_deterministic_and_brackets_the_median():
    values = [0.05, 0.09, 0.11, 0.12, 0.08, 0.30, 0.07, 0.10]
    first, second = stats.bootstrap_interval(values), stats.bootstrap_interval(values)
    assert first == second
    assert first.estimate == pytest.approx(0.095)
    assert first.low <= first.estimate <= first.high and first.high <= 0.30


@pytest.mark.parametrize("statistic", ["median", "mean"])
def test_bootstrap_of_an_axis_statistic_equals_the_row_by_row_one(statistic):
    import numpy as np

    values = np.random.default_rng(3).lognormal(size=61)
    reduction = getattr(np, statistic)
    fast = stats.bootstrap_interval(values, statistic=reduction)  # reduces every resample along the axis at once
    slow = stats.bootstrap_interval(values, statistic=lambda row: reduction(row))  # one call per resample
    assert fast == slow and fast.low < fast.estimate < fast.high


def test_slope_interval_of_a_clean_trend():
    x = [3, 4, 5] * 4
    y = [0.1 * v + noise for v, noise in zip(x, [0.01, -0.01, 0.0, 0.0, 0.01, -0.01] * 2)]
    slope = stats.slope_interval(x, y)
    assert slope.estimate == pytest.approx(0.1, abs=0.01) and slope.low > 0
    assert not stats.slope_interval([3, 3, 3], [1, 2, 3]).defined  # one x value: no slope


@pytest.mark.parametrize("low, high, above, below", [
    (1.2, 1.5, HOLDS, FAILS),
    (0.8, 0.9, FAILS, HOLDS),
    (0.9, 1.1, INCONCLUSIVE, INCONCLUSIVE),
])
def test_verdicts_against_a_threshold(low, high, above, below):
    interval = Interval((low + high) / 2, low, high, 5, "t")
    assert stats.above(interval, 1.0) == above
    assert stats.below(interval, 1.0) == below


def test_minimum_count_makes_a_verdict_inconclusive():
    interval = Interval(0.5, 0.4, 0.6, 2, "t")
    assert stats.above(interval, 0.0, min_n=3) == INCONCLUSIVE
    assert stats.above(interval, 0.0, min_n=2) == HOLDS


def test_combine_and_any_of():
    assert stats.combine([HOLDS, HOLDS]) == HOLDS
    assert stats.combine([HOLDS, FAILS, INCONCLUSIVE]) == FAILS
    assert stats.combine([HOLDS, INCONCLUSIVE]) == INCONCLUSIVE
    assert stats.combine([HOLDS, NOT_TESTABLE]) == INCONCLUSIVE
    assert stats.combine([NOT_TESTABLE]) == NOT_TESTABLE and stats.combine([]) == NOT_TESTABLE
    assert stats.any_of([FAILS, HOLDS]) == HOLDS
    assert stats.any_of([FAILS, FAILS]) == FAILS
    assert stats.any_of([FAILS, INCONCLUSIVE]) == INCONCLUSIVE
    with pytest.raises(ValueError, match="not a verdict"):
        stats.combine(["partly"])


def test_overlap():
    a = Interval(1.0, 0.9, 1.1, 3, "t")
    assert a.overlaps(Interval(1.15, 1.05, 1.25, 3, "t"))
    assert not a.overlaps(Interval(1.3, 1.2, 1.4, 3, "t"))
    assert a.overlaps(Interval(5.0, math.nan, math.nan, 1, "t"))  # no interval: no evidence of a change
