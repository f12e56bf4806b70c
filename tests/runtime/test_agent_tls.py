"""Agent traffic over TLS: the agent serves only TLS with a certificate, and the
controller's client believes it only with the CA that signed it."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme

from controller.adapters.agent_client import AgentError, fetch_report, probe_via
from controller.runtime.agent import Agent, AgentConfig
from controller.runtime.http_server import TlsFiles

SECRET = "agent-secret"


class _Engine:
    def info(self) -> dict[str, Any]:
        return {"Swarm": {"NodeID": "n3"}, "Name": "node-3", "NCPU": 2, "MemTotal": 1 << 30}

    def containers(self, **_: Any) -> list[dict[str, Any]]:
        return []


@pytest.fixture
def tls_agent(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    ca = trustme.CA()
    # Discovered agents are addressed by overlay IPs: the certificate names something else.
    cert = ca.issue_cert("agent.placement.internal")
    cert.private_key_pem.write_to_path(str(tmp_path / "key.pem"))
    cert.cert_chain_pems[0].write_to_path(str(tmp_path / "cert.pem"))
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    config = AgentConfig(
        listen=("127.0.0.1", 0),
        secret=SECRET,
        tls=TlsFiles(tmp_path / "cert.pem", tmp_path / "key.pem"),
    )
    client = type("Client", (), {"api": _Engine()})()
    agent = Agent(config, lambda: client)
    thread = threading.Thread(target=agent.serve_forever, kwargs={"measure": False})
    thread.start()
    try:
        yield agent.port, tmp_path / "ca.pem"
    finally:
        agent.stop()
        thread.join(timeout=10)


def test_a_report_over_tls_with_the_agents_ca(tls_agent: tuple[int, Path]) -> None:
    port, ca = tls_agent
    report = fetch_report(f"https://127.0.0.1:{port}", secret=SECRET, timeout=5, ca=ca)
    assert report.node_id == "n3" and report.hostname == "node-3"
    assert probe_via(f"https://127.0.0.1:{port}", "127.0.0.1", secret=SECRET, timeout=5, ca=ca) in (
        True,
        False,
    )


def test_plain_http_and_a_stranger_ca_get_nothing(
    tls_agent: tuple[int, Path], tmp_path: Path
) -> None:
    port, _ = tls_agent
    with pytest.raises(AgentError, match="cannot reach"):
        fetch_report(f"http://127.0.0.1:{port}", secret=SECRET, timeout=5)
    stranger = tmp_path / "stranger.pem"
    trustme.CA().cert_pem.write_to_path(str(stranger))
    with pytest.raises(AgentError, match="CERTIFICATE_VERIFY_FAILED"):
        fetch_report(f"https://127.0.0.1:{port}", secret=SECRET, timeout=5, ca=stranger)
