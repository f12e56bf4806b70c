"""Whether Swarm's scheduler will accept more tasks of a service on a node.

A move's target must pass every filter Swarm applies, or the moved task waits pending
while the task it replaces is gone (stop-first) or the move never ends (start-first).
Constraints and availability are the candidates' business (candidates.py); this adds
the rest, as swarmkit's filters count them:
- resources: the node's capacity minus the reservations of the tasks Swarm counts there
  (assigned to running; core/capacity). A task being moved away keeps its reservation on
  its old node until it stops, so it frees nothing on the target;
- max-replicas-per-node: the service's tasks already there;
- host-mode published ports: a port another task there publishes (the service's own
  tasks included) is taken;
- platform: the node's OS and architecture against the service's `Placement.Platforms`;
  a service without them (its image's platform unknown to Swarm) passes every node.

Room that moves planned earlier in the cycle take is subtracted (`taken`), so two
services never count on the same free slot.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from controller.core.capacity import (
    RESERVING_STATES,
    UNLIMITED,
    Room,
    copies_fitting,
    describe_resources,
    observe_room,
)
from controller.core.model import ClusterSnapshot, Node, Resources, Service
from controller.core.snapshot_cache import per_snapshot

# Swarm's platform filter treats these architecture names as one.
_ARCH_ALIASES = {"x86_64": "amd64", "aarch64": "arm64"}


def _arch(name: str) -> str:
    name = name.lower()
    return _ARCH_ALIASES.get(name, name)


def platform_refusal(service: Service, node: Node) -> str | None:
    """Why the node's platform is not one the service's image runs on (None: it is)."""
    if not service.platforms:
        return None
    for os_name, arch in service.platforms:
        if (not arch or _arch(arch) == _arch(node.platform_arch)) and (
            not os_name or os_name.lower() == node.platform_os.lower()
        ):
            return None
    wanted = ", ".join(f"{o or '*'}/{a or '*'}" for o, a in service.platforms)
    return (
        f"{node.hostname} is {node.platform_os or '?'}/{node.platform_arch or '?'}, "
        f"the image runs on {wanted}"
    )


@per_snapshot
def _observed_ports(snapshot: ClusterSnapshot) -> Mapping[str, frozenset[str]]:
    """Node id -> host ports published by the tasks Swarm counts there."""
    taken: dict[str, set[str]] = {}
    services = snapshot.service_by_id
    for task in snapshot.tasks:
        service = services.get(task.service_id)
        if service is None or not service.host_ports or not task.node_id:
            continue
        if task.state in RESERVING_STATES:
            taken.setdefault(task.node_id, set()).update(service.host_ports)
    return {n: frozenset(ports) for n, ports in taken.items()}


@dataclass(frozen=True)
class Fits:
    snapshot: ClusterSnapshot
    room: Room
    ports: Mapping[str, frozenset[str]]

    @classmethod
    def observe(cls, snapshot: ClusterSnapshot) -> Fits:
        return cls(snapshot, observe_room(snapshot), _observed_ports(snapshot))

    def more(self, service: Service, node_id: str) -> int:
        """How many more tasks of the service Swarm would accept on the node now."""
        return self.check(service, node_id)[0]

    def refusal(self, service: Service, node_id: str) -> str | None:
        """Why Swarm would not accept one more task of the service there (None: it would)."""
        return self.check(service, node_id)[1]

    def check(self, service: Service, node_id: str) -> tuple[int, str | None]:
        """(how many more tasks fit, why none does)."""
        node = self.snapshot.node_by_id.get(node_id)
        free = self.room.free.get(node_id)
        if node is None or free is None:
            return 0, f"{node.hostname if node else node_id} takes no new tasks"
        host = node.hostname
        if (why := platform_refusal(service, node)) is not None:
            return 0, why
        taken = self.ports.get(node_id) if service.host_ports else None
        if taken and (clash := taken.intersection(service.host_ports)):
            return 0, f"host port {', '.join(sorted(clash))} is taken on {host}"
        fit = copies_fitting(free, service.reservations)
        if fit <= 0:
            need = service.reservations
            return 0, (
                f"no room on {host}: needs {describe_resources(need)}, {_free_of(free, need)} free"
            )
        cap = service.max_replicas_per_node
        if cap:
            here = self.room.counts.get(service.id, {}).get(node_id, 0)
            if here >= cap:
                return 0, f"{host} already runs {here} task(s) of it (max-replicas-per-node {cap})"
            fit = min(fit, cap - here)
        if service.host_ports:
            fit = min(fit, 1)  # its own tasks publish the same port
        return min(fit, UNLIMITED), None

    def taken(self, service: Service, per_node: Mapping[str, int]) -> Fits:
        """After placing tasks of the service on these nodes (node id -> tasks)."""
        added = {n: c for n, c in per_node.items() if c > 0}
        if not added:
            return self
        ports = dict(self.ports)
        if service.host_ports:
            for node_id in added:
                ports[node_id] = ports.get(node_id, frozenset()) | frozenset(service.host_ports)
        return Fits(self.snapshot, self.room.taken(service, added), ports)


class RoomView(Mapping[str, int]):
    """Node id -> more tasks of one service Swarm accepts there, over the given nodes,
    each read only when asked (most of a large cluster never is)."""

    def __init__(self, service: Service, nodes: frozenset[str], fits: Fits) -> None:
        self._service, self._nodes, self._fits = service, nodes, fits
        self._known: dict[str, int] = {}

    def __getitem__(self, node_id: str) -> int:
        if node_id not in self._nodes:
            raise KeyError(node_id)
        if node_id not in self._known:
            self._known[node_id] = self._fits.more(self._service, node_id)
        return self._known[node_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self._nodes)

    def __len__(self) -> int:
        return len(self._nodes)


def room_for(
    service: Service, nodes: frozenset[str], fits: Fits, *, explain: Iterable[str] = ()
) -> tuple[Mapping[str, int], dict[str, str]]:
    """(node -> more tasks Swarm accepts there, over `nodes`; and for the nodes of
    `explain` among them that accept none, why). A service that reserves and restricts
    nothing fits everywhere: ({}, {})."""
    need = service.reservations
    if not (
        need.nano_cpus
        or need.memory_bytes
        or any(need.generic.values())
        or service.max_replicas_per_node
        or service.host_ports
        or service.platforms
    ):
        return {}, {}
    full: dict[str, str] = {}
    for node_id in explain:
        if node_id in nodes:
            more, why = fits.check(service, node_id)
            if not more:
                full[node_id] = why or "no room"
    return RoomView(service, nodes, fits), full


def _free_of(free: Resources, need: Resources) -> str:
    """What is free of each kind the service needs, as describe_resources words it (zero
    included; a node Swarm over-committed reads as zero)."""
    parts = [f"{k}={max(0, free.generic.get(k, 0))}" for k, v in sorted(need.generic.items()) if v]
    if need.nano_cpus:
        parts.append(f"cpu={max(0, free.nano_cpus) / 1e9:g}")
    if need.memory_bytes:
        parts.append(f"memory={max(0, free.memory_bytes) // (1 << 20)}MiB")
    return ", ".join(parts)
