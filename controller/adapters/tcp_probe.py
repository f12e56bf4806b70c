"""A TCP connect to a node's gossip port: the cheapest sign that its dockerd is there."""

from __future__ import annotations

import socket

# memberlist's port for the overlays' gossip: every swarm node listens on it (2377 only
# managers do), and dockerd refuses it at once when it dies.
GOSSIP_PORT = 7946


def tcp_connects(address: str, port: int, timeout: float) -> bool:
    try:
        with socket.create_connection((address, port), timeout=timeout):
            return True
    except OSError:
        return False
