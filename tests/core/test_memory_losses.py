"""A loss that was held or surged for is settled: it is not held or surged for again."""

from __future__ import annotations

from dataclasses import replace

from controller.core.actions import SetReplicas
from controller.core.memory import Memory
from controller.core.model import NodeState, Service, Task, TaskState
from controller.core.plan import Plan, plan
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


def _surge_then_trim(web: Service) -> tuple[Plan, Service]:
    """A node loss, its surge, and the trim once the surged task runs."""
    tasks = [running(web, 1, 1), running(web, 2, 2), running(web, 3, 3)]
    before = run(snapshot(nodes(), [web], tasks), Memory(), now=100.0)
    surged = run(snapshot(nodes(down=3), [web], tasks[:2]), before.memory, now=101.0)
    (surge,) = surged.actions
    assert isinstance(surge, SetReplicas) and surge.replicas == 4
    web4 = replace(web, replicas=4, labels={**web.labels, **surge.set_labels}, version=101)
    three = [running(web4, 1, 1), running(web4, 2, 2), running(web4, 1, 4)]
    trimmed = run(snapshot(nodes(down=3), [web4], three), surged.memory, now=102.0)
    (trim,) = trimmed.actions
    assert isinstance(trim, SetReplicas) and trim.replicas == 3
    return trimmed, replace(web, version=102)


def test_a_trimmed_surge_is_not_started_again_for_the_same_loss() -> None:
    web = service("web", replicas=3, labels=MANAGED)
    trimmed, web3 = _surge_then_trim(web)
    # A moment after the trim Swarm took the surged task, and its own replacement of the
    # lost one has no node yet: the service runs short for a second, as Swarm meant.
    replacement = Task("t-r", web.id, "", 3, TaskState.RUNNING, TaskState.PENDING)
    tasks = [running(web3, 1, 1), running(web3, 2, 2), replacement]
    after = run(snapshot(nodes(down=3), [web3], tasks), trimmed.memory, now=102.017)
    assert after.actions == (), "surged a second time for a loss already answered"


def test_a_loss_after_the_surge_began_is_still_answered() -> None:
    web = service("web", replicas=3, labels=MANAGED)
    tasks = [running(web, 1, 1), running(web, 2, 2), running(web, 3, 3)]
    before = run(snapshot(nodes(), [web], tasks), Memory(), now=100.0)
    surged = run(snapshot(nodes(down=3), [web], tasks[:2]), before.memory, now=101.0)
    (surge,) = surged.actions
    web4 = replace(web, replicas=4, labels={**web.labels, **surge.set_labels}, version=101)
    # node-2 goes down too while the surge runs: that loss is new.
    on_1 = [running(web4, 1, 1), running(web4, 1, 4)]
    both_down = [
        node(1, manager=True),
        node(2, state=NodeState.DOWN),
        node(3, state=NodeState.DOWN),
    ]
    during = run(snapshot(both_down, [web4], on_1), surged.memory, now=103.0)
    assert during.memory.lost[web.id][0] == 1
