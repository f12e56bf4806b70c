"""Asks the placement plugins before every plan, and goes on without those that fail.

Plugins are discovered anew each cycle (a plugin started or removed is seen at once)
and activated once. Each call has a timeout; a plugin that fails, times out or answers
garbage is left out of that cycle's advice, reported as a source the controller could
not read, and not asked again for `retry_after` seconds, so a dead plugin costs one
timeout now and then rather than one per cycle. Its last vetoes go with it (the deny
labels they caused are lifted, which moves nothing back); its last health word stands
until that word's ttl.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from controller.adapters.plugins import (
    PluginError,
    PluginRef,
    activate,
    discover_plugins,
    filter_nodes,
    node_health,
    score_nodes,
)
from controller.core.model import ClusterSnapshot
from controller.core.signals import HealthReport, PluginAdvice, PluginVeto, SourceStatus

log = logging.getLogger(__name__)


@dataclass
class _State:
    ref: PluginRef
    active: bool | None = None  # None: not activated yet; False: not a PlacementDriver
    failed_at: float | None = None
    problem: str = ""


@dataclass(frozen=True)
class Gathered:
    advice: PluginAdvice = field(default_factory=PluginAdvice)
    health: tuple[HealthReport, ...] = ()
    unavailable: tuple[SourceStatus, ...] = ()


class PluginHost:
    def __init__(
        self,
        dirs: Iterable[str | Path],
        *,
        timeout: float = 2.0,
        retry_after: float = 10.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.dirs = tuple(dirs)
        self.timeout, self.retry_after, self._monotonic = timeout, retry_after, monotonic
        self._plugins: dict[str, _State] = {}

    def gather(self, snapshot: ClusterSnapshot, *, now: float) -> Gathered:
        refs, problems = discover_plugins(self.dirs)
        for problem in problems:
            log.warning("%s", problem)
        current = {r.name: r for r in refs}
        for name in [n for n, s in self._plugins.items() if current.get(n) != s.ref]:
            del self._plugins[name]  # gone, or moved to another address: start afresh
        vetoes: list[PluginVeto] = []
        scores: dict[str, dict[str, float]] = {}
        health: list[HealthReport] = []
        answered: list[str] = []
        unavailable: list[SourceStatus] = []
        services = tuple(s for s in snapshot.services)
        for name, ref in sorted(current.items()):
            state = self._plugins.setdefault(name, _State(ref))
            if state.failed_at is not None:
                if self._monotonic() - state.failed_at < self.retry_after:
                    unavailable.append(SourceStatus("plugin", name, state.problem))
                    continue
                state.active = None  # try again from the handshake
            try:
                if state.active is None:
                    state.active = activate(ref, timeout=self.timeout)
                if not state.active:
                    continue  # another kind of Docker plugin: not ours
                got_vetoes = filter_nodes(ref, snapshot, services, timeout=self.timeout)
                got_scores = score_nodes(ref, snapshot, services, timeout=self.timeout)
                got_health = node_health(ref, snapshot, now=now, timeout=self.timeout)
            except PluginError as exc:
                state.failed_at, state.problem = self._monotonic(), f"down: {exc}"
                state.active = None
                log.warning("placement plugin %s: %s", name, exc)
                unavailable.append(SourceStatus("plugin", name, state.problem))
                continue
            state.failed_at, state.problem = None, ""
            answered.append(name)
            vetoes.extend(got_vetoes)
            health.extend(got_health)
            for service_id, per_node in got_scores.items():
                mine = scores.setdefault(service_id, {})
                for node_id, score in per_node.items():
                    mine[node_id] = mine.get(node_id, 0.0) + score
        advice = PluginAdvice(vetoes=tuple(vetoes), scores=scores, answered=tuple(answered))
        return Gathered(advice=advice, health=tuple(health), unavailable=tuple(unavailable))
