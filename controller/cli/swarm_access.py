"""What the read-only commands (plan, explain, snapshot) share: a manager, a policy and
one dry-run plan.

Errors become `CommandError` with the exit code the command returns: 2 for what the
user must fix (a bad policy file, an endpoint that is not a manager), 1 for trouble
reaching the engine.
"""

from __future__ import annotations

import sys
from pathlib import Path

import docker

from controller.adapters.decision_log import read_decisions
from controller.adapters.engine import (
    DockerUnavailableError,
    NotAManagerError,
    check_manager,
    connect,
)
from controller.adapters.policy_file import PolicyFileError, load_policy_file
from controller.core.explain import Past
from controller.core.rules import declared_settings
from controller.policy import Policy
from controller.runtime.dry_run import DryRun, plan_once

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


class CommandError(Exception):
    def __init__(self, lines: list[str], code: int) -> None:
        self.lines, self.code = lines, code
        super().__init__("\n".join(lines))

    def report(self) -> int:
        """Print the message on stderr; the command's exit code."""
        print("\n".join(self.lines), file=sys.stderr)
        return self.code


def load_policy(path: Path | None, command: str) -> Policy:
    if path is None:
        return Policy.default(declared_settings())
    try:
        return load_policy_file(path).policy
    except PolicyFileError as exc:
        raise CommandError([*exc.errors, f"{command}: the policy {path} is invalid"], 2) from None


def connect_manager(command: str) -> docker.DockerClient:
    """A client for the manager at DOCKER_HOST (checked to be one)."""
    try:
        client = connect()
        check_manager(client)
    except NotAManagerError as exc:
        raise CommandError([f"{command}: {exc}"], EXIT_USAGE) from None
    except DockerUnavailableError as exc:
        raise CommandError([f"{command}: {exc}"], EXIT_FAILED) from None
    return client


def dry_plan(policy: Policy, command: str) -> DryRun:
    """One observation and one plan of the manager at DOCKER_HOST, nothing written."""
    client = connect_manager(command)
    try:
        return plan_once(client, policy)
    except DockerUnavailableError as exc:
        raise CommandError([f"{command}: {exc}"], EXIT_FAILED) from None
    finally:
        client.close()


def read_log(path: str | None, command: str) -> list[Past]:
    """The decisions in the controller's log at `path` (`-`: standard input), oldest first;
    none without a path."""
    if path is None:
        return []
    if path == "-":
        return read_decisions(sys.stdin)
    try:
        with Path(path).open(encoding="utf-8", errors="replace") as lines:
            return read_decisions(lines)
    except OSError as exc:
        raise CommandError(
            [f"{command}: cannot read {path}: {exc.strerror or exc}"], EXIT_USAGE
        ) from None
