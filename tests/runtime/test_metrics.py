"""Metrics: which writes count as failovers, failbacks, preemptions and moves; rendering."""

from __future__ import annotations

from pathlib import Path

from prometheus_client import generate_latest

from controller.core.actions import SetReplicas, SetServiceConstraints
from controller.core.decisions import Code, Decision, Outcome
from controller.runtime.metrics import Metrics, events_of
from controller.runtime.policy_source import PolicySource

SURGE = SetReplicas("s1", "db", 7, 3)
STEER = SetServiceConstraints("s2", "web", 4, ("node.id!=n1",), evicts_from=("n1",))
SHRINK = SetReplicas("s3", "batch", 2, 1)


def _decisions() -> list[Decision]:
    return [
        Decision("failover", "service db", Outcome.SURGE, "1 lost", action=SURGE),
        Decision("owners", "service web", Outcome.STEER, "steer", action=STEER),
        Decision(
            "owners",
            "service web",
            Outcome.MOVE,
            "a task from n1 to n2: failback to preferred",
            code=Code.FAILBACK,
        ),
        Decision("owners", "service web", Outcome.MOVE, "a task from n3 to n2: restore spread"),
        Decision("preemption", "service batch", Outcome.PREEMPT, "room", action=SHRINK),
        Decision("preemption", "service hi", Outcome.PREEMPT, "2 pending"),  # no write of its own
        Decision(  # not executed
            "owners", "service other", Outcome.MOVE, "failback to preferred", code=Code.FAILBACK
        ),
    ]


def test_events_count_only_what_the_executed_writes_started() -> None:
    counts = events_of([SURGE, STEER, SHRINK], _decisions())
    assert counts == {"failover": 1, "failback": 1, "preemption": 1, "move": 2, "false_alarm": 0}
    assert set(events_of([], _decisions()).values()) == {0}


def test_a_failback_counts_by_its_code_not_its_reason() -> None:
    coded = Decision("owners", "service web", Outcome.MOVE, "a task back", code=Code.FAILBACK)
    worded = Decision("owners", "service web", Outcome.MOVE, "failback to preferred owner #1")
    assert events_of([STEER], [coded]) == {
        "failover": 0,
        "failback": 1,
        "preemption": 0,
        "move": 1,
        "false_alarm": 0,
    }
    assert events_of([STEER], [worded])["failback"] == 0


