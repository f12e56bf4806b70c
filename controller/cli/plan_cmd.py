"""`swarm-placement plan`: what the controller would do now, and why; nothing is written.

One observation and one plan, through the same reconciler `run` uses (in dry-run
mode): every action with the rule and the reasons behind it, then what the guards held
back. `-o json` (or `--json`) and `-o yaml` print the same for machines, with each
action's exact fields.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from controller.cli.env_options import add_policy_argument
from controller.cli.output import add_output_option, emit
from controller.cli.render import change
from controller.cli.swarm_access import (
    EXIT_OK,
    CommandError,
    dry_plan,
    load_policy,
)
from controller.core.actions import Action, describe, target_of
from controller.core.clock import utc_time
from controller.core.decisions import Decision, Outcome
from controller.core.mirror import MIRROR_CONFIG
from controller.runtime.dry_run import DryRun

# `plan --exit-code`: there would be writes (as `terraform plan -detailed-exitcode`).
EXIT_CHANGES = 2


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "plan",
        help="show what the controller would do now, and why (writes nothing)",
        description=(
            "Observe the swarm at DOCKER_HOST (a manager) and plan once, exactly as `run` "
            "does in its first cycle, without writing anything. Prints each action with the "
            "rule and reasons behind it, and what the guards held back."
        ),
    )
    add_policy_argument(parser)
    add_output_option(parser, json_flag=True)
    parser.add_argument(
        "--exit-code",
        action="store_true",
        help=f"exit {EXIT_CHANGES} when the plan has writes, 0 when it has none (for CI)",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    try:
        dry = dry_plan(load_policy(args.policy, "plan"), "plan")
    except CommandError as exc:
        return exc.report()
    emit(args, plan_document(dry), lambda: render_plan(dry))
    return EXIT_CHANGES if args.exit_code and dry.plan.actions else EXIT_OK


def _subject(action: Action, hosts: Mapping[str, str]) -> str:
    kind, ident = target_of(action)
    if kind == "node":
        return f"node {hosts.get(ident, ident)}"
    if kind == "mirror":
        return f"config {MIRROR_CONFIG}"
    return f"service {getattr(action, 'service_name', ident)}"


def reasons_for(action: Action, decisions: tuple[Decision, ...]) -> tuple[str, list[Decision]]:
    """The rule that proposed the action, and the decisions that explain it: the one that
    names it and the same rule's other decisions about the same subject."""
    named = [d for d in decisions if d.action == action and d.rule != "guard"]
    rule = named[0].rule if named else "?"
    subject = named[0].subject if named else ""
    related = [d for d in decisions if d.rule == rule and d.subject == subject and d not in named]
    return rule, named + related


def render_plan(dry: DryRun) -> str:
    snap, result = dry.snapshot, dry.plan
    hosts = {n.id: n.hostname for n in snap.nodes}
    when = utc_time(dry.now)
    lines = [
        f"plan at {when}: {len(snap.nodes)} nodes, {len(snap.services)} services, "
        f"{len(snap.tasks)} tasks; nothing was written"
    ]
    if not result.actions:
        lines.append("no actions: the controller would write nothing now")
    for number, action in enumerate(result.actions, 1):
        rule, why = reasons_for(action, result.decisions)
        lines.append("")
        lines.append(f"{number}. [{rule}] {_subject(action, hosts)}: {action.kind}")
        lines.append(f"   change: {change(action, hosts)}")
        for decision in why:
            lines.append(f"   why:    {decision.outcome} - {decision.reason}")
    held = [d for d in result.decisions if d.rule == "guard" or d.outcome == Outcome.DEFER]
    if held:
        lines.append("")
        lines.append("held back this cycle:")
        lines.extend(f"   {d.line()}" for d in held)
    return "\n".join(lines)


def _jsonable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | frozenset | set):
        return [_jsonable(v) for v in value]
    return value


def plan_document(dry: DryRun) -> dict[str, Any]:
    snap, result = dry.snapshot, dry.plan
    hosts = {n.id: n.hostname for n in snap.nodes}
    actions = []
    for action in result.actions:
        rule, why = reasons_for(action, result.decisions)
        kind, ident = target_of(action)
        # What the write states; not what is derived from it when it is made.
        fields = {
            f.name: _jsonable(getattr(action, f.name)) for f in dataclasses.fields(action) if f.init
        }
        actions.append(
            {
                "kind": action.kind,
                "target": {"kind": kind, "id": ident, "name": _subject(action, hosts)},
                "change": describe(action),
                "rule": rule,
                "reasons": [d.as_dict() for d in why],
                "fields": fields,
            }
        )
    return {
        "time": datetime.fromtimestamp(dry.now, UTC).isoformat(),
        "nodes": len(snap.nodes),
        "services": len(snap.services),
        "tasks": len(snap.tasks),
        "actions": actions,
        "decisions": [d.as_dict() for d in result.decisions],
    }
