"""The crash-test hook: parks the worker after the named step, and only then."""

from __future__ import annotations

import sys

import pytest

from controller.core.actions import Action, SetReplicas
from controller.core.decisions import Decision, Outcome
from controller.runtime import pause_hook
from controller.runtime.loop import Controller, RunConfig
from controller.runtime.policy_source import PolicySource

LOW = SetReplicas("s1", "low", 7, 4)
HIGH = SetReplicas("s2", "high", 9, 2)
DECISIONS = (
    Decision("preemption", "service high", Outcome.PREEMPT, "pending"),
    Decision("preemption", "service low", Outcome.PREEMPT, "stopped", action=LOW),
    Decision("restore", "service high", Outcome.RESTORE, "room", action=HIGH),
)


def test_the_step_is_the_outcome_of_the_decision_that_made_the_action() -> None:
    assert pause_hook.step_of(LOW, DECISIONS) == "preempt"
    assert pause_hook.step_of(HIGH, DECISIONS) == "restore"
    assert pause_hook.step_of(SetReplicas("s3", "other", 1, 1), DECISIONS) is None


class ParkedError(Exception):
    pass


class FakeEvent:
    def wait(self) -> None:
        raise ParkedError


@pytest.mark.parametrize(
    ("wanted", "parks"), [(None, False), ("restore", False), ("preempt", True)]
)
def test_pauses_only_after_the_named_step(
    monkeypatch: pytest.MonkeyPatch, wanted: str | None, parks: bool
) -> None:
    if wanted is None:
        monkeypatch.delenv(pause_hook.PAUSE_ENV, raising=False)
    else:
        monkeypatch.setenv(pause_hook.PAUSE_ENV, wanted)
    monkeypatch.setattr(pause_hook.threading, "Event", FakeEvent)
    said: list[str] = []
    written: list[object] = []
    execute = pause_hook.pausing(written.append, lambda: DECISIONS, said.append)
    if parks:
        with pytest.raises(ParkedError):
            execute(LOW)
        assert said == ["test hook: paused after preempt (PLACEMENT_TEST_PAUSE_AFTER)"]
    else:
        execute(LOW)
        assert said == []
    assert written == [LOW]  # the write is made before any pause


def test_unset_it_is_the_executor_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(pause_hook.PAUSE_ENV, raising=False)
    written: list[object] = []
    assert pause_hook.pausing(written.append, lambda: DECISIONS, print) == written.append


def test_without_the_module_the_variable_does_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """The production image leaves the hook out (deploy/Dockerfile): the controller then
    writes through its executor as it is, whatever the environment says."""
    monkeypatch.setenv(pause_hook.PAUSE_ENV, "preempt")
    monkeypatch.setitem(sys.modules, "controller.runtime.pause_hook", None)  # not importable
    written: list[Action] = []
    controller = Controller(
        RunConfig(), PolicySource(None), executor=lambda client: written.append,
        handle_signals=False,
    )  # fmt: skip
    assert controller._writer(None) == written.append  # type: ignore[arg-type]
