"""The health panic: a storm of outside inputs takes nothing more away.

One monitor or plugin that says `failed` for every node is far likelier broken than the
swarm, and acting on it would stop every managed task at once (Swarm's constraint
enforcer ignores update configs), which Swarm alone never does. So the outside inputs
together may take at most a share of the ready and active nodes
(`controller.health-panic-threshold`, the one blast-radius cap of
core/kernel/blast_radius.py) out of service at once. Counted together: the nodes reported
failed or degraded, those suspected (speculative failover), those quarantined, and, for
each service, the nodes it is moved off for failing there (in force). When more than the
share would be taken, the controller is in a *health panic*:

- no new report is acted on: no deny label, pause, quarantine or failover comes of it, no
  suspicion starts a speculative surge;
- what is in force stays (it was within the share when it was decided, and lifting it
  could send tasks back to a node that is really sick), and a word in force may be
  repeated (a fresh ttl) but not made worse (degraded to failed);
- releases go on (`ok`, a lapsed ttl, failed to degraded): they only give capacity back.

Nodes Swarm itself marks down are no reports: they count neither among the taken nor the
ready and active nodes, and fail over as usual. Once the inputs fall back within the
share, the controller acts on them again. A service's own inputs (move-offs, plugin
vetoes) get only the room the node-wide ones leave (rules/nodes: workload.py, deny.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from controller.core.clock import utc_time
from controller.core.decisions import Decision, Outcome
from controller.core.health.node_marks import HealthMark
from controller.core.health.suspicion import SUSPICION_SOURCE
from controller.core.kernel.blast_radius import (
    MAX_NAMED,
    SETTING,
    allowed,
    not_down,
    ready_and_active,
)
from controller.core.model import Node, NodeState

RULE = "health"

__all__ = ["SETTING", "Panic", "allowed", "detect_panic", "held_in_panic", "ignored"]


def _hosts(names: tuple[str, ...]) -> str:
    text = ", ".join(names[:MAX_NAMED])
    if len(names) > MAX_NAMED:
        text += f" and {len(names) - MAX_NAMED} more"
    return text


@dataclass(frozen=True, slots=True)
class Panic:
    taken: int  # the nodes the inputs would take, for the service they take most from
    reported: tuple[str, ...]  # hostnames of the nodes not down reported or suspected
    base: int  # nodes ready and active (or paused by the controller)
    share: float
    sources: tuple[str, ...]  # the sources of those reports
    down: int  # nodes Swarm marks down: not reports, failed over as usual
    quarantined: tuple[str, ...] = ()  # hostnames quarantined (in force)
    # The service whose move-offs in force take it over, with those nodes' hostnames.
    moved_off: tuple[str, tuple[str, ...]] | None = None

    def decision(self) -> Decision:
        parts = []
        if self.reported:
            what = "reported failed or degraded"
            if SUSPICION_SOURCE in self.sources:
                what += ", or suspected"
            parts.append(
                f"{len(self.reported)} {what} ({_hosts(self.reported)}) "
                f"by {', '.join(self.sources)}"
            )
        if self.quarantined:
            parts.append(f"{len(self.quarantined)} quarantined ({_hosts(self.quarantined)})")
        if self.moved_off is not None:
            name, hosts = self.moved_off
            parts.append(f"service {name} also moved off {_hosts(hosts)}")
        down = (
            f"; {self.down} node(s) Swarm marks down are no reports and fail over as usual"
            if self.down
            else ""
        )
        share = f"{self.taken / self.base:.0%}" if self.base else "no base"
        return Decision(
            RULE,
            "swarm",
            Outcome.PANIC,
            f"{self.taken} of {self.base} ready and active node(s) ({share}) taken by "
            f"outside inputs: {'; '.join(parts)}: over {SETTING} {self.share:.0%} "
            f"(at most {allowed(self.share, self.base)} node(s)). No new report, suspicion "
            "or quarantine is acted on (no deny, pause, quarantine or failover from one) "
            f"until they fall back; what is in force stays, releases go on{down}",
        )


def detect_panic(
    nodes: tuple[Node, ...],
    marks: Mapping[str, Mapping[str, HealthMark]],
    share: float,
    *,
    held: frozenset[str] = frozenset(),
    quarantined: frozenset[str] = frozenset(),
    moved_off: Mapping[str, frozenset[str]] | None = None,
) -> Panic | None:
    """`marks`: node id -> source -> its non-ok word in force or reported (unexpired),
    suspicions included; `held`: nodes the controller holds paused (in the base);
    `quarantined`: nodes quarantined now; `moved_off`: service name -> the nodes it is
    kept off for failing there (in force).

    The base counts nodes Swarm calls unknown: a new Raft leader calls every node
    `unknown` until it reports, and a storm arriving then must not find a base of zero
    (seen in the chaos run: every node denied every managed service)."""
    base = ready_and_active(nodes, held)
    alive = not_down(nodes)
    reported = {n for n in alive if marks.get(n)}
    node_wide = reported | (quarantined & alive)
    cap = allowed(share, len(base))
    worst: tuple[int, str, frozenset[str]] = (len(node_wide), "", frozenset())
    for name, off in sorted((moved_off or {}).items()):
        extra = (off & alive) - node_wide
        if len(node_wide) + len(extra) > worst[0]:
            worst = (len(node_wide) + len(extra), name, frozenset(extra))
    if worst[0] <= cap:
        return None
    by_id = {n.id: n for n in nodes}

    def hosts(ids: frozenset[str] | set[str]) -> tuple[str, ...]:
        return tuple(sorted(by_id[n].hostname for n in ids))

    return Panic(
        taken=worst[0],
        reported=hosts(reported),
        base=len(base),
        share=share,
        sources=tuple(sorted({s for n in reported for s in marks[n]})),
        down=sum(1 for n in nodes if n.state is NodeState.DOWN),
        quarantined=hosts(quarantined & alive),
        moved_off=(worst[1], hosts(worst[2])) if worst[1] else None,
    )


def held_in_panic(
    wanted: Mapping[str, HealthMark], recorded: Mapping[str, HealthMark]
) -> dict[str, HealthMark]:
    """The words a node keeps during a panic: those already in force (`recorded` on the
    node, unexpired), each as now reported when that is no worse; a new word is left out."""
    kept = {}
    for source, word in wanted.items():
        before = recorded.get(source)
        if before is not None:
            kept[source] = word if word.state.severity <= before.state.severity else before
    return kept


def ignored(
    node: Node, wanted: Mapping[str, HealthMark], held: Mapping[str, HealthMark]
) -> list[Decision]:
    """A decision for the words a panic leaves out (new ones, and ones made worse)."""
    left = [r for s, r in sorted(wanted.items()) if s not in held or held[s].state is not r.state]
    if not left:
        return []
    words = "; ".join(
        f"{r.source} reports {r.state.value}: {r.reason or 'no reason given'} "
        f"(until {utc_time(r.until)})"
        for r in left
    )
    return [
        Decision(
            RULE,
            f"node {node.hostname}",
            Outcome.IGNORE,
            f"{words}: not acted on in the health panic",
        )
    ]
