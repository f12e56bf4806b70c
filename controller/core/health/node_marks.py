"""The node labels that make health, quarantine and workload-health state durable.

Everything lives on the node itself, in Swarm's Raft store, so a restarted controller
keeps it: a failed node stays failed until its report lapses, a quarantine ends on time,
a service stays off the node it kept failing on.

- `swarm-placement.health.<source>` = `<state>,<until>,<reason>`: the last non-ok report
  of one source (`webhook`, `plugin.<name>`), until epoch seconds.
- `swarm-placement.quarantine-until` (epoch seconds) and `swarm-placement.quarantine-reason`:
  kept after the quarantine ends, as its mark; failures before `until` never count again.
- `swarm-placement.paused` = `health`, `quarantine` or both: the controller paused the node
  and will set it active again; a node paused by an operator carries no such label and is
  left alone.
- `swarm-placement.unhealthy.<service>` = epoch seconds: the service was moved off this node
  because its tasks kept failing there (see workload.py); with the deny label.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from controller.core.labels import OWN_PREFIX
from controller.core.outside_inputs import HealthState

HEALTH_PREFIX = OWN_PREFIX + "health."
QUARANTINE_UNTIL = OWN_PREFIX + "quarantine-until"
QUARANTINE_REASON = OWN_PREFIX + "quarantine-reason"
PAUSED = OWN_PREFIX + "paused"
UNHEALTHY_PREFIX = OWN_PREFIX + "unhealthy."

PAUSE_HEALTH, PAUSE_QUARANTINE = "health", "quarantine"
MAX_REASON = 200


def clean_reason(text: str) -> str:
    """One printable line, at most MAX_REASON characters (labels are shown everywhere)."""
    flat = "".join(ch if ch.isprintable() else " " for ch in text).strip()
    return flat[:MAX_REASON]


@dataclass(frozen=True, slots=True)
class HealthMark:
    source: str
    state: HealthState
    until: float
    reason: str = ""

    def value(self) -> str:
        return f"{self.state.value},{self.until:.3f},{clean_reason(self.reason)}"


def health_key(source: str) -> str:
    return HEALTH_PREFIX + source


def read_health_marks(labels: Mapping[str, str]) -> tuple[HealthMark, ...]:
    """Every readable health mark on a node; a garbled one reads as failed until now
    is never true, so it is dropped (and removed by the next write)."""
    out = []
    for key, raw in sorted(labels.items()):
        if not key.startswith(HEALTH_PREFIX):
            continue
        state, _, rest = raw.partition(",")
        until, _, reason = rest.partition(",")
        try:
            parsed = HealthMark(key.removeprefix(HEALTH_PREFIX), HealthState(state), float(until))
        except ValueError:
            continue
        if math.isfinite(parsed.until) and parsed.state is not HealthState.OK:
            out.append(HealthMark(parsed.source, parsed.state, parsed.until, reason))
    return tuple(out)


def read_float(labels: Mapping[str, str], key: str) -> float | None:
    try:
        value = float(labels[key])
    except (KeyError, ValueError):
        return None
    return value if math.isfinite(value) else None


def paused_for(labels: Mapping[str, str]) -> frozenset[str]:
    """Why the controller holds this node paused (empty: it does not)."""
    return frozenset(p for p in labels.get(PAUSED, "").split(",") if p)


def format_paused(reasons: Iterable[str]) -> str:
    return ",".join(sorted(set(reasons)))


def unhealthy_key(service_name: str) -> str:
    return UNHEALTHY_PREFIX + service_name


def unhealthy_marks(labels: Mapping[str, str]) -> dict[str, float]:
    """Service name -> when it was moved off this node for failing here."""
    out = {}
    for key in labels:
        if key.startswith(UNHEALTHY_PREFIX):
            since = read_float(labels, key)
            out[key.removeprefix(UNHEALTHY_PREFIX)] = since if since is not None else 0.0
    return out
