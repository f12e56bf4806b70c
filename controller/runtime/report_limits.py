"""How fast the health webhook takes reports: per caller, per node, and no replays.

Each `failed` the controller acts on evicts every managed task from its node at once.
The panic threshold caps how many nodes are out together, not how often: a token holder,
or a monitor that flaps, could rotate `failed` from node to node within the share and
evict a node's worth of tasks every cycle. So, with the caller named by its address:

- **posts per caller**: a token bucket (60 a minute, in bursts of 60), checked before
  the token is, so a flood costs a refusal each and nothing more;
- **escalations per caller**: a report that makes a node worse than the webhook's word
  in force (nothing or `ok` to `degraded` or `failed`, `degraded` to `failed`) spends
  one of 3, given back at one a minute; repeating a word in force, or a release, is free;
- **flap damping per node**: a node made worse 3 times within 10 minutes, by whoever,
  takes no 4th until the first of them is 10 minutes old;
- **replays** (optional, `--health-replay-window`): each post carries `at`, when the
  monitor made it, within the window of the controller's clock, and later than the last
  taken for that node.

A refusal is a 429 with `Retry-After` (409 for a replay, 422 for a missing `at`).
"""

from __future__ import annotations

import math
from collections import OrderedDict, deque
from dataclasses import dataclass, field

from controller.core.outside_inputs import HealthState

MAX_CALLERS = 4096  # the least recently seen is forgotten beyond this


@dataclass(frozen=True)
class ReportLimits:
    posts_per_minute: float = 60.0
    escalations: int = 3
    escalation_seconds: float = 60.0  # one escalation given back every this long
    flaps: int = 3  # escalations of one node within flap_seconds before it is damped
    flap_seconds: float = 600.0
    replay_seconds: float | None = None  # with it, `at` is required within this of now


class ReportRefusedError(Exception):
    def __init__(self, status: int, message: str, result: str, retry_after: float = 0.0):
        super().__init__(message)
        self.status, self.message, self.result = status, message, result
        self.retry_after = retry_after


@dataclass
class _Bucket:
    capacity: float
    per_second: float
    level: float = math.inf
    at: float = 0.0

    def take(self, now: float) -> float:
        """0 when one was taken; else the seconds until one is there."""
        self.level = min(self.capacity, self.level + (now - self.at) * self.per_second)
        self.at = now
        if self.level >= 1:
            self.level -= 1
            return 0.0
        return (1 - self.level) / self.per_second


@dataclass
class _Caller:
    posts: _Bucket
    escalations: _Bucket


@dataclass
class ReportGate:
    limits: ReportLimits = field(default_factory=ReportLimits)
    _callers: OrderedDict[str, _Caller] = field(default_factory=OrderedDict)
    _escalated: dict[str, deque[float]] = field(default_factory=dict)  # node -> times
    _last_at: dict[str, float] = field(default_factory=dict)  # node -> newest `at` taken

    def _caller(self, address: str) -> _Caller:
        caller = self._callers.pop(address, None)
        if caller is None:
            limits = self.limits
            caller = _Caller(
                _Bucket(limits.posts_per_minute, limits.posts_per_minute / 60.0),
                _Bucket(limits.escalations, 1.0 / limits.escalation_seconds),
            )
        self._callers[address] = caller  # the most recent last
        while len(self._callers) > MAX_CALLERS:
            self._callers.popitem(last=False)
        return caller

    def admit(self, address: str, now: float) -> None:
        """Before anything is read: ReportRefusedError when this caller posts too fast."""
        wait = self._caller(address).posts.take(now)
        if wait:
            raise ReportRefusedError(
                429,
                f"too many posts from {address}: try again in {math.ceil(wait)} s",
                "rate-limited",
                wait,
            )

    def check_at(self, node_id: str, at: float | None, now: float) -> None:
        window = self.limits.replay_seconds
        if window is None:
            return
        if at is None:
            raise ReportRefusedError(
                422, "at: required (when the report was made, epoch seconds)", "invalid"
            )
        if abs(now - at) > window:
            raise ReportRefusedError(
                422,
                f"at: {at:.0f} is more than {window:g} s from this controller's clock "
                f"({now:.0f}): a replay, or a clock that is off",
                "stale",
            )
        last = self._last_at.get(node_id)
        if last is not None and at <= last:
            raise ReportRefusedError(
                409, f"at: a report made at {last:.3f} was taken already: a replay", "stale"
            )

    def check_escalation(
        self, address: str, node_id: str, state: HealthState, now_state: HealthState, now: float
    ) -> None:
        """ReportRefusedError when this report would make the node worse too often."""
        if state.severity <= now_state.severity:
            return  # the same word again, or a release: free
        limits = self.limits
        times = self._escalated.setdefault(node_id, deque())
        while times and now - times[0] >= limits.flap_seconds:
            times.popleft()
        if len(times) >= limits.flaps:
            wait = limits.flap_seconds - (now - times[0])
            raise ReportRefusedError(
                429,
                f"node {node_id} was reported worse {len(times)} times within "
                f"{limits.flap_seconds:g} s: damped for {math.ceil(wait)} s",
                "damped",
                wait,
            )
        wait = self._caller(address).escalations.take(now)
        if wait:
            raise ReportRefusedError(
                429,
                f"{address} reported {limits.escalations} nodes worse lately: the next "
                f"in {math.ceil(wait)} s",
                "rate-limited",
                wait,
            )
        times.append(now)

    def taken(self, node_id: str, at: float | None) -> None:
        if at is not None:
            self._last_at[node_id] = max(at, self._last_at.get(node_id, at))
