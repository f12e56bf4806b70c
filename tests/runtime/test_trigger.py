from __future__ import annotations

import anyio
import pytest

from controller.runtime.cycle_trigger import Trigger

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_reasons_fired_before_a_wait_coalesce_into_one_cycle() -> None:
    trigger = Trigger()
    for reason in ("event:service:update", "resync", "event:service:update"):
        trigger.fire(reason)
    assert await trigger.wait() == {"event:service:update", "resync"}
    with anyio.move_on_after(0.05) as scope:
        await trigger.wait()
    assert scope.cancelled_caught, "nothing was fired, so the second wait must block"


async def test_a_fire_during_a_cycle_yields_the_next_cycle() -> None:
    trigger = Trigger()
    trigger.fire("start")
    await trigger.wait()
    trigger.fire("conflict")
    with anyio.fail_after(1):
        assert await trigger.wait() == {"conflict"}
