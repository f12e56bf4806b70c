"""The owners rule's word on a service whose tasks still run where its possible owners
forbid: one decision per cycle, coded, that `status`, the web view and the metric read
(core/kernel/possible_gaps)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from controller.core.context import PlanContext
from controller.core.decisions import Code, Decision, Outcome
from controller.core.kernel.candidates import Candidates, NodeIndex
from controller.core.kernel.possible_gaps import gap_reason, tasks_off_possible_owners
from controller.core.labels import POSSIBLE_VALUE, possible_constraint, possible_label
from controller.core.model import Service
from controller.core.rules.owners.name import RULE
from controller.core.rules.owners.owner_moves import is_stop_first
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


def possible_wait(
    ctx: PlanContext,
    service: Service,
    cands: Candidates,
    current: Mapping[str, int],
    *,
    local: bool,
) -> str | None:
    """Why the possible-owner constraint is not required yet, for a service that has
    possible owners: their labels are not all written, or it would stop tasks first (a
    stop-first task, or one whose data is on its node)."""
    if cands.possible is None:
        return None
    label = possible_label(service.name)
    nodes = ctx.snapshot.node_by_id
    if not all(nodes[n].labels.get(label) == POSSIBLE_VALUE for n in cands.possible):
        return "possible-owner labels are being written"
    if unmarked := _unmarked(ctx, service, current, local=local):
        if local:
            return (
                f"the possible-owner constraint follows once its task(s) on "
                f"{', '.join(unmarked)}, whose data is there, have left: required now, it "
                "would move them"
            )
        return (
            f"the possible-owner constraint follows once its stop-first task(s) on "
            f"{', '.join(unmarked)} have moved: required now, it would stop them first"
        )
    return None


def _unmarked(
    ctx: PlanContext, service: Service, current: Mapping[str, int], *, local: bool
) -> list[str]:
    """Hosts whose stop-first tasks of the service a new possible-owner constraint would
    reject (they lack its mark): Swarm's updater would stop each before its replacement
    starts. Until they have moved by surge, the exclusions alone keep the service on its
    possible owners. A task whose data is on its node is not moved at all (`local`).
    Empty when the constraint is already there: nothing changes then."""
    required = possible_constraint(service.name)
    if not (local or is_stop_first(service)) or required in service.constraints:
        return []
    label = possible_label(service.name)
    nodes = ctx.snapshot.node_by_id
    return sorted(
        nodes[n].hostname
        for n, count in current.items()
        if count and nodes[n].labels.get(label) != POSSIBLE_VALUE
    )
