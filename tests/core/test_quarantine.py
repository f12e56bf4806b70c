"""Quarantine: a crash-looping node is kept from the managed services for a while, never
too many at once, and never paused: Swarm keeps it for the services it does not manage."""

from __future__ import annotations

from dataclasses import replace

from controller.core.actions import SetNodeAvailability, SetNodeLabels, SetServiceConstraints
from controller.core.health.node_marks import PAUSED, QUARANTINE_UNTIL
from controller.core.memory import Memory
from controller.core.model import Availability, ClusterSnapshot, NodeState
from controller.core.outside_inputs import HealthReport, HealthState, WorkloadEvent
from controller.core.plan import Plan, plan
from controller.policy import Policy, policy_from_data

from .builders import node, running, service, snapshot

T0 = 100_000.0


def cluster(
    count: int = 4, *, down: set[int] = frozenset(), labels: dict[int, dict[str, str]] | None = None
) -> ClusterSnapshot:  # type: ignore[assignment]
    return snapshot(
        [
            node(
                n,
                manager=n == 1,
                state=NodeState.DOWN if n in down else NodeState.READY,
                labels=(labels or {}).get(n),
            )
            for n in range(1, count + 1)
        ],
        [],
    )


def cycle(snap: ClusterSnapshot, memory: Memory, now: float, policy: Policy | None = None) -> Plan:
    return plan(snapshot=snap, policy=policy or Policy.default(), memory=memory, now=now)


def crash_loop(nodes: set[int], *, count: int = 4, times: int = 3) -> tuple[Memory, float]:
    """Memory after `times` ungraceful exits of each of `nodes`, a minute apart."""
    memory, now = cycle(cluster(count), Memory(), T0).memory, T0
    for _ in range(times):
        now += 30
        memory = cycle(cluster(count, down=nodes), memory, now).memory
        now += 30
        memory = cycle(cluster(count), memory, now).memory
    return memory, now


def node_actions(result: Plan) -> dict[str, SetNodeLabels | SetNodeAvailability]:
    return {
        a.node_id: a for a in result.actions if isinstance(a, SetNodeLabels | SetNodeAvailability)
    }


def test_three_ungraceful_exits_within_the_hour_quarantine_the_node_for_two_hours() -> None:
    memory, now = crash_loop({3})
    assert len(memory.health.exits["n3"]) == 3
    # The third exit was counted while the node was down; it is quarantined from then.
    result = cycle(cluster(4), memory, now + 1)
    actions = node_actions(result)
    assert set(actions) == {"n3"}, result.actions
    quarantine = actions["n3"]
    # A record, not a pause: Swarm still places what the controller does not manage there.
    assert isinstance(quarantine, SetNodeLabels)
    assert PAUSED not in quarantine.set_labels
    until = float(quarantine.set_labels[QUARANTINE_UNTIL])
    assert until == now + 1 + 7200
    assert any(d.outcome == "quarantine" for d in result.decisions)


def test_a_quarantined_node_is_kept_from_managed_services_only() -> None:
    memory, now = crash_loop({3})
    until = now + 7200.0
    held = cluster(4, labels={3: {QUARANTINE_UNTIL: f"{until:.3f}"}})
    labels = {
        "placement.managed": "true",
        "placement.preferred-nodes": "node-3",
        "placement.failback": "immediate",
        "placement.failback-delay": "0s",
    }
    db = service("db", replicas=1, labels=labels)
    snap = replace(held, services=(db,), tasks=(running(db, 2, 1),))
    result = cycle(snap, memory, now + 1)
    assert not node_actions(result), "no pause: the node stays active for the rest"
    writes = [a for a in result.actions if isinstance(a, SetServiceConstraints)]
    assert writes and all(not a.evicts_from for a in writes), "no failback onto it"
    assert all("node.id!=n3" in a.constraints for a in writes), "Swarm's failover avoids it"
    # Once it is over, the preferred owner is a target again.
    later = cycle(snap, memory, until + 1)
    assert any(isinstance(a, SetServiceConstraints) and a.evicts_from for a in later.actions)


def test_a_node_an_earlier_quarantine_paused_is_set_active_and_still_kept_from_them() -> None:
    memory, now = crash_loop({3})
    until = now + 7200.0
    held = cluster(4, labels={3: {QUARANTINE_UNTIL: f"{until:.3f}", PAUSED: "quarantine"}})
    held = replace(
        held,
        nodes=tuple(
            replace(n, availability=Availability.PAUSE) if n.id == "n3" else n for n in held.nodes
        ),
    )
    released = node_actions(cycle(held, memory, until - 1))["n3"]
    assert isinstance(released, SetNodeAvailability)
    assert released.availability is Availability.ACTIVE
    assert released.remove_labels == (PAUSED,), "the record of the quarantine stays"


