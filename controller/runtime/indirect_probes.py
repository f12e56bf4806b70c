"""Indirect probes: a node the controller cannot reach is tried from other nodes' agents.

A failed direct probe only says that this manager cannot reach the node, which a bad
route or the controller's own link explains as well as a death. So, as SWIM's ping-req
does, up to `fanout` agents on other nodes try the same gossip port: one that gets
through makes the node alive; every one that answers failing makes it gone; none
answering says nothing. A killed dockerd is refused at once from anywhere, so with the
direct probe this is a second, independent signal within a second of a death, where the
overlay's gossip takes 5 to 7 s (docs/speculative-failover.md).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from functools import partial

from controller.adapters.agent_client import AgentError, probe_via
from controller.runtime.agent_collector import AgentCollector
from controller.runtime.calls_in_flight import CallsInFlight

FANOUT = 3
ProbeVia = Callable[..., bool]


class IndirectProbes:
    def __init__(
        self,
        agents: AgentCollector,
        *,
        timeout: float = 1.0,
        fanout: int = FANOUT,
        probe: ProbeVia = probe_via,
        calls: CallsInFlight | None = None,
    ) -> None:
        self._agents, self.timeout, self.fanout, self._probe = agents, timeout, fanout, probe
        # One probe per agent and address at a time: a poll skips a pair still asking.
        self.calls = calls or CallsInFlight("indirect probe")

    def __call__(self, node_id: str, address: str) -> tuple[bool, str] | None:
        """(alive, why) from the agents of other nodes; None when none of them answered."""
        points = sorted(
            (hostname or url, url)
            for url, (node, hostname) in self._agents.vantage_points().items()
            if node != node_id
        )[: self.fanout]
        if not points:
            return None
        answers: dict[str, bool] = {}

        def ask(name: str, url: str) -> None:
            # An agent that does not answer says nothing about the node.
            with contextlib.suppress(AgentError):
                answers[name] = self._probe(
                    url,
                    address,
                    secret=self._agents.secret,
                    timeout=self.timeout,
                    ca=self._agents.ca,
                )

        started = (self.calls.start(f"{u} for {address}", partial(ask, n, u)) for n, u in points)
        threads = [thread for thread in started if thread is not None]
        for thread in threads:
            thread.join(self.timeout + 1)
        reached = sorted(name for name, ok in dict(answers).items() if ok)
        if reached:
            return True, f"reached from {', '.join(reached)}"
        if answers:
            return False, f"unreachable from {', '.join(sorted(answers))} as well"
        return None
