"""Node agent parts without Docker: event reading, usage from /proc, reports, discovery,
the collector, and failures from Swarm's task history."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import pytest
import requests

from controller.adapters.agent_client import (
    AgentError,
    addresses_from_tasks,
    discover_agents,
    report_from,
)
from controller.adapters.agent_probe import (
    ContainerUsage,
    EventReader,
    HostUsage,
    Identity,
    ProbeError,
    service_counts,
)
from controller.adapters.health_attrs import failure_events_from_attrs
from controller.core.model import NodeUsage
from controller.core.outside_inputs import WorkloadEventKind
from controller.runtime.agent_collector import AgentCollector
from tests.core.builders import node, snapshot


def event(action: str, container: str = "c1", at: float = 100.0, **attrs: str) -> dict[str, Any]:
    labels = {
        "com.docker.swarm.task.id": "task-1",
        "com.docker.swarm.service.id": "svc-1",
        "com.docker.swarm.service.name": "web",
        **attrs,
    }
    return {
        "Type": "container",
        "Action": action,
        "Actor": {"ID": container, "Attributes": labels},
        "timeNano": int(at * 1e9),
    }


def test_events_unhealthy_and_unasked_deaths_count_stops_do_not() -> None:
    reader = EventReader()
    unhealthy = reader.read(event("health_status: unhealthy"))
    assert unhealthy is not None and unhealthy.kind == "unhealthy"
    assert reader.read(event("health_status: healthy")) is None
    died = reader.read(event("die", exitCode="137"))
    assert died is not None and died.kind == "died" and died.detail == "exit code 137"
    assert reader.read(event("die", exitCode="0")) is None, "a clean exit is no failure"
    assert reader.read(event("kill", container="c2", at=200.0)) is None
    assert reader.read(event("die", container="c2", at=201.0, exitCode="137")) is None, "asked"
    assert reader.read({**event("die"), "Actor": {"ID": "c3", "Attributes": {}}}) is None


def test_host_usage_from_proc(tmp_path: Path) -> None:
    (tmp_path / "meminfo").write_text("MemTotal: 1000 kB\nMemFree: 100 kB\nMemAvailable: 250 kB\n")
    (tmp_path / "stat").write_text("cpu  100 0 100 700 100 0 0 0 0 0\n")
    meter = HostUsage(tmp_path)
    assert meter.sample() is None, "the first read only sets the baseline"
    (tmp_path / "stat").write_text("cpu  200 0 200 800 100 0 0 0 0 0\n")  # +200 busy, +100 idle
    cpu, memory = meter.sample() or (0, 0)
    assert cpu == pytest.approx(2 / 3) and memory == pytest.approx(0.75)
    (tmp_path / "stat").unlink()
    with pytest.raises(ProbeError):
        meter.sample()


class _VanishingEngine:
    """Two running containers; `gone` exits between the list and its stats call, and the
    engine then answers 200 with an empty body (seen on dockerd 20.10)."""

    def __init__(self) -> None:
        self.cpu_ns = 0

    def containers(self, filters: dict[str, str]) -> list[dict[str, str]]:
        return [{"Id": "gone"}, {"Id": "busy"}]

    def stats(self, container: str, stream: bool, one_shot: bool) -> dict[str, Any]:
        if container == "gone":
            raise requests.exceptions.JSONDecodeError("Expecting value", "", 0)
        self.cpu_ns += 500_000_000
        return {"cpu_stats": {"cpu_usage": {"total_usage": self.cpu_ns}},
                "memory_stats": {"usage": 512}}  # fmt: skip


def test_container_usage_skips_a_container_that_exits_while_measured() -> None:
    engine = _VanishingEngine()
    client = type("Client", (), {"api": engine})()
    meter = ContainerUsage(client, Identity("n1", "node-1", cpus=2, memory_bytes=1024))
    assert meter.sample() is None, "the first read only sets the baseline"
    cpu, memory = meter.sample() or (-1.0, -1.0)
    assert cpu > 0 and memory == pytest.approx(0.5), "the busy container is still measured"


class _SlowEngine:
    """An engine amid a Raft election: the list call times out, and docker-py lets
    requests' own ReadTimeout through rather than a DockerException."""

    def containers(self, filters: dict[str, str]) -> list[dict[str, str]]:
        raise requests.exceptions.ReadTimeout("Read timed out. (read timeout=10)")


