"""A coalescing trigger: any number of reasons fired while a cycle runs yield one cycle."""

from __future__ import annotations

import anyio


class Trigger:
    def __init__(self) -> None:
        self._reasons: set[str] = set()
        self._event = anyio.Event()

    def fire(self, reason: str) -> None:
        """Safe to call from the event loop; threads use `anyio.from_thread.run_sync`."""
        self._reasons.add(reason)
        self._event.set()

    async def wait(self) -> set[str]:
        await self._event.wait()
        reasons, self._reasons = self._reasons, set()
        self._event = anyio.Event()
        return reasons
