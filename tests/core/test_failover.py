"""Failover surge and trim, the operator-wins rule, and holding priority-none services."""

from __future__ import annotations

from dataclasses import replace

from controller.core.actions import SetMirror, SetReplicas
from controller.core.apply import apply_actions
from controller.core.labels import EXCLUDED_LABEL, exclusion_constraint
from controller.core.memory import Memory
from controller.core.mirror import OVERRIDDEN_PREFIX, Mirror
from controller.core.model import NodeState, Service, Task, TaskState
from controller.core.plan import plan
from controller.core.replicas import (
    BASE_LABEL,
    REPLICA_RECORD_LABELS,
    is_in_flight,
    read_replica_record,
)
from controller.core.rules import rules_named
from controller.policy import Policy

from .builders import MANAGED, node, running, service, snapshot

RULES = rules_named("failover")


def run(snap, memory: Memory, now: float):  # type: ignore[no-untyped-def]
    return plan(snapshot=snap, policy=Policy.default(), memory=memory, now=now, rules=RULES)


def nodes(down: int | None = None):  # type: ignore[no-untyped-def]
    return [
        node(i, manager=i == 1, state=NodeState.DOWN if i == down else NodeState.READY)
        for i in (1, 2, 3)
    ]


def test_a_node_loss_surges_by_the_tasks_it_held_then_trims_once_they_run() -> None:
    web = service("web", replicas=3, labels=MANAGED)
    tasks = [running(web, 1, 1), running(web, 2, 2), running(web, 3, 3)]
    before = run(snapshot(nodes(), [web], tasks), Memory(), now=100.0)
    assert before.actions == ()

    after_loss = snapshot(nodes(down=3), [web], tasks[:2])
    surged = run(after_loss, before.memory, now=101.0)
    (action,) = surged.actions
    assert isinstance(action, SetReplicas) and action.replicas == 4
    record = read_replica_record(action.set_labels)
    assert record is not None and (record.base, record.written, record.operation) == (3, 4, "surge")

    # The surged task is not running yet: wait. Once it runs (3 running for a base of
    # 3) the count goes back at once, before Swarm's delayed replacement gets a node.
    web4 = replace(web, replicas=4, labels={**web.labels, **action.set_labels}, version=101)
    starting = replace(running(web4, 1, 4), state=TaskState.STARTING)
    two = [running(web4, 1, 1), running(web4, 2, 2), starting]
    waiting = run(snapshot(nodes(down=3), [web4], two), surged.memory, now=101.5)
    assert waiting.actions == ()
    three = [*two[:2], running(web4, 1, 4)]
    trimmed = run(snapshot(nodes(down=3), [web4], three), surged.memory, now=102.0)
    (trim,) = trimmed.actions
    assert isinstance(trim, SetReplicas) and trim.replicas == 3
    assert set(trim.remove_labels) == set(REPLICA_RECORD_LABELS)


def test_a_rebalance_is_trimmed_after_a_while_even_if_a_surged_task_never_starts() -> None:
    web = service("web", replicas=2, labels={**MANAGED})
    surge = {
        BASE_LABEL: "2",
        "swarm-placement.replicas-set": "3",
        "swarm-placement.operation": "rebalance",
        "swarm-placement.operation-since": "100",
    }
    web3 = replace(web, replicas=3, labels={**web.labels, **surge})
    two = [running(web3, 1, 1), running(web3, 2, 2)]
    assert run(snapshot(nodes(), [web3], two), Memory(), now=110.0).actions == ()
    (trim,) = run(snapshot(nodes(), [web3], two), Memory(), now=131.0).actions
    assert isinstance(trim, SetReplicas) and trim.replicas == 2


def test_the_operator_wins_when_they_scaled_during_an_operation() -> None:
    surge = {
        BASE_LABEL: "2",
        "swarm-placement.replicas-set": "3",
        "swarm-placement.operation": "surge",
        "swarm-placement.operation-since": "100",
    }
    web = service("web", replicas=7, labels={**MANAGED, **surge})
    result = run(snapshot(nodes(), [web]), Memory(), now=101.0)
    (action,) = result.actions
    assert isinstance(action, SetReplicas) and action.replicas == 7
    assert set(action.remove_labels) == set(REPLICA_RECORD_LABELS)
    assert any(d.outcome == "forget" for d in result.decisions)


