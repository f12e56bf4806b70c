"""Run an HttpServer in a background event loop for a test; yields it while it serves."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator

import anyio.from_thread

from controller.runtime.http_server import HttpServer


@contextlib.contextmanager
def serving(server: HttpServer) -> Iterator[HttpServer]:
    with anyio.from_thread.start_blocking_portal() as portal:
        running = portal.start_task_soon(server.run)
        try:
            yield server
        finally:
            running.cancel()


def closed_within(sock: socket.socket, within: float) -> bool:
    """Whether the server closes `sock` within `within` seconds (sending nothing)."""
    sock.settimeout(within)
    try:
        return sock.recv(1024) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False
