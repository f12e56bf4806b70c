"""Command-line options that also read a PLACEMENT_* variable, as a stack file sets them.

A variable's value goes through the same conversion as the option's, when the command
that has the option runs: a bad value stops that command with a message naming both
(other commands are unaffected), rather than a traceback or a silent default.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

PREFIX = "PLACEMENT_"
TRUE_WORDS = frozenset({"1", "true", "yes", "on"})
FALSE_WORDS = frozenset({"0", "false", "no", "off", ""})

Group = argparse.ArgumentParser | argparse._ArgumentGroup


def variable(env: str) -> str:
    return PREFIX + env


def option(
    group: Group,
    flag: str,
    *,
    env: str,
    type: Callable[[str], Any] = str,
    what: str = "a value",
    default: Any = None,
    choices: Sequence[str] | None = None,
    help: str | None = None,
    **kwargs: Any,
) -> None:
    """`flag VALUE`, defaulting to $PLACEMENT_<env>, then to `default`."""
    name = variable(env)
    raw = os.environ.get(name)
    if choices is not None:
        what = " or ".join(choices)
        kwargs.setdefault("metavar", "{" + ",".join(choices) + "}")

    def convert(text: str) -> Any:
        try:
            if choices is not None and text not in choices:
                raise ValueError(text)
            return type(text)
        except (ValueError, TypeError):
            raise argparse.ArgumentTypeError(
                f"expected {what}, got {text!r} (from the option or ${name})"
            ) from None

    group.add_argument(
        flag,
        type=convert,
        default=raw if raw is not None else default,
        help=f"{help} [${name}]" if help else f"[${name}]",
        **kwargs,
    )


def parse_switch(text: str, name: str) -> bool:
    word = text.strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    raise argparse.ArgumentTypeError(f"${name}={text!r}: expected true or false")


class _Switch(argparse.Action):
    """Like store_true, but its default may be a variable's text, converted at parse
    time (argparse converts string defaults through `type`)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, **kwargs)

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: Any = None) -> None:
        setattr(namespace, self.dest, True)


def switch(group: Group, flag: str, *, env: str, help: str, default: bool = False) -> None:
    """`flag` alone, or $PLACEMENT_<env> set to true/false (yes/no, on/off, 1/0); a
    switch on by default is turned off by the variable or by `--no-<flag>`."""
    name = variable(env)
    raw = os.environ.get(name)
    if default:
        group.add_argument(
            f"--no-{flag.removeprefix('--')}",
            dest=flag.removeprefix("--").replace("-", "_"),
            action="store_false",
            default=argparse.SUPPRESS,  # the switch's own default stands
            help=f"the opposite of {flag}",
        )
    group.add_argument(
        flag,
        action=_Switch,
        default=raw if raw is not None else default,
        type=lambda text: parse_switch(text, name),
        help=f"{help} [${name}]",
    )


def add_policy_argument(parser: Group) -> None:
    """`--policy FILE`, as every command that reads a policy takes it (unset or empty:
    the built-in defaults)."""
    parser.add_argument(
        "--policy",
        type=Path,
        default=os.environ.get("PLACEMENT_POLICY") or None,
        metavar="FILE",
        help="policy file (default: $PLACEMENT_POLICY, else the built-in defaults)",
    )
