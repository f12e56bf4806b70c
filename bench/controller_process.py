"""`swarm-placement run` as a process of its own against one sandbox manager, as the
benchmarks start it: resync every second, its output in a log, stopped by its own PID."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path


class ControllerProcess:
    def __init__(self, docker_host: str, log: Path, *args: str, append: bool = False) -> None:
        self.docker_host = docker_host
        self._log = log.open("a" if append else "w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "controller", "run", "--resync", "1", *args],
            env={**os.environ, "DOCKER_HOST": docker_host},
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._log.close()

    def kill(self) -> None:
        """SIGKILL, as a crash would: no clean-up of any kind."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self._log.close()
