"""The chaos verdict's pre-registered protocol, as the runner and the scorer read it.

bench/chaos-protocol.md states it in words and lists the same triples (a test checks
that the two agree). Changing anything here after the first registered triple has run
makes a new protocol: give it a new NAME and a results directory of its own.

`chaos-2` replaces `chaos-1`, none of whose pairs ran: the arms of a pair run at the
same time, on separate sandboxes, rather than one after another.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

NAME = "chaos-2"
MINUTES = 2.0  # each triple's fault schedule
HEARTBEAT = 1.0  # the sandbox's dispatcher heartbeat, seconds
SEEDS = tuple(range(201, 213))  # 12 triples, each one A/B pair and one A/A pair
OFFSET = 10.0  # replica-seconds added to both arms before their ratio
MARGIN = math.log(1.10)  # how much worse than Swarm alone still passes: 10 %
ALPHA = 0.05  # per family of six services, after Holm's correction

# The arms of a triple, all at once: Swarm alone, the controller, Swarm alone again.
# The A/B pair is `controller` against `first`; the A/A pair `second` against `first`.
ARMS = ("first", "controller", "second")
DRY_RUN = "dry-run"  # optional, outside the verdict: the controller writing nothing
ARM_OF = {"first": "alone", "second": "alone", "controller": "controller", DRY_RUN: "dry-run"}


@dataclass(frozen=True)
class Triple:
    id: str  # also its file name in the results directory
    seed: int
    # The order the arms' processes start in (they then wait for each other before
    # t = 0), rotated over the triples so that no arm always brings its sandbox up first.
    order: tuple[str, ...]

    def arm(self, label: str) -> str:
        return ARM_OF[label]


def registered() -> list[Triple]:
    """Every triple of the protocol, in the order the runner takes them."""
    out = []
    for i, seed in enumerate(SEEDS):
        k = i % len(ARMS)
        out.append(Triple(f"t-{seed}", seed, ARMS[k:] + ARMS[:k]))
    return out


def by_id() -> dict[str, Triple]:
    return {t.id: t for t in registered()}


def registry_table() -> str:
    """The registered triples as bench/chaos-protocol.md lists them."""
    lines = ["| # | triple | seed | arms, in the order their processes start |",
             "|---|---|---|---|"]  # fmt: skip
    for i, t in enumerate(registered(), 1):
        lines.append(f"| {i} | `{t.id}` | {t.seed} | {', '.join(t.order)} |")
    return "\n".join(lines)