def _sample(metrics: Metrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def test_a_cycle_feeds_the_counters_and_repeated_decisions_count_once(tmp_path: Path) -> None:
    metrics = Metrics(PolicySource(None), lease=None)
    for _ in range(2):
        metrics.record_cycle(
            seconds=0.2,
            leader=True,
            decisions=_decisions(),
            executed=[SURGE, STEER],
            conflict=False,
        )
    assert _sample(metrics, "placement_reconcile_duration_seconds_count", role="leader") == 2
    assert _sample(metrics, "placement_decisions_total", rule="owners", outcome="move") == 3
    assert _sample(metrics, "placement_actions_total", kind="set-replicas") == 2
    assert _sample(metrics, "placement_failovers_total") == 2
    assert _sample(metrics, "placement_failbacks_total") == 2
    assert _sample(metrics, "placement_lease_leader") == 1.0


def test_a_standby_cycle_counts_its_duration_only() -> None:
    metrics = Metrics(PolicySource(None), lease=None)
    metrics.record_cycle(
        seconds=0.1, leader=False, decisions=_decisions(), executed=[SURGE], conflict=True
    )
    assert _sample(metrics, "placement_reconcile_duration_seconds_count", role="standby") == 1
    assert _sample(metrics, "placement_failovers_total") == 0
    assert _sample(metrics, "placement_write_conflicts_total") == 0


def test_policy_reloads_and_errors_are_read_when_scraped(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text("apiVersion: placement/v1\n")
    source = PolicySource(path)
    metrics = Metrics(source, lease=None)
    path.write_text("apiVersion: placement/v1\ncontroller: {resync-interval: 2s}\n")
    source.reload()
    path.write_text("apiVersion: nope\n")
    source.reload()
    text = generate_latest(metrics.registry).decode()
    assert "placement_policy_reloads_total 1.0" in text
    assert "placement_policy_errors_total 1.0" in text
    assert f'sha256="{source.digest}"' in text


def test_the_agents_gauge_shows_only_with_agents_configured() -> None:
    without = Metrics(PolicySource(None), lease=None)
    assert _sample(without, "placement_agents_reporting") is None
    metrics = Metrics(PolicySource(None), lease=None, agents=lambda: 3)
    assert _sample(metrics, "placement_agents_reporting") == 3


def test_writes_docker_refused_are_counted_by_kind() -> None:
    metrics = Metrics(PolicySource(None), lease=None)
    metrics.record_cycle(
        seconds=0.1, leader=True, decisions=(), executed=[SURGE], conflict=False, failed=[STEER]
    )
    assert _sample(metrics, "placement_write_failures_total", kind=STEER.kind) == 1
    assert _sample(metrics, "placement_actions_total", kind=STEER.kind) is None
    assert _sample(metrics, "placement_write_conflicts_total") == 0


def test_a_health_panic_is_a_gauge_while_it_lasts_and_a_count_of_cycles() -> None:
    metrics = Metrics(PolicySource(None), lease=None)
    panic = Decision("health", "swarm", Outcome.PANIC, "4 of 4 ready node(s) reported failed")
    for decisions in ([panic], [panic], []):
        metrics.record_cycle(
            seconds=0.1, leader=True, decisions=decisions, executed=[], conflict=False
        )
        assert _sample(metrics, "placement_health_panic") == (1.0 if decisions else 0.0)
    assert _sample(metrics, "placement_health_panic_cycles_total") == 2
    metrics.record_cycle(seconds=0.1, leader=False, decisions=[panic], executed=[], conflict=False)
    assert _sample(metrics, "placement_health_panic") == 0.0, "a standby acts on nothing"
    assert _sample(metrics, "placement_health_panic_cycles_total") == 2


def test_managed_services_held_nodes_plugin_failures_and_the_build() -> None:
    from controller import __version__  # noqa: PLC0415
    from controller.core.health.node_marks import PAUSED, QUARANTINE_UNTIL  # noqa: PLC0415
    from controller.core.labels import deny_label  # noqa: PLC0415
    from controller.core.memory import Memory  # noqa: PLC0415
    from controller.core.plan import plan  # noqa: PLC0415
    from controller.policy import Policy  # noqa: PLC0415
    from tests.core.builders import MANAGED, node, service, snapshot  # noqa: PLC0415

    now = 1_800_000_000.0
    nodes = [
        node(1, manager=True),
        node(2, labels={PAUSED: "quarantine", QUARANTINE_UNTIL: str(now + 60)}),
        node(3, labels={deny_label("web"): "true", QUARANTINE_UNTIL: str(now - 60)}),
    ]
    snap = snapshot(
        nodes, [service("web", labels=MANAGED), service("db", labels=MANAGED), service("x")]
    )
    result = plan(snapshot=snap, policy=Policy.default(), memory=Memory(), now=now)
    failures = {"topology": 2}
    metrics = Metrics(PolicySource(None), lease=None, plugin_failures=lambda: failures)
    metrics.record_state(snap, result.resolved, now)
    text = generate_latest(metrics.registry).decode()
    assert "placement_managed_services 2.0" in text
    assert 'placement_nodes_held{mark="paused"} 1.0' in text
    assert 'placement_nodes_held{mark="quarantined"} 1.0' in text  # node-3's has ended
    assert 'placement_nodes_held{mark="denying"} 1.0' in text
    assert 'placement_nodes_held{mark="failed"} 0.0' in text
    assert 'placement_plugin_failures_total{plugin="topology"} 2.0' in text
    assert 'placement_build_info{python="' in text and f'version="{__version__}"' in text


def test_tasks_on_a_node_that_is_no_possible_owner_are_counted_per_service() -> None:
    from dataclasses import replace  # noqa: PLC0415

    from controller.core.memory import Memory  # noqa: PLC0415
    from controller.core.plan import plan  # noqa: PLC0415
    from controller.policy import Policy  # noqa: PLC0415
    from tests.core.builders import MANAGED, node, running, service, snapshot  # noqa: PLC0415

    now = 1_800_000_000.0
    api = replace(
        service("api", replicas=2, labels={**MANAGED, "placement.possible-nodes": "node-2"}),
        update_order="stop-first",
    )
    nodes = [node(1, manager=True), node(2), node(3)]
    snap = snapshot(nodes, [api], [running(api, 2, 1), running(api, 3, 2)])
    result = plan(snapshot=snap, policy=Policy.default(), memory=Memory(), now=now)
    metrics = Metrics(PolicySource(None), lease=None)
    metrics.record_state(
        snap, result.resolved, now, policy=Policy.default(), decisions=result.decisions
    )
    text = generate_latest(metrics.registry).decode()
    assert 'placement_possible_owners_unenforced{service="api"} 1.0' in text
    # Once the task has moved, the service reads nothing.
    moved = replace(snap, tasks=(running(api, 2, 1), replace(running(api, 2, 2))))
    metrics.record_state(moved, result.resolved, now, policy=Policy.default())
    assert "placement_possible_owners_unenforced{" not in generate_latest(metrics.registry).decode()


def test_calls_skipped_for_a_busy_agent_are_counted_by_call() -> None:
    metrics = Metrics(PolicySource(None), lease=None, skipped_calls=lambda: {"agent report": 3})
    text = generate_latest(metrics.registry).decode()
    assert 'placement_outbound_calls_skipped_total{call="agent report"} 3.0' in text


def test_an_event_is_counted_for_the_rule_that_declares_it_only() -> None:
    # The failover rule's spec declares its surges; the same outcome from another rule,
    # or a surge whose write did not go out, is no failover.
    other = Decision("speculative", "service db", Outcome.SURGE, "1 suspected", action=SURGE)
    assert events_of([SURGE], [other])["failover"] == 0
    assert events_of([], _decisions()[:1])["failover"] == 0
    assert events_of([SURGE], _decisions()[:1])["failover"] == 1
