"""The blast radius of health: a storm of bad reports takes nothing more away.

One monitor or plugin that says `failed` for every node is far likelier broken than the
swarm, and acting on it would stop every managed task at once (Swarm's constraint
enforcer ignores update configs), which Swarm alone never does. So health may take at
most a share of the ready nodes (`controller.health-panic-threshold`, rounded down: 0.34
is 1 node of 3 or 4, 2 of 6) out of service at once. When more of them are reported
failed or degraded, the controller is in a *health panic*:

- no new report is acted on: no deny label, pause, quarantine or failover comes of it;
- what is already in force stays (it was within the share when it was decided, and
  lifting it could send tasks back to a node that is really sick), and a word in force
  may be repeated (a fresh ttl) but not made worse (degraded to failed);
- releases go on (`ok`, a lapsed ttl, failed to degraded): they only give capacity back.

Nodes Swarm itself marks down are no reports: they count neither among the reported nor
the ready nodes, and fail over as usual. Once the reports fall back within the share, the
controller acts on them again. The same share caps one plugin's vetoes of one service
(deny.py) and the nodes one service is kept off for failing there (workload.py).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from controller.core.clock import utc_time
from controller.core.constraints import ConstraintError, node_satisfies, parse_constraint
from controller.core.decisions import Decision, Outcome
from controller.core.health.node_marks import HealthMark
from controller.core.labels import operator_texts
from controller.core.model import ClusterSnapshot, Node, NodeState, Service

RULE = "health"
SETTING = "controller.health-panic-threshold"
# Hostnames named in the panic decision; the rest are counted.
MAX_NAMED = 10


def allowed(share: float, nodes: int) -> int:
    """How many of `nodes` may be taken away at once (rounded down)."""
    return math.floor(share * nodes + 1e-9)


def eligible(snapshot: ClusterSnapshot, service: Service) -> set[str]:
    """The nodes that take tasks and meet the operator's constraints of the service. The
    controller's own (deny labels, exclusions) are left out: the base of a share must not
    shrink with what that share caps. Unreadable constraints: every node that takes tasks."""
    texts = operator_texts(service.name, service.labels, service.constraints)
    try:
        parsed = tuple(parse_constraint(c) for c in texts)
    except ConstraintError:
        parsed = ()
    return {n.id for n in snapshot.nodes if n.accepts_tasks and node_satisfies(n, parsed)}


@dataclass(frozen=True, slots=True)
class Panic:
    reported: tuple[str, ...]  # hostnames of the nodes not down reported failed or degraded
    ready: int  # nodes Swarm does not mark down (ready, or unknown after a leader change)
    share: float
    sources: tuple[str, ...]  # the sources of those reports
    down: int  # nodes Swarm marks down: not reports, failed over as usual

    def decision(self) -> Decision:
        named = ", ".join(self.reported[:MAX_NAMED])
        if len(self.reported) > MAX_NAMED:
            named += f" and {len(self.reported) - MAX_NAMED} more"
        down = (
            f"; {self.down} node(s) Swarm marks down are no reports and fail over as usual"
            if self.down
            else ""
        )
        return Decision(
            RULE,
            "swarm",
            Outcome.PANIC,
            f"{len(self.reported)} of {self.ready} node(s) not down "
            f"({len(self.reported) / self.ready:.0%}) reported failed or degraded "
            f"({named}) by {', '.join(self.sources)}: over {SETTING} {self.share:.0%} "
            f"(at most {allowed(self.share, self.ready)} node(s)). No new report is acted "
            "on (no deny, pause, quarantine or failover from one) until they fall back; "
            f"what is in force stays, releases go on{down}",
        )


def detect_panic(
    nodes: tuple[Node, ...], marks: Mapping[str, Mapping[str, HealthMark]], share: float
) -> Panic | None:
    """`marks`: node id -> source -> its non-ok word in force or reported (unexpired).

    The base is every node Swarm does not mark down: a new Raft leader calls every node
    `unknown` until it reports, and a storm arriving then must not find a base of zero
    (seen in the chaos run: every node denied every managed service)."""
    ready = [n for n in nodes if n.state is not NodeState.DOWN]
    reported = sorted((n for n in ready if marks.get(n.id)), key=lambda n: n.hostname)
    if len(reported) <= allowed(share, len(ready)):
        return None
    return Panic(
        reported=tuple(n.hostname for n in reported),
        ready=len(ready),
        share=share,
        sources=tuple(sorted({s for n in reported for s in marks[n.id]})),
        down=sum(1 for n in nodes if n.state is NodeState.DOWN),
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
