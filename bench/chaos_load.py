"""How busy the machine and the controller were, sample by sample: the chaos runs share two
cores between three managers, one worker and (in one run) the controller, and a manager
that answers its heartbeats late gets a node marked down that no fault touched. Read from
/proc, so that a reader can set the controller's own CPU beside each such down."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path


def machine_ticks(stat: str) -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs from /proc/stat's first line. Idle and iowait
    are not busy; steal is (a core the machine did not get)."""
    fields = [int(x) for x in stat.split("\n", 1)[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return sum(fields) - idle, sum(fields)


def process_ticks(stat: str) -> int:
    """utime + stime of one process (all its threads) from /proc/PID/stat. The command
    name may hold spaces or parentheses: fields are counted after the last ')'."""
    rest = stat[stat.rindex(")") + 2 :].split()
    return int(rest[11]) + int(rest[12])  # fields 14 and 15 of proc(5)


class LoadMeter:
    """Each `read` returns what happened since the previous one: the share of all cores
    that was busy (0 to 1) and how many cores the controller used (0 when none runs)."""

    def __init__(self, pid: Callable[[], int | None], proc: Path = Path("/proc")) -> None:
        self._pid, self._proc = pid, proc
        self._machine: tuple[int, int] | None = None
        self._process: tuple[int | None, int, int] | None = None  # pid, ticks, total

    def read(self) -> tuple[float, float]:
        try:
            busy, total = machine_ticks((self._proc / "stat").read_text())
        except (OSError, ValueError, IndexError):
            return 0.0, 0.0
        share = 0.0
        if self._machine is not None and total > self._machine[1]:
            share = (busy - self._machine[0]) / (total - self._machine[1])
        self._machine = (busy, total)
        cores = self._controller(total)
        return round(share, 3), round(cores, 3)

    def _controller(self, total: int) -> float:
        pid = self._pid()
        ticks = 0
        if pid is not None:
            try:
                ticks = process_ticks((self._proc / str(pid) / "stat").read_text())
            except (OSError, ValueError, IndexError):  # gone: killed by the schedule
                pid = None
        last, self._process = self._process, (pid, ticks, total)
        if pid is None or last is None or last[0] != pid or total <= last[2]:
            return 0.0  # a new process (restarted) is measured from its next sample
        # /proc/stat's total counts every core's jiffies; a process's, one core's.
        cores = os.cpu_count() or 1
        return (ticks - last[1]) * cores / (total - last[2])
