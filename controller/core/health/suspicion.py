"""Suspicion: a node Swarm has not given up (ready, or unknown after a leadership change)
that faster signals say is gone.

Swarm marks a dead node down only after its heartbeat grace (11 to 15 s with the default
5 s heartbeat). Faster signals come from outside Swarm's heartbeat: the overlay's gossip
(a peer memberlist has dropped), a TCP probe of the node's address, its node agent. Any
one of them can be lost on its own (a slow gossip round, the controller's own route, an
agent restarting), so one never makes a suspicion: a node is *suspected* when at least
two sources say it is gone, more say gone than alive, and they have agreed for
`controller.suspect-after`.

A suspicion stops nothing and excludes nothing; it only lets `failover-mode:
speculative` services start replacements early (rules/failover/speculative.py). A storm of
suspicions (the controller cut off, not the nodes) counts against the same
`controller.health-panic-threshold` as health reports: past it none is acted on.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from controller.core.clock import utc_time
from controller.core.decisions import Decision, Outcome
from controller.core.health.node_marks import HealthMark
from controller.core.model import ClusterSnapshot, NodeState
from controller.core.outside_inputs import HealthState, LivenessSignal

RULE = "suspicion"
SUSPICION_SOURCE = "suspicion"  # how a suspicion counts in the health panic
GOSSIP_SOURCE = "gossip"  # the overlay's gossip peers (runtime/liveness): slow to drop a peer
MIN_AGREEING = 2


@dataclass(frozen=True, slots=True)
class Suspicion:
    node_id: str
    hostname: str
    signals: tuple[LivenessSignal, ...]  # the sources that agree the node is gone
    since: float  # when the last of them turned, so when they began to agree

    @property
    def sources(self) -> tuple[str, ...]:
        return tuple(s.source for s in self.signals)

    def describe(self) -> str:
        return "; ".join(
            f"{s.source}: {s.detail or 'gone'} (since {utc_time(s.since)})" for s in self.signals
        )


# States in which Swarm has not given a node up: ready, or unknown after a Raft
# leadership change until the node reports to the new leader (or the grace runs out).
SWARM_UNDECIDED = frozenset({NodeState.READY, NodeState.UNKNOWN})


def suspect_nodes(
    snapshot: ClusterSnapshot, *, suspect_after: float, now: float
) -> tuple[dict[str, Suspicion], list[Decision]]:
    """Node id -> suspicion, for the ready nodes the signals agree are gone; with a
    decision for every node that at least one signal calls gone. The reasons hold no
    running clock, so a suspicion that lasts is one unchanged decision, logged once."""
    by_node: dict[str, dict[str, LivenessSignal]] = {}
    for signal in sorted(snapshot.liveness, key=lambda s: (s.node_id, s.source, s.since)):
        by_node.setdefault(signal.node_id, {})[signal.source] = signal
    suspected: dict[str, Suspicion] = {}
    decisions: list[Decision] = []
    for node in sorted(snapshot.nodes, key=lambda n: n.hostname):
        signals = by_node.get(node.id, {})
        gone = tuple(s for s in signals.values() if not s.alive)
        if not gone or node.state not in SWARM_UNDECIDED:
            continue  # nothing says gone, or Swarm has confirmed it: failover's, not ours
        alive = [s.source for s in signals.values() if s.alive]
        subject = f"node {node.hostname}"
        said = "; ".join(f"{s.source}: {s.detail or 'gone'}" for s in gone)
        if len(gone) < MIN_AGREEING or len(gone) <= len(alive):
            alive_note = f", {', '.join(alive)} say(s) alive" if alive else ""
            decisions.append(
                Decision(
                    RULE,
                    subject,
                    Outcome.WATCH,
                    f"{said}{alive_note}: one lost signal is no node failure, not suspected",
                )
            )
            continue
        since = max(s.since for s in gone)
        if now - since < suspect_after:
            decisions.append(
                Decision(
                    RULE,
                    subject,
                    Outcome.WATCH,
                    f"{said}: agreeing since {utc_time(since)}, suspected after "
                    f"controller.suspect-after {suspect_after:.1f} s",
                )
            )
            continue
        suspicion = Suspicion(node.id, node.hostname, gone, since)
        suspected[node.id] = suspicion
        decisions.append(
            Decision(
                RULE,
                subject,
                Outcome.SUSPECT,
                f"{suspicion.describe()}: agreeing for controller.suspect-after "
                f"{suspect_after:.1f} s while Swarm says {node.state.value}; services with "
                "failover-mode speculative start replacements elsewhere, nothing on the node "
                "is stopped",
            )
        )
    return suspected, decisions


def as_panic_marks(
    suspected: Mapping[str, Suspicion],
) -> dict[str, dict[str, HealthMark]]:
    """Suspicions as health words, only to count them in the panic share (never recorded
    on a node and never acted on as health)."""
    return {
        node_id: {
            SUSPICION_SOURCE: HealthMark(
                SUSPICION_SOURCE, HealthState.FAILED, math.inf, "+".join(s.sources)
            )
        }
        for node_id, s in suspected.items()
    }


def dropped_in_panic(suspected: Mapping[str, Suspicion]) -> list[Decision]:
    return [
        Decision(
            RULE,
            f"node {s.hostname}",
            Outcome.IGNORE,
            f"{s.describe()}: not acted on in the health panic (too many nodes look gone at "
            "once: likelier the controller's view than the nodes)",
        )
        for s in sorted(suspected.values(), key=lambda s: s.hostname)
    ]
