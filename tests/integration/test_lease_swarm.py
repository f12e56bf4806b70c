"""Two controllers, one swarm, one writer: the leader lease on a real sandbox swarm.

Both controllers run in threads of the test with the lease in a config of the shared
swarm, which the first to take it creates. A churn thread keeps undoing the adoption of a
managed service, so whoever leads writes every second or so. Every write that passes the
fence is recorded with its holder.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator

import docker
import pytest

from controller.adapters.engine import DockerUnavailableError
from controller.adapters.engine_http import engine_url, post_json
from controller.adapters.lease_store import ConfigLeaseStore, LeaseRead, LeaseStore
from controller.adapters.writes import Executor, docker_executor
from controller.core.actions import Action
from controller.core.labels import steering_constraint
from controller.core.lease import lease_from_labels
from controller.runtime.lease_keeper import LeaseConfig

from .support import ControllerThread, wait_until

pytestmark = [pytest.mark.swarm, pytest.mark.slow, pytest.mark.alone]
LIFETIME = 3.0
_names = itertools.count()


class Writes:
    """Every write that got past a controller's fence: (holder, started, ended)."""

    def __init__(self) -> None:
        self.log: list[tuple[str, float, float]] = []
        self._lock = threading.Lock()

    def executor(self, holder: str) -> object:
        def factory(client: docker.DockerClient) -> Executor:
            real = docker_executor(client)

            def run(action: Action) -> None:
                started = time.monotonic()
                try:
                    real(action)
                finally:
                    with self._lock:
                        self.log.append((holder, started, time.monotonic()))

            return run

        return factory

    def of(self, holder: str) -> list[tuple[float, float]]:
        with self._lock:
            return [(s, e) for h, s, e in self.log if h == holder]


class CuttableStore:
    """The lease store of one controller, which the test can cut off (a partition
    between that controller and Swarm's Raft store; its other API calls still work)."""

    def __init__(self, inner: LeaseStore) -> None:
        self.inner = inner
        self.cut = threading.Event()

    def read(self) -> LeaseRead:
        if self.cut.is_set():
            raise DockerUnavailableError("cut off by the test")
        return self.inner.read()

    def write(self, read: LeaseRead, lease: object) -> None:
        if self.cut.is_set():
            raise DockerUnavailableError("cut off by the test")
        self.inner.write(read, lease)  # type: ignore[arg-type]


class Churn:
    """Removes a managed service's steering constraint again and again."""

    def __init__(self, client: docker.DockerClient, service: str) -> None:
        self._client, self._service = client, service
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        api = self._client.api
        wanted = steering_constraint(self._service)
        while not self._stop.wait(0.4):
            attrs = api.inspect_service(self._service)
            placement = attrs["Spec"]["TaskTemplate"].setdefault("Placement", {})
            constraints = placement.get("Constraints") or []
            if wanted not in constraints:
                continue
            placement["Constraints"] = [c for c in constraints if c != wanted]
            url = engine_url(api, "/services/{0}/update", attrs["ID"])
            try:
                post_json(
                    api, url, data=attrs["Spec"], params={"version": attrs["Version"]["Index"]}
                )
            except docker.errors.APIError:
                continue  # the controller wrote it meanwhile: try again

    def __enter__(self) -> Churn:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


@pytest.fixture
def client(swarm) -> Iterator[docker.DockerClient]:  # type: ignore[no-untyped-def]
    c = docker.DockerClient(base_url=swarm.manager_host, version="auto", timeout=30)
    yield c
    for svc in c.api.services():
        c.api.remove_service(svc["ID"])
    for config in c.api.configs(filters={"name": "ctl-lease"}):
        c.api.remove_config(config["ID"])
    c.close()


def test_two_controllers_never_write_at_once_and_a_cut_off_leader_stops(swarm, client) -> None:  # type: ignore[no-untyped-def]
    n = next(_names)
    lease_name, churned = f"ctl-lease{n}", f"churn{n}"
    swarm.create_service(churned, replicas=0, labels={"placement.managed": "true"})
    writes = Writes()
    stores: dict[str, CuttableStore] = {}

    def store_for(name: str) -> object:
        def make() -> LeaseStore:
            inner = ConfigLeaseStore(
                docker.DockerClient(base_url=swarm.manager_host, version="auto", timeout=10),
                lease_name,
            )
            stores[name] = CuttableStore(inner)
            return stores[name]

        return make

    def controller(name: str) -> ControllerThread:
        return ControllerThread(
            swarm.manager_host,
            lease=LeaseConfig(name=lease_name, holder=name, lifetime=LIFETIME),
            lease_store=store_for(name),  # type: ignore[arg-type]
            executor=writes.executor(name),  # type: ignore[arg-type]
        )

    with controller("A") as a, controller("B") as b, Churn(client, churned):
        ctl = {"A": a, "B": b}
        leader = wait_until(
            lambda: next((h for h in "AB" if len(writes.of(h)) >= 3), None), 60, "a writer"
        )
        other = "B" if leader == "A" else "A"
        assert not writes.of(other), "the standby wrote while the leader held the lease"

        cut_at = time.monotonic()
        stores[leader].cut.set()
        wait_until(lambda: len(writes.of(other)) >= 3, 60, f"{other} to take over and write")
        took_over = writes.of(other)[0][0]
        stores[leader].cut.clear()
        cycles = ctl[leader].cycles
        wait_until(lambda: ctl[leader].cycles >= cycles + 3, 30, "the old leader to cycle on")
        wait_until(lambda: len(writes.of(other)) >= 6, 60, f"{other} to keep writing")

        # Hand over cleanly: the new leader stops, releases, the old one takes at once.
        ctl[other].stop()
        wait_until(lambda: any(s > took_over for s, _ in writes.of(leader)), 30, "a clean handover")

    print(f"cut at {cut_at:.2f}, first write of {other} {took_over - cut_at:.2f} s later")
    old, new = writes.of(leader), writes.of(other)
    handed_back = max(end for _, end in new)
    assert all(end <= took_over or start >= handed_back for start, end in old), (old, new)
    lease = lease_from_labels(client.api.inspect_config(lease_name)["Spec"]["Labels"])
    # Term 1 the first holder, 2 the takeover, 3 the handover back; released at the end.
    assert lease is not None and lease.released and lease.term == 3
    assert "lease: no longer the holder" in ctl[leader].out.getvalue()
    assert "released by its holder" in ctl[leader].out.getvalue()
    assert f"lease: took the lease {lease_name} as {other}, term 2" in (ctl[other].out.getvalue())
