"""A loss that was held is forgotten: starting the service does not hold it again."""

from __future__ import annotations

from dataclasses import replace

from controller.core.memory import Memory
from controller.core.model import NodeState
from controller.core.plan import plan
from controller.core.rules.failover import plan_failover
from controller.policy import Policy

from .builders import MANAGED, node, running, service, snapshot

RULES = (("failover", plan_failover),)


def run(snap, memory: Memory, now: float):  # type: ignore[no-untyped-def]
    return plan(snapshot=snap, policy=Policy.default(), memory=memory, now=now, rules=RULES)


def nodes(down: int | None = None):  # type: ignore[no-untyped-def]
    return [
        node(i, manager=i == 1, state=NodeState.DOWN if i == down else NodeState.READY)
        for i in (1, 2, 3)
    ]


def test_a_started_service_is_not_held_again_for_the_same_loss() -> None:
    batch = service("batch", replicas=3, labels={**MANAGED, "placement.priority": "none"})
    tasks = [running(batch, 1, 1), running(batch, 2, 2), running(batch, 3, 3)]
    before = run(snapshot(nodes(), [batch], tasks), Memory(), now=100.0)
    held = run(snapshot(nodes(down=3), [batch], tasks[:2]), before.memory, now=101.0)
    (hold,) = held.actions
    held_batch = replace(batch, replicas=2, labels={**batch.labels, **hold.set_labels})  # type: ignore[union-attr]
    quiet = run(snapshot(nodes(down=3), [held_batch], tasks[:2]), held.memory, now=102.0)
    assert quiet.actions == ()
    # `swarm-placement start batch`: back to 3, the record gone; the new task has no node yet.
    started = replace(batch, version=102)
    after = run(snapshot(nodes(down=3), [started], tasks[:2]), quiet.memory, now=103.0)
    assert after.actions == (), "held a second time for a loss already handled"
