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
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import anyio
import docker
from opentelemetry.sdk.trace import SpanProcessor

from controller.adapters.writes import Executor
from controller.runtime.loop import Controller, RunConfig
from controller.runtime.policy_source import PolicySource


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
    ) -> None:
        self.out = io.StringIO()
        self.docker_host = docker_host

        def factory() -> docker.DockerClient:
            from controller.adapters.docker_api import DockerUnavailableError  # noqa: PLC0415

            try:
                return docker.DockerClient(base_url=docker_host, version="auto", timeout=10)
            except docker.errors.DockerException as exc:
                raise DockerUnavailableError(str(exc)) from exc

        self.controller = Controller(
            RunConfig(policy_path=policy, dry_run=dry_run, resync_seconds=resync),
            PolicySource(policy),
            out=self.out,
            client_factory=factory,
            span_processors=span_processors,
            executor=executor,
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

    def __exit__(self, *exc: object) -> None:
        self.stop()

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
