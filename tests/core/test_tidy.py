"""The tidy rule: a slot left running two tasks gets the same spec written again."""

from __future__ import annotations

from dataclasses import replace

from controller.core.actions import SetServiceConstraints
from controller.core.clock import time_of_day
from controller.core.labels import TIDIED_LABEL, steering_constraint
from controller.core.memory import Memory
from controller.core.model import ClusterSnapshot, Service, Task
from controller.core.plan import Plan, plan
from controller.policy import Policy

from .builders import MANAGED, node, running, service, snapshot

NOW = 10_000.0
ADOPTED = [steering_constraint("web")]


def _plan(snap: ClusterSnapshot) -> Plan:
    return plan(snapshot=snap, policy=Policy.default(), memory=Memory(), now=NOW)


def _second(svc: Service, node_n: int, slot: int, ran_for: float = 30.0) -> Task:
    """Another running task in the slot, running for `ran_for` seconds."""
    task = running(svc, node_n, slot)
    return replace(task, id=f"{task.id}-again", updated_at=NOW - ran_for)


def _cluster(web: Service, *extra: Task) -> ClusterSnapshot:
    nodes = [node(1, manager=True), node(2), node(3)]
    tasks = [replace(running(web, n, n), updated_at=NOW - 60) for n in (1, 2, 3)]
    return snapshot(nodes, [web], [*tasks, *extra])


def _web(**settings: object) -> Service:
    return service("web", replicas=3, labels=MANAGED, constraints=ADOPTED, **settings)  # type: ignore[arg-type]


def test_a_slot_running_two_tasks_gets_the_same_spec_again_with_the_time() -> None:
    web = _web()
    result = _plan(_cluster(web, _second(web, 3, 2)))
    assert result.actions == (
        SetServiceConstraints(
            service_id="s-web",
            service_name="web",
            version=100,
            constraints=tuple(ADOPTED),
            set_labels={TIDIED_LABEL: "10000"},
        ),
    )
    (tidy,) = [d for d in result.decisions if d.rule == "tidy"]
    assert tidy.outcome == "tidy" and tidy.action == result.actions[0]
    assert "1 slot(s) run two tasks (2) for 3 replica(s)" in tidy.reason


def test_a_second_task_that_just_started_is_left_to_swarm() -> None:
    """A start-first update runs both tasks of a slot for a moment before it stops the old."""
    web = _web()
    result = _plan(_cluster(web, _second(web, 3, 2, ran_for=2.0)))
    assert result.actions == ()
    assert not [d for d in result.decisions if d.rule == "tidy"]


def test_one_task_per_slot_needs_nothing() -> None:
    assert _plan(_cluster(_web())).actions == ()


def test_a_tidied_service_is_not_written_again_within_a_minute() -> None:
    web = _web()
    web = replace(web, labels={**web.labels, TIDIED_LABEL: f"{NOW - 30:.0f}"})
    result = _plan(_cluster(web, _second(web, 3, 2)))
    assert result.actions == ()
    (wait,) = [d for d in result.decisions if d.rule == "tidy"]
    assert wait.outcome == "wait"
    assert f"tidied at {time_of_day(NOW - 30)}, again after {time_of_day(NOW + 30)}" in wait.reason

    web = replace(web, labels={**web.labels, TIDIED_LABEL: f"{NOW - 61:.0f}"})
    assert len(_plan(_cluster(web, _second(web, 3, 2))).actions) == 1


def test_the_wait_reads_the_same_every_cycle_so_it_is_logged_once() -> None:
    web = _web()
    web = replace(web, labels={**web.labels, TIDIED_LABEL: f"{NOW - 30:.0f}"})
    snap = _cluster(web, _second(web, 3, 2))
    reasons = {
        d.reason
        for now in (NOW, NOW + 10, NOW + 20)
        for d in plan(snapshot=snap, policy=Policy.default(), memory=Memory(), now=now).decisions
        if d.rule == "tidy"
    }
    assert len(reasons) == 1, reasons


def test_an_operators_rollout_is_left_to_swarm_even_paused() -> None:
    for state in ("updating", "paused", "rollback_started"):
        web = _web(update_state=state)
        result = _plan(_cluster(web, _second(web, 3, 2)))
        assert result.actions == (), state
        (wait,) = [d for d in result.decisions if d.rule == "tidy"]
        assert wait.outcome == "wait", state


def test_a_paused_rollout_of_the_controllers_own_is_tidied() -> None:
    """Swarm paused a rollout the controller's constraint write started: nobody else
    resumes it, and the write is what resumes it."""
    web = replace(_web(update_state="paused"), rollout_is_own=True)
    result = _plan(_cluster(web, _second(web, 3, 2)))
    assert len(result.actions) == 1
    assert [d.outcome for d in result.decisions if d.rule in ("tidy", "guard")] == [
        "tidy",
        "allow",
    ]


def test_a_service_another_rule_writes_this_cycle_is_left_to_that_write() -> None:
    """Adoption writes the service anyway, and any write runs Swarm's updater."""
    web = service("web", replicas=3, labels=MANAGED)
    result = _plan(_cluster(web, _second(web, 3, 2)))
    assert [d.rule for d in result.decisions if d.action is not None] == ["adoption"]
    assert not [d for d in result.decisions if d.rule == "tidy"]


def test_an_unmanaged_service_is_never_tidied() -> None:
    legacy = service("legacy", replicas=3)
    result = _plan(_cluster(legacy, _second(legacy, 3, 2)))
    assert result.actions == ()


def test_a_running_task_that_no_longer_meets_the_constraints_holds_the_tidy() -> None:
    """The updater's pass would replace that task too (a stop-first one stopped first):
    a move, which is no tidy's to make."""
    web = replace(_web(), constraints=(*ADOPTED, "node.hostname!=node-1"))
    result = _plan(_cluster(web, _second(web, 3, 2)))
    assert result.actions == ()
    (wait,) = [d for d in result.decisions if d.rule == "tidy"]
    assert wait.outcome == "wait" and "node-1, which no longer meet" in wait.reason


def test_a_garbled_tidied_label_does_not_stop_the_cycle() -> None:
    web = _web()
    web = replace(web, labels={**web.labels, TIDIED_LABEL: "inf"})
    (wait,) = [d for d in _plan(_cluster(web, _second(web, 3, 2))).decisions if d.rule == "tidy"]
    assert wait.outcome == "wait" and "tidied at an unreadable time" in wait.reason
