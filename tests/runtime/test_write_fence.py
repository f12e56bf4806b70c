"""Every attempt of a write passes the lease's fence, and no request outlives its margin.

The executor is the one the controller builds for itself (`Controller._writer`), over a
fake of the engine's service API: the write is what would go out, attempt by attempt.
"""

from __future__ import annotations

import copy
import io
from collections.abc import Callable
from typing import Any

import docker.errors
import pytest
import requests

from controller.core.actions import Action, SetNodeLabels, SetReplicas
from controller.core.lease import LeaseView, new_lease
from controller.runtime.lease_keeper import LeaseConfig, LeaseKeeper, NotLeaderError
from controller.runtime.loop import Controller, RunConfig
from controller.runtime.policy_source import PolicySource
from tests.adapters.engine_session import EngineSession

LEASE = LeaseConfig(name="ctl-lease", holder="a", lifetime=15.0)
SCALE = SetReplicas(service_id="svc1", service_name="web", version=40, replicas=3)
MARK = SetNodeLabels(node_id="n2", hostname="node-2", version=7, set_labels={"a": "b"})


class Clock:
    def __init__(self) -> None:
        self.now = 500.0

    def __call__(self) -> float:
        return self.now


def _server_error(text: str) -> docker.errors.APIError:
    response = requests.Response()
    response.status_code = 500
    return docker.errors.APIError(text, response=response, explanation=text)


class FakeServiceApi(EngineSession):
    """inspect and raw update of one service; `failing` answers fail with a 500 first,
    each calling `meanwhile` (what happens while that attempt is out)."""

    def __init__(self, failing: int = 0, meanwhile: Callable[[], None] = lambda: None) -> None:
        self.attrs: dict[str, Any] = {
            "ID": "svc1",
            "Version": {"Index": 40},
            "Spec": {"Name": "web", "Mode": {"Replicated": {"Replicas": 2}}},
        }
        self.failing, self.meanwhile = failing, meanwhile
        self.sent: list[dict[str, Any]] = []  # every update request that went out
        self.landed: list[dict[str, Any]] = []

    def inspect_service(self, service_id: str) -> dict[str, Any]:
        return copy.deepcopy(self.attrs)

    def inspect_node(self, node_id: str) -> dict[str, Any]:
        return {"ID": node_id, "Version": {"Index": 7}, "Spec": {"Labels": {}}}

    def raw_post(self, path: str, body: Any, params: dict[str, Any], timeout: Any) -> Any:
        self.sent.append({"params": params, "timeout": timeout})
        if self.failing:
            self.failing -= 1
            self.meanwhile()
            raise _server_error("rpc error: the swarm does not have a leader")
        self.landed.append(body)
        return None


class FakeClient:
    def __init__(self, api: FakeServiceApi) -> None:
        self.api = api


def leading_writer(api: FakeServiceApi, clock: Clock) -> tuple[Callable[..., None], LeaseKeeper]:
    """The controller's own executor, its lease held from `clock.now` for a lifetime."""
    controller = Controller(
        RunConfig(lease=LEASE), PolicySource(None), out=io.StringIO(), handle_signals=False
    )
    keeper = LeaseKeeper(LEASE, lambda: None, say=lambda _: None, clock=clock)  # type: ignore[arg-type,return-value]
    lease = new_lease(me=LEASE.holder, term=1, lifetime=LEASE.lifetime, wall_now=clock.now)
    keeper.view = LeaseView().attempt(lease, now=clock.now).landed()
    controller.lease = keeper
    assert keeper.holds()
    return controller._writer(FakeClient(api)), keeper  # type: ignore[arg-type]


def test_a_retried_write_is_fenced_again_and_stays_out_once_the_lease_is_lost() -> None:
    """The first attempt is answered with a 5xx (a Raft election); while it is out, the
    lease runs into its margin (a standby may take over a margin later). The retry must
    not go out."""
    clock = Clock()

    def lease_runs_out() -> None:
        clock.now += LEASE.lifetime - LEASE.margin

    api = FakeServiceApi(failing=1, meanwhile=lease_runs_out)
    write, keeper = leading_writer(api, clock)
    with pytest.raises(NotLeaderError):
        write(SCALE)
    assert not keeper.holds()
    assert len(api.sent) == 1, "a retry went out after the lease was lost"
    assert api.landed == []


def test_a_retry_while_the_lease_holds_goes_out() -> None:
    clock = Clock()
    api = FakeServiceApi(failing=1, meanwhile=lambda: setattr(clock, "now", clock.now + 1.0))
    write, _ = leading_writer(api, clock)
    write(SCALE)
    assert len(api.sent) == 2
    assert [spec["Mode"]["Replicated"]["Replicas"] for spec in api.landed] == [3]


@pytest.mark.parametrize("action", [SCALE, MARK], ids=["service", "node"])
def test_no_write_request_may_outlive_the_lease_margin(action: Action) -> None:
    """A request sent while the lease holds is answered, or given up on, before the
    margin it was sent with has passed: its connect and read timeouts add up to less."""
    clock = Clock()
    api = FakeServiceApi()
    write, _ = leading_writer(api, clock)
    write(action)
    (request,) = api.sent
    timeout = request.get("timeout")
    assert isinstance(timeout, tuple), f"the write waits the client's own timeout ({timeout})"
    connect, read = timeout
    assert 0 < connect + read < LEASE.margin
