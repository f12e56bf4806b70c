"""The stacked speculative surge: every node already holds a replica, so the surge can
only land beside one. It is made on strong evidence alone (every signal that can speak
says the node is gone, for STACK_HOLD_SECONDS), names the nodes where a false alarm's
trim may stop an original, and the trim after a false alarm drops the surged copy."""

from __future__ import annotations

from dataclasses import replace

from controller.core.actions import SetReplicas
from controller.core.decisions import Code
from controller.core.memory import Memory
from controller.core.model import ClusterSnapshot, NodeState, Resources, Service, Task
from controller.core.outside_inputs import LivenessSignal
from controller.core.plan import plan
from controller.core.replicas import read_replica_record
from controller.core.rules import rules_named
from controller.core.rules.failover.stacked_surge import STACK_HOLD_SECONDS
from controller.policy import Policy

from .builders import MANAGED, node, running, service, snapshot
from .test_speculative import answers, applied, watching

RULES = rules_named("failover", "speculative")
STOP_FIRST = {**MANAGED}  # failover-mode auto: speculative for a replicated service
CPU = 1_000_000_000


def run(snap: ClusterSnapshot, memory: Memory, now: float):  # type: ignore[no-untyped-def]
    return plan(snapshot=snap, policy=Policy.default(), memory=memory, now=now, rules=RULES)


def dead(n: int, *, at: float = 100.0) -> tuple[LivenessSignal, ...]:
    """A killed dockerd: its probe and every other node's agent are refused; the gossip,
    slow to drop a peer, still lists it as it has for long."""
    return (
        LivenessSignal(f"n{n}", "gossip", True, 10.0, "in the ingress gossip peers"),
        LivenessSignal(f"n{n}", "probe", False, at, "refused"),
        LivenessSignal(f"n{n}", "indirect", False, at, "refused from node-1, node-2"),
    )


