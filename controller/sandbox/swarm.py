"""Forming the swarm from the nodes' daemons, and reading it back through a manager."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from controller.sandbox import daemon, typed_docker
from controller.sandbox.spec import SandboxError
from controller.sandbox.state import NodeState, SandboxState

READY_TIMEOUT_SECONDS = 120.0
NANOSECONDS = 1_000_000_000


def form_swarm(state: SandboxState) -> None:
    """`swarm init` on node-1, managers join one by one, workers join together."""
    first, *rest = state.nodes
    heartbeat_ns = (
        None if state.heartbeat_seconds is None else int(state.heartbeat_seconds * NANOSECONDS)
    )
    api = typed_docker.api_client(first.docker_host)
    try:
        first.node_id = typed_docker.swarm_init(
            api, advertise_ip=first.ip, heartbeat_ns=heartbeat_ns
        )
        worker_token, manager_token = typed_docker.join_tokens(api)
    finally:
        api.close()

    def join(node: NodeState) -> None:
        node_api = typed_docker.api_client(node.docker_host)
        try:
            typed_docker.swarm_join(
                node_api,
                manager_ip=first.ip,
                token=manager_token if node.manager else worker_token,
                advertise_ip=node.ip,
            )
            node.node_id = str(typed_docker.info(node_api)["Swarm"]["NodeID"])
        finally:
            node_api.close()

    for node in rest:
        if node.manager:
            join(node)
    workers = [node for node in rest if not node.manager]
    if workers:
        with ThreadPoolExecutor(max_workers=min(8, len(workers))) as pool:
            list(pool.map(join, workers))


def label_nodes(state: SandboxState, manager_host: str) -> None:
    api = typed_docker.api_client(manager_host)
    try:
        for node in state.nodes:
            if node.labels and node.node_id:
                typed_docker.set_node_labels(api, node.node_id, node.labels)
    finally:
        api.close()


def node_summary(attrs: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of a Docker node object the sandbox reports."""
    spec = attrs.get("Spec") or {}
    description = attrs.get("Description") or {}
    status = attrs.get("Status") or {}
    manager = attrs.get("ManagerStatus") or {}
    resources = (description.get("Resources") or {}).get("GenericResources") or []
    generic: dict[str, int] = {}
    for resource in resources:
        discrete = resource.get("DiscreteResourceSpec")
        if discrete:
            generic[str(discrete["Kind"])] = int(discrete["Value"])
    return {
        "id": attrs.get("ID", ""),
        "hostname": description.get("Hostname", ""),
        "state": status.get("State", "unknown"),
        "availability": spec.get("Availability", ""),
        "role": spec.get("Role", ""),
        "leader": bool(manager.get("Leader")),
        "reachability": manager.get("Reachability", ""),
        "labels": dict(spec.get("Labels") or {}),
        "generic_resources": generic,
        "addr": status.get("Addr", ""),
    }


def manager_candidates(state: SandboxState) -> list[NodeState]:
    """Managers whose dockerd answers, those not failed first."""
    managers = [n for n in state.nodes if n.manager and daemon.dockerd_running(n)]
    return sorted(managers, key=lambda n: n.failure is not None)


def query_nodes(state: SandboxState) -> list[dict[str, Any]]:
    """The nodes as a reachable manager sees them; SandboxError when none answers."""
    errors = []
    for node in manager_candidates(state):
        api = typed_docker.api_client(node.docker_host, timeout=5)
        try:
            return [node_summary(n) for n in typed_docker.list_nodes(api)]
        except SandboxError as exc:
            errors.append(f"{node.hostname}: {exc}")
        finally:
            api.close()
    raise SandboxError(
        "no manager of the sandbox answers" + (": " + "; ".join(errors) if errors else "")
    )


def leader(state: SandboxState) -> NodeState | None:
    try:
        nodes = query_nodes(state)
    except SandboxError:
        return None
    for summary in nodes:
        if summary["leader"]:
            for node in state.nodes:
                if node.hostname == summary["hostname"]:
                    return node
    return None


def wait_all_ready(state: SandboxState, *, timeout: float = READY_TIMEOUT_SECONDS) -> None:
    """Wait until every node is Ready (and every manager reachable) in the manager's view."""
    deadline = time.monotonic() + timeout
    wanted = {n.hostname: n.manager for n in state.nodes}
    last = "no answer yet"
    while time.monotonic() < deadline:
        try:
            nodes = query_nodes(state)
        except SandboxError as exc:
            last = str(exc)
        else:
            seen = {n["hostname"]: n for n in nodes}
            pending = [
                host
                for host, manager in wanted.items()
                if host not in seen
                or seen[host]["state"] != "ready"
                or (manager and seen[host]["reachability"] != "reachable")
            ]
            if not pending:
                return
            last = "not ready: " + ", ".join(
                f"{h} ({seen[h]['state'] if h in seen else 'absent'})" for h in pending
            )
        time.sleep(0.2)
    raise SandboxError(f"the swarm did not become ready in {timeout:.0f} s: {last}")


