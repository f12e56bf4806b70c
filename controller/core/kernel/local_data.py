"""Services whose data lives on the node their task runs on.

A task with a named volume of the local driver, or a bind mount, finds its data only on
its own node: moved, it starts without it. So no move the controller starts for its own
reasons (failback, rebalancing, spread, load, preferred owners) takes such a task off its
node, unless the policy says its data follows it (`placement.data: shared`). Failover
still happens, as with Swarm alone: the node is gone, and so is the task.
"""

from __future__ import annotations

from controller.core.model import Service
from controller.policy import DataMode, ServiceSettings


def local_data(service: Service, settings: ServiceSettings) -> tuple[str, ...]:
    """What ties the service's tasks to their nodes (its local mounts, or the setting);
    empty when its data follows its tasks."""
    if settings.data is DataMode.SHARED:
        return ()
    if settings.data is DataMode.LOCAL:
        return service.local_data or ("placement.data: local",)
    return service.local_data


def data_stays(service: Service, settings: ServiceSettings) -> str | None:
    """Why the controller's own moves leave the service's tasks where they are, or None."""
    found = local_data(service, settings)
    if not found:
        return None
    return (
        f"its data is local to its node ({', '.join(found)}): the controller starts no move "
        "of it (placement.data: shared if the data follows the task)"
    )
