"""Per-snapshot memoisation for totals that several rules and services recompute.

A snapshot is frozen, so a function of it alone may be computed once. The last result
is kept against a weak reference to the snapshot: nothing is kept alive, and another
snapshot (the next cycle's, or a test's) computes afresh.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from functools import wraps
from typing import TypeVar

from controller.core.model import ClusterSnapshot

T = TypeVar("T")


def per_snapshot(fn: Callable[[ClusterSnapshot], T]) -> Callable[[ClusterSnapshot], T]:
    """Cache `fn(snapshot)` for the last snapshot seen; callers must not mutate it."""
    last: list[tuple[weakref.ref[ClusterSnapshot], T]] = []

    @wraps(fn)
    def cached(snapshot: ClusterSnapshot) -> T:
        if last and last[0][0]() is snapshot:
            return last[0][1]
        value = fn(snapshot)
        last[:] = [(weakref.ref(snapshot), value)]
        return value

    return cached
