"""The blast radius: every outside input together takes one service off at most the share
of the ready and active nodes (controller.health-panic-threshold), not a share each."""

from __future__ import annotations

from dataclasses import replace

from controller.core.actions import SetNodeAvailability, SetNodeLabels
from controller.core.apply import apply_actions
from controller.core.health.node_marks import (
    PAUSED,
    QUARANTINE_UNTIL,
    read_float,
    read_health_marks,
)
from controller.core.kernel.blast_radius import allowed
from controller.core.labels import deny_label, steering_constraint
from controller.core.memory import Memory
from controller.core.model import Availability, ClusterSnapshot, Node
from controller.core.outside_inputs import (
    HealthReport,
    HealthState,
    PluginAdvice,
    PluginVeto,
    WorkloadEvent,
)
from controller.core.plan import Plan, plan
from controller.policy import Policy, policy_from_data

from .builders import MANAGED, node, running, service, snapshot

NOW = 1_796_152_964.0
SHARE = 0.34
# Four failures of one service on one node quarantine it; web's three on node-5 do not.
POLICY = policy_from_data({"apiVersion": "placement/v1", "nodes": {"quarantine": {"failures": 4}}})


def kept_off(snap: ClusterSnapshot, name: str, now: float) -> set[str]:
    """The nodes, not down, that outside inputs keep the service off: refused it (deny
    label), held paused by the controller, quarantined or carrying a health word."""

    def off(n: Node) -> bool:
        return (
            n.labels.get(deny_label(name)) == "true"
            or PAUSED in n.labels
            or (read_float(n.labels, QUARANTINE_UNTIL) or 0.0) > now
            or any(m.until > now for m in read_health_marks(n.labels))
        )

    return {n.hostname for n in snap.nodes if n.is_ready and off(n)}


def mixed() -> ClusterSnapshot:
    """Six nodes: web runs on node-1 and node-6, batch on node-3. One input each:
    node-2 reported degraded, batch failing four times on node-3 (quarantine), a plugin
    vetoing web on node-4, web failing three times on node-5 (failover-threshold 3/10m)."""
    web = service(
        "web",
        replicas=2,
        labels={**MANAGED, "placement.failover-threshold": "3/10m"},
        constraints=[steering_constraint("web")],
    )
    batch = service(
        "batch",
        replicas=1,
        labels={**MANAGED, "placement.priority": "low"},
        constraints=[steering_constraint("batch")],
    )
    nodes = [node(n, manager=n == 1) for n in range(1, 7)]
    tasks = [running(web, 1, 1), running(web, 6, 2), running(batch, 3, 1)]
    failures = (
        *(WorkloadEvent(f"b{i}", "s-batch", "n3", NOW - 100 + i) for i in range(4)),
        *(WorkloadEvent(f"w{i}", "s-web", "n5", NOW - 100 + i) for i in range(3)),
    )
    return replace(
        snapshot(nodes, [web, batch], tasks),
        health=(HealthReport("n2", HealthState.DEGRADED, "webhook", NOW + 600, "disk slow"),),
        workload=failures,
        plugins=PluginAdvice(
            vetoes=(PluginVeto("topo", "s-web", "n4", "no path"),), answered=("topo",)
        ),
    )


def run(snap: ClusterSnapshot, policy: Policy = POLICY, now: float = NOW) -> Plan:
    calm = replace(snap, health=(), workload=(), plugins=PluginAdvice())
    memory = plan(snapshot=calm, policy=policy, memory=Memory(), now=now - 3000).memory
    return plan(snapshot=snap, policy=policy, memory=memory, now=now)


def node_writes(result: Plan) -> tuple[SetNodeLabels | SetNodeAvailability, ...]:
    return tuple(a for a in result.actions if isinstance(a, SetNodeLabels | SetNodeAvailability))


def test_mixed_inputs_together_keep_a_service_off_no_more_than_the_one_share() -> None:
    """Each input alone is within its own share; together they took web off four of six
    nodes (degraded, quarantined, vetoed, moved off) where the share allows two."""
    snap = mixed()
    result = run(snap)
    after = apply_actions(snap, node_writes(result))
    off = kept_off(after, "web", NOW)
    assert len(off) <= allowed(SHARE, 6) == 2, (off, result.decisions)
    # The node-wide inputs come first (the degraded node, the quarantine); the service's
    # own move-off and the plugin's veto are held back, and decisions say why.
    assert off == {"node-2", "node-3"}
    assert after.node_by_id["n2"].availability is Availability.ACTIVE, "kept off, not paused"
    reasons = [d.reason for d in result.decisions if d.subject == "service web"]
    held = [r for r in reasons if "controller.health-panic-threshold 34% allows 2" in r]
    assert any("3 task failure(s) on node-5" in r for r in held), reasons
    assert any("plugin topo" in r and "node-4" in r for r in held), reasons
    assert any("node-2 degraded" in r and "node-3 quarantined" in r for r in held), reasons


def test_a_services_move_offs_in_force_count_against_a_new_report() -> None:
    """web was moved off node-2 and node-3 for failing there (in force, 2 of 6: the
    cap): a report of node-4 failed would keep it off a third node, so it is a panic."""
    marks = {deny_label("web"): "true", "swarm-placement.unhealthy.web": f"{NOW - 60:.3f}"}
    snap = mixed()
    snap = replace(
        snap,
        nodes=tuple(replace(n, labels=marks) if n.id in ("n2", "n3") else n for n in snap.nodes),
        health=(HealthReport("n4", HealthState.FAILED, "webhook", NOW + 600, "gone"),),
        workload=(),
        plugins=PluginAdvice(),
    )
    result = run(snap)
    [panic] = [d for d in result.decisions if d.outcome == "panic"]
    assert "3 of 6 ready and active node(s)" in panic.reason
    assert "service web also moved off node-2, node-3" in panic.reason
    assert not [a for a in node_writes(result) if a.node_id == "n4"]


def test_a_quarantine_waits_for_room_under_the_cap() -> None:
    """node-2 and node-4 reported degraded fill the cap of 2 of 6: batch failing on
    node-3 would make a third node taken, so node-3 stays in service, and a decision
    says what fills the cap."""
    snap = replace(
        mixed(),
        health=tuple(
            HealthReport(n, HealthState.DEGRADED, "webhook", NOW + 600, "slow")
            for n in ("n2", "n4")
        ),
        plugins=PluginAdvice(),
    )
    result = run(snap)
    assert not [d for d in result.decisions if d.outcome == "quarantine"]
    [kept] = [d for d in result.decisions if d.subject == "node node-3" and d.outcome == "keep"]
    assert "a quarantine would make 3 of the 6 ready and active node(s)" in kept.reason
    assert "node-2 degraded, node-4 degraded already" in kept.reason


def test_nodes_an_operator_drained_are_not_in_the_base() -> None:
    """Three of six nodes drained for maintenance: the base is the three ready and
    active ones, of which the share allows one; two reports are a panic (counted over
    all six, as before, they were within the share and both acted on)."""
    base = mixed()
    drained = tuple(
        replace(n, availability=Availability.DRAIN) if n.id in ("n4", "n5", "n6") else n
        for n in base.nodes
    )
    reports = tuple(
        HealthReport(n, HealthState.FAILED, "webhook", NOW + 600, "gone") for n in ("n2", "n3")
    )
    snap = replace(base, nodes=drained, health=reports, workload=(), plugins=PluginAdvice())
    result = run(snap)
    [panic] = [d for d in result.decisions if d.outcome == "panic"]
    assert "2 of 3 ready and active node(s)" in panic.reason
    assert node_writes(result) == ()
