"""Event-to-write latency, idle writes and memory of the controller on a sandbox swarm.

    python bench/reconcile_latency.py [--services 20] [--idle 20]

Each managed service created is a Swarm `service create` event; the controller's first
write to it (adoption) is Swarm's own UpdatedAt, so the latency is measured on the
manager's clock by Swarm itself: UpdatedAt - CreatedAt. Then the swarm is left alone and
every Version.Index is compared before and after several resync cycles: any change is a
write an idle controller should not have made. Memory is the controller process's
resident set (VmRSS) and its peak (VmHWM).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

import docker

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from controller.sandbox import Sandbox, SandboxSpec

RESYNC = 2.0


def _ts(text: str) -> float:
    head, _, frac = text.rstrip("Z").partition(".")
    return datetime.fromisoformat(head + "+00:00").timestamp() + float(f"0.{frac or 0}")


def _status(pid: int) -> dict[str, int]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in {"VmRSS", "VmHWM"}:
            out[key] = int(value.split()[0])  # kB
    return out


def _versions(client: docker.DockerClient) -> dict[str, int]:
    found = {s["ID"]: s["Version"]["Index"] for s in client.api.services()}
    found.update({n["ID"]: n["Version"]["Index"] for n in client.api.nodes()})
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--services", type=int, default=20)
    parser.add_argument("--idle", type=float, default=20.0, help="seconds left alone")
    args = parser.parse_args()

    spec = SandboxSpec(name=f"bench-lat-{os.getpid()}", nodes=3, heartbeat_seconds=1.0)
    with Sandbox.up(spec) as sandbox:
        env = {**os.environ, "DOCKER_HOST": sandbox.manager_host}
        controller = subprocess.Popen(
            [sys.executable, "-m", "controller", "run", "--resync", str(RESYNC)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        lines: list[str] = []
        threading.Thread(target=lambda: lines.extend(controller.stdout or []), daemon=True).start()
        client = docker.DockerClient(base_url=sandbox.manager_host, version="auto")
        try:
            time.sleep(2)  # first cycles done
            latencies = []
            for i in range(args.services):
                name = f"lat{i}"
                sandbox.create_service(name, labels={"placement.managed": "true"})
                deadline = time.monotonic() + 30
                while True:
                    attrs = client.api.inspect_service(name)
                    if attrs["Version"]["Index"] > 0 and attrs["UpdatedAt"] != attrs["CreatedAt"]:
                        break
                    if time.monotonic() > deadline:
                        raise SystemExit(f"{name} was not adopted in 30 s")
                    time.sleep(0.05)
                latencies.append(_ts(attrs["UpdatedAt"]) - _ts(attrs["CreatedAt"]))
            # Swarm records each adoption as an update (UpdateStatus updating ->
            # completed, a version bump each, no task restarted): wait for that to settle,
            # so that any version moving afterwards can only be a write.
            deadline = time.monotonic() + 60
            while any(
                (svc.get("UpdateStatus") or {}).get("State") == "updating"
                for svc in client.api.services()
            ):
                if time.monotonic() > deadline:
                    raise SystemExit("updates did not complete in 60 s")
                time.sleep(0.5)
            time.sleep(2 * RESYNC)
            before, logged = _versions(client), len(lines)
            time.sleep(args.idle)
            after = _versions(client)
            changed = sorted(k for k, v in after.items() if before.get(k) != v)
            idle_writes = sum(1 for line in lines[logged:] if " action=" in line)
            names = {s["ID"]: s["Spec"]["Name"] for s in client.api.services()}
            names.update({n["ID"]: n["Description"]["Hostname"] for n in client.api.nodes()})
            memory = _status(controller.pid)
        finally:
            controller.terminate()
            controller.wait(timeout=20)
            client.close()

    ms = sorted(x * 1000 for x in latencies)
    print(f"engine: dockerd via sandbox, {args.services} managed services created one by one")
    print(f"{'measure':<38}{'value':>12}")
    print(f"{'event -> first write, median (ms)':<38}{statistics.median(ms):>12.1f}")
    print(f"{'event -> first write, p90 (ms)':<38}{ms[int(0.9 * (len(ms) - 1))]:>12.1f}")
    print(f"{'event -> first write, max (ms)':<38}{ms[-1]:>12.1f}")
    print(f"{'resync interval (ms), polling only':<38}{RESYNC * 1000:>12.1f}")
    print(f"{'median / resync interval':<38}{statistics.median(ms) / (RESYNC * 1000):>12.3f}")
    idle = f"controller actions logged, {args.idle:.0f} s idle"
    print(f"{idle:<38}{idle_writes:>12d}")
    print(f"{'versions moved, idle (any writer)':<38}{len(changed):>12d}")
    if changed:
        print("  moved by:", ", ".join(names.get(k, k) for k in changed))
    print(f"{'controller RSS (MiB)':<38}{memory.get('VmRSS', 0) / 1024:>12.1f}")
    print(f"{'controller peak RSS (MiB)':<38}{memory.get('VmHWM', 0) / 1024:>12.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
