"""How the controller's parts that talk to the outside are made from its configuration:
the lease keeper, the health webhook, the liveness gatherer and the agents' discovery,
and what the metrics read of the outside inputs."""

from __future__ import annotations

from collections.abc import Callable

from controller.adapters.agent_client import AgentError, discover_agents
from controller.adapters.engine import ENGINE_ERRORS, EngineClient
from controller.adapters.lease_store import ConfigLeaseStore, LeaseStore
from controller.adapters.tcp_probe import tcp_connects
from controller.runtime.cycle_trigger import Trigger
from controller.runtime.health_inputs import HealthConfig, HealthInputs
from controller.runtime.lease_keeper import LeaseConfig, LeaseKeeper
from controller.runtime.liveness import LivenessGatherer
from controller.runtime.report_limits import ReportLimits
from controller.runtime.webhook import HealthApi

ClientFactory = Callable[[], EngineClient]


def lease_keeper(
    lease: LeaseConfig | None,
    client_factory: ClientFactory,
    store: Callable[[], LeaseStore] | None,
    *,
    say: Callable[[str], None],
    trigger: Trigger,
) -> LeaseKeeper | None:
    """The lease keeper, on the swarm's config unless the caller brings a store."""
    if lease is None:
        return None

    def config_store() -> LeaseStore:
        client = client_factory()
        # A manager without a Raft leader (an election) hangs requests: a short timeout
        # lets a standby read again at once when the new Raft leader answers.
        client.api.timeout = max(1.0, lease.lifetime / 4)
        return ConfigLeaseStore(client, lease.name)

    factory = store or config_store
    return LeaseKeeper(
        lease,
        factory,
        say=say,
        on_acquire=lambda: trigger.fire("lease:acquired"),
    )


def health_webhook(
    health: HealthConfig | None,
    inputs: HealthInputs | None,
    *,
    trigger: Trigger,
    clock: Callable[[], float],
    role: Callable[[], str],
    on_result: Callable[[str], None],
    say: Callable[[str], None],
) -> HealthApi | None:
    """The webhook's routes' handler, when the configuration asks for a webhook."""
    if health is None or inputs is None or health.webhook is None:
        return None
    return HealthApi(
        token=health.webhook_token,
        store=inputs.store,
        latest=inputs.latest,
        # A route of the server in the event loop: the trigger is fired directly.
        on_report=lambda report: trigger.fire(f"health:{report.state.value}"),
        clock=clock,
        max_body=health.webhook_max_body,
        role=role,
        on_result=on_result,
        limits=ReportLimits(
            escalations=health.webhook_escalations,
            escalation_seconds=health.webhook_escalation_seconds,
            replay_seconds=health.webhook_replay_seconds,
        ),
        say=say,
    )


def liveness_gatherer(
    health: HealthConfig | None,
    client_factory: ClientFactory,
    *,
    clock: Callable[[], float],
    on_change: Callable[[], None],
) -> LivenessGatherer:
    health = health or HealthConfig()
    return LivenessGatherer(
        client_factory=client_factory,
        connect=health.liveness_connect or tcp_connects,
        interval=health.liveness_interval,
        clock=clock,
        on_change=on_change,
    )


def agents_from(client_factory: ClientFactory) -> Callable[[str, int, str], dict[str, str]]:
    """How the node agents are found: the tasks of their service, on a fresh client."""

    def discover(service: str, port: int, scheme: str) -> dict[str, str]:
        try:
            client = client_factory()
        except ENGINE_ERRORS as exc:
            raise AgentError(f"cannot reach the Docker engine: {exc}") from exc
        try:
            return discover_agents(client, service, port, scheme)
        finally:
            client.close()

    return discover


def plugin_failures(inputs: HealthInputs | None) -> dict[str, int]:
    plugins = inputs.plugins if inputs is not None else None
    return dict(plugins.failures) if plugins is not None else {}


def skipped_calls(inputs: HealthInputs | None) -> dict[str, int]:
    agents = inputs.agents if inputs is not None else None
    if agents is None:
        return {}
    return {c.kind: c.skipped for c in (agents.calls, agents.probe_calls)}


def agents_reporting(inputs: HealthInputs | None) -> int | None:
    agents = inputs.agents if inputs is not None else None
    return agents.reporting() if agents is not None else None
