"""The attack bench on one machine: a real `Controller` on 127.0.0.1, with TLS, and the
agent's Docker proxy in front of a recording stand-in engine.

    python bench/attack.py --local [--seconds 20]

The controller runs as a process of its own (`serve`, below): the engine it observes is
the test builders' two-node swarm, everything else (HTTP servers, probe socket, web view,
heartbeat, reconcile loop) is the real one. The attacker's sockets come from 127.0.0.2,
the honest client's from 127.0.0.3 (every 127/8 address is loopback on Linux). Phases:

1. 2000 sockets that never start TLS, all from one address, then from 20 addresses
   (the process's total cap, not the address's, is what holds them);
2. a slowloris: 16 connections that complete TLS and drip a request a byte a second;
3. 16 clients that ask for /metrics and the web view's page and never read;
4. the smuggled request (a POST in a bare-LF header line) through the Docker proxy.

During each, every 0.25 s: the controller's RSS and open descriptors (from /proc), the
container healthcheck's answer on the probe socket, and an honest client's /healthz over
TLS from another address. Printed per phase: the worst of each, and the attacker's view.
"""

from __future__ import annotations

import contextlib
import http.client
import io
import json
import os
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

ATTACKER, HONEST = "127.0.0.2", "127.0.0.3"
LIMIT_MIB = 256  # the controller's memory limit in compose.yaml


def serve(work: Path) -> None:
    """The controller under attack (run in a process of its own)."""
    import anyio  # noqa: PLC0415

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from controller.runtime.http_server import TlsFiles  # noqa: PLC0415
    from controller.runtime.loop import Controller, RunConfig  # noqa: PLC0415
    from controller.runtime.policy_source import PolicySource  # noqa: PLC0415
    from controller.runtime.reconciler import Reconciler  # noqa: PLC0415
    from controller.runtime.tracing import (  # noqa: PLC0415
        DecisionLog,
        get_tracer,
        make_tracer_provider,
    )
    from tests.core.builders import node, snapshot  # noqa: PLC0415

    policy = PolicySource(None)
    tls = TlsFiles(work / "cert.pem", work / "key.pem")
    config = RunConfig(
        http=("127.0.0.1", 0), probe_socket=work / "probe.sock", resync_seconds=1, tls=tls,
        ui_token="bench-ui-token-0123456789", metrics_token="bench-metrics-token-0123",
    )  # fmt: skip
    out = io.StringIO()
    controller = Controller(config, policy, out=out, handle_signals=False)
    controller.reconciler = Reconciler(
        observe=lambda: snapshot([node(1, manager=True), node(2)], []),
        executor=lambda action: None,
        policy=policy,
        tracer=get_tracer(make_tracer_provider("none")),
        decision_log=DecisionLog(out),
    )
    assert controller.server is not None and controller.probe_server is not None
    (work / "port").write_text(str(controller.server.port))

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            for task in (controller._heartbeat, controller._worker, controller._resync_timer):
                tg.start_soon(task)
            for server in (controller.server, controller.probe_server):
                assert server is not None
                tg.start_soon(server.run)
            await anyio.sleep_forever()

    anyio.run(main)


def _status(pid: int) -> tuple[float, int]:
    """RSS in MiB and open descriptors of `pid`."""
    rss = 0.0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1]) / 1024
    return rss, len(os.listdir(f"/proc/{pid}/fd"))


def _probe(path: Path) -> float | None:
    started = time.monotonic()
    try:
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(5)
            s.connect(str(path))
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            ok = s.recv(64).startswith(b"HTTP/1.1 200")
    except OSError:
        ok = False
    return time.monotonic() - started if ok else None


def _honest(port: int, context: ssl.SSLContext) -> float | None:
    started = time.monotonic()
    try:
        conn = http.client.HTTPSConnection(
            "127.0.0.1", port, timeout=5, context=context, source_address=(HONEST, 0)
        )
        conn.request("GET", "/healthz")
        ok = conn.getresponse().status == 200
        conn.close()
    except OSError:
        ok = False
    return time.monotonic() - started if ok else None


