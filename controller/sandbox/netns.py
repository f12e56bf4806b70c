"""The sandbox's network: a switch namespace with a bridge, and one namespace per node.

Each node namespace gets `eth0`, a veth whose peer (`portN`) is a port of the bridge `br0`
inside the switch namespace. Links are created directly inside their namespaces, so the
root namespace never sees them, and the bridge stays clear of any FORWARD policy that a
root-namespace dockerd might install. A partition is the switch port going down.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from controller.sandbox.spec import SandboxError

NETNS_DIR = Path("/run/netns")
BRIDGE = "br0"
NODE_LINK = "eth0"


def netns_path(name: str) -> Path:
    return NETNS_DIR / name


def _ip(ip_tool: str, *args: str) -> None:
    try:
        subprocess.run([ip_tool, *args], check=True, capture_output=True, text=True, timeout=30)
    except subprocess.CalledProcessError as exc:
        raise SandboxError(
            f"'ip {' '.join(args)}' failed: {(exc.stderr or exc.stdout).strip()}"
        ) from exc
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SandboxError(f"'ip {' '.join(args)}' failed: {exc}") from exc


def exists(name: str) -> bool:
    return netns_path(name).exists()


def create_switch(ip_tool: str, switch: str) -> None:
    _ip(ip_tool, "netns", "add", switch)
    _ip(ip_tool, "-n", switch, "link", "set", "lo", "up")
    _ip(ip_tool, "-n", switch, "link", "add", BRIDGE, "type", "bridge")
    _ip(ip_tool, "-n", switch, "link", "set", BRIDGE, "up")


def create_node(
    ip_tool: str, *, switch: str, node_netns: str, port: str, address: str, prefix: int = 24
) -> None:
    """Make the node's namespace and wire it to the switch with `address/prefix`."""
    _ip(ip_tool, "netns", "add", node_netns)
    _ip(
        ip_tool,
        "link", "add", port, "netns", switch,
        "type", "veth", "peer", "name", NODE_LINK, "netns", node_netns,
    )  # fmt: skip
    _ip(ip_tool, "-n", switch, "link", "set", port, "master", BRIDGE, "up")
    _ip(ip_tool, "-n", node_netns, "link", "set", "lo", "up")
    _ip(ip_tool, "-n", node_netns, "addr", "add", f"{address}/{prefix}", "dev", NODE_LINK)
    _ip(ip_tool, "-n", node_netns, "link", "set", NODE_LINK, "up")


def set_port(ip_tool: str, *, switch: str, port: str, up: bool) -> None:
    """Plug (`up=True`) or unplug the node's cable at the switch."""
    _ip(ip_tool, "-n", switch, "link", "set", port, "up" if up else "down")


def port_is_up(ip_tool: str, *, switch: str, port: str) -> bool:
    try:
        out = subprocess.run(
            [ip_tool, "-n", switch, "-o", "link", "show", port],
            check=True,
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    flags = out.split("<", 1)[1].split(">", 1)[0].split(",") if "<" in out else []
    return "UP" in flags


def delete(ip_tool: str, name: str) -> None:
    """Delete a namespace; its links go with it. Missing namespaces are fine."""
    if not exists(name):
        return
    try:
        _ip(ip_tool, "netns", "delete", name)
    except SandboxError:
        if exists(name):
            raise


def names_matching(pattern: re.Pattern[str]) -> list[str]:
    if not NETNS_DIR.is_dir():
        return []
    return sorted(p.name for p in NETNS_DIR.iterdir() if pattern.fullmatch(p.name))


def root_links() -> list[str]:
    """Link names in the root namespace (for leak checks)."""
    try:
        out = subprocess.run(
            ["ip", "-o", "link", "show"], check=True, capture_output=True, text=True, timeout=30
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    names = []
    for line in out.splitlines():
        parts = line.split(":", 2)
        if len(parts) >= 2:
            names.append(parts[1].strip().split("@", 1)[0])
    return names
