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
    assert after.node_by_id["n2"].availability is Availability.PAUSE
    reasons = [d.reason for d in result.decisions if d.subject == "service web"]
    held = [r for r in reasons if "controller.health-panic-threshold 34% allows 2" in r]
    assert any("3 task failure(s) on node-5" in r for r in held), reasons
    assert any("plugin topo" in r and "node-4" in r for r in held), reasons
    assert any("node-2 degraded" in r and "node-3 quarantined" in r for r in held), reasons
