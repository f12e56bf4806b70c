"""Running the real controller against a real sandbox swarm, inside a test.

`ControllerThread` runs the controller in a thread of the test process (like kopf's
KopfRunner), so a test can inject an executor wrapper, an in-memory span exporter or a
clock, and stop it at once.
"""

from __future__ import annotations

import contextlib
import io
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import anyio
import docker
import requests
from opentelemetry.sdk.trace import SpanProcessor

from controller.adapters.lease_store import LeaseStore
from controller.adapters.writes import Executor
from controller.core.capacity import RESERVING_STATES
from controller.core.mirror import MIRROR_CONFIG
from controller.runtime.health_inputs import HealthConfig
from controller.runtime.lease_keeper import LeaseConfig
from controller.runtime.loop import Controller, RunConfig
from controller.runtime.policy_source import PolicySource
from controller.sandbox import Sandbox


class ControllerThread:
    def __init__(
        self,
        docker_host: str,
        *,
        policy: Path | None = None,
        dry_run: bool = False,
        resync: float = 1.0,
        executor: Callable[[docker.DockerClient], Executor] | None = None,
        span_processors: Iterable[SpanProcessor] = (),
        clock: Callable[[], float] = time.time,
        lease: LeaseConfig | None = None,
        lease_store: Callable[[], LeaseStore] | None = None,
        health: HealthConfig | None = None,
        http: tuple[str, int] | None = None,
        ui_token: str | None = None,
    ) -> None:
        self.out = io.StringIO()
        self.docker_host = docker_host

        def factory() -> docker.DockerClient:
            from controller.adapters.engine import DockerUnavailableError  # noqa: PLC0415

            try:
                return docker.DockerClient(base_url=docker_host, version="auto", timeout=10)
            except docker.errors.DockerException as exc:
                raise DockerUnavailableError(str(exc)) from exc

        self.controller = Controller(
            RunConfig(
                policy_path=policy,
                dry_run=dry_run,
                resync_seconds=resync,
                lease=lease,
                health=health,
                http=http,
                ui_token=ui_token,
            ),
            PolicySource(policy),
            out=self.out,
            client_factory=factory,
            span_processors=span_processors,
            executor=executor,
            clock=clock,
            handle_signals=False,
            lease_store=lease_store,
        )
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, daemon=True)

    def _main(self) -> None:
        try:
            anyio.run(self.controller.run)
        except BaseException as exc:  # surfaced by stop()
            self.error = exc

    def __enter__(self) -> ControllerThread:
        self._thread.start()
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        self.stop()
        if exc_type is not None:  # pytest shows this with the failure
            print(f"--- controller decisions ---\n{self.out.getvalue()}")

    def stop(self) -> None:
        deadline = time.monotonic() + 10
        while self._thread.is_alive() and self.controller._token is None:
            if time.monotonic() > deadline:
                break
            time.sleep(0.05)
        if self._thread.is_alive():
            with contextlib.suppress(RuntimeError):  # it finished meanwhile
                self.controller.request_stop()
        self._thread.join(timeout=20)
        assert not self._thread.is_alive(), "the controller did not stop"
        if self.error is not None:
            raise self.error

    @property
    def cycles(self) -> int:
        r = self.controller.reconciler
        return r.cycles if r is not None else 0

    def wait_cycles(self, n: int, timeout: float = 30.0) -> None:
        start = self.cycles
        wait_until(lambda: self.cycles >= start + n, timeout, f"{n} reconcile cycles")


def wait_until(
    predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.1
) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


def wait_steady(predicate: Callable[[], Any], hold: float, timeout: float, what: str) -> None:
    """Wait until the predicate has held for `hold` seconds on end."""
    deadline = time.monotonic() + timeout
    since: float | None = None
    while True:
        now = time.monotonic()
        if predicate():
            since = now if since is None else since
            if now - since >= hold:
                return
        else:
            since = None
        if now > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}, {hold} s on end")
        time.sleep(0.2)


def running_task_ids(client: docker.DockerClient, service: str) -> set[str]:
    tasks = client.api.tasks(filters={"service": service, "desired-state": "running"})
    return {t["ID"] for t in tasks if t["Status"]["State"] == "running"}


def service_version(client: docker.DockerClient, service: str) -> int:
    return int(client.api.inspect_service(service)["Version"]["Index"])


def constraints_of(client: docker.DockerClient, service: str) -> list[str]:
    spec = client.api.inspect_service(service)["Spec"]
    return list(spec["TaskTemplate"].get("Placement", {}).get("Constraints") or [])


def all_versions(client: docker.DockerClient) -> dict[str, int]:
    versions = {
        f"service {s['Spec']['Name']}": s["Version"]["Index"] for s in client.api.services()
    }
    versions.update({f"node {n['ID']}": n["Version"]["Index"] for n in client.api.nodes()})
    return versions


def running_by_node(client: docker.DockerClient, service: str) -> dict[str, int]:
    """Hostname -> running tasks of the service, as `docker service ps` would show."""
    hosts = {n["ID"]: n["Description"]["Hostname"] for n in client.api.nodes()}
    out: dict[str, int] = {}
    for task in client.api.tasks(filters={"service": service, "desired-state": "running"}):
        if task["Status"]["State"] == "running" and task.get("NodeID") in hosts:
            host = hosts[task["NodeID"]]
            out[host] = out.get(host, 0) + 1
    return out