class Watch:
    """Samples the controller while an attack runs."""

    def __init__(self, pid: int, work: Path, port: int, context: ssl.SSLContext) -> None:
        self.pid, self.work, self.port, self.context = pid, work, port, context
        self.samples: list[tuple[float, int, float | None, float | None]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.25):
            rss, fds = _status(self.pid)
            probe = _probe(self.work / "probe.sock")
            self.samples.append((rss, fds, probe, _honest(self.port, self.context)))

    @contextlib.contextmanager
    def during(self) -> Iterator[None]:
        self.samples.clear()
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        try:
            yield
        finally:
            self._stop.set()
            self._thread.join()

    def report(self) -> str:
        rss = max(s[0] for s in self.samples)
        fds = max(s[1] for s in self.samples)
        probes = [s[2] for s in self.samples]
        honest = [s[3] for s in self.samples]
        answered = [p for p in probes if p is not None]
        served = [h for h in honest if h is not None]
        return (
            f"controller: max RSS {rss:.1f} MiB (limit {LIMIT_MIB}), max open fds {fds}, "
            f"alive {_alive(self.pid)}; probe socket: {len(answered)}/{len(probes)} answered, "
            f"max {max(answered, default=0):.3f} s; honest /healthz from {HONEST}: "
            f"{len(served)}/{len(honest)} answered, max {max(served, default=0):.3f} s"
        )


