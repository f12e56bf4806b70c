"""Polls the node agents in the background; each cycle reads their latest reports.

An agent that cannot be reached, answers badly or has not answered for `stale_after`
seconds contributes nothing: its node's load falls back to reservations, and a decision
says the agent is unavailable. Nothing else follows from it: a lost agent is not a lost
node (Swarm's heartbeat and the health sources say that).

Every agent speaks for one node only: a discovered one for the node Swarm runs its task
on, a listed one for the node it is listed with (`--agents node-2=https://...`, by
hostname or ID). A report that names another node is not believed.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import anyio
import anyio.to_thread

from controller.adapters.agent_client import AgentError, fetch_report
from controller.adapters.agent_report import AgentReport
from controller.core.model import ClusterSnapshot, NodeState, NodeUsage
from controller.core.outside_inputs import SourceStatus, WorkloadEvent
from controller.runtime.calls_in_flight import CallsInFlight

log = logging.getLogger(__name__)


@dataclass
class _Seen:
    report: AgentReport | None = None
    at: float = 0.0  # when the last good report came (clock)
    problem: str = ""


@dataclass(frozen=True)
class AgentInputs:
    usage: Mapping[str, NodeUsage] = field(default_factory=dict)
    events: tuple[WorkloadEvent, ...] = ()
    unavailable: tuple[SourceStatus, ...] = ()


class AgentCollector:
    def __init__(
        self,
        *,
        secret: str,
        addresses: Mapping[str, str] | None = None,  # address -> the node it speaks for
        discover: Callable[[], Mapping[str, str]] | None = None,
        interval: float = 5.0,
        timeout: float = 2.0,
        clock: Callable[[], float] = time.time,
        ca: Path | None = None,
    ) -> None:
        if not secret:
            raise ValueError("collecting from agents needs the shared secret")
        self._secret, self._discover = secret, discover
        self._addresses: dict[str, str] = dict(addresses or {})
        self._node_ids: dict[str, str] = {}  # hostname or ID -> ID, as last observed
        self.ca = ca  # the agents speak TLS with certificates this CA signed
        self.interval, self.timeout, self._clock = interval, timeout, clock
        self.stale_after = 3 * interval + timeout
        self._lock = threading.Lock()
        self._seen: dict[str, _Seen] = {}  # address -> latest
        # Address -> the node its task runs on, as Swarm says (discovered agents only): a
        # report is believed only for that node, whatever node id it claims.
        self._runs_on: dict[str, str] = {}
        self.polls = 0
        self.calls = CallsInFlight("agent report")  # one report call per agent at a time
        self.probe_calls = CallsInFlight("indirect probe")  # runtime/indirect_probes.py

    async def run(self) -> None:
        while True:
            try:
                await anyio.to_thread.run_sync(self.poll_once, abandon_on_cancel=True)
            except Exception:  # agents are advice: never let them stop the controller
                log.exception("polling the agents failed; polling again")
            await anyio.sleep(self.interval)

    def targets(self) -> list[str]:
        if self._discover is None:
            return list(self._addresses)
        try:
            found = self._discover()
            with self._lock:
                self._runs_on = {address: node_id for node_id, address in found.items()}
            return sorted(set(found.values()) | set(self._addresses))
        except AgentError as exc:
            log.warning("agent discovery: %s", exc)
            return list(self._addresses)

    def poll_once(self) -> None:
        targets = self.targets()
        results: dict[str, AgentReport | str] = {}

        def one(address: str) -> None:
            try:
                results[address] = fetch_report(
                    address, secret=self._secret, timeout=self.timeout, ca=self.ca
                )
            except AgentError as exc:
                results[address] = str(exc)

        threads = []
        for address in targets:
            thread = self.calls.start(address, partial(one, address))
            if thread is None:
                results[address] = "its last call has not ended"
            else:
                threads.append(thread)
        for thread in threads:
            thread.join(self.timeout * 3)
        now = self._clock()
        with self._lock:
            for address in list(self._seen):
                if address not in targets:
                    del self._seen[address]
            for address in targets:
                seen = self._seen.setdefault(address, _Seen())
                result = results.get(address, "no answer")
                if isinstance(result, AgentReport):
                    seen.report, seen.at, seen.problem = result, now, ""
                else:
                    seen.problem = f"unreachable: {result}"
            self.polls += 1

    def vantage_points(self) -> dict[str, tuple[str, str]]:
        """Address -> (node id, hostname) of each agent with a fresh report: where the
        controller can ask for an indirect probe (runtime/indirect_probes.py)."""
        now = self._clock()
        with self._lock:
            seen = dict(self._seen)
        return {
            address: (s.report.node_id, s.report.hostname)
            for address, s in seen.items()
            if s.report is not None
            and now - s.at <= self.stale_after
            and self._impostor(address, s.report) is None
        }

    def _impostor(self, address: str, report: AgentReport) -> str | None:
        """Why a report is not believed: its agent's task runs on another node than the
        one it names (a discovered agent), or it was listed for another node."""
        runs_on = self._runs_on.get(address)
        if runs_on is not None and runs_on != report.node_id:
            return (
                f"reports for node {report.node_id} but its task runs on node {runs_on}: "
                "not believed"
            )
        listed = self._addresses.get(address)
        if runs_on is None and listed is not None:
            listed_id = self._node_ids.get(listed)
            if listed_id != report.node_id:
                return (
                    f"reports for node {report.node_id} but is listed for node {listed}: "
                    "not believed"
                )
        return None

    @property
    def secret(self) -> str:
        return self._secret

    def reporting(self) -> int:
        """How many agents have a fresh report (a metric)."""
        now = self._clock()
        with self._lock:
            seen = list(self._seen.values())
        return sum(1 for s in seen if s.report is not None and now - s.at <= self.stale_after)

    def inputs(self, snapshot: ClusterSnapshot, now: float) -> AgentInputs:
        usage: dict[str, NodeUsage] = {}
        events: list[WorkloadEvent] = []
        unavailable: list[SourceStatus] = []
        known = snapshot.node_by_id
        with self._lock:
            seen = dict(self._seen)
            # A node that left and rejoined is listed twice under its hostname: the one
            # Swarm does not call down is meant (the live ones sort last and win).
            nodes = sorted(snapshot.nodes, key=lambda n: n.state is not NodeState.DOWN)
            self._node_ids = {n.hostname: n.id for n in nodes} | {n.id: n.id for n in nodes}
        for address, entry in sorted(seen.items()):
            report = entry.report
            fresh = report is not None and now - entry.at <= self.stale_after
            name = report.hostname if report is not None and report.hostname else address
            if entry.problem and not fresh:
                unavailable.append(SourceStatus("agent", name, entry.problem))
                continue
            if report is None or not fresh or report.node_id not in known:
                continue
            if (why := self._impostor(address, report)) is not None:
                unavailable.append(SourceStatus("agent", name, why))
                continue
            node_usage = report.node_usage()
            if node_usage is not None:
                usage[report.node_id] = node_usage
            events.extend(report.workload_events())
        return AgentInputs(usage=usage, events=tuple(events), unavailable=tuple(unavailable))
