"""Executing a plan: a refused write fails alone and waits, failover goes first, a conflict
still ends the cycle. The planner and the observation are stubbed; the executor is fake."""

from __future__ import annotations

import io
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import docker.errors
import pytest
import requests

from controller.adapters.attrs import snapshot_from_attrs
from controller.adapters.engine import ConflictError
from controller.adapters.writes import Rehearsal, naming_refusals
from controller.core.actions import (
    Action,
    SetNodeLabels,
    SetReplicas,
    SetServiceConstraints,
    describe,
)
from controller.core.decisions import Decision, Outcome
from controller.core.memory import Memory
from controller.core.plan import Plan
from controller.core.rules.failover.speculation_memory import SPECULATION_MEMORY
from controller.policy import Policy
from controller.runtime import reconciler as reconciler_module
from controller.runtime.reconciler import Reconciler
from controller.runtime.tracing import DecisionLog, get_tracer, make_tracer_provider
from tests.core.builders import node, snapshot

FIXTURES = Path(__file__).resolve().parents[1] / "adapters" / "fixtures"
BAD = SetServiceConstraints("s-bad", "bad", 3, ("node.role==worker",))
API = SetServiceConstraints("s-api", "api", 4, ("node.labels.rack==r1",))
WEB = SetReplicas("s-web", "web", 5, 4)
NODE = SetNodeLabels("n2", "node-2", 12, set_labels={"swarm-placement.deny.web": "true"})


def refused(
    status: int = 400, text: str = "invalid\n  spec:   bad label"
) -> docker.errors.APIError:
    response = requests.Response()
    response.status_code = status
    return docker.errors.APIError("Client Error", response=response, explanation=text)


class Stage:
    """What the stubbed planner returns, the fake executor's calls and failures, a clock."""

    def __init__(self) -> None:
        self.actions: tuple[Action, ...] = ()
        self.early: tuple[Action, ...] = ()
        self.decisions: tuple[Decision, ...] = ()
        self.calls: list[str] = []
        self.failures: dict[str, Exception] = {}
        self.now = 1000.0
        self.out = io.StringIO()

    def plan(self, *actions: Action, failover: tuple[Action, ...] = ()) -> None:
        self.actions = actions
        self.early = failover
        self.decisions = tuple(
            Decision("failover" if a in failover else "owners", "s", Outcome.WRITE, "why", a)
            for a in actions
        )

    def execute(self, action: Action) -> None:
        self.calls.append(describe(action).split(":")[0])
        failure = self.failures.get(describe(action).split(":")[0])
        if failure is not None:
            raise failure


OBSERVED = snapshot([node(1, manager=True), node(2)], [])


@pytest.fixture
def stage(monkeypatch: pytest.MonkeyPatch) -> Iterator[Stage]:
    stage = Stage()

    def fake_plan(**kwargs: object) -> Plan:
        return Plan(
            actions=stage.actions, decisions=stage.decisions, memory=Memory(), early=stage.early
        )

    monkeypatch.setattr(reconciler_module, "plan", fake_plan)
    yield stage


def make(stage: Stage, execute: Callable[[Action], None] | None = None) -> Reconciler:
    return Reconciler(
        observe=lambda: OBSERVED,
        # Docker's own errors, named as the adapters' executor names them.
        executor=naming_refusals(execute or stage.execute),
        policy=Policy,
        tracer=get_tracer(make_tracer_provider("none")),
        decision_log=DecisionLog(stage.out),
        clock=lambda: stage.now,
    )


