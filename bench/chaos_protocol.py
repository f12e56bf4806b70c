"""The chaos verdict's pre-registered protocol, as the runner and the scorer read it.

bench/chaos-protocol.md states it in words and lists the same pairs (a test checks that
the two agree). Changing anything here after the first registered pair has run makes a
new protocol: give it a new NAME and a results directory of its own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

NAME = "chaos-1"
MINUTES = 4.0  # each arm's fault schedule
HEARTBEAT = 1.0  # the sandbox's dispatcher heartbeat, seconds
AB_SEEDS = tuple(range(101, 117))  # 16 A/B pairs, each with a dry-run arm
AA_SEEDS = tuple(range(101, 109))  # 8 A/A pairs: the first eight schedules, Swarm alone twice
OFFSET = 10.0  # replica-seconds added to both arms before their ratio
MARGIN = math.log(1.10)  # how much worse than Swarm alone still passes: 10 %
ALPHA = 0.05  # per family of six services, after Holm's correction

# What each arm is, as chaos_run.run_once names it.
ARM_OF = {"alone": "alone", "controller": "controller", "dry-run": "dry-run"}
ARM_OF |= {"first": "alone", "second": "alone"}

# A/B pairs alternate Swarm alone and the controller A B B A (A B B A ...), so that over
# the pairs each runs first as often, and put the dry-run arm last, first and second in
# turn: over any twelve pairs, each of the six orders of the three arms comes twice.
_DRY_RUN_AT = (2, 0, 1)


def _order(i: int) -> tuple[str, ...]:
    pair = ["alone", "controller"] if i % 4 in (0, 3) else ["controller", "alone"]
    pair.insert(_DRY_RUN_AT[i % 3], "dry-run")
    return tuple(pair)


@dataclass(frozen=True)
class Pair:
    id: str  # also its file name in the results directory
    kind: str  # "AB" (with its dry-run arm) or "AA"
    seed: int
    order: tuple[str, ...]  # the arms' labels, in the order they run

    def arm(self, label: str) -> str:
        return ARM_OF[label]


def registered() -> list[Pair]:
    """Every pair of the protocol, in the order the runner takes them: the A/A pairs
    spread among the A/B pairs (one after every second A/B pair), so that drift over
    the hours weighs on both kinds alike."""
    ab = [Pair(f"ab-{seed}", "AB", seed, _order(i)) for i, seed in enumerate(AB_SEEDS)]
    aa = [Pair(f"aa-{seed}", "AA", seed, ("first", "second")) for seed in AA_SEEDS]
    out: list[Pair] = []
    for i, pair in enumerate(ab):
        out.append(pair)
        if i % 2 == 1 and aa:
            out.append(aa.pop(0))
    return out + aa


def by_id() -> dict[str, Pair]:
    return {p.id: p for p in registered()}


def registry_table() -> str:
    """The registered pairs as bench/chaos-protocol.md lists them."""
    lines = ["| # | pair | kind | seed | arms, in the order they run |", "|---|---|---|---|---|"]
    for i, p in enumerate(registered(), 1):
        lines.append(f"| {i} | `{p.id}` | {p.kind} | {p.seed} | {', '.join(p.order)} |")
    return "\n".join(lines)
