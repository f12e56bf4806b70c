"""What a speculative surge is charged: the nodes it names for the disruption budget (a
flapping node, a free node a new Raft leader has not heard from, a stacked surge's), in
the words of its decision, and whether the budget refuses it."""

from __future__ import annotations

from dataclasses import dataclass

from controller.core.actions import SetReplicas
from controller.core.context import PlanContext
from controller.core.rules.failover.speculate_room import names
from controller.core.rules.failover.speculation_notes import FLAP_WINDOW_SECONDS
from controller.core.rules.failover.stacked_surge import Stacking, stacked_charge


@dataclass(frozen=True)
class Charge:
    """What a surge is charged, in words, and whether the disruption budget refuses it."""

    text: str
    refused: bool = False


def surge_charges(
    ctx: PlanContext,
    action: SetReplicas,
    stacking: Stacking | None,
    *,
    unheard: tuple[str, ...],
    beside: tuple[str, ...],
    charged: tuple[str, ...],
) -> Charge:
    """What the surge is charged, in words, and whether the disruption budget refuses."""
    text = ""
    if stacking is not None:
        said = stacked_charge(ctx, stacking, action)
        if said.refused:
            return Charge(said.text, refused=True)
        text = said.text
    refusal = ctx.budget().refusal(action) if beside or charged else None
    if beside:
        if refusal is not None:
            return Charge(
                f"; free {names(ctx, unheard)} not reported to a new Raft leader yet, so the "
                "surge may land beside a replica and is charged to the disruption budget, "
                f"and {refusal}: it waits",
                refused=True,
            )
        text = (
            f"; free {names(ctx, unheard)} has not reported to a new Raft leader yet: Swarm "
            f"places the surge on the first node that reports, beside a replica if that is "
            f"{names(ctx, beside)}, so it is charged to the disruption budget"
        )
    if charged:
        if refusal is not None:
            return Charge(
                f", which raised a false alarm within {FLAP_WINDOW_SECONDS:.0f} s, so the "
                f"surge is charged to the disruption budget, and {refusal}: it waits",
                refused=True,
            )
        flappy = names(ctx, charged)
        text += f"; {flappy} raised a false alarm lately: charged to the disruption budget"
    return Charge(text)