def _surged_3_for_2_in_a_rollback() -> tuple[Service, list[Task]]:
    """web surged 2 -> 3, all running, while an operator's rollout whose failure action is
    rollback runs: a write would end the rollback, so the forget of the record waits."""
    surge = {
        BASE_LABEL: "2",
        "swarm-placement.replicas-set": "3",
        "swarm-placement.operation": "surge",
        "swarm-placement.operation-since": "100",
    }
    web = service("web", replicas=3, labels={**MANAGED, **surge}, update_state="updating")
    web = replace(web, update_failure_action="rollback")
    return web, [running(web, 1, 1), running(web, 2, 2), running(web, 3, 3)]


def test_the_operator_still_wins_when_their_forget_waited_and_they_scaled_back() -> None:
    """Found by the model check: during a rollout whose failure action is rollback the
    write that forgets the record waits (it would restart the rollout). The operator
    scales 3 -> 2, then back to 3, the very count the surge had written: the record must
    not read as the controller's own raise again, or its trim would take the operator's
    3 back to the old base."""
    web, tasks = _surged_3_for_2_in_a_rollback()
    settled = run(snapshot(nodes(), [web], tasks), Memory(), now=101.0).memory
    down = replace(web, replicas=2, version=web.version + 1)
    scaled = run(snapshot(nodes(), [down], tasks[:2]), settled, now=102.0)
    assert not scaled.actions, "the forget waits for the rollout"
    assert any(d.outcome == "forget" for d in scaled.decisions)
    back = replace(web, replicas=3, version=web.version + 2)
    later = run(snapshot(nodes(), [back], tasks), scaled.memory, now=200.0)
    trims = [a for a in later.actions if isinstance(a, SetReplicas) and a.replicas == 2]
    assert not trims, "the operator's 3 stands"
    assert any(d.outcome == "forget" for d in later.decisions), later.decisions


def test_a_restarted_controller_still_knows_the_operator_scaled_over_its_record() -> None:
    """Found by the model check: as above, but the controller restarts (or a standby
    that started after the override takes the lease) once the operator is back at the
    count the surge wrote. Memory alone forgot the override and the trim took the
    operator's 3 down to 2: the mirror keeps it, from the cycle that saw it."""
    web, tasks = _surged_3_for_2_in_a_rollback()
    mirror = Mirror(config_id="cfg", version=5)
    rules = rules_named("failover", "mirror")

    def cycle(snap, memory: Memory, now: float):  # type: ignore[no-untyped-def]
        return plan(snapshot=snap, policy=Policy.default(), memory=memory, now=now, rules=rules)

    first = replace(snapshot(nodes(), [web], tasks), mirror=mirror)
    settled = cycle(first, Memory(), now=101.0).memory
    down = replace(web, replicas=2, version=web.version + 1)
    seen = replace(snapshot(nodes(), [down], tasks[:2]), mirror=mirror)
    scaled = cycle(seen, settled, now=102.0)
    (kept,) = scaled.actions  # the forget waits for the rollout; the mirror write does not
    assert isinstance(kept, SetMirror) and kept.saved(OVERRIDDEN_PREFIX) == {web.id: "100.000"}
    assert any(d.action is kept for d in scaled.decisions), "a write, a decision"
    back = replace(web, replicas=3, version=web.version + 2)
    after = apply_actions(replace(snapshot(nodes(), [back], tasks), mirror=mirror), (kept,))
    for restarted in (Memory(), Memory(watches=True)):
        later = cycle(after, restarted, now=200.0)
        assert any(d.outcome == "forget" for d in later.decisions), later.decisions
    # The rollout ends: the forget goes out, at the operator's 3.
    done = replace(back, update_state="completed")
    ended = replace(snapshot(nodes(), [done], tasks), mirror=after.mirror)
    writes = [a for a in cycle(ended, Memory(), now=201.0).actions if isinstance(a, SetReplicas)]
    assert [(a.replicas, set(a.remove_labels)) for a in writes] == [(3, set(REPLICA_RECORD_LABELS))]
    # Without the mirror's word a new controller reads the record as its own raise.
    bare = cycle(replace(ended, mirror=mirror), Memory(), now=201.0)
    assert [a.replicas for a in bare.actions if isinstance(a, SetReplicas)] == [2]
    # Once the record is gone, so is the mirror's word.
    plain = replace(done, labels=dict(MANAGED))
    forgot = replace(snapshot(nodes(), [plain], tasks), mirror=after.mirror)
    (drop,) = cycle(forgot, Memory(), now=202.0).actions
    assert isinstance(drop, SetMirror) and drop.dropped(OVERRIDDEN_PREFIX) == (web.id,)


