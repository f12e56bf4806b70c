"""The chaos benchmark's hands: each scheduled event done to a sandbox swarm.

Node faults go through the sandbox (`fail`/`restore`: crash is dockerd SIGKILLed, cut is
the node's link down). Operator edits go through the docker command line, as an operator
makes them (`docker service update`, `docker stack deploy`: both re-send the whole spec).
Controller-only faults happen in both runs where they can: the labels are set, the
webhook posts go out (nowhere, with Swarm alone), the hanging plugin socket listens.

The controller runs as a process of its own, against one manager. When the schedule
fails that manager's node, the controller dies with it (SIGKILL) and starts again at once
against a live manager, as Swarm would reschedule it (more slowly) in a real deployment.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import socket
import subprocess
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

from chaos_app import BY_NAME, POLICY, STACK, replicas_of, stack_file
from chaos_sample import Recorder
from chaos_schedule import Event
from controller_process import ControllerProcess

from controller.sandbox import Sandbox, SandboxError

TOKEN = "chaos-token"
NODE_LANE = ("crash", "cut", "crash-manager", "restore", "heal")
EDIT_PATIENCE = 40.0  # seconds an operator retries an edit the swarm refuses
STORM_TTL = 60
CLI_TIMEOUT = 60.0


class HangingPlugin:
    """A plugin socket that accepts every connection and never answers."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(str(path))
        self._server.listen(64)
        self._held: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = self._server.accept()
                self._held.append(conn)  # held open, never read, never answered

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._server.shutdown(socket.SHUT_RDWR)
        self._server.close()
        for conn in self._held:
            conn.close()
        self._thread.join(timeout=5)
        self.path.unlink(missing_ok=True)


