"""`-o table|json|yaml`: data commands print a table for people, JSON or YAML for tools.

The JSON and YAML are the same document (keys sorted); the table is the command's own
rendering of it. `--json` stays as the older spelling of `-o json`.
"""

from __future__ import annotations

import argparse
import io
import json
from collections.abc import Callable
from typing import Any

from ruamel.yaml import YAML

FORMATS = ("table", "json", "yaml")


def add_output_option(parser: argparse.ArgumentParser, *, json_flag: bool = False) -> None:
    parser.add_argument(
        "-o", "--output", choices=FORMATS, default="table", help="how to print (table)"
    )
    if json_flag:
        parser.add_argument(
            "--json", dest="output", action="store_const", const="json", help="-o json"
        )


def emit(args: argparse.Namespace, document: Any, table: Callable[[], str]) -> None:
    if args.output == "json":
        print(json.dumps(document, indent=2, sort_keys=True, default=str))
    elif args.output == "yaml":
        yaml = YAML(typ="safe", pure=True)
        yaml.default_flow_style = False
        out = io.StringIO()
        yaml.dump(json.loads(json.dumps(document, sort_keys=True, default=str)), out)
        print(out.getvalue(), end="")
    else:
        print(table())


def columns(rows: list[list[str]], header: list[str]) -> str:
    """Left-aligned columns, as `docker service ls` prints them."""
    every = [header, *rows]
    widths = [max(len(r[i]) for r in every) for i in range(len(header))]
    lines = ["   ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in every]
    return "\n".join(lines)