def test_a_slow_engine_is_a_probe_error_not_a_failed_report() -> None:
    client = type("Client", (), {"api": _SlowEngine()})()
    with pytest.raises(ProbeError, match="cannot list containers: Read timed out"):
        service_counts(client)


def test_agent_addresses_come_from_the_tasks_network_attachments() -> None:
    tasks = [
        {
            "NodeID": "n1",
            "Status": {"State": "running"},
            "NetworksAttachments": [
                {
                    "Network": {"Spec": {"Name": "ingress", "Ingress": True}},
                    "Addresses": ["10.0.0.5/24"],
                },
                {"Network": {"Spec": {"Name": "placement"}}, "Addresses": ["10.0.1.7/24"]},
            ],
        },
        {"NodeID": "n2", "Status": {"State": "pending"}, "NetworksAttachments": []},
        {"NodeID": "n3", "Status": {"State": "running"}},
    ]
    assert addresses_from_tasks(tasks, 9810) == {"n1": "http://10.0.1.7:9810"}


def test_failed_tasks_in_the_history_are_failures_and_nothing_else() -> None:
    def task(state: str, **extra: Any) -> dict[str, Any]:
        return {
            "ID": f"t-{state}-{len(extra)}",
            "ServiceID": "s1",
            "NodeID": "n2",
            "Status": {
                "State": state,
                "Timestamp": "2026-11-30T09:04:16.365659377Z",
                "Err": "boom",
            },
            **extra,
        }

    events = failure_events_from_attrs(
        [task("failed"), task("rejected"), task("shutdown"), task("failed", NodeID="")]
    )
    assert [(e.task_id, e.node_id, e.kind, e.detail) for e in events] == [
        ("t-failed-0", "n2", WorkloadEventKind.FAILED, "boom")
    ]
    assert events[0].at == pytest.approx(1796029456.365659)


REPORT = {
    "node_id": "n2",
    "hostname": "node-2",
    "at": 1000.0,
    "usage": {"cpu": 0.5, "memory": 0.25, "window": 60, "samples": 3, "source": "host"},
    "services": {"svc-1": {"name": "web", "running": 1, "unhealthy": 1}},
    "events": [{"task": "task-1", "service": "svc-1", "kind": "unhealthy", "at": 990.0}],
}


class FakeAgent:
    def __init__(self, answer: Any, secret: str = "s") -> None:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                ok = self.headers.get("Authorization") == f"Bearer {secret}"
                body = json.dumps(outer.answer if ok else {"error": "no"}).encode()
                self.send_response(200 if ok else 401)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.answer = answer
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def fake() -> Iterator[FakeAgent]:
    agent = FakeAgent(REPORT)
    yield agent
    agent.stop()


SNAP = snapshot([node(1, manager=True), node(2)], [])


def test_the_collector_reads_usage_and_events(fake: FakeAgent) -> None:
    collector = AgentCollector(secret="s", addresses={fake.url: "node-2"}, clock=lambda: 1000.0)
    collector.poll_once()
    got = collector.inputs(SNAP, 1001.0)
    assert got.usage == {"n2": NodeUsage(cpu=0.5, memory=0.25)}
    assert [(e.task_id, e.kind) for e in got.events] == [("task-1", WorkloadEventKind.UNHEALTHY)]
    assert got.unavailable == ()


def test_a_lost_agent_is_reported_once_its_report_is_stale(fake: FakeAgent) -> None:
    now = [1000.0]
    collector = AgentCollector(
        secret="s", addresses={fake.url: "node-2"}, interval=1, timeout=1, clock=lambda: now[0]
    )
    collector.poll_once()
    fake.stop()
    now[0] = 1001.0
    collector.poll_once()
    assert collector.inputs(SNAP, 1001.0).usage, "a blip: the last report still counts"
    now[0] = 1010.0
    collector.poll_once()
    got = collector.inputs(SNAP, 1010.0)
    assert got.usage == {} and got.events == ()
    assert [(s.kind, s.name) for s in got.unavailable] == [("agent", "node-2")]


