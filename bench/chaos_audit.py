"""Both arms counted alike: the observer's writes and overruns set beside the
controller's decision log, in both directions.

The observer (chaos_sample) sees writes and budget overruns from outside, in every arm.
The decision log says what the controller meant to write. Read together:

- an observed write that no decided write explains is the observer's error, or a write
  the controller made without a decision (either is worth a look); in the Swarm-alone
  arm every observed write is one of these;
- a decided write the observer never saw is a write Docker refused or that lost a
  race, or one the observer missed; a decided write to the unmanaged service counts as
  a write to it whether the observer saw it or not;
- an overrun is "after a controller write" when one of its stops follows, within
  ATTRIBUTION seconds, a write (decided, or observed and unexplained) that could stop
  that service's task on that node: a write to that node, a replica count of that
  service, or constraints of that service that the node no longer meets (its labels
  as the observer last saw them). In the
  dry-run arm the same reading against writes never made measures how often a stop
  meets a write by chance.

The decision log repeats no unchanged decision from one cycle to the next, so a write
retried after a conflict appears once: the windows below allow for that. Pure: reads
one arm's figures (chaos_run.summarize), returns counts and lists.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from chaos_app import STACK, UNMANAGED

LAG = 15.0  # seconds between a decision and the write the observer sees
# Seconds a write may precede the stop it caused: Swarm stops a task a refused
# constraint or a lower count leaves within a second or two, more on a loaded machine.
ATTRIBUTION = 10.0
HELD_BACK = {"refuse", "wait", "defer", "failed", "backoff"}
_NODE_LABELS = re.compile(r": labels set (\{.*?\}) remove (\[.*?\])$")
_CONSTRAINTS = re.compile(r"constraints = (\[.*?\])(?:, evicting from (\[.*?\]))?$")


@dataclass(frozen=True)
class Write:
    t: float
    subject: str  # "service db" (the stack's name) or "node node-2"
    action: str  # the decision's action text ("" for a write only the observer saw)


def _subject(text: str) -> str:
    kind, _, name = text.partition(" ")
    if kind == "service" and name.startswith(f"{STACK}_"):
        name = name[len(STACK) + 1 :]
    return f"{kind} {name}"


def decided_writes(decisions: list[dict[str, Any]]) -> list[Write]:
    """The writes the controller decided on and did not hold back. Per cycle (one time
    stamp), an action counts once for each decision that names it to go ahead (a rule's,
    a guard's allow) and less once for each that holds it back (a guard's refusal,
    deferral or wait, a rule's own deferral, Docker's refusal, a backoff): written if
    anything is left. The config object of the controller's own records is not watched
    by the observer, and is left out."""
    cycles: dict[float, Counter[str]] = {}
    for d in decisions:
        if d.get("action"):
            count = cycles.setdefault(float(d["t"]), Counter())
            count[d["action"]] += -1 if d.get("outcome") in HELD_BACK else 1
    return [
        Write(t, _subject(action.split(":", 1)[0]), action)
        for t, count in sorted(cycles.items())
        for action, left in count.items()
        if left > 0 and not action.startswith("records")
    ]


def observed_writes(run: dict[str, Any]) -> list[Write]:
    return [Write(float(t), str(subject), "") for t, subject, _ in run.get("writes_seen", [])]


def _near(write: Write, others: list[Write], before: float, after: float) -> Write | None:
    for other in others:
        if other.subject == write.subject and write.t - before <= other.t <= write.t + after:
            return other
    return None


def _may_stop(write: Write, service: str, host: str, facts: dict[str, str]) -> bool:
    """Whether this write could stop `service`'s task on `host` (`facts`: that node's
    ID and labels when it stopped)."""
    if write.subject == f"node {host}":
        return _node_write_may_stop(write.action, service)
    if write.subject != f"service {service}":
        return False
    if not write.action:
        return True  # seen, not decided: what it changed is unknown
    match = _CONSTRAINTS.search(write.action)
    if match is None:
        return True  # a replica count: Swarm picks which tasks stop
    if match.group(2) and facts.get("node.id") in ast.literal_eval(match.group(2)):
        return True
    return not _meets(ast.literal_eval(match.group(1)), facts)


def _node_write_may_stop(action: str, service: str) -> bool:
    """A node's availability may stop anything on it; its labels only the services
    whose constraints read them: the controller's marks name their service
    (swarm-placement.deny.app_db), so a mark of another service stops nothing of this
    one. A label that names no service may stop anything."""
    match = _NODE_LABELS.search(action)
    if match is None:
        return True
    keys = [*ast.literal_eval(match.group(1)), *ast.literal_eval(match.group(2))]
    named = [k for k in keys if f".{STACK}_" in k]
    return len(named) < len(keys) or any(k.endswith(f".{STACK}_{service}") for k in named)


def _meets(constraints: list[str], facts: dict[str, str]) -> bool:
    """Whether a node meets the constraints, as Swarm reads them: a label the node does
    not have compares as the empty string. A constraint on anything not in `facts`
    (node.role, a label when the run kept none) is taken as not met: the stop is then
    charged to the write."""
    for text in constraints:
        op = "!=" if "!=" in text else "=="
        key, _, value = (part.strip() for part in text.partition(op))
        if key.startswith("node.labels.") and "labels" in facts:
            have = facts.get(key, "")
        elif key in facts:
            have = facts[key]
        else:
            return False
        if (have == value) != (op == "=="):
            return False
    return True


def _facts(run: dict[str, Any], host: str, t: float) -> dict[str, str]:
    """What constraints read of `host` at `t`: its ID, its hostname and, if the run kept
    them, its labels then (the last change at or before t)."""
    facts = {"node.id": str(run.get("node_ids", {}).get(host, "")), "node.hostname": host}
    changes = run.get("node_labels", {}).get(host)
    if changes:
        labels = changes[0][1]
        for when, seen in changes:
            if float(when) <= t:
                labels = seen
        facts["labels"] = "kept"
        facts.update({f"node.labels.{k}": str(v) for k, v in labels.items()})
    return facts


def audit(run: dict[str, Any]) -> dict[str, Any]:
    """One arm's writes and overruns, read against its decision log (empty for Swarm
    alone). The same reading in every arm."""
    decided = decided_writes(run.get("decisions", []))
    seen = observed_writes(run)
    unexplained = [w for w in seen if _near(w, decided, LAG, 1.0) is None]
    unseen = [w for w in decided if _near(w, seen, 1.0, LAG) is None]
    causes = decided + unexplained
    after_write: list[dict[str, Any]] = []
    overruns = 0
    for service, figures in run["services"].items():
        for i, (t, out) in enumerate(figures.get("overrun_at", [])):
            overruns += 1
            stops = figures.get("overrun_stops", [[]] * (i + 1))[i]
            cause = _cause(run, service, stops, causes)
            if cause is not None:
                after_write.append({"service": service, "t": t, "out": out, **cause})
    unmanaged_subjects = {f"service {u}" for u in UNMANAGED}
    unmanaged = [w for w in [*seen, *unseen] if w.subject in unmanaged_subjects]
    return {
        "observed_writes": len(seen),
        "decided_writes": len(decided),
        "unexplained_writes": [[w.t, w.subject] for w in unexplained],
        "unseen_decided_writes": [[w.t, w.subject, w.action] for w in unseen],
        "unmanaged_writes": len(unmanaged),
        "overruns": overruns,
        "overruns_after_write": after_write,
    }


def _cause(
    run: dict[str, Any], service: str, stops: list[list[Any]], writes: list[Write]
) -> dict[str, Any] | None:
    for stop_t, host in stops:
        facts = _facts(run, str(host), float(stop_t))
        for w in writes:
            if float(stop_t) - ATTRIBUTION <= w.t <= float(stop_t) + 0.5 and _may_stop(
                w, service, str(host), facts
            ):
                return {"stop": [stop_t, host], "write": [w.t, w.subject, w.action]}
    return None
