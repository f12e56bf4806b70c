"""`sandbox status` and what `sandbox up` and `sandbox run` print: the sandbox's nodes
as its swarm sees them, and its services."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from controller.sandbox import Sandbox, SandboxError


def _labels_text(labels: dict[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items())) or "-"


def print_status(sandbox: Sandbox) -> None:
    state = sandbox.state
    heartbeat = f"{state.heartbeat_seconds:g}s" if state.heartbeat_seconds else "default"
    print(
        f"sandbox {state.name}: {len(state.nodes)} nodes, subnet {state.subnet}, "
        f"storage {state.storage_driver}, heartbeat {heartbeat}, image {state.image_id[:19]}"
    )
    try:
        seen = {n["hostname"]: n for n in sandbox.node_info()}
        services = sandbox.services()
    except SandboxError as exc:
        seen, services = {}, []
        print(f"  (no manager answers: {exc})")
    rows = [("NODE", "ADDR", "STATE", "AVAIL", "ROLE", "MANAGER", "FAILED", "LABELS", "RESOURCES")]
    for node in state.nodes:
        info = seen.get(node.hostname, {})
        manager = "leader" if info.get("leader") else str(info.get("reachability") or "-")
        rows.append(
            (
                node.hostname,
                node.ip,
                str(info.get("state", "?")),
                str(info.get("availability", "?")),
                str(info.get("role", "manager" if node.manager else "worker")),
                manager,
                node.failure or "-",
                _labels_text(info.get("labels", node.labels)),
                _labels_text(info.get("generic_resources", node.generic_resources)),
            )
        )
    _print_table(rows)
    if services:
        print()
        table = [("SERVICE", "MODE", "RUNNING", "LABELS")]
        for svc in services:
            running = f"{svc['running']}/{svc['replicas']}"
            table.append((svc["name"], svc["mode"], running, _labels_text(svc["labels"])))
        _print_table(table)
    sys.stdout.flush()


def _print_table(rows: Sequence[Sequence[str]]) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        cells = (cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        print("  ".join(cells).rstrip())
