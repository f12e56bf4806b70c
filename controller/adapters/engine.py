"""The Docker Engine API, as the controller uses it: read everything, write raw specs.

Writes never go through docker-py's `Service.update`/`scale`: they rebuild the spec and
start a rolling restart of every task. Instead the spec read from the engine is sent
back byte-for-byte but for the one field changed, with the version it was read at.
"""

from __future__ import annotations

import base64
import gc
import os
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any, cast

import docker
import docker.errors
import requests

from controller.adapters.attrs import (
    Attrs,
    ByVersion,
    service_from_attrs,
    snapshot_from_attrs,
    task_from_attrs,
)
from controller.adapters.engine_http import engine_url, post_json
from controller.adapters.errors import RetryableError, TerminalError
from controller.adapters.health_attrs import failure_events_from_attrs
from controller.adapters.task_list import list_tasks
from controller.core.mirror import MIRROR_CONFIG, Mirror
from controller.core.model import ClusterSnapshot
from controller.core.outside_inputs import WorkloadEvent

OUT_OF_SEQUENCE = "update out of sequence"


# The observer's raw answers, by kind ("observe", "history"), for a record of the cycles.
Tap = Callable[[str, dict[str, Any]], None]

# Finished tasks are listed again after this long (ClusterObserver), by default.
HISTORY_EVERY_SECONDS = 10.0


class DockerUnavailableError(RetryableError, RuntimeError):
    """The engine cannot be reached (yet): retried with backoff by the runtime."""

    cause = "engine-unreachable"
    words = "the Docker engine is unreachable"


class NotAManagerError(TerminalError, RuntimeError):
    """The endpoint is not a swarm manager: the controller cannot work there at all."""


class ConflictError(RetryableError, RuntimeError):
    """Someone wrote the object after we observed it: end the cycle, observe again."""

    cause = "conflict"
    words = "another writer changed an object first"


class GoneError(RetryableError, RuntimeError):
    """The object was removed after we observed it."""

    cause = "gone"
    words = "an object was removed after it was observed"


class TransientError(RetryableError, RuntimeError):
    """A failure worth retrying as is (connection reset, 5xx that is not a conflict)."""

    # A manager amid a Raft election answers 5xx ("the swarm does not have a leader").
    cause = "swarm-error"
    words = "the swarm answered with an error it may recover from"


# What the runtime holds and catches, so that only the adapters import docker: a client
# handle, and every error the engine or its HTTP transport can raise past `_call`.
EngineClient = docker.DockerClient
ENGINE_ERRORS: tuple[type[Exception], ...] = (
    docker.errors.DockerException,
    requests.RequestException,
)


# An engine request's timeout, but through an outage (runtime/outage_timeouts).
REQUEST_SECONDS = 10.0


def connect(*, timeout: float = REQUEST_SECONDS) -> docker.DockerClient:
    """A client for DOCKER_HOST and the other standard variables, API version negotiated."""
    where = os.environ.get("DOCKER_HOST") or "the default socket (DOCKER_HOST is unset)"
    try:
        return docker.DockerClient.from_env(version="auto", timeout=int(timeout))
    except docker.errors.DockerException as exc:
        raise DockerUnavailableError(
            f"cannot reach the Docker engine at {where}: {readable(exc)}"
        ) from exc


def set_request_timeout(client: docker.DockerClient, seconds: float) -> None:
    """Bound every later request of `client` that names no timeout of its own."""
    api = getattr(client, "api", None)  # a test's stand-in may have none
    if api is not None:
        api.timeout = seconds


def check_manager(client: docker.DockerClient) -> None:
    info = cast(Attrs, _call(client.api.info))
    swarm = info.get("Swarm") or {}
    if swarm.get("LocalNodeState") != "active":
        raise NotAManagerError(
            f"the Docker engine at {client.api.base_url} is not part of a swarm "
            f"(state {swarm.get('LocalNodeState') or 'inactive'}): point DOCKER_HOST at a manager"
        )
    if not swarm.get("ControlAvailable"):
        raise NotAManagerError(
            f"the Docker engine at {client.api.base_url} is a swarm worker: "
            "the controller needs a manager's socket (point DOCKER_HOST at a manager)"
        )


def engine_version(client: docker.DockerClient) -> str:
    """The engine's version as `docker version` prints it (for the startup line)."""
    version = cast(Attrs, _call(client.version))
    return str(version.get("Version", "unknown"))


def observe_cluster(client: docker.DockerClient) -> ClusterSnapshot:
    """One observation, the task history listed too (the one-shot commands)."""
    return ClusterObserver(client, history_every=lambda: 0.0)()


@dataclass(frozen=True)
class _History:
    """What one listing of the finished tasks left: their failures, and the heartbeat."""

    failures: dict[str, WorkloadEvent]
    heartbeat: float | None
    listed_at: float
    seq: int = 0  # which listing (a record of the cycles names it)


