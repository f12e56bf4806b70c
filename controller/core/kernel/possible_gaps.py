"""Where a service's possible owners are not enforced yet: its tasks that run on a node
that is no possible owner of it, and the owners rule's word on why they still do.

Possible owners are hard: a node that is not one never hosts the service. The owners rule
moves such tasks off at once (a stop-first service by surge, or within max-unavailable
where no surge can: core/rules/owners/escape_moves), but a move can be held (no room on
the possible owners, a count the controller holds, a cap): while it is, `status`, the web
view and a metric show it, with the reason.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from controller.core.counts import active_counts
from controller.core.decisions import Code, Decision
from controller.core.kernel.candidates import NodeIndex, expand_owner_list
from controller.core.model import ClusterSnapshot
from controller.policy import Policy, ResolvedService, ServiceSettings

PREFIX = "possible owners not yet enforced"


def tasks_off_possible_owners(
    snapshot: ClusterSnapshot,
    service_id: str,
    settings: ServiceSettings,
    policy: Policy,
    *,
    index: NodeIndex | None = None,
) -> dict[str, int]:
    """Ready node id -> active tasks of the service there, for the nodes that are no
    possible owner of it; empty when it has no possible owners."""
    if not settings.possible_nodes:
        return {}
    index = index or NodeIndex(snapshot.nodes)
    possible = frozenset(expand_owner_list(settings.possible_nodes, (), policy.groups, index=index))
    return {n: c for n, c in active_counts(snapshot, service_id).items() if c and n not in possible}


def gap_reason(hosts: Iterable[str], tasks: int, why: str) -> str:
    return f"{PREFIX}: {tasks} task(s) on {', '.join(hosts)}: {why}"


@dataclass(frozen=True, slots=True)
class PossibleGap:
    service_id: str
    service_name: str
    tasks: Mapping[str, int]  # hostname -> active tasks on a node that is no possible owner
    reason: str  # the owners rule's decision, or why there is none this cycle

    @property
    def count(self) -> int:
        return sum(self.tasks.values())

    @property
    def why(self) -> str:
        """The reason without what `tasks` says already (gap_reason's first two parts)."""
        parts = self.reason.split(": ", 2)
        return parts[2] if len(parts) == 3 else self.reason

    def as_dict(self) -> dict[str, object]:
        return {
            "tasks": dict(self.tasks),
            "count": self.count,
            "why": self.why,
            "reason": self.reason,
        }


def possible_gaps(
    snapshot: ClusterSnapshot,
    policy: Policy,
    resolved: Mapping[str, ResolvedService],
    decisions: Sequence[Decision],
) -> list[PossibleGap]:
    """Every managed service with tasks on nodes that are no possible owner of it."""
    said = {d.subject: d.reason for d in decisions if d.code is Code.POSSIBLE_UNENFORCED}
    index = NodeIndex(snapshot.nodes)
    nodes = snapshot.node_by_id
    gaps = []
    for service in sorted(snapshot.services, key=lambda s: s.name):
        found = resolved.get(service.id)
        if found is None or not found.settings.managed:
            continue
        off = tasks_off_possible_owners(snapshot, service.id, found.settings, policy, index=index)
        if not off:
            continue
        tasks = {nodes[n].hostname: c for n, c in sorted(off.items()) if n in nodes}
        reason = said.get(
            f"service {service.name}",
            gap_reason(tasks, sum(tasks.values()), "the owners rule did not plan it this cycle"),
        )
        gaps.append(PossibleGap(service.id, service.name, tasks, reason))
    return gaps
