"""The mirror: what the controller wrote on each service, copied to an object of its own
that no deploy replaces.

The truth stays on each service: a constraint the controller adds and the labels that
say why (the `swarm-placement.*` service labels) go out in one spec write. But `docker
stack deploy` and `docker service update` replace Spec.Labels and the constraints
wholesale, and the controller's own labels and constraints go with them: a service that
had failed over under `failback: never` would then look never steered, and be "placed"
on its preferred owner. So every cycle a copy of each managed service's own labels and
constraints goes to a Docker config of the controller's own (its labels, updated by
version), and a service that comes back from a deploy without them gets them back from
its copy (core/rules/mirror.py).

The copies follow the services one cycle behind, from what Swarm stores: a controller
killed between the two writes loses nothing, since the next cycle copies again. Only a
deploy landing within that one cycle can lose what the mirror had not caught yet.

The same config keeps when each node went down lately (flap damping, core/memory), so
a controller that restarts, which it often does because the node under it died, still
distrusts a node that keeps failing. A node's entry is written when it gains a down and
dropped once all its downs are past the memory's horizon: ageing alone writes nothing.

And when the controller last moved each service's tasks, and off which nodes: the move
cooldown and "never straight back" (core/memory), which a restart or a lease takeover
would otherwise forget a second after the move. A service's entry is written in the
cycle after the move and dropped once its cooldown and its way-back window are over.

And the replica records an operator has scaled over (core/memory `overridden`): once
they scale back to the count the controller wrote, only this says the count is theirs,
and the write that forgets the record may wait (for a rollout, say). An entry names the
record by its start; it is written the cycle the override is seen and dropped with the
record.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from controller.core.labels import OWN_PREFIX, is_own_constraint

# The config's name and its label keys are stored in swarms: they keep their first names.
MIRROR_CONFIG = "swarm-placement-records"
# One config label per service: `swarm-placement.record.<service id>` = its encoded copy.
ENTRY_PREFIX = OWN_PREFIX + "record."
# One config label per node with recent downs: `swarm-placement.downs.<node id>` =
# comma-separated epoch seconds.
DOWNS_PREFIX = OWN_PREFIX + "downs."
# One config label per service moved lately: `swarm-placement.moved.<service id>` = JSON,
# {"at": epoch seconds, "left": [node ids], "left-at": epoch seconds} (left optional).
MOVES_PREFIX = OWN_PREFIX + "moved."
# One config label per replica record an operator scaled over:
# `swarm-placement.overridden.<service id>` = the record's start (operation-since).
OVERRIDDEN_PREFIX = OWN_PREFIX + "overridden."


class MirrorError(ValueError):
    """A copy, a down or a move in the mirror that does not decode: dropped, never guessed at."""


@dataclass(frozen=True, slots=True)
class ServiceCopy:
    """A service's copy: the labels and the constraints the controller had written on it."""

    labels: Mapping[str, str] = field(default_factory=dict)
    constraints: tuple[str, ...] = ()

    @property
    def is_empty(self) -> bool:
        return not self.labels and not self.constraints

    def encode(self) -> str:
        body = {"labels": dict(sorted(self.labels.items())), "constraints": list(self.constraints)}
        return json.dumps(body, separators=(",", ":"), sort_keys=True)

    @classmethod
    def decode(cls, raw: str) -> ServiceCopy:
        try:
            body = json.loads(raw)
            labels = body["labels"]
            constraints = body["constraints"]
        except (ValueError, TypeError, KeyError, RecursionError) as exc:
            # RecursionError: a label nested deep enough to exhaust the parser's stack.
            raise MirrorError(f"unreadable copy in the mirror: {exc}") from exc
        if not (
            isinstance(labels, dict)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in labels.items())
            and isinstance(constraints, list)
            and all(isinstance(c, str) for c in constraints)
        ):
            raise MirrorError("unreadable copy in the mirror: labels must map text to text")
        return cls(labels=labels, constraints=tuple(constraints))


