"""The stacked speculative surge: a suspected node's replicas started beside others when
no free node could take them (every node already holds one).

A surge onto free nodes cannot hurt: a false alarm's trim drops exactly the surged
tasks. A surge beside a replica can, where Swarm's scale-down (which cannot be told which
task to drop) would pick an original over the surged copy. So it is made only on strong
evidence, and it names the nodes where the trim may stop an original, for the budgets:

- strong evidence: every signal that can speak within seconds says the node is gone,
  from two vantage points: this manager's probe and the other nodes' agents (indirect
  probes); none says it lives (the gossip still listing the node counts only if it
  listed it again after they failed: it is 5 to 7 s slow to drop a dead peer); and they
  have agreed for STACK_HOLD_SECONDS. Swarm's own view (ready, or unknown after an
  election) is undecided by definition: its heartbeat is the slow signal.
- the risk: each way Swarm could place the surged tasks (its lowest free slots, on
  nodes with room, the suspected node too, since Swarm still calls it ready) is tried
  against the trim's drop order (kernel/drop_order); the nodes where an original would
  go are named in the write, so the ledger and the disruption budgets charge it.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace

from controller.core.actions import Action
from controller.core.context import PlanContext
from controller.core.health.suspicion import GOSSIP_SOURCE
from controller.core.kernel.drop_order import dropped_tasks
from controller.core.model import Service, Task, TaskState

# How long every signal must have agreed that the node is gone: the suspicion's own
# suspect-after at its default, so a dead worker is surged for in the same cycle.
STACK_HOLD_SECONDS = 1.0
# The vantage points that must both say gone: this manager's probe, other nodes' agents.
STACK_SOURCES = ("probe", "indirect")
# Placements tried at most; past it every candidate node holding an original is named.
MAX_PLACEMENTS = 512


@dataclass(frozen=True)
class Stacking:
    """A stacked surge's candidates (nodes that may take a surged task beside a
    replica) and, of those, where a false alarm's trim may stop an original."""

    candidates: tuple[str, ...]
    risky: tuple[str, ...]


def weak_evidence(ctx: PlanContext, node_id: str) -> str | None:
    """Why the evidence that the node is gone falls short of strong; None if strong."""
    signals = [s for s in ctx.snapshot.liveness if s.node_id == node_id]
    gone = [s for s in signals if not s.alive]
    missing = [src for src in STACK_SOURCES if src not in {s.source for s in gone}]
    if missing:
        return f"no {' or '.join(missing)} word that it is gone"
    first_gone = min(s.since for s in gone)
    contrary = sorted(
        s.source
        for s in signals
        if s.alive and (s.source != GOSSIP_SOURCE or s.since >= first_gone)
    )
    if contrary:
        return f"{', '.join(contrary)} say(s) it lives"
    agreed = max(s.since for s in gone)
    hold = max(STACK_HOLD_SECONDS, ctx.policy.controller.suspect_after_seconds)
    if ctx.now - agreed < hold:
        return f"every signal agrees, but has not held for {hold:.1f} s yet"
    return None


def plan_stacking(
    ctx: PlanContext,
    service: Service,
    suspected: Sequence[str],
    *,
    surged: int,
    free: int,
    beside: Sequence[str],
) -> Stacking | str:
    """The stacked surge for `surged` tasks on the `suspected` nodes, `free` of them
    going to free nodes; or why none is made."""
    for node_id in suspected:
        why = weak_evidence(ctx, node_id)
        if why is not None:
            host = ctx.snapshot.node_by_id[node_id].hostname
            return f"no stacked surge on weak evidence ({host}: {why})"
    if len(beside) < surged - free:
        return "no stacked surge: too few nodes with room beside a replica"
    candidates = tuple(dict.fromkeys([*beside, *suspected]))
    tasks = ctx.snapshot.tasks_of(service.id)
    risky = trim_risk(
        tasks, base=service.replicas or 0, stacked=surged - free, free=free, candidates=candidates
    )
    return Stacking(candidates, risky)


@dataclass(frozen=True)
class Charge:
    """What the decision says of a stacked surge, and whether the budgets refuse it."""

    text: str
    refused: bool = False


def stacked_charge(ctx: PlanContext, stacking: Stacking, action: Action) -> Charge:
    """The stacked surge's charge: where a false alarm's trim may stop an original, that
    node is named in the write and the disruption budget must allow it."""
    by_id = ctx.snapshot.node_by_id
    where = ", ".join(by_id[n].hostname if n in by_id else n for n in stacking.candidates)
    placed = (
        f"; every signal agrees it is gone and no node is free: Swarm places the surge "
        f"beside a replica ({where})"
    )
    if not stacking.risky:
        return Charge(placed + ", and a false alarm's trim would drop exactly the surged task(s)")
    risky = ", ".join(by_id[n].hostname if n in by_id else n for n in stacking.risky)
    refusal = ctx.budget().refusal(action)
    if refusal is not None:
        return Charge(
            f"{placed}, where a false alarm's trim may stop an original on {risky}, "
            f"charged to the disruption budget, and {refusal}: it waits",
            refused=True,
        )
    return Charge(
        f"{placed}; a false alarm's trim may stop an original on {risky}: charged to the "
        "disruption budget"
    )


def trim_risk(
    tasks: Sequence[Task],
    *,
    base: int,
    stacked: int,
    free: int,
    candidates: Collection[str],
) -> tuple[str, ...]:
    """The nodes on which a false alarm's trim back to `base` may stop an original, over
    every placement of the surged tasks (`free` alone on free nodes, `stacked` on the
    candidates, in Swarm's lowest free slots)."""
    slots = _free_slots(tasks, free + stacked)
    holding = sorted({t.node_id for t in tasks if t.node_id in candidates})
    placements = list(
        itertools.islice(itertools.product(sorted(candidates), repeat=stacked), MAX_PLACEMENTS + 1)
    )
    if not tasks or len(placements) > MAX_PLACEMENTS:
        return tuple(holding)
    risky: set[str] = set()
    for placement in placements:
        nodes = [*(f"free-node-{i}" for i in range(free)), *placement]
        placed = [
            replace(
                tasks[0],
                id=f"surged-{slot}",
                slot=slot,
                node_id=node_id,
                desired_state=TaskState.RUNNING,
                state=TaskState.RUNNING,
            )
            for slot, node_id in zip(slots, nodes, strict=True)
        ]
        dropped = dropped_tasks([*tasks, *placed], base)
        if dropped is None:  # Swarm's pick unpredictable here: any node holding one
            risky.update(n for n in placement if n in holding)
            continue
        risky.update(t.node_id for t in dropped if not t.id.startswith("surged-"))
    return tuple(sorted(risky))


def _free_slots(tasks: Sequence[Task], count: int) -> list[int]:
    """The slots Swarm gives new tasks: the lowest not taken (swarmkit's addTasks)."""
    taken = {t.slot for t in tasks}
    free = (s for s in itertools.count(1) if s not in taken)
    return list(itertools.islice(free, count))
