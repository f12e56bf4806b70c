"""The mirror: a deploy that replaces the controller's labels on a service does not undo
the policy."""

from __future__ import annotations

from dataclasses import replace

import pytest

from controller.core.actions import SetMirror, SetReplicas, SetServiceConstraints
from controller.core.apply import apply_actions
from controller.core.labels import EXCLUDED_LABEL, steering_constraint
from controller.core.memory import Memory
from controller.core.mirror import (
    ENTRY_PREFIX,
    Mirror,
    MirrorError,
    ServiceCopy,
    copy_of,
    decode_move,
)
from controller.core.model import ClusterSnapshot, Service
from controller.core.plan import Plan, plan
from controller.core.replicas import BASE_LABEL, OPERATION_LABEL, SET_LABEL
from controller.policy import Policy

from .builders import node, running, service, snapshot

NOW = 1_000_000.0
STABLE = Memory(node_ready_since={f"n{i}": 0.0 for i in range(1, 5)}, started=True)
POLICY = {
    "placement.managed": "true",
    "placement.preferred-nodes": "node-2",
    "placement.failback": "never",
}


def failed_over_db() -> Service:
    """db failed over from its preferred node-2 to node-3; failback never keeps it there."""
    db = service("db", replicas=1, labels={**POLICY, EXCLUDED_LABEL: "n2"})
    return replace(db, constraints=(steering_constraint("db"), "node.id!=n2"))


def deployed(svc: Service, **labels: str) -> Service:
    """The service as `docker stack deploy` leaves it: the stack file's labels and
    constraints only, and a new version."""
    return replace(
        svc, version=svc.version + 7, labels={**POLICY, **labels}, constraints=(), update_state=None
    )


def mirror_of(*services: Service) -> Mirror:
    entries = {
        s.id: copy_of(name=s.name, labels=s.labels, constraints=s.constraints).encode()
        for s in services
    }
    return Mirror(config_id="cfg", version=5, entries=entries)


def four_nodes() -> list:  # type: ignore[type-arg]
    return [node(1, manager=True), node(2), node(3), node(4)]


def planned(snap: ClusterSnapshot) -> Plan:
    return plan(snapshot=snap, policy=Policy.default(), memory=STABLE, now=NOW)


def moves_to_node_2(result: Plan) -> bool:
    """True when a write of this plan would take db off node-3: node-3 excluded, or a
    replica surge that a move trims (decisions of writes deferred to the next cycle
    do not count)."""
    return any(
        (isinstance(a, SetServiceConstraints) and "node.id!=n3" in a.constraints)
        or (isinstance(a, SetReplicas) and a.service_id == "s-db")
        for a in result.actions
    )


def test_without_the_mirror_a_deploy_makes_failback_never_move_back() -> None:
    """The harm this mirror prevents, shown with the real planner."""
    db = deployed(failed_over_db())
    snap = replace(snapshot(four_nodes(), [db], [running(db, 3, 1)]), mirror=Mirror())
    assert moves_to_node_2(planned(snap))


def test_a_deployed_service_gets_its_record_back_and_stays_where_it_failed_over() -> None:
    before = failed_over_db()
    db = deployed(before)
    snap = replace(snapshot(four_nodes(), [db], [running(db, 3, 1)]), mirror=mirror_of(before))
    result = planned(snap)
    recover = [a for a in result.actions if isinstance(a, SetServiceConstraints)]
    assert len(recover) == 1
    assert "node.id!=n2" in recover[0].constraints
    assert steering_constraint("db") in recover[0].constraints
    assert recover[0].set_labels[EXCLUDED_LABEL] == "n2"
    assert recover[0].evicts_from == ()
    assert any(d.rule == "mirror" and d.outcome == "recover" for d in result.decisions)
    assert not moves_to_node_2(result)
    # The next cycle, with the memory the first one left, sees the record back and keeps
    # db on node-3 (no move half-planned for it in the recovering cycle goes on).
    after = apply_actions(snap, result.actions)
    again = plan(snapshot=after, policy=Policy.default(), memory=result.memory, now=NOW + 1)
    assert not moves_to_node_2(again)
    assert all(a.evicts_from == () for a in again.actions if isinstance(a, SetServiceConstraints))
    assert any("failback is never" in d.reason for d in again.decisions)


def test_an_exclusion_of_a_node_running_a_task_since_the_deploy_is_not_put_back() -> None:
    before = failed_over_db()
    db = deployed(before)
    snap = replace(snapshot(four_nodes(), [db], [running(db, 2, 1)]), mirror=mirror_of(before))
    result = planned(snap)
    (recover,) = [a for a in result.actions if isinstance(a, SetServiceConstraints)]
    assert "node.id!=n2" not in recover.constraints
    assert recover.set_labels[EXCLUDED_LABEL] == ""
    (decision,) = [d for d in result.decisions if d.outcome == "recover"]
    assert "node.id!=n2" in decision.reason


