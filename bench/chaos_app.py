"""The application the chaos benchmark runs: a stack that looks like real ones, and the
controller's policy.

Most services keep Swarm's default stop-first update order and reserve CPU and memory, as
most stacks do; web is start-first. db has preferred owners and high priority, api has
possible owners, web and cache share an anti-affinity class, web and api spread over
racks, batch is low priority and preemptible. legacy carries no placement label: the
controller must never write it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

STACK = "app"
RACKS = {
    "node-1": {"rack": "r1"},
    "node-2": {"rack": "r1"},
    "node-3": {"rack": "r2"},
    "node-4": {"rack": "r2"},
}
# A task that ends at once on SIGTERM, as a well-behaved service does.
COMMAND = ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"]

POLICY = """\
apiVersion: placement/v1
defaults:
  failback-delay: 10s
nodes:
  fault-domains:
    rack: rack
controller:
  resync-interval: 1s
"""


@dataclass(frozen=True)
class AppService:
    name: str  # in the stack; the swarm service is app_<name>
    replicas: int
    labels: dict[str, str]
    start_first: bool = False
    cpus: str = ""
    memory: str = ""
    max_unavailable: int = 1  # the policy's budget (default 1); 0 for unmanaged

    @property
    def managed(self) -> bool:
        return self.labels.get("placement.managed") == "true"

    @property
    def full_name(self) -> str:
        return f"{STACK}_{self.name}"


SERVICES = (
    AppService(
        "db",
        1,
        {
            "placement.managed": "true",
            "placement.preferred-nodes": "node-2,node-3",
            "placement.failback": "immediate",
            "placement.priority": "high",
        },
        cpus="0.25",
        memory="64M",
    ),
    AppService(
        "api",
        2,
        {
            "placement.managed": "true",
            "placement.possible-nodes": "node-2,node-3,node-4",
            "placement.spread": "rack",
        },
        cpus="0.25",
        memory="64M",
    ),
    AppService(
        "web",
        3,
        {
            "placement.managed": "true",
            "placement.anti-affinity": "frontend",
            "placement.spread": "rack",
        },
        start_first=True,
    ),
    AppService(
        "cache",
        2,
        {"placement.managed": "true", "placement.anti-affinity": "frontend"},
        cpus="0.1",
        memory="32M",
    ),
    AppService(
        "batch",
        4,
        {"placement.managed": "true", "placement.priority": "low", "placement.preemptible": "true"},
        cpus="0.1",
        memory="32M",
    ),
    AppService("legacy", 2, {}, cpus="0.1", memory="32M", max_unavailable=0),
)
BY_NAME = {s.name: s for s in SERVICES}
UNMANAGED = tuple(s.name for s in SERVICES if not s.managed)

# The "slightly changed" stack: batch one replica fewer, a new label on web.
VARIANT_REPLICAS = {"A": {}, "B": {"batch": 3}}
VARIANT_LABELS = {"A": {}, "B": {"web": {"app.revision": "2"}}}


def replicas_of(variant: str) -> dict[str, int]:
    return {s.name: VARIANT_REPLICAS[variant].get(s.name, s.replicas) for s in SERVICES}


def stack_file(
    image_id: str, variant: str = "A", pins: Mapping[str, Iterable[str]] | None = None
) -> str:
    """The compose file of the stack (JSON is YAML, and needs no YAML writer here).

    `pins` (service -> hostnames) keeps each service off every other node: how the
    warm-up gives every arm one starting placement. The stack deployed again without
    them leaves every task where it is (a constraint its node still meets moves
    nothing), so the arms start from that placement with the stack's own spec."""
    import json  # noqa: PLC0415

    services = {}
    for s in SERVICES:
        deploy: dict[str, object] = {
            "replicas": replicas_of(variant)[s.name],
            "labels": {**s.labels, **VARIANT_LABELS[variant].get(s.name, {})},
            "restart_policy": {"condition": "any"},
        }
        if s.start_first:
            deploy["update_config"] = {"order": "start-first"}
        if s.cpus or s.memory:
            deploy["resources"] = {"reservations": {"cpus": s.cpus, "memory": s.memory}}
        if pins is not None and s.name in pins:
            allowed = set(pins[s.name])
            away = [f"node.hostname!={n}" for n in sorted(set(RACKS) - allowed)]
            deploy["placement"] = {"constraints": away}
        services[s.name] = {
            "image": image_id,
            "command": COMMAND,
            "stop_grace_period": "5s",
            "deploy": deploy,
        }
    return json.dumps({"version": "3.8", "services": services}, indent=2)
