"""The reconcile loop on a real 3-node sandbox swarm (issue: the reconcile loop)."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from collections.abc import Iterator

import docker
import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from controller.adapters.engine_http import engine_url, post_json
from controller.adapters.writes import execute_action
from controller.core.actions import Action
from controller.core.labels import steering_constraint

from .support import (
    ControllerThread,
    all_versions,
    clean_swarm,
    constraints_of,
    running_task_ids,
    service_version,
    wait_until,
)

pytestmark = pytest.mark.swarm
MANAGED = {"placement.managed": "true"}
_names = itertools.count()


@pytest.fixture
def client(swarm) -> Iterator[docker.DockerClient]:  # type: ignore[no-untyped-def]
    c = docker.DockerClient(base_url=swarm.manager_host, version="auto", timeout=30)
    yield c
    # Services, the controller's node labels and its mirror would leak into the
    # next test.
    clean_swarm(c)
    c.close()


def _name(prefix: str) -> str:
    return f"{prefix}{next(_names)}"


def _create(swarm, name: str, replicas: int, labels: dict[str, str] | None = None) -> None:  # type: ignore[no-untyped-def]
    swarm.create_service(name, replicas=replicas, labels=labels or {})


def _all_running(client: docker.DockerClient, name: str, n: int) -> None:
    wait_until(lambda: len(running_task_ids(client, name)) == n, 60, f"{n} tasks of {name} running")


@pytest.mark.second_engine
def test_adoption_restarts_no_task_and_never_writes_an_unmanaged_service(swarm, client) -> None:  # type: ignore[no-untyped-def]
    web, legacy = _name("web"), _name("legacy")
    _create(swarm, web, 3, MANAGED)
    _create(swarm, legacy, 2)
    _all_running(client, web, 3)
    _all_running(client, legacy, 2)
    web_tasks, legacy_version = running_task_ids(client, web), service_version(client, legacy)

    with ControllerThread(swarm.manager_host) as ctl:
        wait_until(lambda: steering_constraint(web) in constraints_of(client, web), 30, "adoption")
        ctl.wait_cycles(3)  # let a few resync cycles pass over the adopted state
        assert service_version(client, legacy) == legacy_version

    assert running_task_ids(client, web) == web_tasks, "adoption restarted a task"
    assert service_version(client, legacy) == legacy_version
    assert constraints_of(client, legacy) == []
    assert f'subject="service {web}" outcome=adopt' in ctl.out.getvalue()


def test_dry_run_writes_nothing(swarm, client) -> None:  # type: ignore[no-untyped-def]
    web = _name("web")
    _create(swarm, web, 2, MANAGED)
    _all_running(client, web, 2)
    before = all_versions(client)
    with ControllerThread(swarm.manager_host, dry_run=True) as ctl:
        ctl.wait_cycles(3)
    assert all_versions(client) == before
    assert f"dry-run: would service {web}: constraints" in ctl.out.getvalue()


def test_a_concurrent_writer_causes_a_conflict_and_the_controller_converges(swarm, client) -> None:  # type: ignore[no-untyped-def]
    web = _name("web")
    _create(swarm, web, 2, MANAGED)
    _all_running(client, web, 2)
    interfered: list[str] = []

    def racing_executor(c: docker.DockerClient):  # type: ignore[no-untyped-def]
        def execute(action: Action) -> None:
            if not interfered:
                # Another writer bumps the version between our observe and our write.
                spec = c.api.inspect_service(web)
                version = spec["Version"]["Index"]
                new_spec = {**spec["Spec"], "Labels": {**spec["Spec"]["Labels"], "other": "x"}}
                url = engine_url(c.api, "/services/{0}/update", spec["ID"])
                post_json(c.api, url, data=new_spec, params={"version": version})
                interfered.append(web)
            execute_action(c, action)

        return execute

    with ControllerThread(swarm.manager_host, executor=racing_executor) as ctl:
        wait_until(lambda: steering_constraint(web) in constraints_of(client, web), 30, "adoption")
    assert interfered == [web]
    reconciler = ctl.controller.reconciler
    assert reconciler is not None and reconciler.conflicts >= 1
    labels = client.api.inspect_service(web)["Spec"]["Labels"]
    assert labels["other"] == "x", "the other writer's change must survive"


def test_spans_reconcile_observe_plan_execute_and_decision_events(swarm, client) -> None:  # type: ignore[no-untyped-def]
    web = _name("web")
    _create(swarm, web, 1, MANAGED)
    exporter = InMemorySpanExporter()
    with ControllerThread(
        swarm.manager_host, span_processors=[SimpleSpanProcessor(exporter)]
    ) as ctl:
        wait_until(lambda: steering_constraint(web) in constraints_of(client, web), 30, "adoption")
        ctl.wait_cycles(1)
    spans: tuple[ReadableSpan, ...] = exporter.get_finished_spans()
    by_id = {s.context.span_id: s for s in spans}
    reconciles = [s for s in spans if s.name == "reconcile"]
    assert reconciles
    adopting = None
    for span in spans:
        if span.name == "plan":
            for event in span.events:
                if event.attributes and event.attributes.get("placement.outcome") == "adopt":
                    adopting = span
    assert adopting is not None, "no decision event for the adoption"
    assert adopting.events[0].name == "decision"
    parent = by_id[adopting.parent.span_id]  # type: ignore[union-attr]
    assert parent.name == "reconcile"
    children = sorted(
        s.name for s in spans if s.parent and s.parent.span_id == parent.context.span_id
    )
    assert children == ["execute", "observe", "plan"]
    execute = next(
        s for s in spans if s.name == "execute" and s.parent.span_id == parent.context.span_id
    )  # type: ignore[union-attr]
    actions = [s for s in spans if s.parent and s.parent.span_id == execute.context.span_id]
    assert [a.name for a in actions] == ["action set-constraints"]


def test_the_watcher_reconnects_after_the_managers_dockerd_restarts(swarm, client) -> None:  # type: ignore[no-untyped-def]
    with ControllerThread(swarm.manager_host, resync=30.0) as ctl:
        wait_until(lambda: ctl.controller.watcher.connects >= 1, 30, "the event stream")
        swarm.fail("node-1", "stop")
        swarm.restore("node-1")
        wait_until(lambda: ctl.controller.watcher.connects >= 2, 60, "a reconnect")
        # The resync is 30 s, so only an event can make this adoption happen quickly.
        web = _name("web")
        c2 = docker.DockerClient(base_url=swarm.manager_host, version="auto", timeout=30)
        wait_until(c2.api.nodes, 60, "the manager answering")
        swarm.create_service(web, replicas=1, labels=MANAGED)
        wait_until(lambda: steering_constraint(web) in constraints_of(c2, web), 20, "adoption")
        c2.close()


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "controller", *args],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_once_on_a_worker_socket_is_refused_with_exit_2(swarm) -> None:  # type: ignore[no-untyped-def]
    done = _cli("run", "--once", env={"DOCKER_HOST": swarm.docker_host("node-3")})
    assert done.returncode == 2, done.stderr
    assert "worker" in done.stderr and "manager" in done.stderr


def test_once_against_an_unreachable_engine_says_so(tmp_path) -> None:  # type: ignore[no-untyped-def]
    done = _cli("run", "--once", env={"DOCKER_HOST": f"unix://{tmp_path}/nothing.sock"})
    assert done.returncode == 1
    assert "cannot reach the Docker engine" in done.stdout + done.stderr
