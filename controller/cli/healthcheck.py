"""`swarm-placement-probe [healthz|readyz] [HOST:PORT]`: the container healthcheck.

Asks the running controller's own endpoint (PLACEMENT_HTTP, or the address given: the
agent's, say) and exits 0 on 200, 1 otherwise. Standard library only: it starts in a few
milliseconds, every few seconds.
"""

from __future__ import annotations

import os
import sys
import urllib.error
import urllib.request
from collections.abc import Sequence

DEFAULT_ADDRESS = ":9464"
ANY_HOST = ("", "0.0.0.0", "::", "[::]")  # listen addresses: probe on loopback


def probe_url(address: str, path: str) -> str:
    host, _, port = address.rpartition(":")
    host = "127.0.0.1" if host in ANY_HOST else host
    return f"http://{host}:{port}/{path}"


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    path = args[0] if args else "healthz"
    if path not in ("healthz", "readyz") or len(args) > 2:
        print("usage: swarm-placement-probe [healthz|readyz] [HOST:PORT]", file=sys.stderr)
        return 2
    address = args[1] if len(args) > 1 else os.environ.get("PLACEMENT_HTTP") or DEFAULT_ADDRESS
    url = probe_url(address, path)
    try:
        with urllib.request.urlopen(url, timeout=3) as reply:
            print(reply.read().decode().strip())
            return 0
    except urllib.error.HTTPError as exc:
        print(exc.read().decode().strip(), file=sys.stderr)
    except (OSError, ValueError) as exc:
        print(f"{url}: {exc}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