def test_the_operators_count_from_a_deploy_wins_over_a_preemption_record() -> None:
    record = {BASE_LABEL: "4", SET_LABEL: "1", OPERATION_LABEL: "preempt"}
    before = replace(failed_over_db(), replicas=1, labels={**failed_over_db().labels, **record})
    db = replace(deployed(before), replicas=4)
    snap = replace(snapshot(four_nodes(), [db], [running(db, 3, 1)]), mirror=mirror_of(before))
    result = planned(snap)
    (recover,) = [a for a in result.actions if isinstance(a, SetServiceConstraints)]
    assert BASE_LABEL not in recover.set_labels
    (yielded,) = [d for d in result.decisions if d.outcome == "yield"]
    assert "operator's count wins" in yielded.reason


def test_a_service_in_a_rollout_waits_and_its_mirror_entry_is_kept() -> None:
    before = failed_over_db()
    db = replace(deployed(before), update_state="updating")
    store = mirror_of(before)
    snap = replace(snapshot(four_nodes(), [db], [running(db, 3, 1)]), mirror=store)
    result = planned(snap)
    assert not [a for a in result.actions if isinstance(a, SetServiceConstraints)]
    assert not [a for a in result.actions if isinstance(a, SetMirror) and a.drop]
    assert any(d.rule == "mirror" and d.outcome == "wait" for d in result.decisions)


def test_the_mirror_follows_the_services_and_is_quiet_at_rest() -> None:
    db = failed_over_db()
    gone = replace(service("gone"), id="s-gone")
    store = mirror_of(db, gone)
    snap = replace(snapshot(four_nodes(), [db], [running(db, 3, 1)]), mirror=store)
    result = planned(snap)
    (mirror,) = [a for a in result.actions if isinstance(a, SetMirror)]
    assert mirror.dropped(ENTRY_PREFIX) == ("s-gone",)
    assert mirror.version == 5
    assert any(d.action is not None and d.rule == "mirror" for d in result.decisions)
    at_rest = replace(snap, mirror=mirror_of(db))
    assert not [a for a in planned(at_rest).actions if isinstance(a, SetMirror)]


def test_the_first_record_creates_the_mirror() -> None:
    db = failed_over_db()
    snap = replace(snapshot(four_nodes(), [db], [running(db, 3, 1)]), mirror=Mirror())
    (mirror,) = [a for a in planned(snap).actions if isinstance(a, SetMirror)]
    assert mirror.config_id == ""
    assert ServiceCopy.decode(mirror.saved(ENTRY_PREFIX)["s-db"]).labels[EXCLUDED_LABEL] == "n2"


def test_an_unobserved_mirror_plans_nothing() -> None:
    db = deployed(failed_over_db())
    snap = snapshot(four_nodes(), [db], [running(db, 3, 1)])
    assert not [d for d in planned(snap).decisions if d.rule == "mirror"]


def test_a_garbled_entry_is_skipped_with_a_decision() -> None:
    db = deployed(failed_over_db())
    store = Mirror(config_id="cfg", version=5, entries={"s-db": "{not json"})
    snap = replace(snapshot(four_nodes(), [db], [running(db, 3, 1)]), mirror=store)
    result = planned(snap)
    (skip,) = [d for d in result.decisions if d.rule == "mirror" and d.outcome == "skip"]
    assert "unreadable copy in the mirror" in skip.reason


def test_a_trimmed_surge_is_not_taken_for_a_deploy_and_is_not_mirrored() -> None:
    surge = {BASE_LABEL: "3", SET_LABEL: "4", OPERATION_LABEL: "surge"}
    web = replace(
        service("web", replicas=4, labels={"placement.managed": "true", **surge}),
        constraints=(steering_constraint("web"),),
    )
    snap = replace(snapshot(four_nodes(), [web], [running(web, 3, 1)]), mirror=Mirror())
    (mirror,) = [a for a in planned(snap).actions if isinstance(a, SetMirror)]
    saved = ServiceCopy.decode(mirror.saved(ENTRY_PREFIX)["s-web"])
    assert saved.constraints == (steering_constraint("web"),)
    assert BASE_LABEL not in saved.labels
    # The trim drops the surge record: the service keeps its steering constraint, so no
    # recovery, and the mirror already holds what it carries.
    trimmed = replace(web, replicas=3, labels={"placement.managed": "true"})
    after = replace(snap, services=(trimmed,), mirror=mirror_of(trimmed))
    result = planned(after)
    assert not [d for d in result.decisions if d.rule == "mirror"]


def test_a_copy_or_move_nested_past_the_parser_is_unreadable_not_a_crash() -> None:
    """Anyone who may write the mirror config could nest a label deep enough to exhaust
    the JSON parser's stack: that is an unreadable entry, never an error that ends a cycle."""
    deep = "[" * 100_000 + "]" * 100_000
    with pytest.raises(MirrorError):
        ServiceCopy.decode(deep)
    with pytest.raises(MirrorError):
        decode_move(deep)
