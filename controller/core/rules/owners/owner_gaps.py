"""The owners rule's word on a service whose tasks still run where its possible owners
forbid: one decision per cycle, coded, that `status`, the web view and the metric read
(core/kernel/possible_gaps)."""

from __future__ import annotations

from collections.abc import Sequence

from controller.core.context import PlanContext
from controller.core.decisions import Code, Decision, Outcome
from controller.core.kernel.candidates import NodeIndex
from controller.core.kernel.possible_gaps import gap_reason, tasks_off_possible_owners
from controller.core.model import Service
from controller.core.rules.owners.name import RULE
from controller.policy import ServiceSettings

# What holds a move, most telling first; then what is under way.
_HOLDING = (
    Outcome.KEEP,
    Outcome.SKIP,
    Outcome.PENDING,
    Outcome.WITHDRAW,
    Outcome.DEFER,
    Outcome.WAIT,
)
_MOVING = (Outcome.MOVE, Outcome.STEER)


def possible_gap_note(
    ctx: PlanContext,
    service: Service,
    settings: ServiceSettings,
    index: NodeIndex,
    notes: Sequence[Decision],
) -> list[Decision]:
    """A decision saying the possible owners are not enforced yet, and why, when tasks
    of the service run on a node that is no possible owner; none otherwise."""
    off = tasks_off_possible_owners(ctx.snapshot, service.id, settings, ctx.policy, index=index)
    if not off:
        return []
    nodes = ctx.snapshot.node_by_id
    hosts = sorted(nodes[n].hostname for n in off)
    why = _why(notes)
    return [
        Decision(
            RULE,
            f"service {service.name}",
            Outcome.WAIT,
            gap_reason(hosts, sum(off.values()), why),
            code=Code.POSSIBLE_UNENFORCED,
        )
    ]


def _why(notes: Sequence[Decision]) -> str:
    for outcomes, prefix in ((_HOLDING[:4], ""), (_MOVING, "moving: "), (_HOLDING[4:], "")):
        found = [n for n in notes if n.outcome in outcomes and n.code is None]
        if found:
            return prefix + found[-1].reason
    return "no move planned this cycle"