def test_priority_none_is_not_failed_over_but_held_and_recorded() -> None:
    batch = service("batch", replicas=3, labels={**MANAGED, "placement.priority": "none"})
    tasks = [running(batch, 1, 1), running(batch, 2, 2), running(batch, 3, 3)]
    before = run(snapshot(nodes(), [batch], tasks), Memory(), now=100.0)
    held = run(snapshot(nodes(down=2), [batch], [tasks[0], tasks[2]]), before.memory, now=101.0)
    (action,) = held.actions
    assert isinstance(action, SetReplicas) and action.replicas == 2
    record = read_replica_record(action.set_labels)
    assert record is not None and (record.base, record.operation) == (3, "hold")
    assert any("swarm-placement start batch" in d.reason for d in held.decisions)


def test_a_restart_on_a_live_node_is_not_a_node_loss() -> None:
    web = service("web", replicas=2, labels=MANAGED)
    tasks = [running(web, 1, 1), running(web, 2, 2)]
    before = run(snapshot(nodes(), [web], tasks), Memory(), now=100.0)
    crashed = [tasks[0], replace(tasks[1], state=TaskState.FAILED)]
    assert run(snapshot(nodes(), [web], crashed), before.memory, now=101.0).actions == ()


def test_a_garbled_record_is_reported_and_left_alone() -> None:
    web = service("web", replicas=2, labels={**MANAGED, BASE_LABEL: "two"})
    result = run(snapshot(nodes(), [web]), Memory(), now=1.0)
    assert result.actions == ()
    assert any("unreadable replica record" in d.reason for d in result.decisions)


def test_no_surge_until_the_constraints_allow_a_free_node() -> None:
    # Strict steering: only node-2 and node-3 allowed; node-3 is lost, node-2 busy,
    # and node-1 is free but excluded by the controller: widen first, then surge.
    web = replace(
        service("web", replicas=2, labels={**MANAGED, EXCLUDED_LABEL: "n1"}),
        constraints=(exclusion_constraint("n1"),),
    )
    tasks = [running(web, 2, 1), running(web, 3, 2)]
    before = run(snapshot(nodes(), [web], tasks), Memory(), now=100.0)
    result = run(snapshot(nodes(down=3), [web], tasks[:1]), before.memory, now=101.0)
    assert result.actions == ()
    assert any("widened first" in d.reason for d in result.decisions)


def test_no_surge_when_no_node_may_take_the_lost_replicas() -> None:
    # Only node-3 is allowed, and it is the node that went down.
    web = replace(
        service("web", replicas=1, labels=MANAGED),
        constraints=("node.hostname==node-3",),
    )
    tasks = [running(web, 3, 1)]
    before = run(snapshot(nodes(), [web], tasks), Memory(), now=100.0)
    result = run(snapshot(nodes(down=3), [web], []), before.memory, now=101.0)
    assert result.actions == ()
    assert any(d.outcome == "pending" and "stay pending" in d.reason for d in result.decisions)


def test_a_surge_is_withdrawn_when_no_node_may_take_its_tasks_any_more() -> None:
    surge = {
        BASE_LABEL: "1",
        "swarm-placement.replicas-set": "2",
        "swarm-placement.operation": "surge",
        "swarm-placement.operation-since": "100",
    }
    web = replace(
        service("web", replicas=2, labels={**MANAGED, **surge}),
        constraints=("node.hostname==node-3",),
    )
    result = run(snapshot(nodes(down=3), [web]), Memory(), now=101.0)
    (action,) = result.actions
    assert isinstance(action, SetReplicas) and action.replicas == 1
    assert any(d.outcome == "pending" for d in result.decisions)


def test_a_speculative_surge_is_in_flight_for_steering() -> None:
    labels = {
        "swarm-placement.replicas": "2",
        "swarm-placement.replicas-set": "3",
        "swarm-placement.operation": "speculate",
    }
    assert is_in_flight(service("web", replicas=3, labels=labels))
    assert not is_in_flight(service("web", replicas=3))
