"""The lease's home: labels on the controller's own service, in Swarm's Raft store.

A read returns the record with the service's Version.Index; a write sends the spec just
read back with only the lease labels changed, at that version. Swarm refuses it with
`update out of sequence` when anyone wrote the service in between, which makes each claim
a compare-and-swap. Service-level labels restart no task (measured: 0 of 3 replaced).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Protocol

import docker

from controller.adapters.attrs import Attrs
from controller.adapters.docker_api import inspect_service, update_service_spec
from controller.core.lease import (
    LEASE_LABELS,
    LeaseLabelError,
    LeaseRecord,
    labels_of,
    record_from_labels,
)


@dataclass(frozen=True)
class LeaseRead:
    record: LeaseRecord | None
    problem: str | None  # why the labels could not be read as a lease, if they could not
    version: int
    service_id: str
    spec: Attrs


class LeaseStore(Protocol):
    """Where the lease lives; tests wrap it to cut a replica off from it."""

    def read(self) -> LeaseRead: ...

    def write(self, read: LeaseRead, record: LeaseRecord) -> None:
        """Replace the lease labels of `read` with `record`; ConflictError if it moved on."""
        ...


def spec_with_lease(spec: Attrs, record: LeaseRecord) -> Attrs:
    """The service spec as read, with the lease labels replaced and nothing else touched."""
    new = copy.deepcopy(dict(spec))
    labels = {k: v for k, v in (new.get("Labels") or {}).items() if k not in LEASE_LABELS}
    labels.update(labels_of(record))
    new["Labels"] = labels
    return new


class ServiceLeaseStore:
    """The lease on the labels of the service named `service` (a name or an ID)."""

    def __init__(self, client: docker.DockerClient, service: str) -> None:
        self._client = client
        self.service = service

    def read(self) -> LeaseRead:
        attrs = inspect_service(self._client, self.service)
        spec = attrs["Spec"]
        try:
            record, problem = record_from_labels(spec.get("Labels") or {}), None
        except LeaseLabelError as exc:
            record, problem = None, f"service {self.service}: {exc}"
        return LeaseRead(
            record=record,
            problem=problem,
            version=int(attrs["Version"]["Index"]),
            service_id=str(attrs["ID"]),
            spec=spec,
        )

    def write(self, read: LeaseRead, record: LeaseRecord) -> None:
        update_service_spec(
            self._client, read.service_id, read.version, spec_with_lease(read.spec, record)
        )