def _alive(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists()


def _from_attacker(port: int, source: str = ATTACKER, rcvbuf: int = 0) -> socket.socket:
    sock = socket.socket()
    if rcvbuf:  # before connecting: the window the client offers stays small
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.bind((source, 0))
    sock.settimeout(2)
    sock.connect(("127.0.0.1", port))
    return sock


def _closed(sock: socket.socket) -> bool:
    """Whether the server closed `sock`: what it sent before is read first."""
    sock.setblocking(False)
    try:
        while sock.recv(65536):
            pass
    except (BlockingIOError, ssl.SSLWantReadError):
        return False  # nothing more now, and still open
    except OSError:
        return True  # reset
    return True  # end of stream


def silent_sockets(
    port: int, seconds: float, count: int = 2000, sources: int = 1
) -> dict[str, int]:
    held, refused = [], 0
    for n in range(count):
        try:
            held.append(
                _from_attacker(port, f"127.0.1.{n % sources + 1}" if sources > 1 else ATTACKER)
            )
        except OSError:
            refused += 1
    time.sleep(seconds)
    closed = sum(_closed(s) for s in held)
    for s in held:
        s.close()
    return {"tried": count, "connected": len(held), "refused": refused, "closed_by_server": closed}


def slowloris(port: int, seconds: float, loose: ssl.SSLContext) -> dict[str, int]:
    cut = {"n": 0, "dripped": 0}
    end = time.monotonic() + seconds

    def drip() -> None:
        while time.monotonic() < end:
            try:
                s = loose.wrap_socket(_from_attacker(port))
                s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
                while time.monotonic() < end:
                    s.sendall(b"X")
                    cut["dripped"] += 1
                    time.sleep(1)
            except OSError:
                cut["n"] += 1
                time.sleep(0.5)

    threads = [threading.Thread(target=drip, daemon=True) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {"connections_cut": cut["n"], "bytes_dripped": cut["dripped"]}


def never_read(port: int, seconds: float, loose: ssl.SSLContext) -> dict[str, int]:
    """Each asks for the web view's script 400 times in one go (pipelined), reading
    nothing: the answers fill the buffers and the server can write no more."""
    held, cut = [], 0
    ask = b"GET /ui/app.js HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" * 400
    for _ in range(16):
        try:
            s = loose.wrap_socket(_from_attacker(port, rcvbuf=4096))
            s.settimeout(2)
            with contextlib.suppress(TimeoutError):  # the server stopped reading: fine
                s.sendall(ask)
            held.append(s)
        except OSError:
            cut += 1
    time.sleep(seconds + 10)  # the write deadline (10 s) runs from when the buffers fill
    closed = sum(_closed(s) for s in held)
    for s in held:
        s.close()
    return {"clients": 16, "cut_before_reading": cut, "closed_by_server": closed + cut}


@contextlib.contextmanager
def recording_engine(where: Path) -> Iterator[tuple[Path, list[str]]]:
    """A stand-in engine on a unix socket that answers every request line it reads
    (bare LF ends a line here too, as in Go's net/http) and records it."""
    import http.server  # noqa: PLC0415
    import socketserver  # noqa: PLC0415

    seen: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def address_string(self) -> str:
            return "local"

        def log_message(self, *args: object) -> None:
            pass

        def _answer(self) -> None:
            seen.append(f"{self.command} {self.path}")
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        do_GET = do_POST = _answer

    class Engine(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
        daemon_threads = True

    path = where / "engine.sock"
    server = Engine(str(path), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield path, seen
    finally:
        server.shutdown()
        server.server_close()


def smuggle(seconds: float) -> dict[str, object]:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from controller.runtime.docker_proxy import make_proxy  # noqa: PLC0415

    with tempfile.TemporaryDirectory() as tmp, recording_engine(Path(tmp)) as (path, seen):
        proxy = make_proxy(str(path), Path(tmp) / "proxy" / "docker.sock")
        threading.Thread(target=proxy.serve_forever, daemon=True).start()
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(5)
            s.connect(str(Path(tmp) / "proxy" / "docker.sock"))
            s.sendall(
                b"GET /v1.41/info HTTP/1.1\r\nX: a\n\nPOST /v1.41/containers/create HTTP/1.1\n"
                b"Host: x\nContent-Type: application/json\nContent-Length: 2\n\n{}\r\n\r\n"
            )
            answer = s.recv(64).split(b"\r\n")[0].decode()
        time.sleep(min(seconds, 1))
        proxy.shutdown()
        proxy.server_close()
        return {"answer": answer, "reached_the_engine": list(seen)}


def main(seconds: float) -> int:
    import trustme  # noqa: PLC0415

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        ca = trustme.CA()
        cert = ca.issue_cert("127.0.0.1")
        cert.private_key_pem.write_to_path(str(work / "key.pem"))
        cert.cert_chain_pems[0].write_to_path(str(work / "cert.pem"))
        context = ssl.create_default_context()
        ca.configure_trust(context)
        loose = ssl.create_default_context()
        loose.check_hostname, loose.verify_mode = False, ssl.CERT_NONE
        proc = subprocess.Popen(
            [sys.executable, __file__, "serve", str(work)],
            cwd=Path(__file__).resolve().parents[1],
        )
        try:
            return _run(proc, work, context, loose, seconds)
        finally:
            proc.terminate()
            proc.wait(15)


def _run(
    proc: subprocess.Popen[bytes],
    work: Path,
    context: ssl.SSLContext,
    loose: ssl.SSLContext,
    seconds: float,
) -> int:
    deadline = time.monotonic() + 60
    while not (work / "port").exists() or _probe(work / "probe.sock") is None:
        if time.monotonic() > deadline or proc.poll() is not None:
            raise SystemExit("the controller did not start")
        time.sleep(0.2)
    port = int((work / "port").read_text())
    watch = Watch(proc.pid, work, port, context)
    rss, fds = _status(proc.pid)
    say(f"controller pid {proc.pid} on 127.0.0.1:{port}: RSS {rss:.1f} MiB, {fds} fds, idle")
    phases: list[tuple[str, Callable[[], object]]] = [
        ("no attack (the baseline)", lambda: time.sleep(seconds)),
        ("2000 sockets that never start TLS, one address", lambda: silent_sockets(port, seconds)),
        (
            "the total cap: 2000 sockets that never start TLS from 20 addresses",
            lambda: silent_sockets(port, seconds, sources=20),
        ),
        ("slowloris, 16 TLS connections", lambda: slowloris(port, seconds, loose)),
        (
            "16 clients that never read (the script, 400 times each)",
            lambda: never_read(port, seconds, loose),
        ),
        ("the smuggled request through the Docker proxy", lambda: smuggle(seconds)),
    ]
    for name, attack in phases:
        with watch.during():
            result = attack()
        say(f"--- {name} ---")
        say(f"attacker: {json.dumps(result)}")
        say(watch.report())
        time.sleep(2)
    rss, fds = _status(proc.pid)
    say(f"after: RSS {rss:.1f} MiB, {fds} fds")
    return 0


def say(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"]:
        serve(Path(sys.argv[2]))
    else:
        sys.exit(main(float(sys.argv[1]) if len(sys.argv) > 1 else 20.0))
