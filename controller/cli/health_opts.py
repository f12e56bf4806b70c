"""`swarm-placement run` options for health and placement intelligence (core/health).

Every option also reads a PLACEMENT_* variable, like the others of `run`. Secrets are
read from files (Docker secrets), never from the command line.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from controller.cli.env_options import option, switch
from controller.runtime.health_inputs import HealthConfig
from controller.runtime.http_server import parse_address

DEFAULT_PLUGIN_DIRS = "/run/docker/plugins:/etc/docker/plugins:/usr/lib/docker/plugins"


def add_health_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "health and placement intelligence",
        "The health webhook, placement plugins and node agents (docs/health.md, "
        "docs/plugin-protocol.md). All off unless asked for.",
    )
    option(
        group,
        "--health-listen",
        env="HEALTH_LISTEN",
        metavar="HOST:PORT",
        help="serve POST /v1/health here (e.g. :9465); needs --health-token-file",
    )
    option(
        group,
        "--health-token-file",
        env="HEALTH_TOKEN_FILE",
        type=Path,
        metavar="FILE",
        help="a file (a Docker secret) holding the webhook's bearer token",
    )
    option(
        group,
        "--health-max-body",
        env="HEALTH_MAX_BODY",
        type=int,
        what="a whole number",
        default=16 * 1024,
        metavar="BYTES",
        help="largest webhook body accepted (16384)",
    )
    option(
        group,
        "--health-escalations",
        env="HEALTH_ESCALATIONS",
        type=int,
        what="a whole number",
        default=3,
        metavar="N",
        help=(
            "reports that make a node worse a caller may post in a burst, one more every "
            "--health-escalation-seconds; beyond, 429 (3)"
        ),
    )
    option(
        group,
        "--health-escalation-seconds",
        env="HEALTH_ESCALATION_SECONDS",
        type=float,
        what="seconds",
        default=60.0,
        metavar="SECONDS",
        help="how often a caller gets one more report that makes a node worse (60)",
    )
    option(
        group,
        "--health-replay-window",
        env="HEALTH_REPLAY_WINDOW",
        type=float,
        what="seconds",
        metavar="SECONDS",
        help=(
            "refuse replays: every post must carry `at` (epoch seconds) within this of the "
            "controller's clock, later than the last taken for its node (off by default)"
        ),
    )
    switch(
        group,
        "--plugins",
        env="PLUGINS",
        help="ask the placement plugins found in --plugin-dirs before every plan",
    )
    switch(
        group,
        "--liveness",
        env="LIVENESS",
        help="watch the nodes' gossip peers and probe their addresses (port 7946) every "
        "0.5 s, to suspect a dead node before Swarm's heartbeat does (failover-mode "
        "speculative); on by default, it stands aside, and says so, while no node's "
        "address answers",
        default=True,
    )
    option(
        group,
        "--plugin-dirs",
        env="PLUGIN_DIRS",
        default=DEFAULT_PLUGIN_DIRS,
        metavar="DIR:DIR",
        help=f"where plugins are discovered ({DEFAULT_PLUGIN_DIRS})",
    )
    option(
        group,
        "--plugin-timeout",
        env="PLUGIN_TIMEOUT",
        type=float,
        what="seconds",
        default=2.0,
        metavar="SECONDS",
        help="timeout of each plugin call, for the connection and each read (2)",
    )
    option(
        group,
        "--plugin-deadline",
        env="PLUGIN_DEADLINE",
        type=float,
        what="seconds",
        default=1.0,
        metavar="SECONDS",
        help="all plugins are asked at once; one that has not answered by then is down (1)",
    )
    option(
        group,
        "--plugin-retry",
        env="PLUGIN_RETRY",
        type=float,
        what="seconds",
        default=10.0,
        metavar="SECONDS",
        help="a plugin that failed is asked again after this long (10)",
    )
    option(
        group,
        "--agents",
        env="AGENTS",
        metavar="NODE=URL,...",
        help=(
            "node agents to collect from, each with the node it speaks for (hostname or "
            "ID), e.g. node-2=https://10.0.0.5:9810,..."
        ),
    )
    option(
        group,
        "--agent-service",
        env="AGENT_SERVICE",
        metavar="SERVICE",
        help="or find the agents as the tasks of this global service (shared overlay)",
    )
    option(
        group,
        "--agent-port",
        env="AGENT_PORT",
        type=int,
        what="a port number",
        default=9810,
        metavar="PORT",
        help="the agents' port (9810)",
    )
    option(
        group,
        "--agent-secret-file",
        env="AGENT_SECRET_FILE",
        type=Path,
        metavar="FILE",
        help="a file (a Docker secret) holding the secret the agents require",
    )
    option(
        group,
        "--agent-interval",
        env="AGENT_INTERVAL",
        type=float,
        what="seconds",
        default=5.0,
        metavar="SECONDS",
        help="how often the agents are polled (5)",
    )
    option(
        group,
        "--agent-ca-file",
        env="AGENT_CA_FILE",
        type=Path,
        metavar="FILE",
        help="the agents speak TLS: trust certificates this CA signed (PEM)",
    )


def _listed_agents(text: str) -> tuple[tuple[str, str], ...]:
    """`NODE=URL,...`: each agent with the node it speaks for (ValueError otherwise)."""
    listed = []
    for entry in (e.strip() for e in text.split(",")):
        if not entry:
            continue
        node, sep, url = entry.partition("=")
        if not sep or not node.strip() or "://" not in url:
            raise ValueError(
                f"--agents: {entry!r} names no node: list each agent as NODE=URL, e.g. "
                "node-2=https://10.0.0.5:9810 (a listed agent is believed for its node only)"
            )
        listed.append((node.strip(), url.strip()))
    return tuple(listed)


def _agent_ca(path: Path | None) -> Path | None:
    if path is not None and not Path(path).is_file():
        raise ValueError(f"the agents' CA file {path} does not exist")
    return Path(path) if path is not None else None


MIN_SECRET_CHARS = 16  # a short token is guessed; `openssl rand -hex 32` makes 64


def read_secret(path: Path, what: str) -> str:
    try:
        secret = Path(path).read_text().strip()
    except OSError as exc:
        raise ValueError(f"cannot read the {what}: {exc}") from exc
    if not secret:
        raise ValueError(f"the {what} file {path} is empty")
    if len(secret) < MIN_SECRET_CHARS:
        raise ValueError(
            f"the {what} in {path} has {len(secret)} characters, fewer than "
            f"{MIN_SECRET_CHARS}: make one with `openssl rand -hex 32`"
        )
    return secret


def health_config(args: argparse.Namespace) -> HealthConfig | None:
    """The HealthConfig the options ask for (None: none of it); ValueError says what is
    wrong."""
    webhook = parse_address(args.health_listen) if args.health_listen else None
    token = ""
    if webhook is not None:
        if not args.health_token_file:
            raise ValueError("--health-listen needs --health-token-file: the webhook is not open")
        token = read_secret(args.health_token_file, "webhook token")
    if args.health_max_body < 1:
        raise ValueError("--health-max-body must be at least 1")
    if args.health_escalations < 1 or args.health_escalation_seconds <= 0:
        raise ValueError("--health-escalations must be at least 1, its seconds above 0")
    if args.health_replay_window is not None and args.health_replay_window <= 0:
        raise ValueError("--health-replay-window must be above 0")
    if args.plugin_timeout <= 0 or args.plugin_retry < 0 or args.agent_interval <= 0:
        raise ValueError("--plugin-timeout and --agent-interval must be above 0")
    if args.plugin_deadline <= 0:
        raise ValueError("--plugin-deadline must be above 0")
    agents = _listed_agents(args.agents or "")
    plain = [url for _, url in agents if not url.lower().startswith("https://")]
    if args.agent_ca_file and plain:
        # The CA says the agents speak TLS: one listed in the clear would get the secret.
        raise ValueError(
            f"--agent-ca-file is set, so every agent is reached over https://, but "
            f"--agents lists {', '.join(plain)}: the agents' secret would go in clear"
        )
    secret = ""
    if agents or args.agent_service:
        if not args.agent_secret_file:
            raise ValueError("collecting from agents needs --agent-secret-file")
        secret = read_secret(args.agent_secret_file, "agent secret")
    if (
        webhook is None
        and not args.plugins
        and not agents
        and not args.agent_service
        and not args.liveness
    ):
        return None
    return HealthConfig(
        webhook=webhook,
        webhook_token=token,
        webhook_max_body=args.health_max_body,
        webhook_escalations=args.health_escalations,
        webhook_escalation_seconds=args.health_escalation_seconds,
        webhook_replay_seconds=args.health_replay_window,
        plugin_dirs=tuple(d for d in args.plugin_dirs.split(":") if d) if args.plugins else (),
        plugin_timeout=args.plugin_timeout,
        plugin_deadline=args.plugin_deadline,
        plugin_retry=args.plugin_retry,
        agents=agents,
        agent_service=args.agent_service,
        agent_port=args.agent_port,
        agent_secret=secret,
        agent_interval=args.agent_interval,
        agent_ca=_agent_ca(args.agent_ca_file),
        liveness=args.liveness,
    )
