"""`swarm-placement image build --sandbox NAME`: the controller's image, with no registry.

Builds deploy/Dockerfile on a Debian base made locally by debootstrap, from wheels made
on this host, on the sandbox's first node, and loads it into every node; prints the image
ID to deploy the stack with (`PLACEMENT_IMAGE=sha256:...`).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from controller.sandbox import Sandbox, SandboxError
from controller.sandbox.app_image import build_controller_image, load_into

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "image",
        help="build the controller's image on a sandbox swarm, offline",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="image_command", metavar="IMAGE_COMMAND")
    build = commands.add_parser("build", help="build the image and load it into every node")
    build.add_argument("--sandbox", default="dev", help="sandbox name (default: dev)")
    build.set_defaults(handler=run_build)

    def usage(_args: argparse.Namespace) -> int:
        parser.print_help(sys.stderr)
        return EXIT_USAGE

    parser.set_defaults(handler=usage)


def run_build(args: argparse.Namespace) -> int:
    try:
        sandbox = Sandbox.load(args.sandbox)
        first = sandbox.nodes[0]
        built = build_controller_image(sandbox.docker_host(first))
        load_into([sandbox.docker_host(n) for n in sandbox.nodes[1:]], built)
    except SandboxError as exc:
        print(f"image build: {exc}", file=sys.stderr)
        return EXIT_FAILED
    print(f"built {built.reference} {built.image_id} ({built.timings()})", file=sys.stderr)
    print(built.image_id)
    return EXIT_OK
