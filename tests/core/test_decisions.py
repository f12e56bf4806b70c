"""Decisions: subjects named alike, actions held as objects, and text for the log."""

from __future__ import annotations

from controller.core.actions import (
    SetMirror,
    SetNodeAvailability,
    SetReplicas,
    SetServiceConstraints,
    describe,
    subject_of,
)
from controller.core.context import PlanContext, Rule, RuleOutput, RuleSpec
from controller.core.decisions import Decision, Outcome
from controller.core.memory import Memory
from controller.core.model import Availability
from controller.core.plan import plan
from controller.policy import Policy

from .builders import MANAGED, node, running, service, snapshot


def test_subject_of_names_each_kind_of_write_by_name() -> None:
    assert subject_of(SetReplicas("s-abc", "web", 1, 2)) == "service web"
    assert subject_of(SetNodeAvailability("n2", "node-2", 1, Availability.PAUSE)) == "node node-2"
    assert subject_of(SetMirror("", 1)) == "mirror"


def test_a_deferred_write_names_its_service_by_name_not_id() -> None:
    web = service("web", replicas=2, labels=MANAGED)
    snap = snapshot([node(1, manager=True), node(2)], [web], [running(web, 1, 1)])
    first = SetReplicas(web.id, web.name, web.version, 3, set_labels={"a": "1"})
    second = SetServiceConstraints(web.id, web.name, web.version, ("node.id!=n2",))

    def writes(name: str, action: SetReplicas | SetServiceConstraints) -> Rule:
        def rule(ctx: PlanContext) -> RuleOutput:
            note = Decision(name, subject_of(action), Outcome.WRITE, "test", action)
            return RuleOutput(actions=(action,), decisions=(note,))

        return rule

    result = plan(
        snapshot=snap,
        policy=Policy.default(),
        memory=Memory(),
        now=1000.0,
        rules=(
            RuleSpec("first", writes("first", first)),
            RuleSpec("second", writes("second", second)),
        ),
    )
    (deferred,) = [d for d in result.decisions if d.outcome == Outcome.DEFER]
    assert deferred.rule == "second" and deferred.subject == "service web"
    assert deferred.action == second and deferred.action_text == describe(second)


def test_the_line_shows_the_action_as_text_and_the_outcome_as_its_value() -> None:
    action = SetReplicas("s-abc", "web", 1, 2, set_labels={"a": "1"})
    decision = Decision("owners", "service web", Outcome.KEEP_LAST_GOOD, "why", action)
    assert (
        decision.line() == "[owners] service web: keep-last-good - why (service web: replicas = 2)"
    )
    assert decision.logged().line() == decision.line()
    # An action holding a dict does not hash; the decision still does (sets of decisions).
    assert (
        len({decision, Decision("owners", "service web", Outcome.KEEP_LAST_GOOD, "why", action)})
        == 1
    )
