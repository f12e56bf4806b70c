"""Release: a service that leaves management gets back exactly what the controller took."""

from __future__ import annotations

from dataclasses import replace

import pytest

from controller.core.actions import (
    Action,
    SetNodeAvailability,
    SetNodeLabels,
    SetReplicas,
    SetServiceConstraints,
)
from controller.core.apply import apply_actions
from controller.core.context import RuleOutput
from controller.core.kernel.mark_needs import mark_requirements
from controller.core.labels import (
    EXCLUDED_LABEL,
    exclusion_constraint,
    possible_constraint,
    possible_label,
    steering_constraint,
)
from controller.core.memory import Memory
from controller.core.model import Availability, ClusterSnapshot, Node, Service, Unreadable
from controller.core.plan import Plan, plan
from controller.core.replicas import (
    BASE_LABEL,
    DETAIL_LABEL,
    OPERATION_LABEL,
    REPLICA_RECORD_LABELS,
    SET_LABEL,
    SINCE_LABEL,
)
from controller.core.rules import rule_named
from controller.core.rules.release.release_plan import (
    ReleaseConstraints,
    ReleaseReplicas,
    release_node,
    release_refusal,
    release_service,
)
from controller.policy import Policy

from .builders import node, running, service, snapshot

OFF = {"placement.managed": "false", "team": "db"}
MARK = possible_label("db")
OURS = (steering_constraint("db"), possible_constraint("db"), exclusion_constraint("n1"))


def _record(base: int, written: int, operation: str = "preempt") -> dict[str, str]:
    return {
        BASE_LABEL: str(base),
        SET_LABEL: str(written),
        OPERATION_LABEL: operation,
        SINCE_LABEL: "900.000",
        DETAIL_LABEL: "",
    }


def _db(
    labels: dict[str, str] | None = None, constraints: tuple[str, ...] = OURS, replicas: int = 3
) -> Service:
    own = {EXCLUDED_LABEL: "n1", "swarm-placement.adopted": "true"}
    return service(
        "db",
        replicas=replicas,
        labels={**OFF, **own, **(labels or {})},
        constraints=(
            "node.role==worker",
            *constraints[:2],
            "engine.labels.ssd==yes",
            *constraints[2:],
        ),
    )


def _swarm(*services: Service, marked: tuple[int, ...] = (2, 3)) -> ClusterSnapshot:
    nodes = [
        node(1, manager=True),
        *(node(n, labels={MARK: "true"} if n in marked else {}) for n in (2, 3, 4)),
    ]
    tasks = [running(s, 2 + i % 2, i) for s in services for i in range(s.replicas or 0)]
    return snapshot(nodes, services, tasks)


def _plan(snap: ClusterSnapshot, memory: Memory | None = None, rules=None) -> Plan:  # type: ignore[no-untyped-def]
    return plan(
        snapshot=snap, policy=Policy.default(), memory=memory or Memory(), now=1000.0, rules=rules
    )


# --- what one release write takes back ------------------------------------------------


def test_the_first_write_drops_only_our_constraints_and_labels() -> None:
    db = _db()
    action, decision = release_service(db)
    assert action == ReleaseConstraints(
        service_id="s-db",
        service_name="db",
        version=100,
        constraints=("node.role==worker", "engine.labels.ssd==yes"),
        remove_labels=("swarm-placement.adopted", EXCLUDED_LABEL),
    )
    assert decision is not None and decision.outcome == "release"
    assert "no task stops" in decision.reason


def test_an_exclusion_the_operator_wrote_is_theirs() -> None:
    db = _db(constraints=(*OURS, "node.id!=n4"))  # n4 is not in swarm-placement.excluded
    action, _ = release_service(db)
    assert action is not None and "node.id!=n4" in action.constraints


def test_a_restorable_count_follows_in_its_own_write_then_nothing_is_left() -> None:
    db = _db(_record(base=3, written=1), replicas=1)
    first, decision = release_service(db)
    assert isinstance(first, ReleaseConstraints)
    assert not set(first.remove_labels) & set(REPLICA_RECORD_LABELS), (
        "the record goes with its count"
    )
    assert decision is not None and "replica count 3 follows" in decision.reason
    after = apply_actions(_swarm(db), (first,)).service_by_id["s-db"]
    second, decision = release_service(after)
    assert second == ReleaseReplicas(
        service_id="s-db",
        service_name="db",
        version=101,
        replicas=3,
        remove_labels=tuple(k for k in REPLICA_RECORD_LABELS if k in after.labels),
    )
    assert decision is not None and "recorded 3" in decision.reason
    done = apply_actions(_swarm(after), (second,)).service_by_id["s-db"]
    assert release_service(done) == (None, None)
    assert dict(done.labels) == OFF and done.replicas == 3


def test_a_count_the_operator_changed_stands_and_its_record_goes_at_once() -> None:
    db = _db(_record(base=3, written=1), replicas=5)
    action, _ = release_service(db)
    assert isinstance(action, ReleaseConstraints)
    assert set(_record(3, 1)) <= set(action.remove_labels)


def test_an_unreadable_record_is_left_for_the_operator() -> None:
    db = _db({BASE_LABEL: "three", SET_LABEL: "1", OPERATION_LABEL: "preempt"})
    first, _ = release_service(db)
    assert first is not None and BASE_LABEL not in first.remove_labels
    after = apply_actions(_swarm(db), (first,)).service_by_id["s-db"]
    action, decision = release_service(after)
    assert action is None and decision is not None and decision.outcome == "keep"
    assert "unreadable replica record" in decision.reason


@pytest.mark.parametrize("state", ["updating", "paused", "rollback_started", "rollback_paused"])
def test_no_release_during_a_rollout(state: str) -> None:
    action, decision = release_service(replace(_db(), update_state=state))
    assert action is None and decision is not None and decision.outcome == "wait"


def test_a_service_with_nothing_of_ours_needs_no_release() -> None:
    plain = service("plain", labels={"team": "x"}, constraints=["node.role==worker"])
    assert release_service(plain) == (None, None)


# --- the guard: an unmanaged service takes only a pure take-back ------------------------


def _guarded(db: Service, action: Action) -> Plan:
    def rule(ctx):  # type: ignore[no-untyped-def]
        return RuleOutput((action,))

    return _plan(_swarm(db), rules=(replace(rule_named("release"), plan=rule),))


GOOD = ReleaseConstraints(
    service_id="s-db",
    service_name="db",
    version=100,
    constraints=("node.role==worker", "engine.labels.ssd==yes"),
    remove_labels=(EXCLUDED_LABEL,),
)


@pytest.mark.parametrize(
    ("action", "why"),
    [
        (
            SetServiceConstraints("s-db", "db", 100, ("node.role==worker",)),
            "not managed",
        ),
        (replace(GOOD, constraints=("engine.labels.ssd==yes",)), "only the controller's"),
        (replace(GOOD, constraints=(*GOOD.constraints, "node.id!=n3")), "only drop"),
        (
            replace(GOOD, constraints=("engine.labels.ssd==yes", "node.role==worker")),
            "only drop",
        ),
        (replace(GOOD, remove_labels=("team",)), "only the controller's labels"),
        (replace(GOOD, set_labels={"swarm-placement.x": "1"}), "only removes"),
        (replace(GOOD, evicts_from=("n2",)), "only removes"),
        (replace(GOOD, version=99), "version"),
        (ReleaseReplicas("s-db", "db", 100, replicas=3), "recorded count"),
        (SetReplicas("s-db", "db", 100, replicas=3), "not managed"),
    ],
)
def test_the_guard_refuses_anything_but_a_take_back(action: Action, why: str) -> None:
    result = _guarded(_db(), action)
    assert result.actions == ()
    (refusal,) = [d for d in result.decisions if d.rule == "guard"]
    assert refusal.outcome == "refuse" and why in refusal.reason


def test_the_guard_lets_a_take_back_through_and_says_so() -> None:
    result = _guarded(_db(), GOOD)
    assert result.actions == (GOOD,)
    assert [d.outcome for d in result.decisions if d.rule == "guard"] == ["allow"]
    db = _db(_record(base=4, written=2), replicas=2)
    restore = ReleaseReplicas("s-db", "db", 100, replicas=4, remove_labels=REPLICA_RECORD_LABELS)
    assert release_refusal(db, restore) is None
    assert _guarded(db, restore).actions == (restore,)


# --- the whole plan: constraint first, mark after, nothing stops -----------------------


def test_unmanaging_releases_the_constraint_first_and_the_marks_in_a_later_cycle() -> None:
    snap = _swarm(_db())
    first = _plan(snap)
    assert [type(a) for a in first.actions] == [ReleaseConstraints]
    kept = [d for d in first.decisions if d.rule == "nodes" and d.outcome == "keep"]
    assert {d.subject for d in kept} == {"node node-2", "node node-3"}
    assert "(db)" in kept[0].reason
    snap = apply_actions(snap, first.actions)
    second = _plan(snap, first.memory)
    assert second.actions == (
        SetNodeLabels("n2", "node-2", 12, remove_labels=(MARK,)),
        SetNodeLabels("n3", "node-3", 13, remove_labels=(MARK,)),
    )
    snap = apply_actions(snap, second.actions)
    assert _plan(snap, second.memory).actions == ()
    assert not any(MARK in n.labels for n in snap.nodes)