class ClusterObserver:
    """A cycle's observation. The finished tasks (Swarm keeps up to five per slot, so
    most of what a task listing returns) are only health input: failures for quarantine
    and workload health, counted over minutes to an hour. They are listed by
    `refresh_history`, which the controller calls off its worker once per resync
    interval, so no cycle waits on the largest answer of all; only their failures are
    kept. A cycle lists them itself only when no listing is younger than
    `history_every()` seconds: the first cycle, the one-shot commands (0), and a
    refresher that keeps failing."""

    def __init__(
        self,
        client: docker.DockerClient,
        *,
        history_every: Callable[[], float] = lambda: HISTORY_EVERY_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        tap: Tap | None = None,
    ) -> None:
        self._client, self._every, self._clock = client, history_every, clock
        # Given the raw answers as read (runtime/cycle_recorder: PLACEMENT_RECORD_DIR).
        self._tap = tap
        self._history: _History | None = None
        self._convert_task = ByVersion(task_from_attrs)
        self._convert_service = ByVersion(service_from_attrs)
        self.history_listings = 0

    def refresh_history(self) -> None:
        """List the finished tasks and keep their failures (safe beside a cycle: the
        result replaces the last one in a single assignment)."""
        listed_at = self._clock()
        with collector_paused():
            history = _call(lambda: list_tasks(self._client, desired_state="shutdown"))
            failures = {e.task_id: e for e in failure_events_from_attrs(history)}
            swarm = self._read_swarm()
            if self._tap is not None:
                self._tap(
                    "history", {"seq": self.history_listings + 1, "tasks": history, "swarm": swarm}
                )
            del history
        heartbeat = heartbeat_seconds(swarm) if swarm is not None else None
        self._history = _History(failures, heartbeat, listed_at, self.history_listings + 1)
        self.history_listings += 1

    def _current_history(self) -> _History:
        history = self._history
        if history is None or self._clock() - history.listed_at >= self._every():
            self.refresh_history()
            history = self._history
            assert history is not None
        return history

    def _read_swarm(self) -> Attrs | None:
        """The swarm's dispatcher settings (the heartbeat); the rest, join tokens among
        it, is dropped."""
        try:
            swarm = _call(self._client.api.inspect_swarm)
        except GoneError:
            return None  # not a swarm manager's answer: the rules do without it
        return {"Spec": {"Dispatcher": ((swarm.get("Spec") or {}).get("Dispatcher"))}}

    def __call__(self) -> ClusterSnapshot:
        client = self._client
        # The answers are plain JSON (no reference cycles) and dropped once converted,
        # so the cyclic collector's passes over their objects find nothing: at 20,000
        # tasks they were half of the observation's time (bench/cycle_scale.py).
        with collector_paused():
            nodes = _call(client.api.nodes)
            services = _call(client.api.services)
            # Swarm's delayed replacements (desired READY) come in the same listing: a
            # scale-down counts them, so a trim is judged with them (core/kernel/ledger).
            tasks = _call(lambda: list_tasks(client, desired_state=("running", "ready")))
            snapshot = snapshot_from_attrs(
                nodes=nodes,
                services=services,
                tasks=tasks,
                convert_task=self._convert_task,
                convert_service=self._convert_service,
            )
            self._convert_task.next_cycle()
            self._convert_service.next_cycle()
            running_failures = failure_events_from_attrs(tasks)
            # Kept past this block only for a record of the cycles.
            answers = {"nodes": nodes, "services": services, "tasks": tasks} if self._tap else {}
            del nodes, services, tasks
        history = self._current_history()
        # A task listed in both (its desired state changed in between): the history's
        # newer word wins, as one listing of both would have had it.
        failures = {e.task_id: e for e in running_failures} | history.failures
        mirror = read_mirror(client)
        if self._tap is not None:
            self._tap("observe", {**answers, "mirror": mirror, "history": history.seq})
        del answers
        return replace(
            snapshot,
            workload=tuple(sorted(failures.values(), key=lambda e: (e.at, e.task_id))),
            mirror=mirror_from_attrs(mirror),
            heartbeat_seconds=history.heartbeat,
        )


def heartbeat_seconds(swarm: Attrs) -> float | None:
    """The dispatcher heartbeat of `docker swarm inspect`, in seconds (None: not set)."""
    period = ((swarm.get("Spec") or {}).get("Dispatcher") or {}).get("HeartbeatPeriod")
    return period / 1e9 if isinstance(period, int) and period > 0 else None


class _CollectorSwitch:
    """The cyclic collector's switch is the process's: pauses are counted, so that a
    cycle and a history listing in two threads leave it off until both are done, and
    as it was before the first."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pauses = 0
        self._was_enabled = False

    def pause(self) -> None:
        with self._lock:
            if self._pauses == 0:
                self._was_enabled = gc.isenabled()
                gc.disable()
            self._pauses += 1

    def resume(self) -> None:
        with self._lock:
            self._pauses -= 1
            if self._pauses == 0 and self._was_enabled:
                gc.enable()


_COLLECTOR = _CollectorSwitch()


@contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic garbage collector off for a block (reference counting still frees)."""
    _COLLECTOR.pause()
    try:
        yield
    finally:
        _COLLECTOR.resume()


