"""ClusterObserver lists the finished tasks once per interval and reuses their failures
between; the cyclic collector is off while it decodes, and on again after."""

from __future__ import annotations

import gc
import json
from typing import Any

import pytest

from controller.adapters.attrs import ByVersion, service_from_attrs, task_from_attrs
from controller.adapters.engine import ClusterObserver, collector_paused
from tests.adapters.engine_session import EngineSession


def _failed(task_id: str, at: str, desired: str) -> dict[str, Any]:
    return {
        "ID": task_id,
        "ServiceID": "svc",
        "NodeID": "node-a",
        "DesiredState": desired,
        "Status": {"State": "failed", "Timestamp": at, "Err": f"{task_id} exited"},
    }


class _Raw:
    def __init__(self, body: bytes | Exception) -> None:
        self.body, self.closed = body, False

    def read(self, decode_content: bool = False) -> bytes:
        if isinstance(self.body, Exception):
            raise self.body
        return self.body


class _Response:
    """What adapters/task_list reads of a streamed response: the raw body, in one read."""

    def __init__(self, body: bytes | Exception) -> None:
        self.raw = _Raw(body)

    def raise_for_status(self) -> None:
        pass

    def close(self) -> None:
        self.raw.closed = True


class _Api(EngineSession):
    def __init__(self) -> None:
        self.listings: list[str] = []
        self.answers: dict[str, list[Any]] = {"running": [], "ready": [], "shutdown": []}

    def nodes(self) -> list[Any]:
        return []

    def services(self) -> list[Any]:
        return []

    # The task listing goes through docker-py's session, as adapters/task_list does.
    def raw_get(self, path: str, params: dict[str, Any]) -> Any:
        assert path == "/tasks"
        assert not gc.isenabled(), "decoding with the cyclic collector on"
        states = json.loads(params["filters"])["desired-state"]
        self.listings.append(states[0])  # a cycle lists running (and ready) tasks in one call
        return _Response(json.dumps([t for s in states for t in self.answers[s]]).encode())

    def inspect_swarm(self) -> Any:
        return {"Spec": {"Dispatcher": {"HeartbeatPeriod": 2_000_000_000}}}

    def inspect_config(self, name: str) -> Any:
        import docker.errors  # noqa: PLC0415

        raise docker.errors.NotFound("no records yet")


def test_the_history_is_listed_once_per_interval_the_running_tasks_every_cycle() -> None:
    api = _Api()
    client: Any = type("Client", (), {"api": api})()
    now = [0.0]
    observe = ClusterObserver(client, history_every=lambda: 10.0, clock=lambda: now[0])
    for t in (0.0, 1.0, 9.9, 10.0, 15.0, 20.5):
        now[0] = t
        observe()
    assert api.listings.count("running") == 6
    assert api.listings.count("shutdown") == 3  # at 0, 10 and 20.5
    assert observe.history_listings == 3


def test_a_cycle_lists_swarm_s_delayed_replacements_beside_the_running_tasks() -> None:
    """A replacement Swarm's restart supervisor holds back (desired READY) is counted by a
    scale-down, so the snapshot keeps it, apart from the tasks Swarm wants running."""
    api = _Api()
    client: Any = type("Client", (), {"api": api})()
    api.answers["running"] = [_failed("up", "2026-01-01T10:00:00Z", "running")]
    api.answers["ready"] = [_failed("later", "2026-01-01T10:00:01Z", "ready")]
    snap = ClusterObserver(client, history_every=lambda: 10.0, clock=lambda: 0.0)()
    assert [t.id for t in snap.tasks] == ["up"]
    assert [t.id for t in snap.delayed] == ["later"]


def test_failures_come_from_both_listings_and_the_history_is_kept_as_failures_only() -> None:
    api = _Api()
    client: Any = type("Client", (), {"api": api})()
    api.answers["shutdown"] = [
        _failed("old", "2026-01-01T10:00:00Z", "shutdown"),
        _failed("both", "2026-01-01T10:00:05Z", "shutdown"),
    ]
    api.answers["running"] = [
        _failed("new", "2026-01-01T10:00:09Z", "running"),
        _failed("both", "2026-01-01T10:00:01Z", "running"),
    ]
    observe = ClusterObserver(client, history_every=lambda: 10.0, clock=lambda: 0.0)
    first = observe()
    assert [(e.task_id, e.detail) for e in first.workload] == [
        ("old", "old exited"),
        ("both", "both exited"),
        ("new", "new exited"),
    ]
    assert first.workload[1].at == first.workload[0].at + 5  # the history's word on "both"
    api.answers["shutdown"] = []  # not listed again within the interval: kept as failures
    assert [e.task_id for e in observe().workload] == ["old", "both", "new"]
    assert api.listings.count("shutdown") == 1
    assert first.heartbeat_seconds == 2.0  # read with the history, for the owners rule
    assert gc.isenabled()


