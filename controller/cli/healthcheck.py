"""`swarm-placement-probe [healthz|readyz] [HOST:PORT]`: the container healthcheck.

Asks the running controller's (or agent's) own endpoint and exits 0 on 200, 1
otherwise. Standard library only: it starts in a few milliseconds, every few seconds.

Where it asks: the address given; else the unix socket PLACEMENT_PROBE_SOCKET names (the
image sets it), a listener of the process's own that no network client can reach or
crowd out (runtime/http_server.py); else PLACEMENT_HTTP over TCP.

With PLACEMENT_TLS_CERT_FILE set the server speaks only TLS, so the probe does too. It
asks its own process on loopback, whose name the certificate need not carry, so it does
not verify the server's certificate; under mutual TLS (PLACEMENT_TLS_CLIENT_CA_FILE) it
presents the server's own certificate and key as its client certificate.
"""

from __future__ import annotations

import http.client
import os
import socket
import ssl
import sys
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence

DEFAULT_ADDRESS = ":9464"
ANY_HOST = ("", "0.0.0.0", "::", "[::]")  # listen addresses: probe on loopback
TIMEOUT_SECONDS = 3


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str) -> None:
        super().__init__("localhost", timeout=TIMEOUT_SECONDS)
        self._path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self._path)


def probe_unix(path: str, what: str) -> int:
    connection = _UnixConnection(path)
    try:
        connection.request("GET", f"/{what}")
        reply = connection.getresponse()
        body = reply.read().decode().strip()
    except OSError as exc:
        print(f"unix:{path}: {exc}", file=sys.stderr)
        return 1
    finally:
        connection.close()
    print(body, file=sys.stdout if reply.status == 200 else sys.stderr)
    return 0 if reply.status == 200 else 1


def probe_url(address: str, path: str, *, tls: bool = False) -> str:
    host, _, port = address.rpartition(":")
    host = "127.0.0.1" if host in ANY_HOST else host
    return f"{'https' if tls else 'http'}://{host}:{port}/{path}"


def tls_context(env: Mapping[str, str]) -> ssl.SSLContext | None:
    cert, key = env.get("PLACEMENT_TLS_CERT_FILE"), env.get("PLACEMENT_TLS_KEY_FILE")
    if not cert:
        return None
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # its own process, on loopback (see above)
    if env.get("PLACEMENT_TLS_CLIENT_CA_FILE") and key:
        context.load_cert_chain(cert, key)
    return context


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    path = args[0] if args else "healthz"
    if path not in ("healthz", "readyz") or len(args) > 2:
        print("usage: swarm-placement-probe [healthz|readyz] [HOST:PORT]", file=sys.stderr)
        return 2
    unix = os.environ.get("PLACEMENT_PROBE_SOCKET")
    if len(args) < 2 and unix:
        return probe_unix(unix, path)
    address = args[1] if len(args) > 1 else os.environ.get("PLACEMENT_HTTP") or DEFAULT_ADDRESS
    try:
        context = tls_context(os.environ)
    except (OSError, ssl.SSLError) as exc:
        print(f"cannot load the TLS certificate: {exc}", file=sys.stderr)
        return 1
    url = probe_url(address, path, tls=context is not None)
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_SECONDS, context=context) as reply:
            print(reply.read().decode().strip())
            return 0
    except urllib.error.HTTPError as exc:
        print(exc.read().decode().strip(), file=sys.stderr)
    except (OSError, ValueError) as exc:
        print(f"{url}: {exc}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
