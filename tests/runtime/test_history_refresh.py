"""The resync timer lists the task history off the worker, then asks for the resync
cycle; a listing that fails is said and the resync cycle still runs."""

from __future__ import annotations

import io

import anyio

from controller.adapters.engine import TransientError
from controller.runtime.loop import Controller, RunConfig
from controller.runtime.policy_source import PolicySource


class _Observer:
    def __init__(self, controller: Controller, failures: list[Exception]) -> None:
        self.controller, self.failures = controller, failures
        self.pending_when_listed: list[set[str]] = []

    def refresh_history(self) -> None:
        # What the trigger holds while the listing runs: the resync is not asked yet.
        self.pending_when_listed.append(set(self.controller.trigger._reasons))
        if self.failures:
            raise self.failures.pop(0)


def test_the_history_is_listed_before_each_resync_and_a_failed_listing_is_said() -> None:
    out = io.StringIO()
    controller = Controller(
        RunConfig(resync_seconds=0.05), PolicySource(None), out=out, handle_signals=False
    )
    observer = _Observer(controller, [TransientError("the swarm does not have a leader")])
    controller._observer = observer  # type: ignore[assignment]
    fired: list[set[str]] = []

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(controller._resync_timer)
            for _ in range(3):
                fired.append(await controller.trigger.wait())
            tg.cancel_scope.cancel()

    anyio.run(main)
    assert fired == [{"resync"}] * 3
    assert len(observer.pending_when_listed) >= 3
    assert all(not pending for pending in observer.pending_when_listed)
    said = out.getvalue()
    assert said.count("task history not listed") == 1
    assert "the swarm answered with an error it may recover from" in said
