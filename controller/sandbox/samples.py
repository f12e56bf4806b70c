"""Sample services and rack labels, so a fresh sandbox has something to place."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from controller.sandbox.sandbox import Sandbox
from controller.sandbox.spec import hostname_of

# A task that ends at once on SIGTERM, as a well-behaved service does.
SAMPLE_COMMAND = ("sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done")


@dataclass(frozen=True)
class SampleService:
    name: str
    replicas: int
    labels: Mapping[str, str]


SAMPLE_SERVICES = (
    SampleService(
        "web",
        3,
        {
            "placement.managed": "true",
            "placement.anti-affinity": "frontend",
            "placement.spread": "rack",
        },
    ),
    SampleService(
        "db",
        1,
        {
            "placement.managed": "true",
            "placement.preferred-nodes": "node-2,node-3",
            "placement.failback": "immediate",
        },
    ),
    SampleService("batch", 2, {"placement.managed": "true", "placement.priority": "low"}),
    SampleService("legacy", 2, {}),
)


def rack_labels(nodes: int) -> dict[str, dict[str, str]]:
    """Two nodes per rack: node-1 and node-2 in r1, node-3 and node-4 in r2, ..."""
    return {hostname_of(i): {"rack": f"r{(i + 1) // 2}"} for i in range(1, nodes + 1)}


def with_rack_labels(
    nodes: int, labels: Mapping[str, Mapping[str, str]]
) -> dict[str, dict[str, str]]:
    """The sample rack labels, overridden by any label the caller gave."""
    merged = rack_labels(nodes)
    for host, extra in labels.items():
        merged.setdefault(host, {}).update(extra)
    return merged


def create_samples(sandbox: Sandbox, *, timeout: float = 90.0) -> list[str]:
    """Create the sample services and wait until they all run; returns their IDs."""
    ids = [
        sandbox.create_service(
            sample.name,
            replicas=sample.replicas,
            labels=dict(sample.labels),
            command=SAMPLE_COMMAND,
        )
        for sample in SAMPLE_SERVICES
    ]
    sandbox.wait_services_running([s.name for s in SAMPLE_SERVICES], timeout=timeout)
    return ids
