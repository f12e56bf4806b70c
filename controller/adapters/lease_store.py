"""The lease's home: the labels of a Docker config of the controller's own, in Raft.

Not the controller's service: every service spec write replaces the service's PreviousSpec
and clears its UpdateStatus, so a lease renewed there every few seconds would make
`docker service rollback` return to the last renewal and could resume a paused rollout.
A config is an object nothing else writes, and Swarm lets only its labels change.

A read returns the lease with the config's Version.Index; a write sends the spec just
read back with only the lease labels changed, at that version (`POST /configs/{id}/update
?version=N`). Swarm refuses it with `update out of sequence` when anyone wrote the config
in between, which makes each claim a compare-and-swap. When there is no config yet, the
write creates it: of two replicas that race to create it, Swarm lets one through and
refuses the other (409), which then reads the winner's lease.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Protocol

import docker

from controller.adapters.attrs import Attrs
from controller.adapters.engine import (
    GoneError,
    create_config,
    inspect_config,
    update_config_spec,
)
from controller.core.lease import (
    HOLDER_LABEL,
    LEASE_LABELS,
    Lease,
    LeaseLabelError,
    labels_of,
    lease_from_labels,
)

# A config must hold some data, and only its labels may ever change: say what it is for.
CONFIG_DATA = b"The swarm-placement leader lease: its state is in this config's labels.\n"


@dataclass(frozen=True)
class LeaseRead:
    lease: Lease | None
    problem: str | None  # why the labels could not be read as a lease, if they could not
    version: int | None  # None: there is no lease config (yet)
    config_id: str | None
    spec: Attrs


class LeaseStore(Protocol):
    """Where the lease lives; tests wrap it to cut a replica off from it."""

    def read(self) -> LeaseRead: ...

    def write(self, read: LeaseRead, lease: Lease) -> None:
        """Replace the lease labels of `read` with `lease`; ConflictError if it moved on."""
        ...


def spec_with_lease(spec: Attrs, lease: Lease) -> Attrs:
    """The config spec as read, with the lease labels replaced and nothing else touched."""
    new = copy.deepcopy(dict(spec))
    labels = {k: v for k, v in (new.get("Labels") or {}).items() if k not in LEASE_LABELS}
    labels.update(labels_of(lease))
    new["Labels"] = labels
    return new


class ConfigLeaseStore:
    """The lease in the labels of the Docker config named `name`, created when missing."""

    def __init__(self, client: docker.DockerClient, name: str) -> None:
        self._client = client
        self.name = name

    def read(self) -> LeaseRead:
        try:
            attrs = inspect_config(self._client, self.name)
        except GoneError:
            return LeaseRead(lease=None, problem=None, version=None, config_id=None, spec={})
        spec = attrs["Spec"]
        try:
            lease, problem = lease_from_labels(spec.get("Labels") or {}), None
        except LeaseLabelError as exc:
            lease, problem = None, f"config {self.name}: {exc}"
        return LeaseRead(
            lease=lease,
            problem=problem,
            version=int(attrs["Version"]["Index"]),
            config_id=str(attrs["ID"]),
            spec=spec,
        )

    def write(self, read: LeaseRead, lease: Lease) -> None:
        if read.config_id is None or read.version is None:
            create_config(self._client, self.name, CONFIG_DATA, labels_of(lease))
            return
        update_config_spec(
            self._client, read.config_id, read.version, spec_with_lease(read.spec, lease)
        )


def find_leases(client: docker.DockerClient) -> list[tuple[str, Lease | None, str | None]]:
    """Every config that carries a lease: (name, lease, problem), by name."""
    found = []
    for attrs in client.api.configs(filters={"label": HOLDER_LABEL}):
        spec = attrs.get("Spec") or {}
        try:
            lease, problem = lease_from_labels(spec.get("Labels") or {}), None
        except LeaseLabelError as exc:
            lease, problem = None, str(exc)
        found.append((str(spec.get("Name", "")), lease, problem))
    return sorted(found, key=lambda f: f[0])
