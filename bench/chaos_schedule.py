"""The chaos benchmark's fault schedule: a list of timed events drawn from one seed, and
the placement every arm starts from.

Pure and deterministic: the same seed and length give the same schedule, so every arm of
a pair sees the same faults at the same offsets, each addressed to a node by the
schedule (never to "whichever manager leads now", which differs between arms). Node
faults (crash, network cut, a manager's crash) never overlap, so the three managers
always keep a quorum; every fault is mended before the schedule ends.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import asdict, dataclass

NODES = ("node-1", "node-2", "node-3", "node-4")
MANAGERS = ("node-1", "node-2", "node-3")  # node-1 leads from the start, in every arm

# Every kind of event, and the event that ends it (None: a single event).
PAIRED = {
    "crash": "restore",  # a node's dockerd SIGKILLed, later started again
    "cut": "heal",  # a node's link down, later up
    "crash-manager": "restore",  # a manager's dockerd SIGKILLed: an election if it led
    "kill-controller": "start-controller",  # the controller SIGKILLed, later started again
    "unmanage": "manage",  # placement.managed=false, later true
    "bad-label": "fix-label",  # placement.priority=hgih, later the stack's value
    "health-storm": "health-ok",  # every node reported failed to the webhook, later ok
    "plugin-hang": "plugin-gone",  # a plugin socket that accepts and never answers
}
SINGLE = ("deploy-same", "deploy-changed", "constraint", "replicas")
NODE_FAULTS = ("crash", "cut", "crash-manager")
# Services the operator edits (by their name in the stack); legacy is unmanaged.
EDITED = ("web", "api", "batch", "cache", "legacy")


@dataclass(frozen=True)
class Event:
    at: float  # seconds from the start of the schedule
    kind: str
    node: str = ""  # node faults: the node
    service: str = ""  # operator edits: the stack's service name
    value: str = ""  # replicas: the count; constraint: the constraint; deploy: the variant

    def describe(self) -> str:
        parts = [f"{self.at:6.1f}s", self.kind]
        parts += [p for p in (self.node, self.service, self.value) if p]
        return " ".join(parts)


def make_schedule(seed: int, minutes: float) -> list[Event]:
    """Node-fault episodes back to back, other faults at random times in between."""
    rng = random.Random(seed)
    length = minutes * 60.0
    end = length - 10.0  # every fault is over 10 s before the end
    events: list[Event] = []

    # Node faults: one at a time, 12-20 s each, 6-14 s apart; each kind at least once.
    kinds = list(NODE_FAULTS)
    rng.shuffle(kinds)
    t = rng.uniform(5, 12)
    n = 0
    while True:
        length_of = rng.uniform(12, 20)
        if t + length_of > end:
            break
        kind = kinds[n] if n < len(kinds) else rng.choice(NODE_FAULTS)
        node = rng.choice(MANAGERS if kind == "crash-manager" else NODES)
        events.append(Event(round(t, 1), kind, node=node))
        events.append(Event(round(t + length_of, 1), PAIRED[kind], node=node))
        t += length_of + rng.uniform(6, 14)
        n += 1

    # The others: each once, at random times; paired ones last 10-25 s.
    others = [k for k in PAIRED if k not in NODE_FAULTS] + list(SINGLE)
    for kind in others:
        start = rng.uniform(8, end - 26)
        if kind in PAIRED:
            service = (
                rng.choice(("web", "api", "cache")) if kind in ("unmanage", "bad-label") else ""
            )
            events.append(Event(round(start, 1), kind, service=service))
            events.append(
                Event(round(start + rng.uniform(10, 25), 1), PAIRED[kind], service=service)
            )
        elif kind == "replicas":
            service = rng.choice(EDITED)
            events.append(
                Event(round(start, 1), kind, service=service, value=str(rng.randint(1, 4)))
            )
        elif kind == "constraint":
            service = rng.choice(EDITED)
            node = rng.choice(NODES)
            events.append(
                Event(round(start, 1), kind, service=service, value=f"node.hostname!={node}")
            )
        else:
            events.append(
                Event(round(start, 1), kind, value="B" if kind == "deploy-changed" else "")
            )
    # An edit of the unmanaged service, so its only version moves are the schedule's own.
    if not any(e.service == "legacy" for e in events):
        events.append(Event(round(rng.uniform(8, end - 26), 1), "replicas", "", "legacy", "3"))
    return sorted(events, key=lambda e: (e.at, e.kind))


def start_placement(seed: int, replicas: Mapping[str, int]) -> dict[str, tuple[str, ...]]:
    """Per service, the nodes its tasks run on when the schedule starts, drawn from the
    seed (apart from the schedule's draws, so that adding this changed no schedule).

    Swarm spreads a service's tasks evenly over the nodes its constraints allow, the
    fewest of the service first, and breaks ties at random: only a node count that
    divides the replica count gives the same placement every time. So each service gets
    k such nodes, k drawn from the divisors of its count (at most 4), the nodes drawn at
    random: lumpy placements (every task on one node) as well as spread ones, as a swarm
    with a history of failures has."""
    rng = random.Random(f"start-placement-{seed}")
    out: dict[str, tuple[str, ...]] = {}
    for name in sorted(replicas):
        count = replicas[name]
        sizes = [k for k in range(1, len(NODES) + 1) if count % k == 0] if count else [1]
        out[name] = tuple(sorted(rng.sample(NODES, rng.choice(sizes))))
    return out


def last_fault_at(events: list[Event]) -> float:
    return max(e.at for e in events)


def to_json(events: list[Event]) -> list[dict[str, object]]:
    return [asdict(e) for e in events]