def test_a_refused_write_fails_alone_waits_and_is_retried_after(stage: Stage) -> None:
    stage.plan(BAD, API)
    stage.failures["service bad"] = refused()
    r = make(stage)

    first = r.reconcile({"start"})
    assert stage.calls == ["service bad", "service api"], "the rest of the plan still runs"
    assert first.failed == [BAD] and first.executed == [API] and not first.wants_another
    [failed] = first.outcomes
    assert (failed.rule, failed.subject, failed.outcome) == ("execute", "service bad", "failed")
    assert "400 invalid spec: bad label" in failed.reason and "\n" not in failed.reason
    assert failed in first.decisions
    assert 'rule=execute subject="service bad" outcome=failed' in stage.out.getvalue()

    stage.calls.clear()
    stage.now += 4  # within the first wait (5 s)
    second = r.reconcile({"resync"})
    assert stage.calls == ["service api"], "the refused object waits"
    assert [d.outcome for d in second.outcomes] == ["backoff"]
    assert second.failed == [] and second.executed == [API]

    stage.calls.clear()
    stage.now += 2  # the wait is over: tried again, refused again, waits twice as long
    third = r.reconcile({"resync"})
    assert stage.calls == ["service bad", "service api"]
    assert "waits 10 s (refusal 2 in a row)" in third.outcomes[0].reason
    stage.calls.clear()
    stage.now += 9
    r.reconcile({"resync"})
    assert stage.calls == ["service api"]

    del stage.failures["service bad"]
    stage.calls.clear()
    stage.now += 2
    fourth = r.reconcile({"resync"})
    assert stage.calls == ["service bad", "service api"] and fourth.executed == [BAD, API]
    assert fourth.outcomes == []
    stage.calls.clear()
    stage.failures["service bad"] = refused()
    r.reconcile({"resync"})
    assert "waits 5 s (refusal 1 in a row)" in stage.out.getvalue(), "a success starts afresh"


def test_another_write_to_a_waiting_object_is_tried_at_once(stage: Stage) -> None:
    stage.plan(BAD)
    stage.failures["service bad"] = refused(403, "authorization denied by plugin")
    r = make(stage)
    r.reconcile({"start"})
    other = SetServiceConstraints("s-bad", "bad", 3, ("node.role==manager",))
    stage.plan(other)
    stage.calls.clear()
    cycle = r.reconcile({"resync"})
    assert stage.calls == ["service bad"]
    assert cycle.failed == [other] and "403 authorization denied" in cycle.outcomes[0].reason


def test_failover_writes_go_first_behind_only_the_node_writes(stage: Stage) -> None:
    stage.plan(API, WEB, NODE, failover=(WEB,))
    cycle = make(stage).reconcile({"event"})
    assert cycle.executed == [NODE, WEB, API]


def test_a_failover_write_runs_even_when_every_other_write_is_refused(stage: Stage) -> None:
    stage.plan(BAD, API, WEB, failover=(WEB,))
    stage.failures = {"service bad": refused(), "service api": refused(409, "name conflicts")}
    cycle = make(stage).reconcile({"event"})
    assert cycle.executed == [WEB] and cycle.failed == [BAD, API]


def test_a_conflict_still_ends_the_cycle_after_failover(stage: Stage) -> None:
    stage.plan(API, BAD, WEB, failover=(WEB,))
    stage.failures["service api"] = ConflictError("service api changed since it was observed")
    cycle = make(stage).reconcile({"event"})
    assert stage.calls == ["service web", "service api"], "nothing after the conflict"
    assert cycle.executed == [WEB] and cycle.wants_another
    assert cycle.conflict == "service api changed since it was observed"


def test_a_server_error_the_retries_did_not_cure_fails_the_cycle(stage: Stage) -> None:
    stage.plan(BAD)
    stage.failures["service bad"] = refused(503, "swarm has no leader")
    with pytest.raises(docker.errors.APIError):
        make(stage).reconcile({"event"})


def test_a_dry_run_holds_nothing_back(stage: Stage) -> None:
    stage.plan(BAD, WEB, failover=(WEB,))
    r = Reconciler(
        observe=lambda: OBSERVED,
        executor=Rehearsal(lambda text: stage.out.write(text + "\n")),
        policy=Policy,
        tracer=get_tracer(make_tracer_provider("none")),
        decision_log=DecisionLog(stage.out),
        clock=lambda: stage.now,
    )
    cycle = r.reconcile({"plan"})
    assert stage.calls == [] and cycle.outcomes == []
    assert stage.out.getvalue().index("would service web") < stage.out.getvalue().index(
        "would service bad"
    )


@pytest.mark.parametrize("fixture", sorted(FIXTURES.glob("swarm-*.json")), ids=lambda p: p.stem)
def test_a_whole_cycle_runs_from_a_captured_snapshot_without_docker(fixture: Path) -> None:
    # The real plan() on what a real swarm answered; the writes go to a recorder.
    data = json.loads(fixture.read_text())
    observed = snapshot_from_attrs(
        nodes=data["nodes"], services=data["services"], tasks=data["tasks"]
    )
    written: list[Action] = []
    out = io.StringIO()
    r = Reconciler(
        observe=lambda: observed,
        executor=written.append,
        policy=Policy,
        tracer=get_tracer(make_tracer_provider("none")),
        decision_log=DecisionLog(out),
        clock=lambda: 2_000_000_000.0,
    )
    cycle = r.reconcile({"start"})
    assert written and written == cycle.executed, "web is adopted: at least one write"
    assert sorted(map(describe, written)) == sorted(map(describe, cycle.plan.actions))
    managed = {s.id for s in observed.services if s.labels.get("placement.managed") == "true"}
    for action in written:
        service = getattr(action, "service_id", None)
        assert service is None or service in managed, f"an unmanaged service written: {action}"
        assert describe(action) in out.getvalue(), "every write has its decision in the log"


