"""The decision log reads back as written, in both formats, through `docker service logs`."""

from __future__ import annotations

import io

from controller.adapters.decision_log import read_decisions
from controller.core.actions import SetServiceConstraints
from controller.core.decisions import Decision, LoggedDecision, Outcome
from controller.runtime.tracing import DecisionLog

MOVE = Decision(
    "owners",
    "service db",
    Outcome.MOVE,
    'a task from node-1 to node-2: failback to preferred owner #1 node-2 ("quoted")',
    action=SetServiceConstraints("s1", "db", 3, ("node.id!=abc",)),
)
KEEP = Decision("owners", "service web", Outcome.KEEP, "node-3 is preferred, but failback is never")


def _written(fmt: str) -> list[str]:
    out = io.StringIO()
    log = DecisionLog(out, fmt)  # type: ignore[arg-type]
    log.write([MOVE, KEEP], now=1_700_000_000.0)
    log.note("dry-run: would do something", now=1_700_000_000.0)
    return out.getvalue().splitlines()


def test_both_formats_read_back_with_and_without_the_service_logs_prefix() -> None:
    for fmt in ("logfmt", "json"):
        lines = _written(fmt)
        prefixed = [f"placement_controller.1.x3k@node-1    | {line}" for line in lines]
        for source in (lines, prefixed):
            read = read_decisions([*source, "garbage", "decision time=x rule=broken"])
            assert [p.decision for p in read] == [MOVE.logged(), KEEP.logged()], fmt
            assert read[0].decision == LoggedDecision(
                "owners",
                "service db",
                "move",
                MOVE.reason,
                "service db: constraints = ['node.id!=abc']",
            )
            assert read[0].time == "2023-11-14T22:13:20.000+00:00"
