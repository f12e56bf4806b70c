"""`swarm-placement policy`: check policy files, print the schema, show a service's settings.

`check` and `schema` never touch Docker (docker is imported only by `show`), so they run in
CI and in editors' pre-commit hooks.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from controller.adapters.policy_file import PolicyFileError, load_policy_file, load_policy_text
from controller.cli.env_options import add_policy_argument
from controller.cli.output import add_output_option, emit
from controller.core.rules import declared_settings
from controller.policy import Policy, ResolvedService, render_policy_schema, resolve_service

EXIT_OK, EXIT_FAILED, EXIT_INVALID = 0, 1, 2


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "policy",
        help="check policy files, print the schema, show a service's effective settings",
        description="Work with the policy file (apiVersion: placement/v1) and placement.* labels.",
    )
    commands = parser.add_subparsers(dest="policy_command", metavar="SUBCOMMAND")
    parser.set_defaults(handler=lambda args: _usage(parser))

    check = commands.add_parser(
        "check",
        help="validate policy files",
        description="Validate policy files. Exit 0 when all are valid, 2 otherwise; every "
        "problem is printed to stderr as FILE:LINE:COLUMN: PATH = VALUE: EXPECTED.",
    )
    check.add_argument(
        "files", nargs="+", type=Path, metavar="FILE", help="a policy file, or - for standard input"
    )
    check.set_defaults(handler=run_check)

    schema = commands.add_parser(
        "schema",
        help="print the JSON schema of the policy file",
        description="Print the JSON schema of the policy file (the same as policies/schema.json).",
    )
    schema.set_defaults(handler=run_schema)

    show = commands.add_parser(
        "show",
        help="show a live service's effective settings and where each came from",
        description="Read a service from the swarm at DOCKER_HOST, merge the policy file and "
        "its placement.* labels, and print each setting with its source.",
    )
    show.add_argument("service", nargs="?", metavar="SERVICE", help="service name or ID")
    # The older spelling, kept so scripts written for it go on working.
    show.add_argument("--service", dest="service_option", help=argparse.SUPPRESS)
    add_policy_argument(show)
    add_output_option(show)
    show.set_defaults(handler=run_show)


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return EXIT_INVALID


def run_check(args: argparse.Namespace) -> int:
    code = EXIT_OK
    for path in args.files:
        try:
            if str(path) == "-":
                name, policy = "<stdin>", load_policy_text(sys.stdin.read(), source="<stdin>")
            else:
                name, policy = str(path), load_policy_file(path).policy
        except PolicyFileError as exc:
            for line in exc.errors:
                print(line, file=sys.stderr)
            code = EXIT_INVALID
        else:
            print(f"{name}: ok ({policy.describe()})")
    return code


def run_schema(args: argparse.Namespace) -> int:
    sys.stdout.write(render_policy_schema())
    return EXIT_OK


def format_resolved(resolved: ResolvedService, *, policy_name: str) -> str:
    """The `show` report: one row per setting, value in label syntax, then its source."""
    rows = resolved.setting_rows()
    width = max(len(name) for name, _, _ in rows) + 2
    value_width = max(len("VALUE"), *(len(value) for _, value, _ in rows)) + 2
    lines = [
        f"service {resolved.service_name} (id {resolved.service_id})",
        f"policy: {policy_name}",
        "",
        f"{'SETTING':<{width}}{'VALUE':<{value_width}}FROM",
    ]
    lines += [f"{name:<{width}}{value:<{value_width}}{source}" for name, value, source in rows]
    return "\n".join(lines) + "\n"


def run_show(args: argparse.Namespace) -> int:
    name = args.service or args.service_option
    if not name:
        print("policy show: name the service: policy show SERVICE", file=sys.stderr)
        return EXIT_INVALID
    if args.policy is None:
        policy, policy_name = Policy.default(declared_settings()), "none (built-in defaults)"
    else:
        try:
            policy, policy_name = load_policy_file(args.policy).policy, str(args.policy)
        except PolicyFileError as exc:
            print("\n".join(exc.errors), file=sys.stderr)
            return EXIT_INVALID

    # Imported here so that `check` and `schema` never load docker.
    import docker.errors  # noqa: PLC0415
    import requests  # noqa: PLC0415

    from controller.adapters.docker_read import (  # noqa: PLC0415
        ServiceNotFoundError,
        inspect_service_labels,
    )
    from controller.adapters.engine import DockerUnavailableError, connect  # noqa: PLC0415

    try:
        client = connect()
        try:
            service = inspect_service_labels(client, name)
        finally:
            client.close()
    except (
        DockerUnavailableError,
        ServiceNotFoundError,
        docker.errors.DockerException,
        requests.RequestException,
    ) as exc:
        print(f"swarm-placement policy show: {exc}", file=sys.stderr)
        return EXIT_FAILED
    resolved = resolve_service(
        policy, service_name=service.name, service_id=service.id, labels=service.labels
    )
    document = {
        "service": {"id": resolved.service_id, "name": resolved.service_name},
        "policy": policy_name,
        "settings": [
            {"setting": setting, "value": value, "source": source}
            for setting, value, source in resolved.setting_rows()
        ],
        "errors": list(resolved.errors),
    }
    emit(args, document, lambda: format_resolved(resolved, policy_name=policy_name).rstrip("\n"))
    if resolved.error_summary:
        print(resolved.error_summary, file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK
