"""A real multi-node swarm on one machine: dockerd processes in network namespaces.

from controller.sandbox import Sandbox, SandboxSpec
with Sandbox.up(SandboxSpec(name="t1", nodes=3, heartbeat_seconds=1.0)) as sb:
    sb.create_service("web", replicas=3)
    sb.fail("node-3", "crash")
    sb.wait_node_state("node-3", "down")
"""

from controller.sandbox.sandbox import Sandbox
from controller.sandbox.spec import (
    FAILURE_MODES,
    HostNotReadyError,
    NodeSpec,
    SandboxError,
    SandboxExistsError,
    SandboxNotFoundError,
    SandboxSpec,
    SandboxUsageError,
    UnknownNodeError,
)
from controller.sandbox.teardown import Leftovers, find_leftovers, teardown_sandbox

__all__ = [
    "FAILURE_MODES",
    "HostNotReadyError",
    "Leftovers",
    "NodeSpec",
    "Sandbox",
    "SandboxError",
    "SandboxExistsError",
    "SandboxNotFoundError",
    "SandboxSpec",
    "SandboxUsageError",
    "UnknownNodeError",
    "find_leftovers",
    "teardown_sandbox",
]
