"""What-if scenarios: `fail node-2; wait 60s; restore node-2; wait 120s`.

Steps are separated by `;` (or new lines) and run in order; only `wait` lets time pass.
Every problem names the step, its text and what was expected, e.g.
`scenario: step 3 "wiat 60s": unknown verb wiat; expected fail, restore, wait, ...`.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass

from controller.policy.value_syntax import PolicyValueError, parse_duration

# verb -> what it does to the simulated swarm (for the error message and the docs)
NODE_VERBS = {
    "fail": "the node's engine dies: Swarm marks it down after the heartbeat grace",
    "restore": "the node's engine comes back and the node rejoins, ready",
    "drain": "an operator drains the node: its tasks are replaced elsewhere at once",
    "pause": "an operator pauses the node: it keeps its tasks and takes no new ones",
    "activate": "an operator makes the node active again",
}
VERBS = ("fail", "restore", "wait", "drain", "pause", "activate")
MAX_STEPS = 1000
MAX_SECONDS = 7 * 24 * 3600.0


class ScenarioError(ValueError):
    """A scenario that cannot be run; the message names the step and what was expected."""


@dataclass(frozen=True, slots=True)
class Step:
    index: int  # 1-based, as the messages count
    text: str
    verb: str
    node: str = ""  # hostname (or node ID) for node verbs
    seconds: float = 0.0  # for wait

    def describe(self) -> str:
        return f"wait {self.seconds:g}s" if self.verb == "wait" else f"{self.verb} {self.node}"


def parse_scenario(text: str, *, nodes: Collection[str]) -> tuple[Step, ...]:
    """Parse a scenario against the snapshot's node names (hostnames or IDs)."""
    parts = [p.strip() for p in re.split(r"[;\n]", text)]
    steps: list[Step] = []
    for raw in parts:
        if not raw:
            continue
        index = len(steps) + 1
        if index > MAX_STEPS:
            raise ScenarioError(f"scenario: more than {MAX_STEPS} steps")
        steps.append(_parse_step(index, raw, nodes))
    if not steps:
        raise ScenarioError(
            'scenario: no steps; expected steps such as "fail node-2; wait 60s; restore node-2"'
        )
    return tuple(steps)


def _parse_step(index: int, raw: str, nodes: Collection[str]) -> Step:
    where = f'scenario: step {index} "{raw}"'
    words = raw.split()
    verb = words[0].lower()
    if verb not in VERBS:
        raise ScenarioError(f"{where}: unknown verb {words[0]}; expected {', '.join(VERBS)}")
    if len(words) != 2:
        what = "a duration, e.g. wait 60s" if verb == "wait" else f"one node, e.g. {verb} node-2"
        raise ScenarioError(f"{where}: expected {what}")
    arg = words[1]
    if verb == "wait":
        try:
            seconds = parse_duration(arg)
        except PolicyValueError:
            raise ScenarioError(
                f"{where}: {arg} is not a duration; expected e.g. 60s, 2m or 1h30m"
            ) from None
        if seconds > MAX_SECONDS:
            raise ScenarioError(f"{where}: at most {MAX_SECONDS / 86400:g} days per wait")
        return Step(index, raw, verb, seconds=seconds)
    if arg not in nodes:
        known = ", ".join(sorted(nodes)[:20])
        raise ScenarioError(f"{where}: no node {arg} in the snapshot (nodes: {known})")
    return Step(index, raw, verb, node=arg)