def surges(count: int) -> tuple[SetReplicas, ...]:
    return tuple(SetReplicas(f"s-hot{i}", f"hot{i}", 7, 2) for i in range(count))


def test_failover_writes_go_out_together_and_are_settled_in_plan_order(
    stage: Stage, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Forty surges each waiting on the manager: sent one by one the last leaves long
    after the first. They overlap, at most WRITES_IN_FLIGHT at once, while the node
    write before them and the write after them still go alone and in order."""
    lost = surges(12)
    stage.plan(API, *lost, NODE, failover=lost)
    in_flight, most = 0, 0
    lock = threading.Lock()
    both_in = threading.Barrier(2, timeout=5)  # two surges must be in flight together

    def slow(action: Action) -> None:
        nonlocal in_flight, most
        with lock:
            in_flight += 1
            most = max(most, in_flight)
        if action in lost[:2]:
            both_in.wait()
        time.sleep(0.02)
        stage.execute(action)
        with lock:
            in_flight -= 1

    cycle = make(stage, slow).reconcile({"event"})
    assert 2 <= most <= reconciler_module.WRITES_IN_FLIGHT
    assert stage.calls[0] == "node node-2" and stage.calls[-1] == "service api"
    assert cycle.executed == [NODE, *lost, API], "recorded in the plan's order"


def test_a_conflict_among_failover_writes_lets_the_others_finish_then_ends_the_cycle(
    stage: Stage,
) -> None:
    lost = surges(4)
    stage.plan(API, *lost, failover=lost)
    stage.failures["service hot1"] = ConflictError("service hot1 changed since it was observed")
    stage.failures["service hot2"] = refused()
    cycle = make(stage).reconcile({"event"})
    assert sorted(stage.calls) == [f"service hot{i}" for i in range(4)], "api is not sent"
    assert cycle.executed == [lost[0], lost[3]] and cycle.failed == [lost[2]]
    assert cycle.conflict == "service hot1 changed since it was observed"


def test_an_unexpected_error_among_failover_writes_is_raised_after_the_others(
    stage: Stage,
) -> None:
    lost = surges(3)
    stage.plan(*lost, failover=lost)
    stage.failures["service hot0"] = refused(503, "swarm has no leader")
    r = make(stage)
    with pytest.raises(docker.errors.APIError):
        r.reconcile({"event"})
    assert sorted(stage.calls) == ["service hot0", "service hot1", "service hot2"]


def test_taking_the_lease_over_restarts_speculative_failover_s_wait(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A standby plans every cycle with warm memory; the cycle that first leads must not
    # trim a speculative surge on what it watched as a standby.
    seen: list[float | None] = []

    def fake_plan(*, memory: Memory, now: float, **kwargs: object) -> Plan:
        speculation = memory.slice(SPECULATION_MEMORY)
        seen.append(speculation.watching_since)
        watching = speculation.watching_since
        warm = replace(speculation, watching_since=now if watching is None else watching)
        return Plan(actions=(), decisions=(), memory=memory.with_slice(SPECULATION_MEMORY, warm))

    monkeypatch.setattr(reconciler_module, "plan", fake_plan)
    role: list[str | None] = ["the lease is held elsewhere"]
    clock = [1000.0]
    r = Reconciler(
        observe=lambda: OBSERVED,
        executor=naming_refusals(lambda action: None),
        policy=Policy,
        tracer=get_tracer(make_tracer_provider("none")),
        decision_log=DecisionLog(io.StringIO()),
        clock=lambda: clock[0],
        standby=lambda: role[0],
    )
    for _ in range(3):
        r.reconcile({"resync"})
        clock[0] += 1.0
    role[0] = None  # took the lease over
    r.reconcile({"resync"})
    clock[0] += 1.0
    r.reconcile({"resync"})
    assert seen == [None, 1000.0, 1000.0, None, 1003.0]
