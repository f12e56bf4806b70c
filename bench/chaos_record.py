"""How a chaos arm is kept in bench/results/: its figures, its samples reduced to what a
loss is scored from, and the code it ran on. Shared by the protocol's runner
(bench/chaos_pairs.py) and the suite's calibration (bench/chaos_ci.py)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from chaos_app import SERVICES

ROOT = Path(__file__).resolve().parents[1]


def compact(result: dict[str, Any]) -> dict[str, Any]:
    """One arm's figures as kept: every sample reduced to when, whether a manager
    answered, each service's running and wanted count (in SERVICES order) and the nodes
    the schedule had failed, which is all a loss is scored from again."""
    out = dict(result)
    out["samples_seen"] = [
        [t, answered, [running.get(s.name, 0) for s in SERVICES],
         [desired.get(s.name, 0) for s in SERVICES], faulted]
        for t, answered, running, _where, _nodes, faulted, desired in result["samples_seen"]
    ]  # fmt: skip
    out["services"] = {
        name: {k: v for k, v in figures.items() if k != "waiting_at"}
        for name, figures in result["services"].items()
    }
    # A decision's `msg` and `level` repeat its subject and outcome; `t` is its time.
    out["decisions"] = [
        {k: v for k, v in d.items() if k not in ("msg", "level", "time")}
        for d in result.get("decisions", [])
    ]
    return out


def code_version() -> dict[str, Any]:
    """The commit, and what the pairs' figures depend on: the controller's tree and the
    chaos bench's files as committed (`changed` lists what differs from them)."""

    def git(*args: str, stdin: str | None = None) -> str:
        done = subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, text=True, check=False, input=stdin
        )
        return done.stdout.strip()

    bench = git("ls-files", "-s", "bench/chaos*.py")
    return {
        "commit": git("rev-parse", "HEAD"),
        "controller": git("rev-parse", "HEAD:controller"),
        "bench": git("hash-object", "--stdin", stdin=bench + "\n"),
        "changed": git("status", "--porcelain", "--", "controller", "bench/chaos*.py").splitlines(),
    }


def write_json(path: Path, document: dict[str, Any]) -> None:
    """Whole or not at all: written aside, then renamed into place."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(document, separators=(",", ":"), default=list) + "\n")
    tmp.replace(path)
