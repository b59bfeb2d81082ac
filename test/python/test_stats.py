"""The report's maths, against hand-computed values."""

from __future__ import annotations

import math

import pytest

from sluice_report import stats


def test_median_odd_and_even():
    assert stats.median([3, 1, 2]) == 2
    assert stats.median([4, 1, 3, 2]) == 2.5
    assert stats.median([5]) == 5
    assert stats.median([]) is None
    assert stats.median([None, 7, 1]) == 4  # missing values are not zeros


def test_min_max():
    assert stats.minimum([3, 1, 2]) == 1
    assert stats.maximum([3, 1, 2]) == 3
    assert stats.minimum([]) is None and stats.maximum([None]) is None


def test_sample_stddev_uses_n_minus_1():
    # mean 5, squared deviations 9+1+1+9 = 20, / (4-1) -> sqrt(20/3)
    assert stats.sample_stddev([2, 4, 6, 8]) == pytest.approx(math.sqrt(20 / 3))
    assert stats.sample_stddev([2, 4, 6, 8]) != pytest.approx(math.sqrt(20 / 4))
    assert stats.sample_stddev([10, 10, 10]) == 0
    assert stats.sample_stddev([10]) is None  # one run: spread unknown, not zero


def test_cv_is_stddev_over_mean():
    assert stats.cv([2, 4, 6, 8]) == pytest.approx(math.sqrt(20 / 3) / 5)
    assert stats.cv([1]) is None
    assert stats.cv([0, 0]) is None


def test_high_variance_threshold_is_strictly_above_ten_percent():
    assert stats.HIGH_CV == 0.10
    assert stats.is_high_variance(0.1001) is True
    assert stats.is_high_variance(0.10) is False
    assert stats.is_high_variance(0.0999) is False
    assert stats.is_high_variance(None) is None
    # 3400/4600/5700: sd 1150.4, mean 4566.7 -> CV 25.2%
    s = stats.spread([3400, 4600, 5700])
    assert s.cv == pytest.approx(0.2519, abs=1e-4) and s.high_variance is True
    assert stats.spread([100, 101, 102]).high_variance is False


def test_spread_bundles_everything():
    s = stats.spread([3, None, 1, 2])
    assert (s.n, s.median, s.min, s.max) == (3, 2, 1, 3)
    assert s.stddev == pytest.approx(1.0)
    assert stats.spread([]) == stats.EMPTY


def test_ratio_guards_zero_and_none():
    assert stats.ratio(3, 4) == 0.75
    assert stats.ratio(3, 0) is None and stats.ratio(None, 4) is None
