"""One family for the errors the controller raises on purpose, split by what to do next.

A retryable error says the world may differ on the next try: an engine away, a Raft
election, a write that lost a race, an object removed since it was observed, a peer that
did not answer. The runtime observes afresh and tries again. A terminal error says that
trying again as is cannot help (not a manager, a file that does not parse, no such
service): a command reports it and stops. `cause` is the metric label of a reconcile cycle
that failed on it, and `words` what the log says of it, so the worker decides with one
check. The pure core's errors (a constraint or a record that does not parse) stay value
errors of their own: the core imports nothing from here.
"""

from __future__ import annotations

from typing import ClassVar


class ControllerError(Exception):
    cause: ClassVar[str] = "unexpected"
    words: ClassVar[str] = "unexpectedly"


class RetryableError(ControllerError):
    """The next try may succeed: observe again and retry, with backoff."""


class TerminalError(ControllerError):
    """Retrying as is cannot help: report it and stop."""
