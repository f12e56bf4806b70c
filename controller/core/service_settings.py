"""Per-service settings for this cycle: file rules and labels merged, last good kept.

A clean resolution depends only on the policy, the service's ID, name and labels, which
rarely change between cycles; it is kept for the policy in force (see `_Clean`).
"""

from __future__ import annotations

from collections.abc import Mapping

from controller.core.decisions import Decision, Outcome
from controller.core.model import ClusterSnapshot
from controller.policy import Policy, ResolvedService, resolve_service

_Key = tuple[str, str, frozenset[tuple[str, str]]]


class _Clean:
    """Clean resolutions under one policy object (held, so its identity stays unique)."""

    _current: _Clean | None = None
    LIMIT = 1 << 16

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.entries: dict[_Key, ResolvedService] = {}

    @classmethod
    def for_policy(cls, policy: Policy) -> _Clean:
        if cls._current is None or cls._current.policy is not policy:
            cls._current = cls(policy)
        return cls._current

    def remember(self, key: _Key, result: ResolvedService) -> None:
        if len(self.entries) >= self.LIMIT:
            self.entries.clear()  # services come and go; start over rather than grow
        self.entries[key] = result


def resolve_settings(
    snapshot: ClusterSnapshot,
    policy: Policy,
    previous: Mapping[str, ResolvedService],
) -> tuple[dict[str, ResolvedService], list[Decision]]:
    resolved: dict[str, ResolvedService] = {}
    decisions: list[Decision] = []
    clean = _Clean.for_policy(policy)
    for service in snapshot.services:
        key = (service.id, service.name, frozenset(service.labels.items()))
        result = clean.entries.get(key)
        if result is None:
            result = resolve_service(
                policy,
                service_name=service.name,
                service_id=service.id,
                labels=service.labels,
                previous=previous.get(service.id),
            )
            if not result.errors:  # only a clean result is independent of `previous`
                clean.remember(key, result)
        resolved[service.id] = result
        for error in result.errors:
            outcome = Outcome.KEEP_LAST_GOOD if result.stale else Outcome.UNMANAGED
            decisions.append(
                Decision(
                    rule="policy", subject=f"service {service.name}", outcome=outcome, reason=error
                )
            )
    for item in snapshot.unreadable:
        decisions.append(
            Decision(
                rule="observe",
                subject=f"{item.kind} {item.name}",
                outcome=Outcome.SKIP,
                reason=item.reason,
            )
        )
    return resolved, decisions
