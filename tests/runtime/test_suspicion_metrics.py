"""placement_suspicions_total counts each suspicion once, however many cycles it lasts."""

from __future__ import annotations

from prometheus_client import generate_latest

from controller.core.decisions import Decision, Outcome
from controller.runtime.metrics import Metrics
from controller.runtime.policy_source import PolicySource


def suspect(host: str, agreed: float) -> Decision:
    return Decision("suspicion", f"node {host}", Outcome.SUSPECT, f"gossip, probe for {agreed} s")


def total(metrics: Metrics) -> float:
    for line in generate_latest(metrics.registry).decode().splitlines():
        if line.startswith("placement_suspicions_total "):
            return float(line.split()[1])
    raise AssertionError("placement_suspicions_total missing")


def test_a_suspicion_counts_once_while_it_lasts_and_again_when_it_returns() -> None:
    metrics = Metrics(PolicySource(None), lease=None)

    def cycle(*decisions: Decision) -> None:
        metrics.record_cycle(
            seconds=0.1, leader=True, decisions=decisions, executed=(), conflict=False
        )

    cycle(suspect("node-3", 1.0))
    cycle(suspect("node-3", 1.5))
    cycle(suspect("node-3", 2.0), suspect("node-4", 1.0))
    assert total(metrics) == 2
    cycle()
    cycle(suspect("node-3", 1.0))
    assert total(metrics) == 3