def observe_mirror(client: docker.DockerClient) -> Mirror:
    """The mirror (core/mirror) as Swarm stores it, empty if there is none yet."""
    return mirror_from_attrs(read_mirror(client))


def read_mirror(client: docker.DockerClient) -> Attrs | None:
    """The mirror's config as the engine answers it; None: there is none yet."""
    try:
        return inspect_config(client, MIRROR_CONFIG)
    except GoneError:
        return None


def mirror_from_attrs(attrs: Attrs | None) -> Mirror:
    if attrs is None:
        return Mirror()
    spec = attrs.get("Spec") or {}
    return Mirror.from_labels(
        str(attrs["ID"]), int(attrs["Version"]["Index"]), spec.get("Labels") or {}
    )


def inspect_service(client: docker.DockerClient, service_id: str) -> Attrs:
    return cast(Attrs, _call(lambda: client.api.inspect_service(service_id)))


def inspect_node(client: docker.DockerClient, node_id: str) -> Attrs:
    return cast(Attrs, _call(lambda: client.api.inspect_node(node_id)))


# A write request's (connect, read) timeout; None: the client's own (adapters/write_fence).
Timeout = tuple[float, float] | None


def _bounded(timeout: Timeout) -> dict[str, Any]:
    return {} if timeout is None else {"timeout": timeout}


def update_service_spec(
    client: docker.DockerClient,
    service_id: str,
    version: int,
    spec: Attrs,
    *,
    timeout: Timeout = None,
) -> None:
    url = engine_url(client.api, "/services/{0}/update", service_id)
    params = {"version": version}
    _call(lambda: post_json(client.api, url, data=spec, params=params, **_bounded(timeout)))


def update_node_spec(
    client: docker.DockerClient, node_id: str, version: int, spec: Attrs, *, timeout: Timeout = None
) -> None:
    url = engine_url(client.api, "/nodes/{0}/update", node_id)
    params = {"version": version}
    _call(lambda: post_json(client.api, url, data=dict(spec), params=params, **_bounded(timeout)))


def inspect_config(client: docker.DockerClient, name_or_id: str) -> Attrs:
    return cast(Attrs, _call(lambda: client.api.inspect_config(name_or_id)))


def create_config(
    client: docker.DockerClient,
    name: str,
    data: bytes,
    labels: dict[str, str],
    *,
    timeout: Timeout = None,
) -> str:
    """A new config's ID; ConflictError when one of that name exists already."""
    body = {"Name": name, "Data": base64.b64encode(data).decode("ascii"), "Labels": labels}
    url = engine_url(client.api, "/configs/create")
    try:
        created = _call(
            lambda: post_json(client.api, url, data=body, answer=True, **_bounded(timeout))
        )
    except docker.errors.APIError as exc:
        if exc.status_code == 409:
            raise ConflictError(str(exc.explanation or exc)) from exc
        raise
    return str(created["ID"])


def update_config_spec(
    client: docker.DockerClient,
    config_id: str,
    version: int,
    spec: Attrs,
    *,
    timeout: Timeout = None,
) -> None:
    """Swarm lets only a config's labels change: `spec` is the spec read, labels apart."""
    url = engine_url(client.api, "/configs/{0}/update", config_id)
    params = {"version": version}
    _call(lambda: post_json(client.api, url, data=spec, params=params, **_bounded(timeout)))


def readable(exc: BaseException) -> str:
    """A transport failure in words, not urllib3's repr of its connection pool."""
    if isinstance(exc, requests.Timeout):
        found = re.search(r"timeout=([\d.]+)", str(exc))
        return f"no answer within {found.group(1)} s" if found else "no answer in time"
    inner: BaseException | None = exc
    while inner is not None:
        if isinstance(inner, OSError) and inner.strerror:
            return inner.strerror[0].lower() + inner.strerror[1:]
        inner = inner.__context__ or inner.__cause__
    return str(exc)


def _call(fn: Any) -> Any:
    """Run one API call, mapping failures onto the controller's error kinds."""
    try:
        return fn()
    except docker.errors.NotFound as exc:
        raise GoneError(str(exc.explanation or exc)) from exc
    except docker.errors.APIError as exc:
        text = str(exc.explanation or exc)
        if OUT_OF_SEQUENCE in text:
            raise ConflictError(text) from exc
        status = exc.status_code or 0
        if status >= 500 or status == 0:
            raise TransientError(text) from exc
        raise
    except (requests.ConnectionError, requests.Timeout) as exc:
        raise DockerUnavailableError(f"lost the Docker engine: {readable(exc)}") from exc
    except docker.errors.DockerException as exc:
        raise DockerUnavailableError(str(exc)) from exc