def test_the_collector_is_on_again_after_a_failure_and_stays_off_if_it_was() -> None:
    with pytest.raises(RuntimeError), collector_paused():
        raise RuntimeError("lost the engine")
    assert gc.isenabled()
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def _running(task_id: str, version: int, node: str) -> dict[str, Any]:
    return {
        "ID": task_id,
        "Version": {"Index": version},
        "ServiceID": "svc",
        "NodeID": node,
        "Slot": 1,
        "DesiredState": "running",
        "Status": {"State": "running", "Timestamp": "2026-01-01T10:00:00Z"},
    }


def test_a_task_at_the_same_version_is_not_converted_again_and_a_changed_one_is() -> None:
    convert = ByVersion(task_from_attrs)
    first = convert(_running("t1", 5, "node-a"))
    convert.next_cycle()
    assert convert(_running("t1", 5, "node-a")) is first
    moved = convert(_running("t1", 6, "node-b"))
    assert (moved.node_id, first.node_id) == ("node-b", "node-a")
    convert.next_cycle()
    convert.next_cycle()  # a cycle that did not see t1: forgotten
    assert convert(_running("t1", 5, "node-a")) is not first
    assert convert(_running("t1", 5, "node-a")) == first


def test_an_engine_without_a_swarm_answer_gives_no_heartbeat_and_the_cycle_goes_on() -> None:
    import docker.errors  # noqa: PLC0415

    api = _Api()

    def no_swarm() -> Any:
        raise docker.errors.NotFound("This node is not a swarm manager.")

    api.inspect_swarm = no_swarm  # type: ignore[method-assign]
    client: Any = type("Client", (), {"api": api})()
    assert ClusterObserver(client)().heartbeat_seconds is None


def test_a_service_at_the_same_version_is_not_converted_again() -> None:
    def web(version: int, replicas: int) -> dict[str, Any]:
        spec = {"Name": "web", "Mode": {"Replicated": {"Replicas": replicas}}}
        return {"ID": "s1", "Version": {"Index": version}, "Spec": spec}

    convert = ByVersion(service_from_attrs)
    first = convert(web(7, 2))
    convert.next_cycle()
    assert convert(web(7, 2)) is first
    assert convert(web(8, 3)).replicas == 3


def test_a_refreshed_history_spares_the_cycles_the_listing_until_it_is_stale() -> None:
    """The controller lists the history off its worker (`refresh_history`); a cycle
    lists it itself only once the last listing is older than `history_every()`."""
    api = _Api()
    api.answers["shutdown"] = [_failed("old", "2026-01-01T10:00:00Z", "shutdown")]
    client: Any = type("Client", (), {"api": api})()
    now = [0.0]
    observe = ClusterObserver(client, history_every=lambda: 30.0, clock=lambda: now[0])
    observe.refresh_history()
    for t in (1.0, 10.0, 29.9):
        now[0] = t
        assert [e.task_id for e in observe().workload] == ["old"]
    assert api.listings.count("shutdown") == 1
    api.answers["shutdown"] = [_failed("newer", "2026-01-01T10:00:30Z", "shutdown")]
    now[0] = 25.0
    observe.refresh_history()  # the timer's next listing: the cycles take its failures
    now[0] = 40.0
    assert [e.task_id for e in observe().workload] == ["newer"]
    assert api.listings.count("shutdown") == 2
    now[0] = 55.0  # 30 s since the last listing: the cycle lists it itself
    observe()
    assert api.listings.count("shutdown") == 3 and observe.history_listings == 3


def test_overlapping_pauses_in_two_threads_keep_the_collector_off_until_both_end() -> None:
    """A history listing and a cycle pause the collector in two threads, in any order:
    the first to finish must not switch it on under the other."""
    listing, cycle = collector_paused(), collector_paused()
    listing.__enter__()
    cycle.__enter__()
    listing.__exit__(None, None, None)
    assert not gc.isenabled()
    cycle.__exit__(None, None, None)
    assert gc.isenabled()


def test_a_listing_cut_mid_body_is_a_lost_engine_and_the_response_is_closed() -> None:
    """The body is read in one piece from urllib3; its transport errors reach the
    cycle as requests' would have (`response.content`), not as unexpected ones."""
    import urllib3.exceptions  # noqa: PLC0415

    from controller.adapters.engine import DockerUnavailableError  # noqa: PLC0415

    api = _Api()
    responses: list[_Response] = []

    def cut(path: str, params: dict[str, Any]) -> Any:
        responses.append(_Response(urllib3.exceptions.ProtocolError("Connection broken")))
        return responses[-1]

    api.raw_get = cut  # type: ignore[method-assign]
    client: Any = type("Client", (), {"api": api})()
    with pytest.raises(DockerUnavailableError, match="lost the Docker engine"):
        ClusterObserver(client)()
    assert responses and all(r.raw.closed for r in responses)
