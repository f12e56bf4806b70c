"""Everything from outside Swarm, folded into the snapshot before each plan.

Webhook reports (kept by the store), placement plugin answers and node agent reports
(both asked in the background) become plain values in the snapshot: health reports,
usage, workload events, plugin advice, and the sources that could not be read. The
planner sees nothing else of them, so it stays pure and a cycle stays replayable.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from controller.core.model import ClusterSnapshot
from controller.runtime.agent_collector import AgentCollector
from controller.runtime.health_store import HealthStore
from controller.runtime.indirect_probes import IndirectProbes
from controller.runtime.liveness import Connect, LivenessGatherer
from controller.runtime.plugin_host import PluginHost


@dataclass
class HealthInputs:
    store: HealthStore = field(default_factory=HealthStore)
    plugins: PluginHost | None = None
    agents: AgentCollector | None = None
    liveness: LivenessGatherer | None = None
    _latest: ClusterSnapshot | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def latest(self) -> ClusterSnapshot | None:
        """The last snapshot observed (the webhook checks node names against it)."""
        with self._lock:
            return self._latest

    def enrich(self, snapshot: ClusterSnapshot, now: float) -> ClusterSnapshot:
        with self._lock:
            self._latest = snapshot
        health = list(self.store.live(now))
        unavailable = list(snapshot.unavailable_sources)
        changes: dict[str, object] = {}
        if self.plugins is not None:
            gathered = self.plugins.gather(snapshot, now=now)
            health.extend(gathered.health)
            unavailable.extend(gathered.unavailable)
            changes["plugins"] = gathered.advice
        workload = list(snapshot.workload)
        if self.agents is not None:
            agents = self.agents.inputs(snapshot, now)
            changes["usage"] = {**snapshot.usage, **agents.usage}
            workload.extend(agents.events)
            unavailable.extend(agents.unavailable)
        if self.liveness is not None:
            self.liveness.set_targets(snapshot)
            changes["liveness"] = (*snapshot.liveness, *self.liveness.signals())
            unavailable.extend(self.liveness.unavailable())
        return replace(
            snapshot,
            health=(*snapshot.health, *health),
            workload=tuple(workload),
            unavailable_sources=tuple(unavailable),
            **changes,  # type: ignore[arg-type]
        )


@dataclass(frozen=True)
class HealthConfig:
    """Where health and placement intelligence comes from (`swarm-placement run` options)."""

    webhook: tuple[str, int] | None = None  # where POST /v1/health listens
    webhook_token: str = ""
    webhook_max_body: int = 16 * 1024
    # Reports that make a node worse: this many per caller, one more every so many seconds.
    webhook_escalations: int = 3
    webhook_escalation_seconds: float = 60.0
    webhook_replay_seconds: float | None = None  # with it, posts carry `at` within this
    plugin_dirs: tuple[str, ...] = ()  # empty: no placement plugins
    plugin_timeout: float = 2.0
    plugin_deadline: float = 1.0  # for all plugins' answers together
    plugin_retry: float = 10.0
    # Listed agents: (the node each speaks for, by hostname or ID; its https://HOST:PORT).
    agents: tuple[tuple[str, str], ...] = ()
    agent_service: str | None = None  # or: the agents' global service, found by its tasks
    agent_port: int = 9810
    agent_secret: str = ""
    agent_interval: float = 5.0
    agent_timeout: float = 2.0
    agent_ca: Path | None = None  # agents speak TLS, with certificates this CA signed
    # Fast liveness signals (gossip peers, TCP probes) for suspicion and speculative
    # failover; `liveness_connect` replaces the plain TCP connect (tests, embedding).
    liveness: bool = False
    liveness_interval: float = 0.5
    liveness_connect: Connect | None = None


def build_inputs(
    config: HealthConfig,
    discover: Callable[[str, int, str], Mapping[str, str]] | None = None,
    liveness: Callable[[], LivenessGatherer] | None = None,
) -> HealthInputs:
    """The inputs a configuration asks for; `discover(service, port)` finds agents,
    `liveness()` makes the liveness gatherer when the configuration asks for one."""
    plugins = (
        PluginHost(
            config.plugin_dirs,
            timeout=config.plugin_timeout,
            deadline=config.plugin_deadline,
            retry_after=config.plugin_retry,
        )
        if config.plugin_dirs
        else None
    )
    agents = None
    if config.agents or config.agent_service:
        service = config.agent_service
        finder = (
            (lambda: discover(service, config.agent_port, "https" if config.agent_ca else "http"))
            if service is not None and discover is not None
            else None
        )
        agents = AgentCollector(
            secret=config.agent_secret,
            addresses={url: node for node, url in config.agents},
            discover=finder,
            interval=config.agent_interval,
            timeout=config.agent_timeout,
            ca=config.agent_ca,
        )
    gatherer = liveness() if config.liveness and liveness is not None else None
    if gatherer is not None and agents is not None:
        gatherer.indirect = IndirectProbes(agents, calls=agents.probe_calls)
    return HealthInputs(plugins=plugins, agents=agents, liveness=gatherer)