@dataclass(frozen=True, slots=True)
class Mirror:
    """The mirror as observed: the config's ID and version, and its entries."""

    config_id: str = ""  # "" while the config does not exist yet
    version: int = 0
    entries: Mapping[str, str] = field(default_factory=dict)  # service ID -> encoded copy
    downs: Mapping[str, str] = field(default_factory=dict)  # node ID -> encoded downs
    moves: Mapping[str, str] = field(default_factory=dict)  # service ID -> encoded move
    # Service ID -> the start of its replica record an operator scaled over (record_start).
    overridden: Mapping[str, str] = field(default_factory=dict)

    def entry_key(self, service_id: str) -> str:
        return ENTRY_PREFIX + service_id

    @staticmethod
    def from_labels(config_id: str, version: int, labels: Mapping[str, str]) -> Mirror:
        def under(prefix: str) -> dict[str, str]:
            return {k.removeprefix(prefix): v for k, v in labels.items() if k.startswith(prefix)}

        return Mirror(
            config_id=config_id,
            version=version,
            entries=under(ENTRY_PREFIX),
            downs=under(DOWNS_PREFIX),
            moves=under(MOVES_PREFIX),
            overridden=under(OVERRIDDEN_PREFIX),
        )

    def node_downs(self) -> dict[str, tuple[float, ...]]:
        """The recorded downs that decode; an unreadable entry is dropped, never guessed at."""
        decoded: dict[str, tuple[float, ...]] = {}
        for node_id, raw in self.downs.items():
            try:
                decoded[node_id] = decode_downs(raw)
            except MirrorError:
                continue
        return decoded

    def service_moves(self) -> dict[str, Move]:
        """The mirrored moves that decode; an unreadable entry is dropped, never guessed at."""
        decoded: dict[str, Move] = {}
        for service_id, raw in self.moves.items():
            try:
                decoded[service_id] = decode_move(raw)
            except MirrorError:
                continue
        return decoded


def patched(
    base: Mapping[str, str], drop: Iterable[str], save: Mapping[str, str]
) -> dict[str, str]:
    """`base` as a mirror write leaves it: `drop`'s keys gone, then `save`'s set."""
    gone = set(drop)
    return {**{k: v for k, v in base.items() if k not in gone}, **save}


def record_start(since: float) -> str:
    """A replica record's start as the mirror names it: the label's own precision, so a
    start read back from the label and one from memory compare equal."""
    return f"{since:.3f}"


def encode_downs(times: Iterable[float]) -> str:
    return ",".join(f"{t:.3f}" for t in sorted(times))


def decode_downs(raw: str) -> tuple[float, ...]:
    try:
        times = tuple(float(part) for part in raw.split(",") if part)
    except ValueError as exc:
        raise MirrorError(f"unreadable downs {raw!r}: {exc}") from exc
    if not all(math.isfinite(t) and t >= 0 for t in times):
        raise MirrorError(f"unreadable downs {raw!r}: not a time")
    return times


@dataclass(frozen=True, slots=True)
class Move:
    """A service's last move, as the controller's memory holds it: when (the cooldown),
    and the nodes its tasks left, when (never straight back), if it knows them."""

    at: float
    left: tuple[tuple[str, ...], float] | None = None

    def encode(self) -> str:
        body: dict[str, object] = {"at": round(self.at, 3)}
        if self.left is not None:
            body["left"] = list(self.left[0])
            body["left-at"] = round(self.left[1], 3)
        return json.dumps(body, separators=(",", ":"), sort_keys=True)


def _time(value: object, raw: str) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not (math.isfinite(value) and value >= 0)
    ):
        raise MirrorError(f"unreadable move {raw!r}: not a time")
    return float(value)


def decode_move(raw: str) -> Move:
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise MirrorError(f"unreadable move {raw[:80]!r}: {exc}") from exc
    if not isinstance(body, dict):
        raise MirrorError(f"unreadable move {raw!r}: not an object")
    at = _time(body.get("at"), raw)
    left = None
    if "left" in body:
        nodes = body["left"]
        if not isinstance(nodes, list) or not all(isinstance(n, str) for n in nodes):
            raise MirrorError(f"unreadable move {raw!r}: left must list node ids")
        left = (tuple(nodes), _time(body.get("left-at"), raw))
    return Move(at=at, left=left)


def copy_of(*, name: str, labels: Mapping[str, str], constraints: tuple[str, ...]) -> ServiceCopy:
    """The service's copy as it carries its own labels and constraints now."""
    own = {k: v for k, v in labels.items() if k.startswith(OWN_PREFIX)}
    ours = tuple(c for c in constraints if is_own_constraint(c, name, own))
    return ServiceCopy(labels=own, constraints=ours)
