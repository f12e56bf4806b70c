"""The liveness gatherer: signals with the time they changed, an unreadable source says
nothing, a change of mind fires the trigger."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from controller.core.model import ClusterSnapshot
from controller.runtime.health_inputs import HealthInputs
from controller.runtime.liveness import INDIRECT_KEPT_POLLS, LivenessGatherer
from tests.core.builders import node, snapshot


class FakeApi:
    def __init__(self) -> None:
        self.peers: list[dict[str, str]] | None = []
        self.timeout = 60

    def inspect_network(self, name: str, verbose: bool = False) -> dict[str, Any]:
        assert (name, verbose) == ("ingress", True)
        if self.peers is None:
            raise ConnectionError("manager away")
        return {"Peers": self.peers}


class FakeClient:
    def __init__(self) -> None:
        self.api = FakeApi()


def nodes() -> ClusterSnapshot:
    snap = snapshot([node(1, manager=True), node(2)], [])
    addressed = tuple(replace(n, addr=f"10.0.0.{i + 1}") for i, n in enumerate(snap.nodes))
    return replace(snap, nodes=addressed)


def make(open_ports: set[str], client: FakeClient, clock: list[float], fired: list[int]):  # type: ignore[no-untyped-def]
    gatherer = LivenessGatherer(
        client_factory=lambda: client,
        connect=lambda addr, port, timeout: addr in open_ports,
        clock=lambda: clock[0],
        on_change=lambda: fired.append(1),
    )
    gatherer.set_targets(nodes())
    return gatherer


def test_signals_keep_the_time_each_changed_and_a_change_fires_the_trigger() -> None:
    client, clock, fired = FakeClient(), [100.0], []
    client.api.peers = [{"Name": "node-1", "IP": "10.0.0.1"}, {"Name": "node-2", "IP": "10.0.0.2"}]
    ports = {"10.0.0.1", "10.0.0.2"}
    gatherer = make(ports, client, clock, fired)
    gatherer.poll_once()
    assert fired == []  # all alive at the first sight: nothing to act on
    assert {(s.node_id, s.source, s.alive, s.since) for s in gatherer.signals()} == {
        ("n1", "gossip", True, 100.0),
        ("n1", "probe", True, 100.0),
        ("n2", "gossip", True, 100.0),
        ("n2", "probe", True, 100.0),
    }
    clock[0] = 101.0
    ports.discard("10.0.0.2")
    gatherer.poll_once()
    assert fired == [1]
    probe = next(s for s in gatherer.signals() if (s.node_id, s.source) == ("n2", "probe"))
    assert (probe.alive, probe.since) == (False, 101.0)
    assert "refused or timed out" in probe.detail
    clock[0] = 102.0
    client.api.peers = [{"Name": "node-1", "IP": "10.0.0.1"}]
    gatherer.poll_once()
    gossip = next(s for s in gatherer.signals() if (s.node_id, s.source) == ("n2", "gossip"))
    assert (gossip.alive, gossip.since) == (False, 102.0)
    # Unchanged signals keep their time; while a signal turned to gone recently every
    # poll fires (the suspicion ripens without an event), and then no more.
    clock[0] = 105.0
    gatherer.poll_once()
    assert fired == [1, 1, 1]
    clock[0] = 130.0
    gatherer.poll_once()
    assert fired == [1, 1, 1]
    probe = next(s for s in gatherer.signals() if (s.node_id, s.source) == ("n2", "probe"))
    assert probe.since == 101.0
    # The client's timeout was shortened: a hung manager never holds a poll for long.
    assert client.api.timeout <= 2.0


def test_unreadable_gossip_says_nothing_about_the_nodes() -> None:
    client, clock, fired = FakeClient(), [100.0], []
    client.api.peers = None
    gatherer = make({"10.0.0.1", "10.0.0.2"}, client, clock, fired)
    gatherer.poll_once()
    assert {s.source for s in gatherer.signals()} == {"probe"}
    assert all(s.alive for s in gatherer.signals())


def test_other_nodes_are_asked_only_about_a_node_the_probe_fails_on() -> None:
    client, clock, fired = FakeClient(), [100.0], []
    client.api.peers = [{"Name": "node-1", "IP": "10.0.0.1"}, {"Name": "node-2", "IP": "10.0.0.2"}]
    ports = {"10.0.0.1", "10.0.0.2"}
    asked: list[tuple[str, str]] = []
    others: dict[str, tuple[bool, str] | None] = {"n2": (False, "unreachable from node-3")}

    def indirect(node_id: str, address: str) -> tuple[bool, str] | None:
        asked.append((node_id, address))
        return others.get(node_id)

    gatherer = make(ports, client, clock, fired)
    gatherer.indirect = indirect
    gatherer.poll_once()
    assert asked == [] and not [s for s in gatherer.signals() if s.source == "indirect"]

    clock[0] = 101.0
    ports.discard("10.0.0.2")  # the probe fails: other nodes are asked, and agree
    gatherer.poll_once()
    assert asked == [("n2", "10.0.0.2")]
    said = {(s.node_id, s.source): s for s in gatherer.signals()}
    assert (said["n2", "indirect"].alive, said["n2", "indirect"].since) == (False, 101.0)
    assert said["n2", "indirect"].detail == "unreachable from node-3"
    assert said["n2", "gossip"].alive, "gossip has not dropped it yet"

    # No agent answers for a poll or two: the last word is kept (one missed answer would
    # otherwise end a suspicion); after that, no word.
    others["n2"] = None
    for poll in range(INDIRECT_KEPT_POLLS):
        clock[0] = 101.5 + poll / 2
        gatherer.poll_once()
        said = {(s.node_id, s.source): s for s in gatherer.signals()}
        assert (said["n2", "indirect"].alive, said["n2", "indirect"].since) == (False, 101.0)
    clock[0] = 101.5 + INDIRECT_KEPT_POLLS / 2
    gatherer.poll_once()
    assert ("n2", "indirect") not in {(s.node_id, s.source) for s in gatherer.signals()}

    clock[0] = 102.0
    others["n2"] = (True, "reached from node-3")  # only this manager's route is bad
    gatherer.poll_once()
    said = {(s.node_id, s.source): s for s in gatherer.signals()}
    assert said["n2", "indirect"].alive and not said["n2", "probe"].alive

    clock[0] = 103.0
    ports.add("10.0.0.2")  # the probe answers again: nobody is asked, no word kept
    gatherer.poll_once()
    assert len(asked) == 2 + INDIRECT_KEPT_POLLS + 1
    assert ("n2", "indirect") not in {(s.node_id, s.source) for s in gatherer.signals()}


def test_a_controller_that_reaches_no_node_stands_aside_and_says_so() -> None:
    # A route or a firewall between the controller and every node: not every node dying.
    client, clock, fired = FakeClient(), [100.0], []
    client.api.peers = [{"Name": "node-1", "IP": "10.0.0.1"}, {"Name": "node-2", "IP": "10.0.0.2"}]
    ports: set[str] = set()
    asked: list[str] = []
    gatherer = make(ports, client, clock, fired)
    gatherer.indirect = lambda node_id, address: asked.append(node_id) or (False, "refused")
    gatherer.poll_once()
    assert {s.source for s in gatherer.signals()} == {"gossip"}, "no probe word at all"
    assert asked == [], "nor any other node's"
    (status,) = gatherer.unavailable()
    assert status.kind == "probe" and "no node's address answers" in status.problem
    snap = HealthInputs(liveness=gatherer).enrich(nodes(), now=100.0)
    assert status in snap.unavailable_sources
    # Once one node answers, the probes count again.
    clock[0] = 101.0
    ports.add("10.0.0.1")
    gatherer.poll_once()
    assert gatherer.unavailable() == ()
    said = {(s.node_id, s.source): s for s in gatherer.signals()}
    assert said["n1", "probe"].alive and not said["n2", "probe"].alive
