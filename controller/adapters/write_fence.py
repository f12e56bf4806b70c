"""What every attempt of a write passes right before its request goes out.

A write is retried on a transient answer (adapters/writes), so the lease's fence is
checked before each attempt's request, not once per write: an attempt that fails while
the lease runs out is not followed by one sent after a standby may have taken over. And
each request is bounded by the time the lease had left when it was checked (its safety
margin): the controller has its answer, or has given up on it, before that runs out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


def _open() -> None:
    return None


# Of a write's time: the connection must be made within this share, and the answer come
# within this share after that; what is left covers the step from the check to sending.
CONNECT_SHARE = 0.2
ANSWER_SHARE = 0.6


@dataclass(frozen=True)
class WriteFence:
    # Raises (the lease's NotLeaderError) when this replica may not write now.
    check: Callable[[], None] = _open
    # The seconds a write request may take, from the check; None: the client's timeout.
    within: float | None = None

    @property
    def request_timeout(self) -> tuple[float, float] | None:
        """The (connect, read) timeout of the request, as the HTTP client takes it."""
        if self.within is None:
            return None
        return (self.within * CONNECT_SHARE, self.within * ANSWER_SHARE)


UNFENCED = WriteFence()
