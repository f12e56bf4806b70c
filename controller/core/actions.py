"""Actions state absolute desired values and the spec version they were computed against.

Absolute values (never "+1") make a replayed or retried action harmless; the version
makes a write computed from a stale observation fail instead of clobbering a newer spec.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from controller.core.constraints import Constraint, ConstraintError, parse_constraint
from controller.core.mirror import DOWNS_PREFIX, ENTRY_PREFIX, MOVES_PREFIX, OVERRIDDEN_PREFIX
from controller.core.model import Availability


@dataclass(frozen=True, slots=True)
class SetServiceConstraints:
    service_id: str
    service_name: str
    version: int
    constraints: tuple[str, ...]
    # Nodes whose tasks this change evicts; empty when no task moves.
    evicts_from: tuple[str, ...] = ()
    # Service labels written in the same update: the controller's own that go with it.
    set_labels: Mapping[str, str] = field(default_factory=dict)
    remove_labels: tuple[str, ...] = ()
    # The constraints read once, when the write is made, for the guards and the ledger
    # to judge what it stops; None when they cannot be read (`unreadable` says why).
    parsed: tuple[Constraint, ...] | None = field(init=False, repr=False, compare=False)
    unreadable: str | None = field(init=False, repr=False, compare=False)

    kind = "set-constraints"

    def __post_init__(self) -> None:
        try:
            parsed, error = tuple(parse_constraint(c) for c in self.constraints), None
        except ConstraintError as exc:
            parsed, error = None, str(exc)
        object.__setattr__(self, "parsed", parsed)
        object.__setattr__(self, "unreadable", error)


@dataclass(frozen=True, slots=True)
class SetReplicas:
    service_id: str
    service_name: str
    version: int
    replicas: int
    set_labels: Mapping[str, str] = field(default_factory=dict)
    remove_labels: tuple[str, ...] = ()
    # Nodes the count change may take tasks off: those a scale-down stops tasks on, or
    # those a surge-and-trim trims (the surge stops nothing itself, but it starts a move).
    # Either counts against the disruption budget and starts the service's cooldown.
    evicts_from: tuple[str, ...] = ()
    # Back from a failover surge: what it stops is a copy the surge added, no move. The
    # ledger is charged as for any stop, but no cooldown and no "never straight back"
    # starts, so a returning node is rebalanced as soon as it settles.
    ends_surge: bool = False

    kind = "set-replicas"


@dataclass(frozen=True, slots=True)
class SetNodeLabels:
    node_id: str
    hostname: str
    version: int
    set_labels: Mapping[str, str] = field(default_factory=dict)
    remove_labels: tuple[str, ...] = ()
    # Services whose tasks on this node this change evicts.
    evicts_services: tuple[str, ...] = ()

    kind = "set-node-labels"


@dataclass(frozen=True, slots=True)
class SetNodeAvailability:
    node_id: str
    hostname: str
    version: int
    availability: Availability
    # Node labels written in the same update: the marks that say why (and any deny labels
    # that go with it), so the change and its marks land together.
    set_labels: Mapping[str, str] = field(default_factory=dict)
    remove_labels: tuple[str, ...] = ()
    # Services whose tasks on this node the label change evicts.
    evicts_services: tuple[str, ...] = ()

    kind = "set-node-availability"


@dataclass(frozen=True, slots=True)
class SetMirror:
    """Set and remove entries of the mirror (core/mirror): restarts nothing.

    One patch of the config's labels, keyed as stored: a section's prefix (a copy, a
    node's downs, a move, a record scaled over) and the service or node ID."""

    config_id: str  # "": create the config
    version: int
    save: Mapping[str, str] = field(default_factory=dict)  # label -> encoded entry
    drop: tuple[str, ...] = ()  # labels

    kind = "set-mirror"

    def saved(self, prefix: str) -> dict[str, str]:
        """The entries of one section (a core/mirror prefix) saved, by ID."""
        return {k.removeprefix(prefix): v for k, v in self.save.items() if k.startswith(prefix)}

    def dropped(self, prefix: str) -> tuple[str, ...]:
        """The IDs of one section's entries dropped."""
        return tuple(k.removeprefix(prefix) for k in self.drop if k.startswith(prefix))


ServiceAction = SetServiceConstraints | SetReplicas
NodeAction = SetNodeLabels | SetNodeAvailability
Action = ServiceAction | NodeAction | SetMirror


def target_of(action: Action) -> tuple[str, str]:
    """The object an action writes: ("service", id) or ("node", id)."""
    if isinstance(action, SetNodeLabels | SetNodeAvailability):
        return ("node", action.node_id)
    if isinstance(action, SetMirror):
        return ("mirror", "")
    return ("service", action.service_id)


def subject_of(action: Action) -> str:
    """What a decision about the action names: "service <name>", "node <hostname>" or
    "mirror" (by name, as every decision does, never by ID)."""
    if isinstance(action, SetNodeLabels | SetNodeAvailability):
        return f"node {action.hostname}"
    if isinstance(action, SetMirror):
        return "mirror"
    return f"service {action.service_name}"


def describe(action: Action) -> str:
    match action:
        case SetServiceConstraints(service_name=name, constraints=cs, evicts_from=nodes):
            moving = f", evicting from {list(nodes)}" if nodes else ""
            return f"service {name}: constraints = {list(cs)}{moving}"
        case SetReplicas(service_name=name, replicas=n, evicts_from=nodes):
            stopping = f", may stop tasks on {list(nodes)}" if nodes else ""
            return f"service {name}: replicas = {n}{stopping}"
        case SetNodeLabels(hostname=host, set_labels=s, remove_labels=r):
            return f"node {host}: labels set {dict(s)} remove {list(r)}"
        case SetNodeAvailability(hostname=host, availability=a, set_labels=s, remove_labels=r):
            labels = f", labels set {dict(s)} remove {list(r)}" if s or r else ""
            return f"node {host}: availability = {a.value}{labels}"
        case SetMirror():
            s, r = action.saved(ENTRY_PREFIX), action.dropped(ENTRY_PREFIX)
            sd, dd = action.saved(DOWNS_PREFIX), action.dropped(DOWNS_PREFIX)
            sm, dm = action.saved(MOVES_PREFIX), action.dropped(MOVES_PREFIX)
            so, do = action.saved(OVERRIDDEN_PREFIX), action.dropped(OVERRIDDEN_PREFIX)
            downs = f"; save {len(sd)} node's downs, drop {len(dd)}" if sd or dd else ""
            moves = f"; save {len(sm)} service's last move, drop {len(dm)}" if sm or dm else ""
            over = f"; save {len(so)} record scaled over, drop {len(do)}" if so or do else ""
            return f"mirror: save {len(s)} service copy(ies), drop {len(r)}{downs}{moves}{over}"