@pytest.mark.parametrize(
    ("answer", "secret", "says"),
    [
        (REPORT, "wrong", "HTTP 401"),
        (
            {**REPORT, "usage": {"cpu": -1, "memory": 0, "window": 1, "samples": 1}},
            "s",
            "usage.cpu",
        ),
        ({"hello": "world"}, "s", "node_id"),
    ],
)
def test_bad_reports_make_an_agent_unavailable(answer: Any, secret: str, says: str) -> None:
    agent = FakeAgent(answer)
    try:
        collector = AgentCollector(
            secret=secret, addresses={agent.url: "node-2"}, clock=lambda: 0.0
        )
        collector.poll_once()
        got = collector.inputs(SNAP, 0.0)
        assert got.usage == {} and len(got.unavailable) == 1
        assert says in got.unavailable[0].problem
    finally:
        agent.stop()


def test_reports_of_nodes_not_in_the_swarm_are_ignored() -> None:
    agent = FakeAgent({**REPORT, "node_id": "elsewhere"})
    try:
        collector = AgentCollector(secret="s", addresses={agent.url: "node-2"}, clock=lambda: 0.0)
        collector.poll_once()
        assert collector.inputs(SNAP, 0.0).usage == {}
    finally:
        agent.stop()


@pytest.mark.parametrize(("runs_on", "believed"), [("n2", True), ("n1", False)])
def test_a_discovered_agent_is_believed_only_for_the_node_its_task_runs_on(
    fake: FakeAgent, runs_on: str, believed: bool
) -> None:
    # The report says node n2; Swarm says the agent's task runs on `runs_on`.
    collector = AgentCollector(
        secret="s", discover=lambda: {runs_on: fake.url}, clock=lambda: 1000.0
    )
    collector.poll_once()
    got = collector.inputs(SNAP, 1001.0)
    assert bool(got.usage) is believed and bool(got.events) is believed
    assert bool(collector.vantage_points()) is believed
    if not believed:
        (status,) = got.unavailable
        assert "reports for node n2 but its task runs on node n1" in status.problem


@pytest.mark.parametrize(
    ("listed", "believed"), [("node-2", True), ("n2", True), ("node-1", False)]
)
def test_a_listed_agent_is_believed_only_for_the_node_it_is_listed_with(
    fake: FakeAgent, listed: str, believed: bool
) -> None:
    # The report says node n2 (node-2); the operator listed the agent for `listed`.
    collector = AgentCollector(secret="s", addresses={fake.url: listed}, clock=lambda: 1000.0)
    collector.poll_once()
    got = collector.inputs(SNAP, 1001.0)
    assert bool(got.usage) is believed and bool(got.events) is believed
    assert bool(collector.vantage_points()) is believed
    if not believed:
        (status,) = got.unavailable
        assert "reports for node n2 but is listed for node node-1: not believed" in status.problem


@pytest.mark.parametrize("at", [float("nan"), float("inf")])
def test_a_report_whose_times_are_not_numbers_is_refused(at: float) -> None:
    with pytest.raises(AgentError, match="at"):
        report_from({**REPORT, "at": at})
    event = {"task": "t", "service": "s", "kind": "died", "at": at}
    with pytest.raises(AgentError, match=r"events\.0\.at"):
        report_from({**REPORT, "events": [event]})


class _ElectingManager:
    """A manager amid a Raft election: the tasks call times out (a requests error)."""

    def tasks(self, filters: dict[str, str]) -> list[dict[str, Any]]:
        raise requests.exceptions.ReadTimeout("Read timed out. (read timeout=10)")


def test_discovery_on_a_manager_amid_an_election_is_an_agent_error() -> None:
    client = type("Client", (), {"api": _ElectingManager()})()
    with pytest.raises(AgentError, match="Read timed out"):
        discover_agents(client, "placement_agent", 9810)


def test_the_collector_keeps_polling_whatever_discovery_raises(fake: FakeAgent) -> None:
    calls = []

    def discover() -> dict[str, str]:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("something nobody foresaw")
        return {"n2": fake.url}

    collector = AgentCollector(secret="s", discover=discover, interval=0.01)

    async def main() -> None:
        with anyio.move_on_after(5):
            async with anyio.create_task_group() as tg:
                tg.start_soon(collector.run)
                while collector.polls < 1:
                    await anyio.sleep(0.01)
                tg.cancel_scope.cancel()

    anyio.run(main)
    assert len(calls) >= 2, "the failed poll did not end the collector"
    assert collector.inputs(SNAP, time.time()).usage == {"n2": NodeUsage(cpu=0.5, memory=0.25)}
