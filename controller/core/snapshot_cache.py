"""Per-snapshot memoisation for totals that several rules and services recompute.

A snapshot is frozen, so a function of it alone may be computed once. The result is
kept on the snapshot itself (as `functools.cached_property` keeps its values): nothing
lives at module level, and another snapshot (the next cycle's, or a test's) computes
afresh.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import TypeVar, cast

from controller.core.model import ClusterSnapshot

T = TypeVar("T")


def per_snapshot(fn: Callable[[ClusterSnapshot], T]) -> Callable[[ClusterSnapshot], T]:
    """Cache `fn(snapshot)` on the snapshot; callers must not mutate it."""
    key = f"_memo.{fn.__module__}.{fn.__qualname__}"

    @wraps(fn)
    def cached(snapshot: ClusterSnapshot) -> T:
        memo = snapshot.__dict__
        if key in memo:
            return cast(T, memo[key])
        value = fn(snapshot)
        memo[key] = value
        return value

    return cached