def test_a_label_typo_keeps_the_last_good_settings_and_nothing_is_released() -> None:
    good = _db({"placement.managed": "true", "placement.possible-nodes": "node-2,node-3"})
    first = _plan(_swarm(good))
    typo = replace(good, labels={**good.labels, "placement.priority": "hihg"})
    result = _plan(_swarm(typo), first.memory)
    assert not [a for a in result.actions if isinstance(a, ReleaseConstraints)]
    assert not any(
        isinstance(a, SetNodeLabels) and MARK in a.remove_labels for a in result.actions
    ), result.actions


def test_a_label_typo_with_no_last_good_labels_releases_without_stopping_a_task() -> None:
    typo = _db({"placement.managed": "true", "placement.priority": "hihg"})
    result = _plan(_swarm(typo))  # a fresh controller: nothing to fall back on
    assert [type(a) for a in result.actions] == [ReleaseConstraints]
    assert any(d.outcome == "unmanaged" for d in result.decisions)


def test_a_managed_service_whose_possible_owners_shrink_still_leaves_the_dropped_node() -> None:
    db = service(
        "db",
        replicas=1,
        labels={"placement.managed": "true", "placement.possible-nodes": "node-2"},
        constraints=(steering_constraint("db"), possible_constraint("db")),
    )
    result = _plan(_swarm(db))
    (node3,) = [a for a in result.actions if isinstance(a, SetNodeLabels)]
    assert node3.node_id == "n3" and node3.remove_labels == (MARK,)


def test_a_managed_service_whose_possible_owners_were_unset_keeps_its_marks() -> None:
    db = service(
        "db",
        replicas=2,
        labels={"placement.managed": "true"},
        constraints=(steering_constraint("db"), possible_constraint("db")),
    )
    result = _plan(_swarm(db))
    assert not any(isinstance(a, SetNodeLabels) and a.remove_labels for a in result.actions)


def test_the_mark_of_an_unreadable_service_stays() -> None:
    snap = replace(_swarm(), unreadable=(Unreadable("service", "s-db", "db", "bad attrs"),))
    result = _plan(snap)
    assert not any(isinstance(a, SetNodeLabels) and a.remove_labels for a in result.actions)


def test_a_mark_another_service_requires_stays() -> None:
    copy = service("copycat", labels={"team": "x"}, constraints=[possible_constraint("db")])
    result = _plan(_swarm(copy))
    assert not any(isinstance(a, SetNodeLabels) and a.remove_labels for a in result.actions)


# --- release --all: the nodes ------------------------------------------------------------


def _n(labels: dict[str, str], availability: Availability = Availability.ACTIVE) -> Node:
    return node(2, labels={"rack": "r1", **labels}, availability=availability)


def test_a_node_loses_every_label_of_ours_and_keeps_the_operators() -> None:
    labels = {MARK: "true", "swarm-placement.deny.web": "true", "swarm-placement.health.x": "x"}
    action, decision = release_node(_n(labels), mark_requirements(()))
    assert action == SetNodeLabels("n2", "node-2", 12, remove_labels=tuple(sorted(labels)))
    assert decision is not None and decision.outcome == "release"


def test_a_pause_the_controller_recorded_is_lifted_an_operators_is_not() -> None:
    ours = _n({"swarm-placement.paused": "health"}, Availability.PAUSE)
    action, _ = release_node(ours, mark_requirements(()))
    assert action == SetNodeAvailability(
        "n2", "node-2", 12, Availability.ACTIVE, remove_labels=("swarm-placement.paused",)
    )
    theirs = _n({"swarm-placement.deny.web": "true"}, Availability.PAUSE)
    action, _ = release_node(theirs, mark_requirements(()))
    assert isinstance(action, SetNodeLabels)
    drained = _n({"swarm-placement.paused": "health"}, Availability.DRAIN)
    action, _ = release_node(drained, mark_requirements(()))
    assert isinstance(action, SetNodeLabels)


def test_a_mark_a_service_still_requires_stays_on_the_node() -> None:
    requirements = mark_requirements([_db()])
    action, decision = release_node(_n({MARK: "true"}), requirements)
    assert action is None and decision is not None and "required by db" in decision.reason
    action, _ = release_node(_n({MARK: "true", "swarm-placement.deny.db": "true"}), requirements)
    assert action == SetNodeLabels("n2", "node-2", 12, remove_labels=("swarm-placement.deny.db",))