def packed(count: int = 4) -> tuple[Service, list[Task], list]:  # type: ignore[type-arg]
    """The issue's layout: a stop-first service, one replica on every node, 0.25 CPU
    reserved each, room for more everywhere."""
    web = replace(
        service("web", replicas=count, labels=STOP_FIRST),
        update_order="stop-first",
        reservations=Resources(nano_cpus=CPU // 4),
    )
    nodes = [
        replace(node(i, manager=i == 1), capacity=Resources(nano_cpus=2 * CPU, memory_bytes=2**32))
        for i in range(1, count + 1)
    ]
    return web, [running(web, i, i) for i in range(1, count + 1)], nodes


def cluster(
    web: Service, tasks: list[Task], nodes: list, *signals: LivenessSignal
) -> ClusterSnapshot:  # type: ignore[type-arg]
    return replace(snapshot(nodes, [web], tasks), liveness=signals)


def test_every_node_holding_a_replica_a_dead_worker_is_surged_beside_one() -> None:
    """The issue: `only 0 free node(s) could take them without stacking`, so the replica
    waited for Swarm's down. With every signal agreeing, the surge stacks."""
    web, tasks, nodes = packed()
    result = run(cluster(web, tasks, nodes, *dead(3)), Memory(), now=101.5)
    (action,) = result.actions
    assert isinstance(action, SetReplicas) and action.replicas == 5
    record = read_replica_record(action.set_labels)
    assert record is not None and (record.base, record.operation) == (4, "speculate")
    # Slots 1..4, one per node: wherever the fifth lands, the trim back drops it.
    assert action.evicts_from == ()
    (note,) = [d for d in result.decisions if d.rule == "speculative"]
    assert note.outcome == "speculate" and "beside a replica" in note.reason
    assert "indirect+probe" in note.reason


def test_a_stacked_surge_needs_every_signal_to_agree() -> None:
    web, tasks, nodes = packed()
    gossip, probe, indirect = dead(3)
    # Gossip listing the node again after the probe failed: a signal says it lives.
    relisted = replace(gossip, since=100.5)
    # Gossip and the probe alone (no agent's word): this manager's view only.
    dropped = replace(gossip, alive=False, since=100.0, detail="left the gossip peers")
    for signals in ((relisted, probe, indirect), (dropped, probe)):
        result = run(cluster(web, tasks, nodes, *signals), Memory(), now=103.0)
        assert result.actions == (), signals
        (note,) = [d for d in result.decisions if d.rule == "speculative"]
        assert note.outcome == "wait" and "0 free node(s)" in note.reason
        assert "stacked surge" in note.reason


def test_a_stacked_surge_waits_for_the_hold() -> None:
    web, tasks, nodes = packed()
    # Suspected after suspect-after (a policy with a shorter one), but not held yet.
    policy = Policy.default()
    policy = replace(policy, controller=replace(policy.controller, suspect_after_seconds=0.2))
    early = plan(
        snapshot=cluster(web, tasks, nodes, *dead(3)),
        policy=policy,
        memory=Memory(),
        now=100.0 + STACK_HOLD_SECONDS / 2,
        rules=RULES,
    )
    assert early.actions == ()
    assert any("held for" in d.reason for d in early.decisions if d.rule == "speculative")


def test_a_stacked_surge_that_a_trim_may_undo_badly_names_the_nodes() -> None:
    # Slots with a gap (1, 2, 4, 5): the surge takes slot 3, and beside the original in
    # slot 4 or 5 it is the lower slot, so a false alarm's trim would stop the original.
    web, _, nodes = packed()
    tasks = [running(web, 1, 1), running(web, 2, 2), running(web, 3, 4), running(web, 4, 5)]
    result = run(cluster(web, tasks, nodes, *dead(3)), Memory(), now=101.5)
    (action,) = result.actions
    assert isinstance(action, SetReplicas) and action.replicas == 5
    assert set(action.evicts_from) == {"n3", "n4"}
    (note,) = [d for d in result.decisions if d.rule == "speculative"]
    assert "node-3, node-4" in note.reason and "disruption budget" in note.reason


def test_after_a_false_alarm_the_trim_drops_the_surged_copy() -> None:
    web, tasks, nodes = packed()
    surged = run(cluster(web, tasks, nodes, *dead(3)), watching(), now=101.5)
    (action,) = surged.actions
    assert isinstance(action, SetReplicas)
    web5 = applied(web, action)
    # Swarm put the fifth beside the original on node-2; node-3 answers again.
    tasks5 = [*(replace(t, service_id=web5.id) for t in tasks), running(web5, 2, 5)]
    back = cluster(web5, tasks5, nodes, *answers(3, since=103.0))
    result = run(back, surged.memory, now=103.0 + 2.0)
    (trim,) = result.actions
    assert isinstance(trim, SetReplicas) and trim.replicas == 4 and trim.evicts_from == ()
    (note,) = [d for d in result.decisions if d.rule == "speculative"]
    assert note.code is Code.FALSE_ALARM and "exactly the surged" in note.reason
    # One replica for the 3.5 s the surge stood.
    assert note.extra_replica_seconds == 3.5


def test_a_real_death_hands_over_to_failover() -> None:
    web, tasks, nodes = packed()
    surged = run(cluster(web, tasks, nodes, *dead(3)), watching(), now=101.5)
    (action,) = surged.actions
    assert isinstance(action, SetReplicas)
    web5 = applied(web, action)
    down = [replace(n, state=NodeState.DOWN) if n.id == "n3" else n for n in nodes]
    alive = [replace(t, service_id=web5.id) for t in tasks if t.node_id != "n3"]
    tasks5 = [*alive, running(web5, 2, 5)]
    (handover,) = run(cluster(web5, tasks5, down), surged.memory, now=113.0).actions
    assert isinstance(handover, SetReplicas) and handover.replicas == 5
    record = read_replica_record(handover.set_labels)
    assert record is not None and record.operation == "surge"
