"""`swarm-placement completion bash|zsh|fish`: shell completion, from argcomplete.

eval "$(swarm-placement completion bash)"      # in ~/.bashrc
"""

from __future__ import annotations

import argparse
from typing import Any

from argcomplete.shell_integration import shellcode


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "completion",
        help='print the shell completion script: eval "$(swarm-placement completion bash)"',
        description=__doc__.splitlines()[0] if __doc__ else None,
    )
    parser.add_argument("shell", choices=("bash", "zsh", "fish"))
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    print(shellcode(["swarm-placement"], shell=args.shell))
    return 0
