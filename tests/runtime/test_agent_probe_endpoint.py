"""The agent's indirect-probe endpoint over real HTTP: the secret is required, only an IP
address is taken, and the answer says whether this node reaches its gossip port."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from controller.adapters.agent_client import AgentError, probe_via
from controller.adapters.json_client import Endpoint, HttpJsonError, call_json
from controller.runtime import agent as agent_module
from controller.runtime.agent import Agent, AgentConfig

SECRET = "probe-secret"


class _Engine:
    def info(self) -> dict[str, Any]:
        return {"Swarm": {"NodeID": "n3"}, "Name": "node-3", "NCPU": 2, "MemTotal": 1 << 30}


@pytest.fixture
def agent_url(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    # The gossip port of this test: a listener here, nothing on the port after it.
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        monkeypatch.setattr(agent_module, "GOSSIP_PORT", port)
        client = type("Client", (), {"api": _Engine()})()
        agent = Agent(AgentConfig(listen=("127.0.0.1", 0), secret=SECRET), lambda: client)
        thread = threading.Thread(target=agent.serve_forever, kwargs={"measure": False})
        thread.start()
        try:
            yield f"http://127.0.0.1:{agent.port}"
        finally:
            agent.stop()
            thread.join(timeout=10)
            assert not thread.is_alive(), "the agent did not stop"


def test_the_agent_says_whether_it_reaches_an_address(agent_url: str) -> None:
    assert probe_via(agent_url, "127.0.0.1", secret=SECRET, timeout=2) is True
    assert probe_via(agent_url, "127.0.0.2", secret=SECRET, timeout=2) is False


def test_the_answer_names_the_vantage_point(agent_url: str) -> None:
    answer = call_json(
        Endpoint(agent_url),
        "GET",
        "/v1/probe?address=127.0.0.1",
        timeout=2,
        headers={"Authorization": f"Bearer {SECRET}"},
    )
    assert answer["node_id"] == "n3" and answer["hostname"] == "node-3"
    assert answer["reachable"] is True and answer["address"] == "127.0.0.1"


@pytest.mark.parametrize(
    ("query", "secret", "says"),
    [
        ("address=127.0.0.1", "wrong", "HTTP 401"),
        ("address=localhost", SECRET, "not an IP address"),
        ("", SECRET, "give exactly one"),
        ("address=127.0.0.1&address=127.0.0.2", SECRET, "give exactly one"),
    ],
)
def test_a_bad_probe_request_is_refused_with_its_reason(
    agent_url: str, query: str, secret: str, says: str
) -> None:
    with pytest.raises(HttpJsonError, match=says):
        call_json(
            Endpoint(agent_url),
            "GET",
            f"/v1/probe?{query}",
            timeout=2,
            headers={"Authorization": f"Bearer {secret}"},
        )


def test_a_wrong_secret_is_an_agent_error_for_the_controller(agent_url: str) -> None:
    with pytest.raises(AgentError, match="401"):
        probe_via(agent_url, "127.0.0.1", secret="wrong", timeout=2)
