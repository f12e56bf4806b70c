"""Which services each node must refuse: the deny labels, from every reason at once.

`swarm-placement.deny.<service>=true` on a node makes the constraint enforcer stop that
service's tasks there at once and keeps new ones away (every managed service carries the
matching steering constraint). The set is recomputed each cycle from its reasons, so a
label with no reason left is removed, whoever wrote it:

- the node is `failed`: every managed service but a global one (its task cannot run
  elsewhere: if the report is right the task is lost already, if wrong the refusal
  would stop the one that serves);
- the node is `degraded`: preemptible managed services with tasks there, a batch of at
  most `budgets.actions-per-node` services at a time, the next batch once the last one
  runs its replicas elsewhere; those already refused stay refused while it is degraded
  (in a health panic, panic.py, no next batch starts). A global service is not moved (its
  task there cannot run elsewhere: refusing it is a loss, not a move), nor is a service
  whose data is local to its node (core/kernel/local_data.py: moved, it starts empty);
- the service failed there too often (workload.py);
- a placement plugin vetoes the node for the service, unless that plugin vetoes more than
  `controller.health-panic-threshold` of the ready and active nodes that may take it, or
  the vetoes of all plugins, with every other outside input that keeps the service off
  a node (reported, suspected or quarantined nodes, its move-offs), would take it past
  that one blast-radius cap (core/kernel/blast_radius.py). Then they are set aside for
  the cycle, and a decision says so: a plugin gone wrong must not take a service off
  every node at once, nor add its share to the others'. Vetoes come last: they are
  advice asked again every cycle. A service whose data is local is not moved by a veto
  either.
Every eviction these labels cause is charged to the availability ledger by the nodes rule
(global services included: each node's task is one replica).
Removing a deny label moves nothing back: it only lets the node take the service again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from controller.core.counts import active_counts
from controller.core.decisions import Decision, Outcome
from controller.core.health.assess import Assessment
from controller.core.kernel.blast_radius import SETTING, ServiceRadius, named
from controller.core.kernel.ledger import up_tasks
from controller.core.kernel.local_data import data_stays
from controller.core.labels import DENY_LABEL_PREFIX, DENY_VALUE
from controller.core.model import ClusterSnapshot, Service, ServiceMode
from controller.core.outside_inputs import HealthState, PluginVeto
from controller.policy import ServiceSettings

RULE = "health"


@dataclass
class DenyPlan:
    # Node id -> service name -> why it is refused there.
    wanted: dict[str, dict[str, str]] = field(default_factory=dict)
    decisions: list[Decision] = field(default_factory=list)

    def deny(self, node_id: str, service_name: str, why: str) -> None:
        self.wanted.setdefault(node_id, {}).setdefault(service_name, why)


def denied_on(labels: Mapping[str, str]) -> set[str]:
    return {
        k.removeprefix(DENY_LABEL_PREFIX)
        for k, v in labels.items()
        if k.startswith(DENY_LABEL_PREFIX) and v == DENY_VALUE
    }


def _running_elsewhere(snapshot: ClusterSnapshot, service: Service, node_id: str) -> bool:
    """The service runs its replicas without this node, counted as the availability ledger
    counts what is up (a global one: nothing to wait for)."""
    if service.mode is not ServiceMode.REPLICATED:
        return True
    running = sum(1 for t in up_tasks(snapshot, service) if t.node_id != node_id)
    return running >= (service.replicas or 0) and not active_counts(snapshot, service.id).get(
        node_id
    )


def _stays_on_degraded(service: Service, settings: ServiceSettings) -> str | None:
    """Why a degraded node keeps the service's tasks, or None when they may move off."""
    if service.mode is not ServiceMode.REPLICATED:
        return "global: its task there cannot run elsewhere"
    return data_stays(service, settings)


def plan_denials(
    *,
    observed: ClusterSnapshot,
    effective: ClusterSnapshot,
    assessment: Assessment,
    managed: tuple[Service, ...],
    settings: Mapping[str, ServiceSettings],
    batch: int,
    move_offs: Mapping[str, Mapping[str, float]],
    vetoes: tuple[PluginVeto, ...],
    radii: Mapping[str, ServiceRadius],
) -> DenyPlan:
    plan = DenyPlan()
    by_id = {s.id: s for s in managed}
    for node in observed.nodes:
        verdict = assessment.verdict(node)
        if verdict.health is HealthState.FAILED:
            for service in managed:
                if service.mode is not ServiceMode.GLOBAL:
                    plan.deny(node.id, service.name, "node failed")
                elif active_counts(observed, service.id).get(node.id):
                    plan.decisions.append(
                        Decision(
                            RULE,
                            f"service {service.name}",
                            Outcome.KEEP,
                            f"node {node.hostname} is reported failed, but {service.name} "
                            "keeps its task there: global, it cannot run elsewhere, and "
                            "a report may be wrong",
                        )
                    )
        elif verdict.health is HealthState.DEGRADED:
            _degraded(
                plan,
                observed,
                node.id,
                managed=managed,
                settings=settings,
                batch=batch,
                panic=assessment.panic is not None,
            )
        for name in move_offs.get(node.id, {}):
            plan.deny(node.id, name, "keeps failing here")
    _vetoes(plan, effective, by_id, vetoes, radii=radii, settings=settings)
    return plan


