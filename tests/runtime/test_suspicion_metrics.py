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


def sample(metrics: Metrics, name: str) -> float:
    for line in generate_latest(metrics.registry).decode().splitlines():
        if line.startswith(f"{name} "):
            return float(line.split()[1])
    raise AssertionError(f"{name} missing")


def test_a_false_alarm_trim_counts_once_with_its_cost_when_it_is_written() -> None:
    from dataclasses import replace  # noqa: PLC0415

    from controller.core.actions import SetReplicas  # noqa: PLC0415
    from controller.core.decisions import Code  # noqa: PLC0415

    metrics = Metrics(PolicySource(None), lease=None)
    trim = SetReplicas("s-web", "web", 101, 3)
    decision = Decision(
        "speculative",
        "service web",
        Outcome.TRIM,
        "false alarm: node-3 no longer suspected (false alarm cost 6 replica-seconds)",
        action=trim,
        code=Code.FALSE_ALARM,
        extra_replica_seconds=6.4,
    )
    # Planned but not written (a refusal, a conflict): nothing to count yet.
    metrics.record_cycle(
        seconds=0.1, leader=True, decisions=(decision,), executed=(), conflict=False
    )
    assert sample(metrics, "placement_false_alarms_total") == 0
    metrics.record_cycle(
        seconds=0.1, leader=True, decisions=(decision,), executed=(trim,), conflict=False
    )
    assert sample(metrics, "placement_false_alarms_total") == 1
    assert sample(metrics, "placement_false_alarm_replica_seconds_total") == 6.4
    # The same trim with another reason text still counts by its code.
    metrics.record_cycle(
        seconds=0.1,
        leader=True,
        decisions=(replace(decision, reason="reworded"),),
        executed=(trim,),
        conflict=False,
    )
    assert sample(metrics, "placement_false_alarms_total") == 2
