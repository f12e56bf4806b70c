"""The verdict's statistics: the exact sign-flip test, Holm's correction, the quantile."""

from __future__ import annotations

import itertools
import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from chaos_stats import EXACT_UP_TO, holm, quantile, sign_flip_p, spread


def _by_hand(values: list[float], greater: bool) -> float:
    """Every sign pattern, enumerated the long way."""
    observed = sum(values)
    sums = [
        sum(v * s for v, s in zip(values, signs, strict=True))
        for signs in itertools.product((1, -1), repeat=len(values))
    ]
    hits = [s for s in sums if (s >= observed - 1e-9 if greater else s <= observed + 1e-9)]
    return len(hits) / len(sums)


def test_the_p_value_counts_the_sign_patterns_at_least_as_extreme() -> None:
    # +-1 +-2 +-3: sums 6, 4, 2, 0, 0, -2, -4, -6; only one reaches 6.
    assert sign_flip_p([1, 2, 3], greater=True) == 1 / 8
    assert sign_flip_p([1, 2, 3], greater=False) == 1.0
    assert sign_flip_p([1, -2, 3], greater=True) == 3 / 8  # 2: reached by 6, 4 and 2


@pytest.mark.parametrize(
    "values", [[0.3, -0.1, 0.25, 0.0, 0.4, -0.2], [1.0, 1.0, -1.0, 2.5], [0.05] * 7]
)
def test_the_p_value_is_the_enumeration_s(values: list[float]) -> None:
    for greater in (True, False):
        assert sign_flip_p(values, greater=greater) == pytest.approx(_by_hand(values, greater))


def test_a_centre_shifts_what_is_tested() -> None:
    # Mean 0.05: not shown below 0, but shown below 0.5 when every value is.
    values = [0.05] * 8
    assert sign_flip_p(values, greater=False) == 1.0
    assert sign_flip_p(values, centre=0.5, greater=False) == 1 / 256


def test_beyond_exact_enumeration_the_draws_agree_with_the_binomial() -> None:
    # n values of size 1 summing to 0: the sum of a sign pattern is 2K - n, K binomial,
    # so P(sum >= 0) = (1 + P(K = n/2)) / 2.
    n = EXACT_UP_TO + 2
    values = [1.0] * (n // 2) + [-1.0] * (n // 2)
    exact = (1 + math.comb(n, n // 2) / 2**n) / 2
    assert sign_flip_p(values, greater=True) == pytest.approx(exact, abs=0.01)
    assert sign_flip_p([1.0] * n, greater=True) < 1e-4


def test_holm_scales_the_smallest_p_by_the_family_and_never_goes_down() -> None:
    adjusted = holm({"a": 0.01, "b": 0.04, "c": 0.03})
    assert adjusted == pytest.approx({"a": 0.03, "c": 0.06, "b": 0.06})
    assert holm({"a": 0.6, "b": 0.9}) == {"a": 1.0, "b": 1.0}


def test_the_quantile_interpolates_between_order_statistics() -> None:
    values = [4.0, 1.0, 3.0, 2.0, 5.0]
    assert quantile(values, 0.5) == 3.0
    assert quantile(values, 0.99) == pytest.approx(4.96)
    assert quantile(values, 1.0) == 5.0
    assert spread([1.0, 3.0]) == pytest.approx(2**0.5)
