"""Test-only: park the reconcile worker right after a named step, as an executor wrapper.

`PLACEMENT_TEST_PAUSE_AFTER=preempt` makes the worker block for good once it has
executed an action whose decision outcome is `preempt` (likewise `restore`, `surge`,
`trim`, ...). The process stays alive with the rest of the cycle unwritten, so a crash
test can SIGKILL it exactly between two writes of one operation. Unset, the executor is
returned as it is. The production image does not carry this module at all
(deploy/Dockerfile deletes it, and the loop goes without it).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable

from controller.adapters.writes import Executor
from controller.core.actions import Action
from controller.core.decisions import Decision

PAUSE_ENV = "PLACEMENT_TEST_PAUSE_AFTER"


def step_of(action: Action, decisions: Iterable[Decision]) -> str | None:
    """The outcome of the decision that produced the action (one write per object)."""
    return next((d.outcome for d in decisions if d.action == action), None)


def pausing(
    execute: Executor,
    decisions: Callable[[], Iterable[Decision]],
    say: Callable[[str], None],
) -> Executor:
    """`execute`, parking after the step PAUSE_ENV names; `decisions` are the plan's."""
    wanted = os.environ.get(PAUSE_ENV)
    if not wanted:
        return execute

    def execute_then_maybe_park(action: Action) -> None:
        execute(action)
        if step_of(action, decisions()) == wanted:
            say(f"test hook: paused after {wanted} ({PAUSE_ENV})")
            threading.Event().wait()  # until the process is killed

    return execute_then_maybe_park