def doubled_slots(client: docker.DockerClient, service: str) -> list[int]:
    """Slots running more than one task that Swarm wants running."""
    slots = [
        t["Slot"]
        for t in client.api.tasks(filters={"service": service, "desired-state": "running"})
        if t["Status"]["State"] == "running"
    ]
    return sorted({s for s in slots if slots.count(s) > 1})


def tasks_table(client: docker.DockerClient, service: str) -> str:
    """The service's update state and every task, as `docker service ps` would show them:
    what a failed wait prints, so a flake says what Swarm was doing."""
    hosts = {n["ID"]: n["Description"]["Hostname"] for n in client.api.nodes()}
    update = (client.api.inspect_service(service).get("UpdateStatus") or {}).get("State")
    lines = [f"{service}: update {update or 'none'}"]
    tasks = client.api.tasks(filters={"service": service})
    for task in sorted(tasks, key=lambda t: t.get("Slot", 0)):
        status = task["Status"]
        lines.append(
            f"  slot {task.get('Slot')} {hosts.get(task.get('NodeID', ''), '-')} "
            f"desired {task['DesiredState']} state {status['State']} "
            f"{status.get('Err') or status.get('Message', '')}"
        )
    return "\n".join(lines)


def task_ids_by_node(client: docker.DockerClient, service: str) -> dict[str, set[str]]:
    hosts = {n["ID"]: n["Description"]["Hostname"] for n in client.api.nodes()}
    out: dict[str, set[str]] = {}
    for task in client.api.tasks(filters={"service": service, "desired-state": "running"}):
        if task["Status"]["State"] == "running" and task.get("NodeID") in hosts:
            out.setdefault(hosts[task["NodeID"]], set()).add(task["ID"])
    return out


class RunningSampler:
    """Samples a service's running task count in the background: the minimum seen is
    the disruption an operation really caused."""

    def __init__(self, docker_host: str, service: str, interval: float = 0.2) -> None:
        self._client = docker.DockerClient(base_url=docker_host, version="auto", timeout=10)
        self._service = service
        self._interval = interval
        self._stop = threading.Event()
        self.samples: list[int] = []
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            # A hiccup is no sample; docker-py lets a read timeout through as requests' own
            # (while Raft elects a leader, say).
            with contextlib.suppress(docker.errors.DockerException, requests.RequestException):
                self.samples.append(self._count())
            self._stop.wait(self._interval)

    def _count(self) -> int:
        return len(running_task_ids(self._client, self._service))

    def __enter__(self) -> RunningSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self._client.close()

    @property
    def minimum(self) -> int:
        assert self.samples, "no sample was taken"
        return min(self.samples)


class OffsetClock:
    """A wall clock that a test can move forward (failback windows)."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset


@contextlib.contextmanager
def clean_client(
    sandbox: Sandbox, also: Callable[[docker.DockerClient], None] = lambda c: None
) -> Iterator[docker.DockerClient]:
    """A client of the sandbox's manager on a clean swarm (`also` cleans more), and after
    the test the same again: a failed test must not leave a node down for the next."""
    c = docker.DockerClient(base_url=sandbox.manager_host, version="auto", timeout=30)
    clean_swarm(c)
    also(c)
    yield c
    ready = {n["Description"]["Hostname"] for n in c.api.nodes() if n["Status"]["State"] == "ready"}
    for node in sandbox.nodes:
        if node not in ready:
            sandbox.restore(node)
            sandbox.wait_node_state(node, "ready")
    clean_swarm(c)
    also(c)
    c.close()


_HOLDING = frozenset(state.value for state in RESERVING_STATES)  # as the API spells them


def _holding_resources(client: docker.DockerClient) -> list[str]:
    """Tasks that reserve resources, on ready nodes, whose containers have not stopped (a
    down node's never report). Tasks that reserve nothing are not waited for: most tests'
    services reserve nothing, and waiting for every container to stop costs minutes."""
    ready = {n["ID"] for n in client.api.nodes() if n["Status"]["State"] == "ready"}
    return [
        t["ID"]
        for t in client.api.tasks()
        if t.get("NodeID") in ready
        and t["Status"]["State"] in _HOLDING
        and any((((t.get("Spec") or {}).get("Resources") or {}).get("Reservations") or {}).values())
    ]


def clean_swarm(client: docker.DockerClient) -> None:
    """Remove every service and the controller's own node labels (and the pause it held,
    health or quarantine): a clean slate."""
    for svc in client.api.services():
        client.api.remove_service(svc["ID"])
    wait_until(lambda: not client.api.tasks(filters={"desired-state": "running"}), 60, "no tasks")
    # A removed service's task still holds its reservations until its container stops;
    # the next test's tasks would be placed around it, not spread as that test expects.
    wait_until(lambda: not _holding_resources(client), 60, "removed tasks stopped")
    for attrs in client.api.nodes():
        labels = attrs["Spec"].get("Labels") or {}
        own = {k for k in labels if k.startswith("swarm-placement.")}
        if own:
            spec = {**attrs["Spec"], "Labels": {k: v for k, v in labels.items() if k not in own}}
            if "swarm-placement.paused" in own and spec.get("Availability") == "pause":
                spec["Availability"] = "active"
            client.api.update_node(attrs["ID"], attrs["Version"]["Index"], spec)
    # The mirror's copies of services now gone would be dropped by the next controller's
    # first cycle: a write the next test did not make.
    for config in client.api.configs(filters={"name": MIRROR_CONFIG}):
        if config["Spec"]["Name"] == MIRROR_CONFIG:
            client.api.remove_config(config["ID"])
