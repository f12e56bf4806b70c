"""What a person reads gives a moment as a time, never as epoch seconds: every decision
reason, and the text a rule stores for explain, status and the web view to show (a
replica record's detail, a quarantine's reason), over the property tests' swarms.

They run at moments of today, whose epoch seconds have ten digits, so a raw timestamp in
a text shows as a long number (the web view once said "1 replica(s) lost with a node at
1796152964.425")."""

from __future__ import annotations

import re
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from controller.core.apply import apply_actions
from controller.core.decisions import Decision
from controller.core.health.node_marks import QUARANTINE_REASON
from controller.core.health.suspicion import suspect_nodes
from controller.core.memory import Memory
from controller.core.model import ClusterSnapshot
from controller.core.plan import Plan, plan
from controller.core.replicas import DETAIL_LABEL
from controller.policy import Policy

from . import test_health_properties as health
from . import test_owners_properties as owners
from . import test_plan_properties as generic
from . import test_preemption_properties as preemption
from . import test_rebalance_properties as rebalance
from .builders import running
from .rebalance_builders import NOW as REBALANCE_NOW
from .test_decisions_properties import failing_swarms
from .test_suspicion import signal_sets

EPOCH = 1_796_152_964.0  # 2026-12-01T19:22:44Z
# Nine digits or more, alone: no count, size or ID in a reason comes near that.
EPOCH_LIKE = re.compile(r"(?<![\w.])\d{9,}(?:\.\d+)?(?![\w.])")
SHOWN_LABELS = (DETAIL_LABEL, QUARANTINE_REASON)


def test_the_swarms_run_at_moments_of_today() -> None:
    """Else the property swarms could not show a raw timestamp as one."""
    for now in (owners.NOW, health.NOW, REBALANCE_NOW, EPOCH):
        assert EPOCH_LIKE.fullmatch(f"{now:.3f}"), now


def _shown(decisions: tuple[Decision, ...] | list[Decision], result: Plan | None) -> list[str]:
    texts = [d.reason for d in decisions]
    for action in result.actions if result else ():
        labels = getattr(action, "set_labels", {})
        texts += [labels[key] for key in SHOWN_LABELS if key in labels]
    return texts


def _assert_times_read_as_times(result: Plan) -> None:
    raw = [text for text in _shown(result.decisions, result) if EPOCH_LIKE.search(text)]
    assert not raw, f"epoch seconds where a person reads: {raw}"


@settings(max_examples=50, deadline=None)
@given(generic.swarms())
def test_generic_swarms(snap: ClusterSnapshot) -> None:
    result = plan(snapshot=snap, policy=Policy.default(), memory=Memory(), now=EPOCH)
    _assert_times_read_as_times(result)


@settings(max_examples=50, deadline=None)
@given(owners.swarms())
def test_owners_swarms(snap: ClusterSnapshot) -> None:
    _assert_times_read_as_times(owners._plan(snap))


@settings(max_examples=50, deadline=None)
@given(st.one_of(preemption.short_swarms(), preemption.full_swarms()))
def test_swarms_short_of_room(snap: ClusterSnapshot) -> None:
    result = plan(snapshot=snap, policy=Policy.default(), memory=Memory(), now=EPOCH)
    _assert_times_read_as_times(result)


@settings(max_examples=50, deadline=None)
@given(rebalance.swarms(usage=True), rebalance.policies())
def test_rebalancing_swarms(snap: ClusterSnapshot, pol: Policy) -> None:
    memory = rebalance.settled(snap)
    _assert_times_read_as_times(plan(snapshot=snap, policy=pol, memory=memory, now=REBALANCE_NOW))


@settings(max_examples=100, deadline=None)
@given(health.troubled_swarms())
def test_troubled_swarms(snap: ClusterSnapshot) -> None:
    _assert_times_read_as_times(health._plan(snap, health._memory(snap)))


@settings(max_examples=100, deadline=None)
@given(failing_swarms(), st.booleans())
def test_failing_swarms(swarms: tuple[ClusterSnapshot, ClusterSnapshot], replaced: bool) -> None:
    calm, failed = swarms
    policy = Policy.default()
    memory = plan(snapshot=calm, policy=policy, memory=Memory(), now=EPOCH).memory
    surged = plan(snapshot=failed, policy=policy, memory=memory, now=EPOCH + 10)
    _assert_times_read_as_times(surged)
    after = apply_actions(failed, surged.actions)
    if replaced:  # the surged tasks run on nodes that are up: the surges are trimmed
        up = [int(n.id[1:]) for n in after.nodes if n.is_ready]
        extra = [
            running(s, up[i % len(up)], 100 + i)
            for s in after.services
            for i in range(s.replicas or 0)
        ]
        after = replace(after, tasks=(*after.tasks, *extra))
    _assert_times_read_as_times(
        plan(snapshot=after, policy=policy, memory=surged.memory, now=EPOCH + 60)
    )


@settings(max_examples=100, deadline=None)
@given(signal_sets())
def test_suspicions(case: tuple[ClusterSnapshot, float]) -> None:
    snap, suspect_after = case
    today = replace(snap, liveness=tuple(replace(s, since=EPOCH + s.since) for s in snap.liveness))
    _, decisions = suspect_nodes(today, suspect_after=suspect_after, now=EPOCH + 110)
    raw = [text for text in _shown(decisions, None) if EPOCH_LIKE.search(text)]
    assert not raw, f"epoch seconds where a person reads: {raw}"
