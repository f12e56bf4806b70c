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
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, TypeVar

import msgspec

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
PREFIXES = (ENTRY_PREFIX, DOWNS_PREFIX, MOVES_PREFIX, OVERRIDDEN_PREFIX)


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
        body = _decoded(_COPY, raw, "unreadable copy in the mirror")
        return cls(labels=body.labels, constraints=tuple(body.constraints))


# The stored shapes, checked by msgspec as they are read: a value of another shape is
# an unreadable entry (MirrorError), dropped or reported, never a crash or a guess.
class _CopyBody(msgspec.Struct):
    labels: dict[str, str]
    constraints: list[str]


_Time = Annotated[float, msgspec.Meta(ge=0)]  # epoch seconds; JSON has no NaN or infinity


class _MoveBody(msgspec.Struct):
    at: _Time
    left: list[str] | msgspec.UnsetType = msgspec.UNSET
    # Read only with `left` (alone, whatever it holds, it was always ignored).
    left_at: msgspec.Raw = msgspec.field(name="left-at", default=msgspec.Raw(b""))


_COPY = msgspec.json.Decoder(_CopyBody)
_MOVE = msgspec.json.Decoder(_MoveBody)
_TIME = msgspec.json.Decoder(_Time)


_T = TypeVar("_T")


def _decoded(decoder: msgspec.json.Decoder[_T], raw: str | bytes, what: str) -> _T:
    try:
        return decoder.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as exc:
        # RecursionError: a label nested deep enough to exhaust the parser's stack.
        raise MirrorError(f"{what}: {str(exc)[:200]}") from exc


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
    # Decoded once, when the value is made: the copies, downs and moves that decode, and
    # why each copy that does not cannot (a bad down or move is only dropped).
    copies: Mapping[str, ServiceCopy] = field(init=False, repr=False, compare=False)
    unreadable_copies: Mapping[str, str] = field(init=False, repr=False, compare=False)
    node_downs: Mapping[str, tuple[float, ...]] = field(init=False, repr=False, compare=False)
    service_moves: Mapping[str, Move] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        copies, unreadable = _each(self.entries, ServiceCopy.decode)
        object.__setattr__(self, "copies", copies)
        object.__setattr__(self, "unreadable_copies", unreadable)
        object.__setattr__(self, "node_downs", _each(self.downs, decode_downs)[0])
        object.__setattr__(self, "service_moves", _each(self.moves, decode_move)[0])

    def entry_key(self, service_id: str) -> str:
        return ENTRY_PREFIX + service_id

    def labels(self) -> dict[str, str]:
        """The config's labels that hold the mirror, as `from_labels` reads them."""
        sections = zip(
            PREFIXES, (self.entries, self.downs, self.moves, self.overridden), strict=True
        )
        return {prefix + k: v for prefix, section in sections for k, v in section.items()}

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


def _each(
    raws: Mapping[str, str], decode: Callable[[str], _T]
) -> tuple[dict[str, _T], dict[str, str]]:
    """Each entry decoded, and why each one that does not decode cannot."""
    decoded: dict[str, _T] = {}
    unreadable: dict[str, str] = {}
    for key, raw in raws.items():
        try:
            decoded[key] = decode(raw)
        except MirrorError as exc:
            unreadable[key] = str(exc)
    return decoded, unreadable


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


def decode_move(raw: str) -> Move:
    body = _decoded(_MOVE, raw, f"unreadable move {raw[:80]!r}")
    if isinstance(body.left, msgspec.UnsetType):
        return Move(at=body.at)
    if not body.left_at:
        raise MirrorError(f"unreadable move {raw[:80]!r}: left without left-at")
    left_at = _decoded(_TIME, bytes(body.left_at), f"unreadable move {raw[:80]!r}: left-at")
    return Move(at=body.at, left=(tuple(body.left), left_at))


def copy_of(*, name: str, labels: Mapping[str, str], constraints: tuple[str, ...]) -> ServiceCopy:
    """The service's copy as it carries its own labels and constraints now."""
    own = {k: v for k, v in labels.items() if k.startswith(OWN_PREFIX)}
    ours = tuple(c for c in constraints if is_own_constraint(c, name, own))
    return ServiceCopy(labels=own, constraints=ours)
