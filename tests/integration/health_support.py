"""Helpers for the health tests: webhook calls, agents and plugins as real processes."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker

from .support import wait_until

ROOT = Path(__file__).resolve().parents[2]
NANO = 1_000_000_000


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def post_health(
    port: int,
    body: Any,
    *,
    token: str | None,
    raw: bytes | None = None,
    content_type: str = "application/json",
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, Any]]:
    """POST /v1/health; the status and the JSON answer."""
    data = raw if raw is not None else json.dumps(body).encode()
    sent = {"Content-Type": content_type, **(headers or {})}
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("POST", "/v1/health", body=data, headers=sent)
        response = conn.getresponse()
        text = response.read()
    finally:
        conn.close()
    return response.status, json.loads(text) if text else {}


def _python(
    *args: str, env: dict[str, str] | None = None, log: Path, netns: str | None = None
) -> subprocess.Popen[bytes]:
    """`python -m controller ARGS`, in network namespace `netns` (a path) if given."""
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    handle = log.open("wb")
    enter = ["nsenter", f"--net={netns}"] if netns else []
    return subprocess.Popen(
        [*enter, sys.executable, "-m", "controller", *args],
        env=full_env,
        stdout=handle,
        stderr=subprocess.STDOUT,
        cwd=ROOT,
        start_new_session=True,
    )


def kill(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL, as a crash would; by its own pid."""
    if process.poll() is None:
        os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=10)


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            kill(process)


def _agent(
    listen: str, secret_file: Path, docker_host: str, log: Path, netns: str | None = None
) -> subprocess.Popen[bytes]:
    """One agent process: containers usage, 1 s samples over 5 s."""
    return _python(
        "agent",
        "--listen",
        listen,
        "--secret-file",
        str(secret_file),
        "--usage",
        "containers",
        "--interval",
        "1",
        "--window",
        "5",
        env={"DOCKER_HOST": docker_host},
        log=log,
        netns=netns,
    )


@contextlib.contextmanager
def agents(
    docker_hosts: dict[str, str], secret_file: Path, logs: Path
) -> Iterator[dict[str, tuple[subprocess.Popen[bytes], str]]]:
    """One real agent process per node (containers usage, 1 s samples): host -> (process,
    URL). All are stopped afterwards."""
    running: dict[str, tuple[subprocess.Popen[bytes], str]] = {}
    try:
        for host, docker_host in docker_hosts.items():
            port = free_port()
            log = logs / f"agent-{host}.log"
            process = _agent(f"127.0.0.1:{port}", secret_file, docker_host, log)
            running[host] = (process, f"http://127.0.0.1:{port}")
        for host, (process, url) in running.items():
            wait_until(
                lambda p=process, u=url: p.poll() is not None or _answers(u),
                30,
                f"the agent of {host}",
            )
            assert process.poll() is None, (logs / f"agent-{host}.log").read_text()
        yield running
    finally:
        for process, _ in running.values():
            stop(process)


@contextlib.contextmanager
def node_agents(
    sandbox: Any, secret_file: Path, logs: Path, port: int = 9810
) -> Iterator[dict[str, str]]:
    """One real agent process per node, inside that node's network namespace and on its
    address, as an agent task would run there: host -> URL. All are stopped afterwards."""
    from controller.sandbox.netns import netns_path  # noqa: PLC0415
    from controller.sandbox.netns_probe import NetnsProber  # noqa: PLC0415

    running: dict[str, tuple[subprocess.Popen[bytes], str]] = {}
    prober = NetnsProber(sandbox.state.node(sandbox.nodes[0]).netns)
    try:
        for host in sandbox.nodes:
            node = sandbox.state.node(host)
            process = _agent(
                f"{node.ip}:{port}",
                secret_file,
                sandbox.docker_host(host),
                logs / f"agent-{host}.log",
                netns=str(netns_path(node.netns)),
            )
            running[host] = (process, node.ip)
        for host, (process, ip) in running.items():
            wait_until(
                lambda p=process, a=ip: p.poll() is not None or prober(a, port, 1.0),
                30,
                f"the agent of {host}",
            )
            assert process.poll() is None, (logs / f"agent-{host}.log").read_text()
        yield {host: f"http://{ip}:{port}" for host, (_, ip) in running.items()}
    finally:
        prober.close()
        for process, _ in running.values():
            stop(process)


