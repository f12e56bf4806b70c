"""`swarm-placement agent` (the node agent) and `swarm-placement reference-plugin`."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import ssl
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from controller.cli.env_options import option, switch
from controller.cli.health_opts import read_secret
from controller.cli.tls_opts import add_tls_options, tls_files
from controller.runtime.http_server import parse_address

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
NOBODY = 65534
PROXY_SOCKET = Path("/run/swarm-placement/docker-read.sock")


def register(subparsers: Any) -> None:
    agent: argparse.ArgumentParser = subparsers.add_parser(
        "agent",
        help="the node agent: report this node's usage and container health",
        description=(
            "Runs on every node (a global service) with the local Docker socket (DOCKER_HOST "
            "or the default socket) and answers GET /v1/report to holders of the shared "
            "secret: CPU and memory in use averaged over a window, and the containers of "
            "Swarm tasks that turned unhealthy or died."
        ),
    )
    option(
        agent,
        "--listen",
        env="AGENT_LISTEN",
        default=":9810",
        metavar="HOST:PORT",
        help="where to answer (:9810)",
    )
    option(
        agent,
        "--secret-file",
        env="AGENT_SECRET_FILE",
        type=Path,
        metavar="FILE",
        help="a file (a Docker secret) holding the secret callers must present",
    )
    option(
        agent,
        "--usage",
        env="AGENT_USAGE",
        choices=("host", "containers"),
        default="host",
        help="host: the node's /proc (default); containers: the sum of Docker's containers",
    )
    option(
        agent,
        "--proc",
        env="AGENT_PROC",
        type=Path,
        default=Path("/proc"),
        metavar="DIR",
        help="the host's /proc, where the agent runs in a container (e.g. /host/proc)",
    )
    option(
        agent,
        "--interval",
        env="AGENT_INTERVAL",
        type=float,
        what="seconds",
        default=5.0,
        metavar="SECONDS",
        help="how often usage is sampled (5)",
    )
    option(
        agent,
        "--window",
        env="AGENT_WINDOW",
        type=float,
        what="seconds",
        default=60.0,
        metavar="SECONDS",
        help="usage is averaged over this long (60)",
    )
    option(
        agent,
        "--probe-socket",
        env="PROBE_SOCKET",
        type=Path,
        metavar="FILE",
        help="also answer /healthz on this unix socket, for the container healthcheck",
    )
    switch(
        agent,
        "--docker-proxy",
        env="AGENT_DOCKER_PROXY",
        help=(
            "reach Docker only through a read-only proxy (a process of its own, the only "
            "one holding the socket) and give up root once started (needs root)"
        ),
    )
    option(
        agent,
        "--user",
        env="AGENT_USER",
        type=int,
        what="a user ID",
        default=NOBODY,
        metavar="UID",
        help=f"with --docker-proxy, the user (and group) the agent goes on as ({NOBODY})",
    )
    add_tls_options(agent, client_ca=False)
    agent.set_defaults(handler=run_agent)

    plugin: argparse.ArgumentParser = subparsers.add_parser(
        "reference-plugin",
        help="the reference placement plugin (topology and health from a JSON file)",
        description="docs/plugin-protocol.md; the file format is in controller/refplugin.py.",
    )
    plugin.add_argument("--file", type=Path, required=True, help="the topology file (JSON)")
    where = plugin.add_mutually_exclusive_group(required=True)
    where.add_argument("--socket", type=Path, help="e.g. /run/docker/plugins/topology.sock")
    where.add_argument("--listen", metavar="HOST:PORT", help="TCP instead (write a .spec file)")
    plugin.set_defaults(handler=run_reference_plugin)


def _stop_on_signals(stop: Any) -> None:
    def handler(signum: int, _frame: Any) -> None:
        threading.Thread(target=stop, daemon=True).start()

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, handler)


def _start_docker_proxy() -> subprocess.Popen[bytes]:
    """The proxy, as root, in front of the socket DOCKER_HOST names; from now on this
    process's Docker clients go through it (runtime/docker_proxy.py)."""
    if os.geteuid() != 0:
        raise ValueError("--docker-proxy needs root: it hands the socket over, then gives root up")
    host = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
    if not host.startswith("unix://"):
        raise ValueError(f"--docker-proxy works with a unix socket, not DOCKER_HOST={host}")
    process = subprocess.Popen(
        # The module alone (standard library only), not the whole command line: small.
        [sys.executable, "-m", "controller.runtime.docker_proxy",
         host.removeprefix("unix://"), str(PROXY_SOCKET)],
        stdin=subprocess.PIPE,  # closed with this process: the proxy then stops
    )  # fmt: skip
    deadline = time.monotonic() + 10
    while not PROXY_SOCKET.is_socket():
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("the agent's Docker proxy did not start")
        time.sleep(0.05)
    os.environ["DOCKER_HOST"] = f"unix://{PROXY_SOCKET}"
    return process


def run_agent(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(message)s"
    )
    from controller.adapters.agent_probe import ProbeError  # noqa: PLC0415
    from controller.adapters.engine import connect  # noqa: PLC0415
    from controller.runtime.agent import Agent, AgentConfig  # noqa: PLC0415
    from controller.runtime.docker_proxy import give_up_root  # noqa: PLC0415

    proxy = None
    try:
        if not args.secret_file:
            raise ValueError("--secret-file is required: the agent does not answer strangers")
        if args.interval <= 0 or args.window < args.interval:
            raise ValueError("--interval must be above 0 and --window at least --interval")
        config = AgentConfig(
            listen=parse_address(args.listen),
            secret=read_secret(args.secret_file, "agent secret"),
            usage=args.usage,
            proc=args.proc,
            interval=args.interval,
            window=args.window,
            tls=tls_files(args),
            probe_socket=args.probe_socket,
        )
        if args.docker_proxy:
            proxy = _start_docker_proxy()
        # Secrets, certificate and ports are taken now, while the agent is still root.
        agent = Agent(config, connect)
        if proxy is not None:
            give_up_root(args.user, args.user)
    except ValueError as exc:
        print(f"agent: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except ssl.SSLError as exc:
        print(f"agent: cannot use the TLS certificate and key: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (ProbeError, OSError, RuntimeError) as exc:
        print(f"agent: {exc}", file=sys.stderr)
        if proxy is not None:
            proxy.terminate()
        return EXIT_FAILED
    _stop_on_signals(agent.stop)
    docker = f", Docker read-only as user {args.user}" if proxy is not None else ""
    print(
        f"agent: node {agent.node.hostname} ({agent.node.node_id[:12]}) on port {agent.port}, "
        f"usage from {config.usage}{docker}",
        file=sys.stderr,
        flush=True,
    )
    agent.serve_forever()
    return EXIT_OK


def run_reference_plugin(args: argparse.Namespace) -> int:
    from controller.refplugin import make_server  # noqa: PLC0415

    try:
        listen = parse_address(args.listen) if args.listen else None
        server = make_server(args.file, socket_path=args.socket, listen=listen)
    except (ValueError, OSError) as exc:
        print(f"reference-plugin: {exc}", file=sys.stderr)
        return EXIT_USAGE
    _stop_on_signals(server.shutdown)
    print(f"reference-plugin: serving {args.socket or args.listen}", file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    finally:
        server.server_close()
        if args.socket is not None:
            with contextlib.suppress(OSError):
                args.socket.unlink()
    return EXIT_OK
