"""The chaos verdict's statistics: an exact paired sign-flip test and Holm's correction.

The test is Fisher's randomization test for paired data. Under the null hypothesis that
each pair's difference is as likely positive as negative (about a given centre), every
one of the 2^n sign patterns of the differences is equally likely, so the p-value is the
share of patterns whose sum is at least as extreme as the one observed. It assumes no
distribution (replica-seconds lost are lumpy: a task on the node that crashes, or not),
and it is exact for the pair counts a chaos protocol can afford, enumerated in full up
to 2^20 patterns. Written here rather than taken from SciPy, whose permutation_test does
the same: the verdict is one sum over a few thousand patterns, not worth a dependency of
that size.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

EXACT_UP_TO = 20  # pairs: 2^20 patterns, under a second
DRAWS = 200_000  # sign patterns drawn beyond that, from a fixed seed


def _sums(values: Sequence[float]) -> list[float]:
    """The sum of every sign pattern of `values` (2^n of them)."""
    sums = [0.0]
    for v in values:
        sums = [s + v for s in sums] + [s - v for s in sums]
    return sums


def sign_flip_p(differences: Sequence[float], *, centre: float = 0.0, greater: bool) -> float:
    """One-sided p-value that the differences' mean exceeds `centre` (`greater`) or falls
    below it (not `greater`). The pattern observed counts among the extremes, so the
    p-value is never 0. Ties in the sum count as extreme (a little conservative)."""
    shifted = [d - centre for d in differences]
    if not shifted:
        return 1.0
    observed = sum(shifted)
    eps = 1e-9 * max(1.0, sum(abs(v) for v in shifted))
    if len(shifted) <= EXACT_UP_TO:
        sums = _sums(shifted)
        hits = sum(1 for s in sums if (s >= observed - eps if greater else s <= observed + eps))
        return hits / len(sums)
    rng = random.Random(0)
    hits = 1  # the observed pattern itself
    for _ in range(DRAWS):
        s = sum(v if rng.random() < 0.5 else -v for v in shifted)
        hits += s >= observed - eps if greater else s <= observed + eps
    return hits / (DRAWS + 1)


def holm(p_values: dict[str, float]) -> dict[str, float]:
    """Holm's step-down adjustment: each p-value as it is to be compared to the family's
    level, controlling the chance of any false rejection across the family."""
    ordered = sorted(p_values.items(), key=lambda kv: kv[1])
    out: dict[str, float] = {}
    running = 0.0
    m = len(ordered)
    for i, (name, p) in enumerate(ordered):
        running = max(running, min(1.0, (m - i) * p))
        out[name] = running
    return out


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else math.nan


def spread(values: Sequence[float]) -> float:
    """The sample standard deviation (n - 1); nan for fewer than two values."""
    if len(values) < 2:
        return math.nan
    m = mean(values)
    return math.sqrt(sum((v - m) ** 2 for v in values) / (len(values) - 1))


def quantile(values: Sequence[float], q: float) -> float:
    """The q-quantile by linear interpolation between order statistics (the default
    of NumPy and of R's type 7)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    pos = q * (len(ordered) - 1)
    low = math.floor(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)