def test_a_quarantine_ends_on_time_and_its_failures_never_count_again() -> None:
    memory, now = crash_loop({3})
    until = now + 7200.0
    held = cluster(4, labels={3: {QUARANTINE_UNTIL: f"{until:.3f}"}})
    assert not node_actions(cycle(held, memory, until - 1))
    assert not node_actions(cycle(held, memory, until + 1)), "no second quarantine"


def test_never_more_than_a_quarter_of_the_nodes() -> None:
    memory, now = crash_loop({2, 3})
    result = cycle(cluster(4), memory, now + 1)
    assert len(node_actions(result)) == 1
    assert any("max-fraction" in d.reason for d in result.decisions)
    memory3, now3 = crash_loop({3}, count=3)
    assert not node_actions(cycle(cluster(3), memory3, now3 + 1)), "1 of 3 is over 25 %"


def test_a_drained_node_that_goes_down_left_gracefully() -> None:
    drained = cluster(4)
    drained = replace(
        drained,
        nodes=tuple(
            replace(n, availability=Availability.DRAIN) if n.id == "n3" else n
            for n in drained.nodes
        ),
    )
    memory, now = cycle(drained, Memory(), T0).memory, T0
    for _ in range(3):
        now += 30
        memory = cycle(cluster(4, down={3}), memory, now).memory
        now += 30
        memory = cycle(drained, memory, now).memory
    assert not memory.health.exits


def test_task_failures_count_only_when_the_node_is_to_blame() -> None:
    policy = policy_from_data(
        {"apiVersion": "placement/v1", "nodes": {"quarantine": {"max-fraction": 0.5}}}
    )
    base = cluster(4)
    memory = cycle(base, Memory(), T0, policy).memory  # nodes ready since T0 (first seen)
    now = T0 + 600

    def failures(service: str, node_id: str, n: int, start: float) -> list[WorkloadEvent]:
        return [
            WorkloadEvent(f"{service}-{node_id}-{i}", service, node_id, start + i) for i in range(n)
        ]

    only_here = failures("s-a", "n3", 3, T0 + 100)
    everywhere = failures("s-b", "n2", 3, T0 + 100) + failures("s-b", "n4", 1, T0 + 100)
    at_return = failures("s-c", "n4", 3, T0 + 1)  # in the first 30 s after n4 turned ready
    result = cycle(
        replace(base, workload=(*only_here, *everywhere, *at_return)), memory, now, policy
    )
    assert set(node_actions(result)) == {"n3"}


def test_a_crash_the_controller_did_not_see_is_dated_from_swarm_s_last_update() -> None:
    """Seen in a chaos run: while its manager elected a leader, the controller saw none of
    node-3's crash and return; Swarm then reported the four tasks that crash killed as
    failed, and node-3 was quarantined for two hours for one crash."""
    base = cluster(4)
    memory = cycle(base, Memory(), T0).memory  # ready since T0, as far as memory knows
    back = T0 + 600  # node-3 crashed and came back unseen: Swarm's UpdatedAt moved

    def killed(at: float) -> tuple[WorkloadEvent, ...]:
        return tuple(WorkloadEvent(f"t-{s}", f"s-{s}", "n3", at + s) for s in range(4))

    nodes = [replace(n, updated_at=back) if n.id == "n3" else n for n in base.nodes]
    returned = replace(base, nodes=tuple(nodes))
    at_return = cycle(replace(returned, workload=killed(back)), memory, back + 5)
    assert "n3" not in node_actions(at_return)
    # The same failures half a minute after the return are the node's own.
    later = cycle(replace(returned, workload=killed(back + 40)), memory, back + 50)
    assert "n3" in node_actions(later)


def test_a_quarantined_manager_is_no_manager_to_fall_back_on_for_a_health_pause() -> None:
    # node-2, the other manager, is quarantined: the rules see it paused, so pausing
    # degraded node-1 would leave no manager taking tasks; it is not planned at all.
    # (A threshold of a half: the quarantine and the report together are 2 of 4 nodes.)
    half = policy_from_data(
        {"apiVersion": "placement/v1", "controller": {"health-panic-threshold": "50%"}}
    )
    memory, now = crash_loop({3})
    held = cluster(4, labels={2: {QUARANTINE_UNTIL: f"{now + 7200:.3f}"}})
    held = replace(
        held,
        nodes=tuple(replace(n, role=held.nodes[0].role) if n.id == "n2" else n for n in held.nodes),
        health=(HealthReport("n1", HealthState.DEGRADED, "webhook", now + 60, reason="disk"),),
    )
    result = cycle(held, memory, now + 1, half)
    assert not [d for d in result.decisions if d.rule == "guard" and d.outcome == "refuse"]
    assert not [
        a
        for a in result.actions
        if isinstance(a, SetNodeAvailability) and a.availability is Availability.PAUSE
    ]
    assert any("no other manager takes tasks" in d.reason for d in result.decisions)