def _answers(url: str) -> bool:
    host, port = url.removeprefix("http://").split(":")
    with contextlib.suppress(OSError):
        conn = http.client.HTTPConnection(host, int(port), timeout=2)
        try:
            conn.request("GET", "/healthz")
            return conn.getresponse().status == 200
        finally:
            conn.close()
    return False


@contextlib.contextmanager
def reference_plugin(
    socket_path: Path, topology: Path, logs: Path
) -> Iterator[subprocess.Popen[bytes]]:
    process = _python(
        "reference-plugin",
        "--socket",
        str(socket_path),
        "--file",
        str(topology),
        log=logs / "plugin.log",
    )
    try:
        wait_until(lambda: process.poll() is not None or socket_path.exists(), 30, "the plugin")
        assert process.poll() is None, (logs / "plugin.log").read_text()
        yield process
    finally:
        stop(process)


def create_service(
    client: docker.DockerClient,
    name: str,
    image: str,
    *,
    replicas: int = 1,
    labels: dict[str, str] | None = None,
    healthcheck: list[str] | None = None,
    restart_delay: float = 1.0,
    constraints: list[str] | None = None,
    order: str = "start-first",
    reserve: tuple[float, int] | None = None,
) -> str:
    """A service by raw API: the sandbox image, a node-name variable, an optional check;
    `reserve`: (CPUs, memory bytes) each task reserves."""
    container: dict[str, Any] = {
        "Image": image,
        "Command": ["sleep", "3600"],
        "Env": ["NODE={{.Node.Hostname}}"],
        "StopGracePeriod": NANO,
    }
    if healthcheck is not None:
        container["Healthcheck"] = {
            "Test": healthcheck,
            "Interval": NANO,
            "Timeout": NANO,
            "Retries": 1,
            "StartPeriod": 0,
        }
    template = {
        "ContainerSpec": container,
        "RestartPolicy": {"Condition": "any", "Delay": int(restart_delay * NANO), "MaxAttempts": 0},
        "Placement": {"Constraints": list(constraints or [])},
    }
    if reserve is not None:
        cpus, memory = reserve
        template["Resources"] = {
            "Reservations": {"NanoCPUs": int(cpus * NANO), "MemoryBytes": memory}
        }
    result = client.api.create_service(
        template,
        name=name,
        mode={"Replicated": {"Replicas": replicas}},
        labels=labels or {},
        update_config={"Parallelism": 1, "Order": order},
    )
    return str(result["ID"])


def node_attrs(client: docker.DockerClient, hostname: str) -> dict[str, Any]:
    for attrs in client.api.nodes():
        if attrs["Description"]["Hostname"] == hostname:
            return dict(attrs)
    raise AssertionError(f"no node {hostname}")


def reset_nodes(client: docker.DockerClient) -> None:
    """Every node active, and none of the controller's labels left."""
    for attrs in client.api.nodes():
        spec = dict(attrs["Spec"])
        labels = spec.get("Labels") or {}
        own = {k for k in labels if k.startswith("swarm-placement.")}
        if own or spec.get("Availability") != "active":
            spec["Labels"] = {k: v for k, v in labels.items() if k not in own}
            spec["Availability"] = "active"
            client.api.update_node(attrs["ID"], attrs["Version"]["Index"], spec)


def wait_for(text: str, out: Any, timeout: float = 30) -> None:
    wait_until(lambda: text in out.getvalue(), timeout, f"the log to say {text!r}")


def elapsed(since: float) -> float:
    return round(time.monotonic() - since, 2)
