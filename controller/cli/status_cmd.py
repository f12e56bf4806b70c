"""`swarm-placement status`: what the controller holds in the swarm, at a glance.

Read from what Swarm stores, so it needs no running controller and works on a swarm
whose controller is down: the lease (holder and term), every managed service and what
the controller did to it (placed, steered, failed over, preempted, held, moving), the
nodes it pauses, quarantines, marks failed or denies to a service, and, given the
controller's log (`--log`), its last decisions. A suspicion lives only in the running
controller's memory: its web view (/ui) shows it.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from controller.adapters.lease_store import find_leases
from controller.cli.env_options import add_policy_argument
from controller.cli.output import add_output_option, columns, emit
from controller.cli.swarm_access import (
    EXIT_FAILED,
    EXIT_OK,
    CommandError,
    connect_manager,
    load_policy,
    read_log,
)
from controller.core.counts import is_active
from controller.core.explain import Past
from controller.core.kernel.possible_gaps import possible_gaps
from controller.core.labels import exclusion_constraint, is_own_constraint
from controller.core.model import Service
from controller.core.replicas import Operation
from controller.policy import Policy
from controller.runtime.dry_run import DryRun, plan_once
from controller.runtime.view_document import node_marks

STATES = {
    Operation.SURGE: "failed over",
    Operation.SPECULATE: "failed over (speculative)",
    Operation.PREEMPT: "preempted",
    Operation.HOLD: "held",
    Operation.REBALANCE: "moving",
}


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "status",
        help="the lease, managed services, held nodes and last decisions (writes nothing)",
        description=__doc__.splitlines()[0] if __doc__ else None,
    )
    add_policy_argument(parser)
    parser.add_argument(
        "--log",
        metavar="FILE",
        help="the controller's log, or - for stdin (docker service logs ... 2>&1 | ...)",
    )
    parser.add_argument("--recent", type=int, default=10, help="decisions to show (10)")
    add_output_option(parser)
    parser.set_defaults(handler=run)


def service_state(service: Service) -> tuple[str, str]:
    """What the controller did to the service, from what Swarm stores, and the detail."""
    if service.replica_record_error is not None:
        return "record unreadable", service.replica_record_error
    record = service.replica_record
    if record is not None:
        detail = f"replicas {record.written}, the operator's {record.base}"
        return STATES.get(record.operation, record.operation), (
            f"{detail}: {record.detail}" if record.detail else detail
        )
    prefix = exclusion_constraint("")
    kept_off = [
        c
        for c in service.constraints
        if c.startswith(prefix) and is_own_constraint(c, service.name, service.labels)
    ]
    if kept_off:
        return "steered", f"kept off {len(kept_off)} node(s)"
    return "placed", ""


def status_document(
    dry: DryRun, leases: list[Any], recent: list[Past], *, policy: Policy
) -> dict[str, Any]:
    snapshot, resolved = dry.snapshot, dry.plan.resolved
    gaps = {g.service_id: g for g in possible_gaps(snapshot, policy, resolved, dry.plan.decisions)}
    services = []
    for service in sorted(snapshot.services, key=lambda s: s.name):
        settings = resolved.get(service.id)
        if settings is None or not settings.settings.managed:
            continue
        state, detail = service_state(service)
        tasks = snapshot.tasks_of(service.id)
        services.append(
            {
                "name": service.name,
                "id": service.id,
                "state": state,
                "detail": detail,
                "running": sum(1 for t in tasks if t.is_running),
                "active": sum(1 for t in tasks if is_active(t)),
                "replicas": service.replicas,
                "possible_owners_unenforced": (
                    gaps[service.id].as_dict() if service.id in gaps else None
                ),
            }
        )
    nodes = [
        {
            "hostname": node.hostname,
            "id": node.id,
            "state": node.state.value,
            "availability": node.availability.value,
            "marks": marks,
        }
        for node in sorted(snapshot.nodes, key=lambda n: n.hostname)
        if (marks := node_marks(node, dry.plan.decisions, dry.now))
    ]
    return {
        "leases": [
            {
                "name": name,
                "holder": lease.holder if lease else None,
                "term": lease.term if lease else None,
                "renewed_at": lease.renewed_at if lease else None,
                "lifetime": lease.lifetime if lease else None,
                "problem": problem,
            }
            for name, lease, problem in leases
        ],
        "services": services,
        "unmanaged": len(snapshot.services) - len(services),
        "nodes": nodes,
        "decisions": [{"time": p.time, **p.decision.as_dict()} for p in recent],
    }


def render_status(doc: dict[str, Any]) -> str:
    parts = []
    if doc["leases"]:
        rows = [
            [
                lease["name"],
                lease["holder"] or ("(released)" if lease["holder"] == "" else "-"),
                str(lease["term"] if lease["term"] is not None else "-"),
                lease["renewed_at"] or lease["problem"] or "-",
            ]
            for lease in doc["leases"]
        ]
        parts.append(columns(rows, ["LEASE", "HOLDER", "TERM", "RENEWED"]))
    else:
        parts.append("no lease: no controller keeps one in this swarm (a single instance)")
    rows = [
        [
            s["name"],
            s["state"],
            f"{s['running']}/{s['replicas'] if s['replicas'] is not None else 'global'}",
            s["detail"],
        ]
        for s in doc["services"]
    ]
    parts.append(columns(rows, ["SERVICE", "STATE", "RUNNING", "DETAIL"]))
    parts.append(f"({doc['unmanaged']} service(s) not managed)")
    unenforced = [s for s in doc["services"] if s["possible_owners_unenforced"]]
    if unenforced:
        rows = [
            [
                s["name"],
                ", ".join(f"{h} ({c})" for h, c in gap["tasks"].items()),
                gap["why"],
            ]
            for s in unenforced
            if (gap := s["possible_owners_unenforced"])
        ]
        parts.append(columns(rows, ["POSSIBLE OWNERS NOT YET ENFORCED", "TASKS ON", "WHY"]))
    if doc["nodes"]:
        rows = [
            [n["hostname"], n["state"], n["availability"], "; ".join(n["marks"])]
            for n in doc["nodes"]
        ]
        parts.append(columns(rows, ["NODE", "STATE", "AVAILABILITY", "HELD BY THE CONTROLLER"]))
    else:
        parts.append("no node paused, quarantined, failed or denying a service")
    if doc["decisions"]:
        parts.append(
            "\n".join(
                f"{d['time']} [{d['rule']}] {d['subject']}: {d['outcome']} - {d['reason']}"
                for d in doc["decisions"]
            )
        )
    return "\n\n".join(parts)


def run(args: argparse.Namespace) -> int:
    try:
        policy = load_policy(args.policy, "status")
        recent = read_log(args.log, "status")[-args.recent :] if args.recent > 0 else []
        client = connect_manager("status")
        try:
            dry = plan_once(client, policy, clock=time.time)
            leases = find_leases(client)
        except Exception as exc:  # the engine went away between the calls
            raise CommandError([f"status: {exc}"], EXIT_FAILED) from None
        finally:
            client.close()
    except CommandError as exc:
        return exc.report()
    document = status_document(dry, leases, recent, policy=policy)
    emit(args, document, lambda: render_status(document))
    return EXIT_OK