def wait_node_state(state: SandboxState, hostname: str, wanted: str, *, timeout: float) -> float:
    """Poll a manager until `hostname` has Status.State `wanted`; returns seconds waited."""
    state.node(hostname)
    start = time.monotonic()
    deadline = start + timeout
    last = "no answer"
    while True:
        try:
            nodes = query_nodes(state)
        except SandboxError as exc:
            last = str(exc)
        else:
            states = [n["state"] for n in nodes if n["hostname"] == hostname]
            if wanted in states:
                return time.monotonic() - start
            last = ", ".join(states) or "absent"
        if time.monotonic() >= deadline:
            raise SandboxError(
                f"{hostname} did not become {wanted!r} in {timeout:.0f} s (last seen: {last})"
            )
        time.sleep(0.1)


def service_spec(
    *,
    image_id: str,
    command: Sequence[str],
    constraints: Sequence[str],
    reserve_generic: Mapping[str, int] | None,
    restart_delay_seconds: float | None,
    stop_grace_seconds: float | None,
    reserve_cpus: float | None = None,
    reserve_memory_bytes: int | None = None,
    healthy_after_seconds: float | None = None,
) -> dict[str, Any]:
    """The TaskTemplate of a sandbox service, running the sandbox image by ID.

    `healthy_after_seconds`: each task passes its health check only that long after it
    started, and Swarm reports a task with a health check running only once it is
    healthy: a replacement that takes a while to come up, as a real server's does."""
    container: dict[str, Any] = {"Image": image_id, "Command": list(command)}
    if healthy_after_seconds is not None:
        wait = f"{healthy_after_seconds:g}"
        container["Healthcheck"] = {
            "Test": ["CMD-SHELL", f"test -e /tmp/up || {{ sleep {wait}; touch /tmp/up; false; }}"],
            "Interval": NANOSECONDS // 2,
            "Timeout": int((healthy_after_seconds + 5) * NANOSECONDS),
            "Retries": 3,
        }
    if stop_grace_seconds is not None:
        container["StopGracePeriod"] = int(stop_grace_seconds * NANOSECONDS)
    template: dict[str, Any] = {
        "ContainerSpec": container,
        "Placement": {"Constraints": list(constraints)},
    }
    reservations: dict[str, Any] = {}
    if reserve_generic:
        reservations["GenericResources"] = [
            {"DiscreteResourceSpec": {"Kind": kind, "Value": int(value)}}
            for kind, value in sorted(reserve_generic.items())
        ]
    if reserve_cpus:
        reservations["NanoCPUs"] = int(reserve_cpus * NANOSECONDS)
    if reserve_memory_bytes:
        reservations["MemoryBytes"] = int(reserve_memory_bytes)
    if reservations:
        template["Resources"] = {"Reservations": reservations}
    if restart_delay_seconds is not None:
        template["RestartPolicy"] = {
            "Condition": "any",
            "Delay": int(restart_delay_seconds * NANOSECONDS),
            "MaxAttempts": 0,
        }
    return template


def service_summaries(manager_host: str) -> list[dict[str, Any]]:
    """Each service's name, mode, labels and running/desired task counts."""
    api = typed_docker.api_client(manager_host, timeout=10)
    try:
        services = typed_docker.list_services(api)
        tasks = typed_docker.list_tasks(api, {"desired-state": "running"})
    finally:
        api.close()
    running: dict[str, int] = {}
    desired: dict[str, int] = {}
    for task in tasks:
        sid = task.get("ServiceID", "")
        desired[sid] = desired.get(sid, 0) + 1
        if (task.get("Status") or {}).get("State") == "running":
            running[sid] = running.get(sid, 0) + 1
    out = []
    for service in services:
        spec = service.get("Spec") or {}
        mode = spec.get("Mode") or {}
        replicated = mode.get("Replicated")
        sid = service.get("ID", "")
        out.append(
            {
                "id": sid,
                "name": spec.get("Name", ""),
                "mode": "replicated" if replicated is not None else "global",
                "replicas": (replicated or {}).get("Replicas", desired.get(sid, 0)),
                "running": running.get(sid, 0),
                "labels": dict(spec.get("Labels") or {}),
            }
        )
    return sorted(out, key=lambda s: s["name"])