class Controller:
    """The controller process: started, SIGKILLed and moved as the schedule says."""

    def __init__(self, sandbox: Sandbox, work: Path, *, dry_run: bool = False) -> None:
        self.sandbox, self.work, self.dry_run = sandbox, work, dry_run
        self.log = work / "controller.log"
        self.port = _free_port()
        self.plugin_dir = work / "plugins"
        self.plugin_dir.mkdir(exist_ok=True)
        (work / "token").write_text(TOKEN)
        (work / "policy.yaml").write_text(POLICY)
        self.process: ControllerProcess | None = None
        self.starts = 0

    def start(self, host: str) -> None:
        args = ["--policy", str(self.work / "policy.yaml"), "--log-format", "json"]
        args += ["--health-listen", f"127.0.0.1:{self.port}"]
        args += ["--health-token-file", str(self.work / "token")]
        args += ["--plugins", "--plugin-dirs", str(self.plugin_dir)]
        if self.dry_run:  # observes and plans as the other arm does, and writes nothing
            args += ["--dry-run"]
        self.process = ControllerProcess(host, self.log, *args, append=self.starts > 0)
        self.starts += 1

    def kill(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process = None

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()
            self.process = None

    @property
    def host(self) -> str | None:
        return self.process.docker_host if self.process is not None else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Chaos:
    """Does the schedule's events to one sandbox; `controller` is None for Swarm alone."""

    def __init__(
        self,
        sandbox: Sandbox,
        recorder: Recorder,
        controller: Controller | None,
        work: Path,
        desired: dict[str, int],
    ) -> None:
        self.sandbox, self.recorder, self.controller = sandbox, recorder, controller
        self.work, self.desired = work, desired
        self.faulted: dict[str, str] = {}  # hostname -> crash/cut
        self.variant = "A"
        self.increases: dict[str, int] = {}  # replicas the operator added, per service
        self.done: list[dict[str, object]] = []  # what happened, when
        self.plugin: HangingPlugin | None = None
        self.plugin_dir = controller.plugin_dir if controller else work / "plugins"
        self.plugin_dir.mkdir(exist_ok=True)
        self.port = controller.port if controller else _free_port()
        # Each fault of a manager, with the manager that led just before it.
        self.manager_faults: list[dict[str, object]] = []
        self._back_at: dict[str, float] = {}  # hostname -> when the schedule restored it
        self._ctl_lock = threading.Lock()  # the two lanes may both start or kill it

    # --- where to talk to ---------------------------------------------------------------

    def managers(self) -> list[str]:
        """Docker hosts of the managers the schedule has not failed (a follower forwards
        to the leader), sound longest first: a manager back moments ago answers reads
        from a store still catching up, so its specs and tasks can be older than what the
        others already saw (a write seen twice, a task seen stopped again)."""
        live = [m for m in self.sandbox.managers if m not in self.faulted]
        live.sort(key=lambda m: self._back_at.get(m, 0.0))
        return [self.sandbox.docker_host(m) for m in live]

    # --- the schedule -------------------------------------------------------------------

    def run(self, events: list[Event]) -> None:
        """Node faults in one lane, everything else in another, so a slow edit (retried
        through a Raft election) never delays a node's restore."""
        nodes = [e for e in events if e.kind in NODE_LANE]
        # A daemon, so that a runner stopped (Ctrl-C) between pairs' events exits at once
        # rather than when this lane's last event is due.
        other = threading.Thread(
            target=self._lane, args=([e for e in events if e not in nodes],), daemon=True
        )
        other.start()
        self._lane(nodes)
        other.join()

    def _lane(self, events: list[Event]) -> None:
        for event in events:
            delay = event.at - self.recorder.now()
            if delay > 0:
                time.sleep(delay)
            started = self.recorder.now()
            try:
                detail = self.do(event)
            except Exception as exc:  # recorded; the schedule goes on
                detail = f"failed: {exc}"
            self.done.append(
                {"event": event.describe().split(None, 1)[1], "at": round(started, 1),
                 "planned": round(event.at, 1), "took": round(self.recorder.now() - started, 1),
                 "detail": detail}
            )  # fmt: skip

    def do(self, event: Event) -> str:
        kind = event.kind
        if kind in ("crash", "cut", "crash-manager"):
            return self._fail(event)
        if kind in ("restore", "heal"):
            node = event.node
            for attempt in range(3):
                try:
                    self.sandbox.restore(node)
                    break
                except SandboxError:
                    # Seen once under load: the new dockerd found its killed predecessor's
                    # PID still alive. The schedule heals it a moment later instead.
                    if attempt == 2:
                        raise
                    time.sleep(2)
            self.faulted.pop(node, None)
            self._back_at[node] = time.monotonic()
            return node + (f" (attempt {attempt + 1})" if attempt else "")
        if kind == "kill-controller":
            if self.controller is None or self.controller.process is None:
                return "no controller"
            with self._ctl_lock:
                self.controller.kill()
            return "SIGKILL"
        if kind == "start-controller":
            if self.controller is None:
                return "no controller"
            with self._ctl_lock:
                self.controller.start(self.managers()[0])
            return "started"
        if kind == "health-storm":
            return self._storm("failed")
        if kind == "health-ok":
            return self._storm("ok")
        if kind == "plugin-hang":
            self.plugin = HangingPlugin(self.plugin_dir / "hang.sock")
            return "listening"
        if kind == "plugin-gone":
            if self.plugin is not None:
                self.plugin.close()
                self.plugin = None
            return "removed"
        if kind in ("deploy-same", "deploy-changed"):
            if kind == "deploy-changed":
                self.variant = event.value or "B"
            return self.deploy()[1]
        return self._edit(event)

    def _fail(self, event: Event) -> str:
        node = event.node
        leader = ""
        if self.sandbox.state.node(node).manager:
            leader = self._wait_quorum()
            # Which manager led is recorded, not chosen: it may differ between arms.
            self.manager_faults.append(
                {"planned": event.at, "event": event.kind, "node": node, "leader": leader}
            )
        mode = "partition" if event.kind == "cut" else "crash"
        self.faulted[node] = event.kind
        self.sandbox.fail(node, mode)
        moved = ""
        with self._ctl_lock:
            ctl = self.controller
            if ctl is not None and ctl.host == self.sandbox.docker_host(node):
                ctl.kill()  # it ran on that node: it dies with it
                ctl.start(self.managers()[0])
                moved = ", controller moved"
        led = " (the leader)" if leader == node else ""
        return node + led + moved

    def _wait_quorum(self, timeout: float = 30.0) -> str:
        """Before failing a manager: every manager reachable (the last one has rejoined).
        Returns the leader's hostname as last read ("" if none was read)."""
        leader = ""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with contextlib.suppress(Exception):
                info = self.sandbox.node_info()
                managers = [n for n in info if n.get("role") == "manager"]
                leader = next((str(n["hostname"]) for n in managers if n.get("leader")), "")
                if all(n.get("reachability") == "reachable" for n in managers):
                    return leader
            time.sleep(0.5)
        return leader

    def _storm(self, state: str) -> str:
        delivered = 0
        for node in self.sandbox.nodes:
            body = {"node": node, "state": state, "reason": "chaos storm", "ttl": STORM_TTL}
            with contextlib.suppress(OSError):
                delivered += _post(self.port, body) == 202
        return f"{delivered} of {len(self.sandbox.nodes)} reports taken"

    # --- operator edits -----------------------------------------------------------------

    def deploy(self, pins: Mapping[str, Iterable[str]] | None = None) -> tuple[bool, str]:
        """`docker stack deploy` of the current variant (with `pins`: the warm-up's)."""
        path = self.work / f"stack-{self.variant}{'-pinned' if pins else ''}.json"
        path.write_text(stack_file(self.sandbox.image_id, self.variant, pins))
        argv = ["stack", "deploy", "--resolve-image", "never", "-c", str(path), STACK]
        before = dict(self.desired)
        ok, said = self.recorder.edit(list(BY_NAME), lambda: self._cli(argv))
        for name, count in replicas_of(self.variant).items():
            self._set_desired(name, count, before)
        return ok, f"variant {self.variant}: {said}"

    def _edit(self, event: Event) -> str:
        name = event.service
        full = f"{STACK}_{name}"
        if event.kind == "replicas":
            argv = ["--replicas", event.value]
        elif event.kind == "constraint":
            argv = ["--constraint-add", event.value]
        elif event.kind == "unmanage":
            argv = ["--label-add", "placement.managed=false"]
        elif event.kind == "manage":
            argv = ["--label-add", "placement.managed=true"]
        elif event.kind == "bad-label":
            argv = ["--label-add", "placement.priority=hgih"]
        elif event.kind == "fix-label":
            value = BY_NAME[name].labels.get("placement.priority")
            argv = (
                ["--label-add", f"placement.priority={value}"]
                if value
                else ["--label-rm", "placement.priority"]
            )
        else:
            return f"unknown event {event.kind}"
        before = dict(self.desired)
        # Whether Swarm took it, not the words: "ok after 2 refusal(s): [... failed ...]".
        ok, said = self.recorder.edit(
            [name], lambda: self._cli(["service", "update", "-d", *argv, full])
        )
        if event.kind == "replicas" and ok:
            self._set_desired(name, int(event.value), before)
        return said

    def _set_desired(self, name: str, count: int, before: dict[str, int]) -> None:
        if count > before.get(name, 0):
            self.increases[name] = self.increases.get(name, 0) + count - before.get(name, 0)
        self.desired[name] = count

    def _cli(self, argv: list[str]) -> tuple[bool, str]:
        """The docker command line against a live manager; retried as an operator would
        (a write computed from a spec someone else just changed is refused, and so is
        every write while the managers elect a leader)."""
        errors: list[str] = []
        deadline = time.monotonic() + EDIT_PATIENCE
        while time.monotonic() < deadline:
            hosts = self.managers()
            env = {**os.environ, "DOCKER_HOST": hosts[0] if hosts else ""}
            try:
                done = subprocess.run(
                    ["docker", *argv], env=env, capture_output=True, text=True,
                    timeout=CLI_TIMEOUT, check=False,
                )  # fmt: skip
            except subprocess.TimeoutExpired:
                errors.append("timed out")
                continue
            if done.returncode == 0:
                return True, "ok" + (f" after {len(errors)} refusal(s): {errors}" if errors else "")
            errors.append(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "?")
            time.sleep(2)
        return False, f"failed: {errors}"


def _post(port: int, body: dict[str, object]) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        headers = {"Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"}
        conn.request("POST", "/v1/health", body=json.dumps(body).encode(), headers=headers)
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()
