"""`release`: take back what the controller wrote, one version-checked write at a time.

The writes are those of core/rules/release/release_plan: per service, its constraints
and labels first, then a replica count it changed; with `--all`, then every node's
labels and a pause the controller recorded, never a mark some service's constraint still
requires (a service whose release failed keeps it). Each write goes through
adapters/writes from a fresh read; a write that loses a race with another writer is
planned again from a new read, a few times. A running controller would adopt the
services again: stop it first.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

import docker

from controller.adapters.attrs import (
    AttrsError,
    node_from_attrs,
    service_from_attrs,
    snapshot_from_attrs,
)
from controller.adapters.docker_read import ServiceNotFoundError
from controller.adapters.engine import (
    ConflictError,
    GoneError,
    inspect_node,
    inspect_service,
)
from controller.adapters.writes import execute_action
from controller.core.actions import Action
from controller.core.apply import apply_actions
from controller.core.decisions import Decision, Outcome
from controller.core.kernel.mark_needs import MarkRequirements, mark_requirements
from controller.core.lease import LeaseLabelError, lease_from_labels
from controller.core.model import ClusterSnapshot, Node, Service
from controller.core.rules.release.name import RULE
from controller.core.rules.release.release_plan import (
    release_node,
    release_refusal,
    release_service,
)

ATTEMPTS = 3  # reads per write: a conflict means someone else wrote; read again
MAX_WRITES = 3  # per service: constraints and labels, then the replica count


class Swarm(Protocol):
    """The reads and the write a release needs (DockerSwarm, or a fake in tests)."""

    def snapshot(self) -> ClusterSnapshot: ...
    def service(self, name: str) -> Service: ...
    def node(self, node_id: str) -> Node: ...
    def write(self, action: Action) -> None: ...


class DockerSwarm:
    def __init__(self, client: docker.DockerClient) -> None:
        self._client = client

    def snapshot(self) -> ClusterSnapshot:
        api = self._client.api
        return snapshot_from_attrs(nodes=api.nodes(), services=api.services(), tasks=[])

    def service(self, name: str) -> Service:
        try:
            return service_from_attrs(inspect_service(self._client, name))
        except GoneError:
            raise ServiceNotFoundError(f"no service named {name!r}") from None

    def node(self, node_id: str) -> Node:
        return node_from_attrs(inspect_node(self._client, node_id))

    def write(self, action: Action) -> None:
        execute_action(self._client, action)


@dataclass
class Releaser:
    """Runs the release writes and reports one decision line per write (or per refusal)."""

    swarm: Swarm
    dry_run: bool
    say: Callable[[str], None]
    complete: bool = True  # False once something of ours is left behind
    reported: int = 0  # decision lines said

    def _report(self, decision: Decision) -> None:
        prefix = "dry run: " if self.dry_run else ""
        self.say(prefix + decision.line())
        self.reported += 1
        if decision.outcome != Outcome.RELEASE:
            self.complete = False

    def _fail(self, subject: str, reason: str) -> None:
        self._report(Decision(RULE, subject, Outcome.FAIL, reason))

    def service(self, name: str) -> Service:
        """Release one service (name or ID); its state afterwards (as a dry run leaves it)."""
        service = self.swarm.service(name)
        for _ in range(MAX_WRITES):
            for attempt in range(ATTEMPTS):
                action, decision = release_service(service)
                if action is None:
                    if decision is not None:
                        self._report(decision)
                    return service
                refusal = release_refusal(service, action)
                if refusal is not None:  # a bug in release_service: never written
                    self._fail(f"service {service.name}", refusal)
                    return service
                if self.dry_run:
                    if decision is not None:
                        self._report(decision)
                    service = _applied(service, action)
                    break
                try:
                    self.swarm.write(action)
                except GoneError:
                    return service  # removed meanwhile: nothing of ours left on it
                except ConflictError as exc:
                    if attempt == ATTEMPTS - 1:
                        self._fail(f"service {service.name}", f"it kept changing: {exc}")
                        return service
                    service = self.swarm.service(service.id)
                    continue
                if decision is not None:
                    self._report(decision)
                service = self.swarm.service(service.id)
                break
        return service

    def everything(self) -> None:
        """Every service, then every node (their marks once no constraint needs them)."""
        snapshot = self.swarm.snapshot()
        for item in snapshot.unreadable:
            self._fail(
                f"{item.kind} {item.name}", f"cannot be read, release it by hand: {item.reason}"
            )
        services = []
        for service in sorted(snapshot.services, key=lambda s: s.name):
            try:
                services.append(self.service(service.id))
            except ServiceNotFoundError:
                continue  # removed meanwhile: nothing of ours left on it
            except AttrsError as exc:
                self._fail(f"service {service.name}", f"cannot be read now: {exc}")
        if not self.dry_run:
            snapshot = self.swarm.snapshot()
            services = list(snapshot.services)
        # The mark of a service that cannot be read stays: its constraint may need it.
        unreadable = [u.name for u in snapshot.unreadable if u.kind == "service"]
        requirements = mark_requirements(services, unreadable)
        for node in sorted(snapshot.nodes, key=lambda n: n.hostname):
            self._node(node, requirements)

    def _node(self, node: Node, requirements: MarkRequirements) -> None:
        for attempt in range(ATTEMPTS):
            action, decision = release_node(node, requirements)
            if decision is None:
                return
            if action is None or self.dry_run:
                self._report(decision)
                return
            try:
                self.swarm.write(action)
            except GoneError:
                return  # left the swarm meanwhile
            except ConflictError as exc:
                if attempt == ATTEMPTS - 1:
                    self._fail(f"node {node.hostname}", f"it kept changing: {exc}")
                    return
                node = self.swarm.node(node.id)
                continue
            self._report(decision)
            return


# A lease renewed this recently (beyond its lifetime) may still have a live holder.
LEASE_SLACK_SECONDS = 60.0


def live_leases(client: docker.DockerClient, now: datetime) -> list[str]:
    """Leader leases a controller renewed within their lifetime (wall clocks, plus a
    minute's slack): a controller that still runs would adopt its services again, and
    could put a constraint back between `release --all`'s service and node writes."""
    out = []
    for attrs in client.api.configs():
        spec = attrs.get("Spec") or {}
        try:
            lease = lease_from_labels(spec.get("Labels") or {})
            renewed = datetime.fromisoformat(lease.renewed_at) if lease else None
        except (LeaseLabelError, ValueError):
            continue
        if lease is None or renewed is None or lease.released:
            continue
        if renewed.tzinfo is None:
            renewed = renewed.replace(tzinfo=UTC)
        if (now - renewed).total_seconds() < lease.lifetime + LEASE_SLACK_SECONDS:
            out.append(
                f"config {spec.get('Name', '?')}: held by {lease.holder}, "
                f"renewed {lease.renewed_at}"
            )
    return out


def _applied(service: Service, action: Action) -> Service:
    """The service as the write would leave it (for a dry run's next step)."""
    alone = ClusterSnapshot(nodes=(), services=(service,), tasks=())
    return apply_actions(alone, (action,)).services[0]
