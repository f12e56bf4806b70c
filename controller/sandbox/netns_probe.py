"""TCP probes from inside a sandbox node's network namespace.

Sandbox node addresses exist only inside the sandbox's namespaces, so a probe of a node
address must be made from one of them, as a controller running on that node would.
`setns` moves only the calling thread, so one thread per namespace enters it once and
makes every connect there; the rest of the process stays where it was.
"""

from __future__ import annotations

import ctypes
import os
import queue
import threading
from concurrent.futures import Future

from controller.adapters.tcp_probe import tcp_connects
from controller.sandbox.netns import netns_path

CLONE_NEWNET = 0x40000000


def _enter(netns: str) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(netns_path(netns), os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns into {netns} failed")
    finally:
        os.close(fd)


class NetnsProber:
    """`prober(address, port, timeout) -> bool`, connecting from inside `netns`."""

    def __init__(self, netns: str) -> None:
        self.netns = netns
        self._jobs: queue.Queue[tuple[str, int, float, Future[bool]] | None] = queue.Queue()
        self._ready: Future[None] = Future()
        self._thread = threading.Thread(target=self._main, daemon=True, name=f"probe-{netns}")
        self._thread.start()
        self._ready.result(timeout=10)

    def _main(self) -> None:
        try:
            _enter(self.netns)
        except OSError as exc:
            self._ready.set_exception(exc)
            return
        self._ready.set_result(None)
        while (job := self._jobs.get()) is not None:
            address, port, timeout, result = job
            # Probes run in parallel threads spawned here: they inherit the namespace.
            worker = threading.Thread(
                target=lambda a=address, p=port, t=timeout, r=result: r.set_result(
                    tcp_connects(a, p, t)
                ),
                daemon=True,
            )
            worker.start()

    def __call__(self, address: str, port: int, timeout: float) -> bool:
        result: Future[bool] = Future()
        self._jobs.put((address, port, timeout, result))
        return result.result(timeout=timeout + 5)

    def close(self) -> None:
        self._jobs.put(None)
