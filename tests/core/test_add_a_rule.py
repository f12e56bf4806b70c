"""A rule is its package plus one line in the registry: its setting (from the policy file
and from a label), its memory kept across cycles and its metric all work with nothing
else changed."""

from __future__ import annotations

from dataclasses import replace

import pytest

from controller.core.apply import apply_actions
from controller.core.labels import steering_constraint
from controller.core.memory import Memory
from controller.core.model import ClusterSnapshot
from controller.core.plan import Plan, plan
from controller.core.rules import RULES, declared_settings
from controller.policy import API_VERSION, Policy, PolicyValidationError, policy_from_data
from controller.runtime.metrics import Metrics
from controller.runtime.policy_source import PolicySource

from . import greeting
from .builders import MANAGED, node, running, service, snapshot

REGISTRY = (*RULES, greeting.SPEC)  # the one line

FILE = {
    "apiVersion": API_VERSION,
    "defaults": {"greet-after": 3},
    "services": [{"match": {"name": "db"}, "greet-after": 2}],
}


def _swarm() -> ClusterSnapshot:
    # Each service already carries its steering constraint: adoption has nothing to write.
    web, db, api = (
        service(name, labels=labels, constraints=(steering_constraint(name),))
        for name, labels in (
            ("web", {**MANAGED, "placement.greet-after": "1"}),
            ("db", MANAGED),
            ("api", MANAGED),
        )
    )
    return snapshot(
        [node(1, manager=True), node(2)],
        [web, db, api],
        [running(web, 1, 1), running(db, 2, 1), running(api, 1, 1)],
    )


def _cycles(policy: Policy, count: int, metrics: Metrics) -> list[Plan]:
    snap, memory, plans = _swarm(), Memory(), []
    for n in range(count):
        result = plan(snapshot=snap, policy=policy, memory=memory, now=1000.0 + n, rules=REGISTRY)
        metrics.record_cycle(
            seconds=0.1,
            leader=True,
            decisions=result.decisions,
            executed=result.actions,
            conflict=False,
        )
        snap, memory = apply_actions(snap, result.actions), result.memory
        plans.append(result)
    return plans


def _greeted(result: Plan) -> list[str]:
    return [d.subject for d in result.decisions if d.rule == "greeting" and d.action is not None]


def test_a_rule_from_one_package_has_its_setting_memory_and_metric() -> None:
    policy = policy_from_data(FILE, declared_settings(REGISTRY))
    metrics = Metrics(PolicySource(None), lease=None, rules=REGISTRY)
    plans = _cycles(policy, 4, metrics)
    # The label's 1 beats the file rule's 2, which beats the file's default 3; the count
    # of cycles seen is the rule's own memory, kept from one cycle to the next.
    assert [_greeted(p) for p in plans] == [["service web"], ["service db"], ["service api"], []]
    assert all(
        a.set_labels == {greeting.greeting_rule.GREETED_LABEL: "yes"}
        for p in plans
        for a in p.actions
    )
    counted = metrics.registry.get_sample_value("placement_greetings_total")
    assert counted == 3


def test_without_its_registry_line_the_rule_and_its_setting_are_unknown() -> None:
    with pytest.raises(PolicyValidationError, match="greet-after"):
        policy_from_data(FILE, declared_settings(RULES))


def test_a_bad_value_of_its_setting_is_reported_where_it_is_written() -> None:
    bad = {**FILE, "services": [{"match": {"name": "db"}, "greet-after": 0}]}
    with pytest.raises(PolicyValidationError) as raised:
        policy_from_data(bad, declared_settings(REGISTRY))
    (problem,) = raised.value.problems
    assert problem.path == "services[0].greet-after"
    assert problem.message.startswith("expected")


def test_a_bad_label_of_its_setting_leaves_the_service_unmanaged_like_any_label_error() -> None:
    policy = policy_from_data(FILE, declared_settings(REGISTRY))
    snap = _swarm()
    web = replace(snap.services[0], labels={**MANAGED, "placement.greet-after": "soon"})
    snap = replace(snap, services=(web, *snap.services[1:]))
    result = plan(snapshot=snap, policy=policy, memory=Memory(), now=1000.0, rules=REGISTRY)
    assert "service web" not in _greeted(result)
    assert any("placement.greet-after" in d.reason and "web" in d.reason for d in result.decisions)
