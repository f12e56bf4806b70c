from __future__ import annotations

from controller.core.actions import SetNodeLabels, SetServiceConstraints
from controller.core.labels import deny_label, steering_constraint
from controller.core.memory import Memory
from controller.core.model import Unreadable
from controller.core.plan import plan
from controller.policy import Policy

from .builders import MANAGED, node, running, service, snapshot


def _plan(snap):  # type: ignore[no-untyped-def]
    return plan(snapshot=snap, policy=Policy.default(), memory=Memory(), now=1000.0)


def test_a_managed_service_gets_the_steering_constraint_appended() -> None:
    web = service("web", replicas=2, labels=MANAGED, constraints=["node.role==worker"])
    result = _plan(snapshot([node(1, manager=True), node(2)], [web], [running(web, 2, 1)]))
    assert result.actions == (
        SetServiceConstraints(
            service_id="s-web",
            service_name="web",
            version=100,
            constraints=("node.role==worker", steering_constraint("web")),
        ),
    )
    (adopt,) = [d for d in result.decisions if d.outcome == "adopt"]
    assert adopt.rule == "adoption" and adopt.subject == "service web"
    assert "no task restarts" in adopt.reason


def test_an_unmanaged_service_is_never_written() -> None:
    legacy = service("legacy", replicas=2)
    off = service("off", labels={"placement.managed": "false"})
    result = _plan(snapshot([node(1, manager=True)], [legacy, off]))
    assert result.actions == ()


def test_an_adopted_service_needs_nothing_more() -> None:
    web = service("web", labels=MANAGED, constraints=[steering_constraint("web")])
    assert _plan(snapshot([node(1, manager=True)], [web])).actions == ()


def test_a_service_in_a_rolling_update_waits() -> None:
    web = service("web", labels=MANAGED, update_state="updating")
    result = _plan(snapshot([node(1, manager=True)], [web]))
    assert result.actions == ()
    assert [d.outcome for d in result.decisions if d.subject == "service web"] == ["wait"]


def test_deny_labels_with_no_reason_left_are_released() -> None:
    """Deny labels are recomputed from their reasons (core/rules/nodes/deny.py): one of a service
    no longer managed, or of a managed one whose reason ended, goes; others stay."""
    labels = {deny_label("gone"): "true", deny_label("web"): "true", "rack": "r1"}
    web = service("web", labels=MANAGED, constraints=[steering_constraint("web")])
    result = _plan(snapshot([node(1, manager=True, labels=labels)], [web]))
    assert result.actions == (
        SetNodeLabels(
            node_id="n1",
            hostname="node-1",
            version=11,
            remove_labels=(deny_label("gone"), deny_label("web")),
        ),
    )


def test_an_unreadable_service_is_skipped_with_a_decision_and_the_others_handled() -> None:
    web = service("web", replicas=1, labels=MANAGED)
    snap = snapshot([node(1, manager=True)], [web])
    snap = type(snap)(
        nodes=snap.nodes,
        services=snap.services,
        tasks=snap.tasks,
        unreadable=(Unreadable("service", "s-odd", "odd", "missing Version.Index"),),
    )
    result = _plan(snap)
    assert [a.service_name for a in result.actions] == ["web"]  # type: ignore[union-attr]
    (skip,) = [d for d in result.decisions if d.subject == "service odd"]
    assert (skip.outcome, skip.reason) == ("skip", "missing Version.Index")


def test_a_service_whose_rollout_swarm_paused_waits_and_says_why() -> None:
    for state in ("paused", "rollback_paused", "rollback_started"):
        web = service("web", labels=MANAGED, update_state=state)
        result = _plan(snapshot([node(1, manager=True)], [web]))
        assert result.actions == ()
        (wait,) = [d for d in result.decisions if d.subject == "service web"]
        assert wait.rule == "adoption" and wait.outcome == "wait"
        assert "the controller waits: a write would" in wait.reason
