"""What the node agent reads on its own node: identity, usage and container health.

Two ways to measure the node's usage:
- `host`: /proc/stat and /proc/meminfo of the host (mount the host's /proc and pass its
  path when the agent runs in a container): the node's whole CPU and memory in use;
- `containers`: the sum of the local containers' CPU and memory (Docker's stats), as a
  fraction of what the engine reports for the node; useful when several nodes share one
  machine (the sandbox), and it leaves out what runs outside Docker.
Container health comes from the local engine's events: `health_status: unhealthy`, and
`die` of a Swarm task's container that nobody stopped (no `kill`/`stop` just before).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
import docker.errors
import requests

from controller.adapters.errors import RetryableError

TASK_LABEL = "com.docker.swarm.task.id"
SERVICE_ID_LABEL = "com.docker.swarm.service.id"
SERVICE_NAME_LABEL = "com.docker.swarm.service.name"
# A die within this long of a kill or stop of the same container was asked for.
ASKED_TO_STOP_SECONDS = 60.0


class ProbeError(RetryableError, RuntimeError):
    """The local engine or /proc could not be read."""


@dataclass(frozen=True, slots=True)
class Identity:
    node_id: str
    hostname: str
    cpus: int
    memory_bytes: int


def identity(client: docker.DockerClient) -> Identity:
    try:
        info = client.api.info()
    except docker.errors.DockerException as exc:
        raise ProbeError(f"cannot read the local engine: {exc}") from exc
    node_id = (info.get("Swarm") or {}).get("NodeID") or ""
    if not node_id:
        raise ProbeError("the local engine is not part of a swarm")
    return Identity(
        node_id=node_id,
        hostname=str(info.get("Name") or ""),
        cpus=int(info.get("NCPU") or 0),
        memory_bytes=int(info.get("MemTotal") or 0),
    )


class HostUsage:
    """CPU busy fraction between two reads of /proc/stat, and memory in use."""

    def __init__(self, proc: str | Path = "/proc") -> None:
        self._proc = Path(proc)
        self._last: tuple[int, int] | None = None

    def _cpu(self) -> tuple[int, int]:
        fields = (self._proc / "stat").read_text().splitlines()[0].split()
        values = [int(v) for v in fields[1:]]
        idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
        return sum(values), idle

    def sample(self) -> tuple[float, float] | None:
        try:
            total, idle = self._cpu()
            meminfo = dict(
                (line.split(":")[0], int(line.split()[1]))
                for line in (self._proc / "meminfo").read_text().splitlines()
                if len(line.split()) >= 2
            )
        except (OSError, ValueError, IndexError) as exc:
            raise ProbeError(f"cannot read {self._proc}: {exc}") from exc
        last, self._last = self._last, (total, idle)
        if last is None or total <= last[0]:
            return None
        cpu = 1.0 - (idle - last[1]) / (total - last[0])
        mem_total = meminfo.get("MemTotal", 0)
        available = meminfo.get("MemAvailable", meminfo.get("MemFree", 0))
        memory = (mem_total - available) / mem_total if mem_total else 0.0
        return max(cpu, 0.0), max(memory, 0.0)


class ContainerUsage:
    """The local containers' CPU (from usage deltas) and memory, over the node's capacity."""

    def __init__(self, client: docker.DockerClient, node: Identity) -> None:
        self._client, self._node = client, node
        self._last: dict[str, tuple[float, int]] = {}  # container -> (when, cpu ns)

    def sample(self) -> tuple[float, float] | None:
        try:
            containers = self._client.api.containers(filters={"status": "running"})
        except (docker.errors.DockerException, requests.RequestException) as exc:
            raise ProbeError(f"cannot list containers: {exc}") from exc
        now = time.monotonic()
        busy, memory, seen = 0.0, 0, {}
        measured = False
        for container in containers:
            try:
                stats = self._client.api.stats(container["Id"], stream=False, one_shot=True)
            except (docker.errors.DockerException, requests.RequestException, ValueError):
                # Gone meanwhile: the engine answers 404, or 200 with an empty body.
                continue
            cpu_ns = int(
                ((stats.get("cpu_stats") or {}).get("cpu_usage") or {}).get("total_usage") or 0
            )
            mem = stats.get("memory_stats") or {}
            cache = int((mem.get("stats") or {}).get("inactive_file") or 0)
            memory += max(int(mem.get("usage") or 0) - cache, 0)
            seen[container["Id"]] = (now, cpu_ns)
            before = self._last.get(container["Id"])
            if before is not None and now > before[0]:
                busy += max(cpu_ns - before[1], 0) / 1e9 / (now - before[0])
                measured = True
        first = not self._last
        self._last = seen
        if first and containers and not measured:
            return None
        cpus = self._node.cpus or 1
        mem_total = self._node.memory_bytes or 1
        return busy / cpus, memory / mem_total


@dataclass(frozen=True, slots=True)
class ContainerEvent:
    task_id: str
    service_id: str
    service_name: str
    kind: str  # "unhealthy" or "died"
    at: float
    detail: str = ""


def service_counts(client: docker.DockerClient) -> dict[str, dict[str, Any]]:
    """Service id -> {name, running, unhealthy} for the local Swarm task containers."""
    try:
        containers = client.api.containers(filters={"label": TASK_LABEL})
    except (docker.errors.DockerException, requests.RequestException) as exc:
        # docker-py lets a slow engine's read timeout through as requests' own error.
        raise ProbeError(f"cannot list containers: {exc}") from exc
    out: dict[str, dict[str, Any]] = {}
    for container in containers:
        labels = container.get("Labels") or {}
        service = labels.get(SERVICE_ID_LABEL)
        if not service:
            continue
        entry = out.setdefault(
            service, {"name": labels.get(SERVICE_NAME_LABEL, ""), "running": 0, "unhealthy": 0}
        )
        if container.get("State") == "running":
            entry["running"] += 1
        if "(unhealthy)" in str(container.get("Status", "")):
            entry["unhealthy"] += 1
    return out


class EventReader:
    """Turns the local engine's container events into unhealthy/died events."""

    def __init__(self) -> None:
        self._asked: dict[str, float] = {}  # container id -> last kill/stop

    def read(self, event: Mapping[str, Any]) -> ContainerEvent | None:
        if event.get("Type") != "container":
            return None
        action = str(event.get("Action") or "")
        actor = event.get("Actor") or {}
        container = str(actor.get("ID") or event.get("id") or "")
        attrs = actor.get("Attributes") or {}
        at = float(event.get("timeNano") or 0) / 1e9 or float(event.get("time") or 0)
        if action in ("kill", "stop"):
            self._asked[container] = at
            self._asked = {c: t for c, t in self._asked.items() if at - t < ASKED_TO_STOP_SECONDS}
            return None
        task, service = attrs.get(TASK_LABEL), attrs.get(SERVICE_ID_LABEL)
        if not task or not service:
            return None
        name = str(attrs.get(SERVICE_NAME_LABEL, ""))
        if action.startswith("health_status") and action.endswith("unhealthy"):
            return ContainerEvent(task, service, name, "unhealthy", at, "health check failed")
        if action == "die":
            asked = self._asked.pop(container, None)
            code = str(attrs.get("exitCode", ""))
            if (asked is not None and at - asked < ASKED_TO_STOP_SECONDS) or code == "0":
                return None
            return ContainerEvent(task, service, name, "died", at, f"exit code {code}")
        return None


def container_events(
    client: docker.DockerClient, since: float | None
) -> Iterator[Mapping[str, Any]]:
    """The local engine's container events from `since` on (blocks; raises on a break)."""
    try:
        stream = client.api.events(since=since, filters={"type": ["container"]}, decode=True)
    except docker.errors.DockerException as exc:
        raise ProbeError(f"cannot watch events: {exc}") from exc
    try:
        yield from stream
    finally:
        stream.close()
