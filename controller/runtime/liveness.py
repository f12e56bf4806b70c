"""Gathers the fast liveness signals of every node in the background (core/health/suspicion).

Two independent sources, polled every `interval` (0.5 s by default):

- gossip: the peers of the `ingress` overlay's gossip cluster as this manager sees them
  (`GET /networks/ingress?verbose=true`). memberlist drops a dead or cut-off peer in 5 to
  7 s with Docker's defaults (bench/detection_signals.py), well before Swarm's down.
- probe: a TCP connect to the node's address on 7946, the gossip port every swarm node
  listens on. A killed dockerd refuses at once, a cut link times out (`probe_timeout`).
- indirect: when the probe fails and node agents run, the same connect from other nodes'
  agents (runtime/indirect_probes.py), which tells "this manager cannot reach it" from
  "nobody can". It is only asked about a node the probe fails on. When no agent
  answers, the last word is kept for INDIRECT_KEPT_POLLS polls: one missed answer must
  not end a suspicion.

Each signal's value and the time it last changed go into the snapshot as plain values;
the planner decides. A source that cannot be read this round (the manager's API away)
contributes nothing, so its silence is never taken for a node's death. Nor are probes
that reach no node at all, not even this manager's own (a route or a firewall between
the controller and the nodes): they contribute nothing either, and the gatherer reports
itself unavailable, which the planner shows as a decision. A change of mind
fires the trigger, and so does every poll for RECHECK_SECONDS after a signal turned to
gone: a suspicion becomes one once its signals have agreed for `controller.suspect-after`,
which no event marks, and the resync timer may be 10 s away.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.to_thread

from controller.adapters.tcp_probe import GOSSIP_PORT, tcp_connects
from controller.core.model import ClusterSnapshot, NodeRole
from controller.core.outside_inputs import LivenessSignal, SourceStatus

log = logging.getLogger(__name__)

GOSSIP, PROBE, INDIRECT = "gossip", "probe", "indirect"
# Nodes other nodes' agents are asked about per poll: more failing at once is likelier
# this manager's own link, and a few answers are enough to say so (the rest get none).
MAX_ASKED_ABOUT = 8
# Polls in a row with no agent's answer for which the last indirect word is kept: one
# missed answer (an agent busy or restarting) must not end a suspicion.
INDIRECT_KEPT_POLLS = 2
# Polls keep firing the trigger this long after a signal turned to gone (see above).
RECHECK_SECONDS = 15.0

Connect = Callable[[str, int, float], bool]
# (node id, address) -> (alive, why) as other nodes see it, or None when none could say.
Indirect = Callable[[str, str], tuple[bool, str] | None]


@dataclass(frozen=True, slots=True)
class _Target:
    node_id: str
    hostname: str
    addr: str


@dataclass(slots=True)
class _Seen:
    alive: bool
    since: float
    detail: str


class LivenessGatherer:
    def __init__(
        self,
        *,
        client_factory: Callable[[], Any],
        connect: Connect = tcp_connects,
        interval: float = 0.5,
        probe_port: int = GOSSIP_PORT,
        probe_timeout: float = 0.5,
        clock: Callable[[], float] = time.time,
        on_change: Callable[[], None] | None = None,
    ) -> None:
        self._client_factory, self._connect = client_factory, connect
        self.interval, self.probe_port, self.probe_timeout = interval, probe_port, probe_timeout
        self._clock, self.on_change = clock, on_change
        self.indirect: Indirect | None = None  # set when node agents run
        self._client: Any = None
        self._lock = threading.Lock()
        self._targets: tuple[_Target, ...] = ()
        self._managers: frozenset[str] = frozenset()
        self._seen: dict[tuple[str, str], _Seen] = {}  # (node id, source) -> latest
        self._unanswered: dict[str, int] = {}  # node id -> polls its indirect word is kept
        self.polls = 0
        self.unreachable = False  # the last poll reached no node's address

    def set_targets(self, snapshot: ClusterSnapshot) -> None:
        """The nodes to watch, from the latest observation (addresses change rarely)."""
        targets = tuple(
            _Target(n.id, n.hostname, n.addr)
            for n in snapshot.nodes
            if n.addr and n.addr != "0.0.0.0"
        )
        managers = frozenset(n.id for n in snapshot.nodes if n.role is NodeRole.MANAGER)
        with self._lock:
            self._targets, self._managers = targets, managers

    def manager_unreached(self) -> float | None:
        """Since when a manager's probe has failed (the earliest, if several), or None:
        the Raft leader's node may be gone, and an election under way."""
        with self._lock:
            failing = [
                seen.since
                for (node_id, source), seen in self._seen.items()
                if source == PROBE and node_id in self._managers and not seen.alive
            ]
        return min(failing) if failing else None

    async def run(self) -> None:
        while True:
            try:
                await anyio.to_thread.run_sync(self.poll_once, abandon_on_cancel=True)
            except Exception:  # advice only: never let it stop the controller
                log.exception("gathering liveness signals failed; trying again")
            await anyio.sleep(self.interval)

    def poll_once(self) -> None:
        with self._lock:
            targets = self._targets
        if not targets:
            return
        # What the poll sees is the nodes as they were when it began: a cut link is
        # known only once the probes time out, but it was cut before they were sent.
        now = self._clock()
        probes, peers = self._probe(targets)
        # No node's address answers, not even this manager's own: a route or a firewall
        # between the controller and the nodes, not every node dying. The probes (and the
        # agents asked because of them) say nothing until one answers.
        unreachable = not any(probes.get(t.node_id) for t in targets)
        flipped = self._note_unreachable(unreachable, targets)  # a cycle shows it at once
        if unreachable:
            probes = {}
        failing = [t for t in targets if probes.get(t.node_id) is False]
        asked = failing[:MAX_ASKED_ABOUT] if self.indirect is not None else []
        indirect = self._ask_others(asked)
        asked_ids = {t.node_id for t in asked}
        changed = False
        with self._lock:
            self._forget_all_but(targets)
            for target in targets:
                if peers is not None:
                    listed = bool({target.hostname, target.addr, target.node_id} & peers)
                    detail = "in the ingress gossip peers" if listed else "left the gossip peers"
                    changed |= self._note(target.node_id, GOSSIP, listed, detail, now)
                if unreachable:
                    self._seen.pop((target.node_id, PROBE), None)
                if target.node_id in probes:
                    up = probes[target.node_id]
                    where = f"{target.addr}:{self.probe_port}"
                    detail = f"{where} accepts" if up else f"{where} refused or timed out"
                    changed |= self._note(target.node_id, PROBE, up, detail, now)
                changed |= self._note_indirect(target.node_id, indirect, asked_ids, now)
            self.polls += 1
            recent = any(
                not seen.alive and now - seen.since <= RECHECK_SECONDS
                for seen in self._seen.values()
            )
        if (changed or recent or flipped) and self.on_change is not None:
            self.on_change()

    def _probe(self, targets: tuple[_Target, ...]) -> tuple[dict[str, bool], set[str] | None]:
        """Every node's probe, all at once in threads, and the gossip peers meanwhile."""
        probes: dict[str, bool] = {}

        def probe(target: _Target) -> None:
            probes[target.node_id] = self._connect(target.addr, self.probe_port, self.probe_timeout)

        threads = [threading.Thread(target=probe, args=(t,), daemon=True) for t in targets]
        for thread in threads:
            thread.start()
        peers = self._gossip_peers()
        for thread in threads:
            thread.join(self.probe_timeout + 2)
        return probes, peers

    def _note_unreachable(self, unreachable: bool, targets: tuple[_Target, ...]) -> bool:
        """Whether no node answering turned true or false this poll (logged when it does)."""
        if unreachable == self.unreachable:
            return False
        self.unreachable = unreachable
        if unreachable:
            log.warning("liveness: %s", self._unreachable_problem(targets))
        else:
            log.info("liveness: a node's address answers on port %d again", self.probe_port)
        return True

    def _forget_all_but(self, targets: tuple[_Target, ...]) -> None:
        """Drop what was seen of nodes no longer watched (under the lock)."""
        known = {t.node_id for t in targets}
        for key in [k for k in self._seen if k[0] not in known]:
            del self._seen[key]
        for gone in [n for n in self._unanswered if n not in known]:
            del self._unanswered[gone]

    def _note_indirect(
        self,
        node_id: str,
        indirect: Mapping[str, tuple[bool, str]],
        asked_ids: set[str],
        now: float,
    ) -> bool:
        """Note the other nodes' word on a node (under the lock); whether it changed."""
        if node_id in indirect:
            alive, why = indirect[node_id]
            changed = self._note(node_id, INDIRECT, alive, why, now)
            self._unanswered.pop(node_id, None)
            return changed
        if (
            node_id in asked_ids
            and (node_id, INDIRECT) in self._seen
            and self._unanswered.get(node_id, 0) < INDIRECT_KEPT_POLLS
        ):  # asked, and nobody answered this time: the last word stands a while
            self._unanswered[node_id] = self._unanswered.get(node_id, 0) + 1
        else:  # not asked (the probe answers), or silent too long: no stale word
            self._seen.pop((node_id, INDIRECT), None)
            self._unanswered.pop(node_id, None)
        return False

    def _unreachable_problem(self, targets: tuple[_Target, ...]) -> str:
        return (
            f"no node's address answers on port {self.probe_port} from this controller "
            f"({len(targets)} tried: a route or a firewall?), so nothing is suspected and "
            "services wait for Swarm to mark a node down, as with failover-mode confirmed"
        )

    def unavailable(self) -> tuple[SourceStatus, ...]:
        """The probes, while no node's address answers (a decision says so)."""
        with self._lock:
            if not self.unreachable:
                return ()
            targets = self._targets
        return (SourceStatus("probe", "node addresses", self._unreachable_problem(targets)),)

    def _ask_others(self, targets: list[_Target]) -> dict[str, tuple[bool, str]]:
        """Node id -> what other nodes' agents say of the nodes this manager cannot reach."""
        ask = self.indirect
        if ask is None or not targets:
            return {}
        said: dict[str, tuple[bool, str]] = {}

        def one(target: _Target) -> None:
            answer = ask(target.node_id, target.addr)
            if answer is not None:
                said[target.node_id] = answer

        threads = [threading.Thread(target=one, args=(t,), daemon=True) for t in targets]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(self.probe_timeout + 3)
        return dict(said)

    def _note(self, node_id: str, source: str, alive: bool, detail: str, now: float) -> bool:
        seen = self._seen.get((node_id, source))
        if seen is not None and seen.alive == alive:
            seen.detail = detail
            return False
        self._seen[(node_id, source)] = _Seen(alive, now, detail)
        return seen is not None or not alive

    def _gossip_peers(self) -> set[str] | None:
        """Names and addresses of the ingress gossip peers; None when unreadable."""
        try:
            if self._client is None:
                self._client = self._client_factory()
                # A manager amid an election hangs requests: never wait a whole poll on it.
                self._client.api.timeout = max(1.0, 4 * self.interval)
            network: Mapping[str, Any] = self._client.api.inspect_network("ingress", verbose=True)
        except Exception as exc:  # an unreadable source says nothing about the nodes
            log.debug("gossip peers unreadable: %s", exc)
            self._client = None
            return None
        peers = network.get("Peers") or []
        return {p.get("Name", "") for p in peers} | {p.get("IP", "") for p in peers}

    def signals(self) -> tuple[LivenessSignal, ...]:
        with self._lock:
            return tuple(
                LivenessSignal(node_id, source, s.alive, s.since, s.detail)
                for (node_id, source), s in sorted(self._seen.items())
            )
