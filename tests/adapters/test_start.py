"""`start_service`: one version-checked write back to the held count, or a clear refusal."""

from __future__ import annotations

import copy
from typing import Any

import docker.errors
import pytest

from controller.adapters.docker_read import ServiceNotFoundError
from controller.adapters.start import InRolloutError, NothingToStartError, start_service
from controller.core.replicas import BASE_LABEL, REPLICA_RECORD_LABELS
from tests.adapters.engine_session import EngineSession

HELD = {
    BASE_LABEL: "3",
    "swarm-placement.replicas-set": "2",
    "swarm-placement.operation": "hold",
    "swarm-placement.operation-since": "100",
    "swarm-placement.operation-detail": "1 replica(s) lost with a node",
}


def service_attrs(replicas: int, labels: dict[str, str]) -> dict[str, Any]:
    return {
        "ID": "svc1",
        "Version": {"Index": 40},
        "Spec": {
            "Name": "batch",
            "Labels": {"placement.priority": "none", **labels},
            "TaskTemplate": {"ContainerSpec": {"Image": "sha256:abc"}},
            "Mode": {"Replicated": {"Replicas": replicas}},
        },
    }


class FakeApi(EngineSession):
    """inspect and raw update of one service; `race` bumps the version before a write."""

    def __init__(self, attrs: dict[str, Any], race: int = 0) -> None:
        self.attrs = attrs
        self.race = race
        self.writes: list[tuple[int, dict[str, Any]]] = []

    def inspect_service(self, name: str) -> dict[str, Any]:
        if name not in (self.attrs["ID"], self.attrs["Spec"]["Name"]):
            raise docker.errors.NotFound("no such service")
        return copy.deepcopy(self.attrs)

    def raw_post(self, url: str, data: dict[str, Any], params: dict[str, int], timeout: Any) -> Any:
        if self.race:
            self.race -= 1
            self.attrs["Version"]["Index"] += 1
        if params["version"] != self.attrs["Version"]["Index"]:
            raise docker.errors.APIError("rpc error: update out of sequence")
        self.writes.append((params["version"], data))
        self.attrs["Spec"] = data
        self.attrs["Version"]["Index"] += 1
        return None


class FakeClient:
    def __init__(self, api: FakeApi) -> None:
        self.api = api


def test_start_restores_the_held_count_and_removes_the_record() -> None:
    api = FakeApi(service_attrs(2, HELD))
    started = start_service(FakeClient(api), "batch")  # type: ignore[arg-type]
    assert (started.name, started.before, started.after) == ("batch", 2, 3)
    ((version, spec),) = api.writes
    assert version == 40
    assert spec["Mode"]["Replicated"]["Replicas"] == 3
    assert not set(REPLICA_RECORD_LABELS) & set(spec["Labels"])
    assert spec["Labels"]["placement.priority"] == "none"


def test_a_racing_writer_is_read_again_not_overwritten() -> None:
    api = FakeApi(service_attrs(2, HELD), race=1)
    start_service(FakeClient(api), "batch")  # type: ignore[arg-type]
    ((version, _),) = api.writes
    assert version == 41


@pytest.mark.parametrize(
    ("replicas", "labels", "expected"),
    [
        (2, {}, "is not held: nothing to start"),
        (2, {**HELD, "swarm-placement.operation": "preempt"}, "restores it itself"),
        (5, HELD, "scaled to 5 by hand"),
        (2, {**HELD, BASE_LABEL: "three"}, "cannot be read"),
    ],
)
def test_nothing_to_start_says_why(replicas: int, labels: dict[str, str], expected: str) -> None:
    api = FakeApi(service_attrs(replicas, labels))
    with pytest.raises(NothingToStartError, match=expected):
        start_service(FakeClient(api), "batch")  # type: ignore[arg-type]
    assert api.writes == []


def test_an_unknown_service_is_not_found() -> None:
    with pytest.raises(ServiceNotFoundError, match="no service named 'nope'"):
        start_service(FakeClient(FakeApi(service_attrs(2, HELD))), "nope")  # type: ignore[arg-type]


@pytest.mark.parametrize("state", ["updating", "paused", "rollback_started", "rollback_paused"])
def test_a_service_in_a_rollout_is_not_written(state: str) -> None:
    """A write would restart a running rollout, or resume a paused one: the guards' rule."""
    attrs = service_attrs(2, HELD)
    attrs["UpdateStatus"] = {"State": state}
    api = FakeApi(attrs)
    with pytest.raises(InRolloutError, match=rf"batch is in a rollout \({state}\)"):
        start_service(FakeClient(api), "batch")  # type: ignore[arg-type]
    assert api.writes == []


def test_a_finished_rollout_holds_nothing() -> None:
    attrs = service_attrs(2, HELD)
    attrs["UpdateStatus"] = {"State": "completed"}
    api = FakeApi(attrs)
    assert start_service(FakeClient(api), "batch").after == 3  # type: ignore[arg-type]
    assert len(api.writes) == 1