def _degraded(
    plan: DenyPlan,
    observed: ClusterSnapshot,
    node_id: str,
    *,
    managed: tuple[Service, ...],
    settings: Mapping[str, ServiceSettings],
    batch: int,
    panic: bool,
) -> None:
    node = observed.node_by_id[node_id]
    hostname = node.hostname
    movable = _movable(plan, observed, node_id, managed=managed, settings=settings)
    refused = [s for s in movable if s.name in denied_on(node.labels)]
    for service in refused:
        plan.deny(node_id, service.name, "node degraded")
    here = [s for s in movable if s not in refused and active_counts(observed, s.id).get(node_id)]
    if not here:
        return
    if panic or batch <= 0:
        why = "health panic" if panic else "budgets.actions-per-node is 0"
        plan.decisions.append(
            Decision(
                RULE,
                f"node {hostname}",
                Outcome.KEEP,
                f"degraded, but {why}: no preemptible work moves",
            )
        )
        return
    moving = [s.name for s in refused if not _running_elsewhere(observed, s, node_id)]
    if moving:
        plan.decisions.append(
            Decision(
                RULE,
                f"node {hostname}",
                Outcome.WAIT,
                f"degraded: {', '.join(moving)} still moving off; "
                f"{len(here)} more preemptible service(s) follow",
            )
        )
        return
    ordered = sorted(here, key=lambda s: (settings[s.id].priority, s.name))
    for service in ordered[:batch]:
        plan.deny(node_id, service.name, "node degraded")


def _movable(
    plan: DenyPlan,
    observed: ClusterSnapshot,
    node_id: str,
    *,
    managed: tuple[Service, ...],
    settings: Mapping[str, ServiceSettings],
) -> list[Service]:
    """The preemptible services that may move off a degraded node; a keep for each
    that holds tasks there but stays (its data is local, say)."""
    hostname = observed.node_by_id[node_id].hostname
    preemptible = [
        s for s in managed if settings[s.id].preemptible and settings[s.id].max_unavailable > 0
    ]
    movable = []
    for service in preemptible:
        why = _stays_on_degraded(service, settings[service.id])
        if why is None:
            movable.append(service)
        elif active_counts(observed, service.id).get(node_id):
            plan.decisions.append(
                Decision(
                    RULE,
                    f"service {service.name}",
                    Outcome.KEEP,
                    f"node {hostname} is degraded, but {service.name} keeps its task(s) "
                    f"there: {why}",
                )
            )
    return movable


def _vetoes(
    plan: DenyPlan,
    effective: ClusterSnapshot,
    by_id: Mapping[str, Service],
    vetoes: tuple[PluginVeto, ...],
    *,
    radii: Mapping[str, ServiceRadius],
    settings: Mapping[str, ServiceSettings],
) -> None:
    per_service: dict[str, dict[str, dict[str, PluginVeto]]] = {}
    stays: set[str] = set()
    for veto in vetoes:
        service = by_id.get(veto.service_id)
        if service is not None and data_stays(service, settings[service.id]) is not None:
            stays.add(service.id)
        elif service is not None and veto.node_id in effective.node_by_id:
            by_plugin = per_service.setdefault(veto.service_id, {})
            by_plugin.setdefault(veto.plugin, {}).setdefault(veto.node_id, veto)
    for service_id in sorted(stays):
        service = by_id[service_id]
        plan.decisions.append(
            Decision(
                "plugins",
                f"service {service.name}",
                Outcome.IGNORE,
                f"the placement plugins veto some of its nodes, but "
                f"{data_stays(service, settings[service_id])}",
            )
        )
    for service_id, by_plugin in sorted(per_service.items()):
        _service_vetoes(plan, by_id[service_id], by_plugin, radii[service_id])


def _service_vetoes(
    plan: DenyPlan,
    service: Service,
    by_plugin: Mapping[str, Mapping[str, PluginVeto]],
    radius: ServiceRadius,
) -> None:
    """One service's vetoes, plugin by plugin (node id -> veto): each plugin's set aside
    when it alone takes more nodes than the cap, all set aside when together they would
    leave the service too few; else its denies, charged to its radius."""
    subject = f"service {service.name}"
    usable, cap, share = radius.homes, radius.cap, radius.share
    kept: dict[str, PluginVeto] = {}
    for plugin, nodes in sorted(by_plugin.items()):
        taken = len(usable & set(nodes))
        if taken > cap:
            plan.decisions.append(
                Decision(
                    "plugins",
                    subject,
                    Outcome.IGNORE,
                    f"plugin {plugin} vetoes {taken} of the {len(usable)} ready and active "
                    f"node(s) that may take it, more than {SETTING} {share:.0%} allows "
                    f"({cap}): its vetoes are set aside this cycle",
                )
            )
            continue
        for node_id, veto in nodes.items():
            kept.setdefault(node_id, veto)
    wanted = {n: f"vetoed by plugin {v.plugin}" for n, v in kept.items()}
    refusal = radius.refusal(wanted)
    if refusal is None and usable and usable <= set(kept) | set(radius.off):
        refusal = "it would be kept off every ready and active node it may run on"
    if refusal is not None:
        plan.decisions.append(
            Decision(
                "plugins",
                subject,
                Outcome.IGNORE,
                f"the placement plugins veto it on {len(wanted)} node(s) "
                f"({named(wanted, radius.hostnames)}), but {refusal}: their vetoes are "
                "set aside this cycle rather than leave it too few nodes",
            )
        )
        return
    radius.take(wanted)
    for node_id, veto in sorted(kept.items()):
        plan.deny(node_id, service.name, f"vetoed by plugin {veto.plugin}: {veto.reason}")
