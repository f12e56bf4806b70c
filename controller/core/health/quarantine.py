"""Quarantine (`nodes.quarantine`): a node with at least `failures` incidents within
`period` is kept from the managed services for `duration`, never more than `max-fraction`
of the nodes at once, and only within the room the blast-radius cap leaves beside the
nodes reported, suspected, quarantined and each service's move-offs. No quarantine starts
in a health panic.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace

from controller.core.clock import utc_time
from controller.core.decisions import Decision, Outcome
from controller.core.exit_history import HealthMemory
from controller.core.health.incidents import counted_failures
from controller.core.health.verdicts import RULE, NodeVerdict
from controller.core.kernel.blast_radius import SETTING, BlastRadius, named
from controller.core.memory import Memory
from controller.core.model import ClusterSnapshot
from controller.policy import Policy, QuarantineSettings


@dataclass(frozen=True, slots=True)
class QuarantineRoom:
    """What a new quarantine must fit beside: the node-wide inputs acted on, and each
    service's move-offs in force (service name -> nodes)."""

    radius: BlastRadius
    taken: Mapping[str, str]
    moved_off: Mapping[str, frozenset[str]]

    def refusal(self, node_id: str) -> str | None:
        taken = {**self.taken, node_id: "quarantined"}
        worst, who = dict(taken), ""
        for name, nodes in sorted(self.moved_off.items()):
            with_moves = {**{n: "moved off" for n in nodes & self.radius.alive}, **taken}
            if len(with_moves) > len(worst):
                worst, who = with_moves, f" for service {name}"
        cap = self.radius.cap
        if len(worst) <= cap:
            return None
        del worst[node_id]
        return (
            f"a quarantine would make {len(worst) + 1} of the {len(self.radius.base)} ready "
            f"and active node(s) taken by outside inputs{who} "
            f"({named(worst, self.radius.hostnames)} already): "
            f"{SETTING} {self.radius.share:.0%} allows {cap}"
        )

    def take(self, node_id: str) -> QuarantineRoom:
        return replace(self, taken={**self.taken, node_id: "quarantined"})


def quarantine(
    snapshot: ClusterSnapshot,
    *,
    policy: Policy,
    memory: Memory,
    health_memory: HealthMemory,
    now: float,
    verdicts: dict[str, NodeVerdict],
    ended: Mapping[str, float],
    decisions: list[Decision],
    panic: bool,
    room: QuarantineRoom,
) -> dict[str, NodeVerdict]:
    """The verdicts with this cycle's new quarantines, most incidents first, each told."""
    q = policy.quarantine
    incidents = _incidents(
        snapshot,
        q,
        memory=memory,
        health_memory=health_memory,
        now=now,
        verdicts=verdicts,
        ended=ended,
    )
    active = sum(1 for v in verdicts.values() if v.quarantined)
    cap = math.floor(q.max_fraction * len(snapshot.nodes) + 1e-9)
    for node_id in sorted(incidents, key=lambda n: (-sum(incidents[n]), verdicts[n].hostname)):
        exits, failed = incidents[node_id]
        verdict = verdicts[node_id]
        what = (
            f"{exits} ungraceful exit(s) and {failed} task failure(s) "
            f"within {_span(q.period_seconds)}"
        )
        subject = f"node {verdict.hostname}"
        if panic:
            refusal: str | None = "no quarantine starts in a health panic"
        elif active >= cap:
            refusal = (
                f"{active} of {len(snapshot.nodes)} node(s) are quarantined "
                f"already (max-fraction {q.max_fraction:.0%})"
            )
        else:
            refusal = room.refusal(node_id)
        if refusal is not None:
            decisions.append(Decision(RULE, subject, Outcome.KEEP, f"{what}, but {refusal}"))
            continue
        room = room.take(node_id)
        active += 1
        until = now + q.duration_seconds
        verdicts[node_id] = replace(verdict, quarantine_until=until, quarantine_reason=what)
        decisions.append(
            Decision(
                RULE,
                subject,
                Outcome.QUARANTINE,
                f"{what}: kept from managed services for {_span(q.duration_seconds)}, "
                f"until {utc_time(until)} (the node stays active for the rest)",
            )
        )
    return verdicts


def _incidents(
    snapshot: ClusterSnapshot,
    q: QuarantineSettings,
    *,
    memory: Memory,
    health_memory: HealthMemory,
    now: float,
    verdicts: Mapping[str, NodeVerdict],
    ended: Mapping[str, float],
) -> dict[str, tuple[int, int]]:
    """Node id -> (exits, task failures) of each node not yet quarantined with enough
    incidents within the period, counted since its last quarantine ended."""
    window_start = now - q.period_seconds
    since = {n.id: max(window_start, ended.get(n.id, -math.inf)) for n in snapshot.nodes}
    failures = counted_failures(snapshot, replace(memory, health=health_memory), now, since=since)
    incidents: dict[str, tuple[int, int]] = {}
    for node in snapshot.nodes:
        exits = sum(1 for t in health_memory.exits.get(node.id, ()) if t > since[node.id])
        failed = len(failures.get(node.id, ()))
        if exits + failed >= q.failures and not verdicts[node.id].quarantined:
            incidents[node.id] = (exits, failed)
    return incidents


def _span(seconds: float) -> str:
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{seconds / 3600:.0f} h"
    if seconds >= 60 and seconds % 60 == 0:
        return f"{seconds / 60:.0f} min"
    return f"{seconds:.0f} s"
