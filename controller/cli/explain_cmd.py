"""`swarm-placement explain SERVICE`: why its tasks are where they are, and what is next.

Reads the live swarm (one dry-run cycle, as `plan`), and optionally the controller's
decision log for the recent history: `--log FILE`, or `--log -` to read it from stdin,
e.g. `docker service logs placement_controller 2>&1 | swarm-placement explain db --log -`.
The controller keeps no history of its own in Swarm: its decisions are log lines.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from typing import Any

from controller.cli.env_options import add_policy_argument
from controller.cli.output import add_output_option, emit
from controller.cli.swarm_access import (
    EXIT_OK,
    EXIT_USAGE,
    CommandError,
    dry_plan,
    load_policy,
    read_log,
)
from controller.core.explain import Explanation, explain_service, explanation_document

RECENT = 20


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "explain",
        help="explain where a service's tasks run and why",
        description=(
            "For each replica of SERVICE: why it is on its node (the rules' view of that "
            "node and where each setting came from); for each pending task: Swarm's reason "
            "and, per node, the filter that refuses it; then what the controller would do "
            "now and, with --log, its recent decisions about the service."
        ),
    )
    parser.add_argument("service", metavar="SERVICE", help="service name or ID")
    add_policy_argument(parser)
    parser.add_argument(
        "--log",
        metavar="FILE",
        help="the controller's output (its decision log); - reads stdin",
    )
    parser.add_argument(
        "--recent", type=int, default=RECENT, metavar="N", help="logged decisions to show"
    )
    add_output_option(parser, json_flag=True)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    try:
        policy = load_policy(args.policy, "explain")
        history = read_log(args.log, "explain")
        dry = dry_plan(policy, "explain")
    except CommandError as exc:
        return exc.report()
    service = next(
        (s for s in dry.snapshot.services if args.service in (s.name, s.id)),
        None,
    ) or next((s for s in dry.snapshot.services if s.id.startswith(args.service)), None)
    if service is None:
        print(f"explain: no service named {args.service!r}", file=sys.stderr)
        return EXIT_USAGE
    found = explain_service(
        service,
        snapshot=dry.snapshot,
        policy=policy,
        resolved=dry.plan.resolved,
        decisions=dry.plan.decisions,
        history=history,
    )
    recent = found.recent[-args.recent :] if args.recent > 0 else ()
    found = dataclasses.replace(found, recent=tuple(recent))
    emit(
        args,
        explanation_document(found),
        lambda: render_explanation(found, with_log=args.log is not None),
    )
    return EXIT_OK


def render_explanation(found: Explanation, *, with_log: bool) -> str:
    service = found.service
    count = f"{service.replicas} replicas" if service.replicas is not None else "global"
    managed = found.settings is not None and found.settings.settings.managed
    lines = [
        f"service {service.name} ({service.id[:12]}): {service.mode.value}, {count}, "
        + ("managed by the controller" if managed else "not managed by the controller")
    ]
    if found.record:
        lines.append(f"  {found.record}")
    if found.settings is not None:
        lines.append("settings (value, and where it came from):")
        rows = found.settings.setting_rows()
        width = max(len(name) for name, _, _ in rows)
        lines.extend(f"  {name:<{width}}  {value or '-'}  [{src}]" for name, value, src in rows)
        lines.extend(f"  label error: {e}" for e in found.settings.errors)
    if found.constraints:
        lines.append("constraints:")
        lines.extend(f"  {text}  [{whose}]" for text, whose in found.constraints)
    lines.append(f"replicas ({len(found.replicas)} active):")
    for replica in found.replicas:
        task = replica.task
        lines.append(f"  {service.name}.{task.slot} on {replica.node}: {task.state.value}")
        lines.extend(f"      {reason}" for reason in replica.reasons)
        if replica.arrived is not None:
            d = replica.arrived.decision
            lines.append(
                f"      came here: {replica.arrived.time} [{d.rule}] {d.outcome} - {d.reason}"
            )
    if found.pending:
        lines.append(f"pending ({len(found.pending)}):")
    for pending in found.pending:
        lines.append(f"  {service.name}.{pending.task.slot}: Swarm says: {pending.swarm}")
        for host, refusals in pending.nodes:
            lines.append(f"      {host}: {'; '.join(refusals) or 'eligible now'}")
    lines.append("the controller now (a dry-run plan):")
    lines.extend(f"  [{d.rule}] {d.outcome} - {d.reason}" for d in found.now)
    if not found.now:
        lines.append("  nothing to do or say about it")
    if with_log:
        lines.append("recent decisions (from the log):")
        lines.extend(f"  {p.time} {p.decision.line()}" for p in found.recent)
        if not found.recent:
            lines.append("  none about this service")
    return "\n".join(lines)
