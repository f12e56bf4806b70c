"""Per-service settings for this cycle: file rules and labels merged, last good kept."""

from __future__ import annotations

from collections.abc import Mapping

from controller.core.decisions import Decision
from controller.core.model import ClusterSnapshot
from controller.policy import Policy, ResolvedService, resolve_service


def resolve_settings(
    snapshot: ClusterSnapshot,
    policy: Policy,
    previous: Mapping[str, ResolvedService],
) -> tuple[dict[str, ResolvedService], list[Decision]]:
    resolved: dict[str, ResolvedService] = {}
    decisions: list[Decision] = []
    for service in snapshot.services:
        result = resolve_service(
            policy,
            service_name=service.name,
            service_id=service.id,
            labels=service.labels,
            previous=previous.get(service.id),
        )
        resolved[service.id] = result
        for error in result.errors:
            outcome = "keep-last-good" if result.stale else "unmanaged"
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
                outcome="skip",
                reason=item.reason,
            )
        )
    return resolved, decisions
