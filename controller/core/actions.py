"""Actions state absolute desired values and the spec version they were computed against.

Absolute values (never "+1") make a replayed or retried action harmless; the version
makes a write computed from a stale observation fail instead of clobbering a newer spec.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from controller.core.constraints import Constraint, ConstraintError, parse_constraint
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
    """Set and remove entries of the mirror (core/mirror): restarts nothing."""

    config_id: str  # "": create the config
    version: int
    save: Mapping[str, str] = field(default_factory=dict)  # service ID -> encoded copy
    drop: tuple[str, ...] = ()  # service IDs
    save_downs: Mapping[str, str] = field(default_factory=dict)  # node ID -> encoded downs
    drop_downs: tuple[str, ...] = ()  # node IDs
    save_moves: Mapping[str, str] = field(default_factory=dict)  # service ID -> encoded move
    drop_moves: tuple[str, ...] = ()  # service IDs
    # Service ID -> the start of a replica record an operator scaled over.
    save_overridden: Mapping[str, str] = field(default_factory=dict)
    drop_overridden: tuple[str, ...] = ()  # service IDs

    kind = "set-mirror"


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
        case SetMirror(save=s, drop=r, save_downs=sd, drop_downs=dd, save_moves=sm, drop_moves=dm):
            downs = f"; save {len(sd)} node's downs, drop {len(dd)}" if sd or dd else ""
            moves = f"; save {len(sm)} service's last move, drop {len(dm)}" if sm or dm else ""
            so, do = action.save_overridden, action.drop_overridden
            over = f"; save {len(so)} record scaled over, drop {len(do)}" if so or do else ""
            return f"mirror: save {len(s)} service copy(ies), drop {len(r)}{downs}{moves}{over}"
