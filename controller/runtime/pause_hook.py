"""Test-only: park the reconcile worker right after a named step.

`PLACEMENT_TEST_PAUSE_AFTER=preempt` makes the worker block for good once it has
executed an action whose decision outcome is `preempt` (likewise `restore`, `surge`,
`trim`, ...). The process stays alive with the rest of the cycle unwritten, so a crash
test can SIGKILL it exactly between two writes of one operation. Unset, this does nothing.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable

from controller.core.actions import Action
from controller.core.decisions import Decision

PAUSE_ENV = "PLACEMENT_TEST_PAUSE_AFTER"


def step_of(action: Action, decisions: Iterable[Decision]) -> str | None:
    """The outcome of the decision that produced the action (one write per object)."""
    return next((d.outcome for d in decisions if d.action == action), None)


def pause_if_asked(step: str | None, say: Callable[[str], None]) -> None:
    wanted = os.environ.get(PAUSE_ENV)
    if not wanted or step != wanted:
        return
    say(f"test hook: paused after {step} ({PAUSE_ENV})")
    threading.Event().wait()  # until the process is killed
