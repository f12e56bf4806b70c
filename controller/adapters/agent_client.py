"""The controller's side of the node agents: where they are, and one report from one.

Agents are found either from a fixed list of addresses, or from the tasks of the agent's
global service: each running task's address on the service's (overlay) network, which
the controller must share with it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import docker
import requests
from pydantic import ValidationError

from controller.adapters.agent_report import AgentReport
from controller.adapters.errors import RetryableError
from controller.adapters.json_client import Endpoint, HttpJsonError, call_json


class AgentError(RetryableError, RuntimeError):
    """The agent could not be reached or answered something unusable."""


def fetch_report(
    address: str, *, secret: str, timeout: float, ca: Path | None = None
) -> AgentReport:
    """One agent's report; `ca`: the agents speak TLS with certificates it signed."""
    try:
        answer = call_json(
            Endpoint(address, ca),
            "GET",
            "/v1/report",
            timeout=timeout,
            headers={"Authorization": f"Bearer {secret}"},
        )
    except HttpJsonError as exc:
        raise AgentError(str(exc)) from exc
    return report_from(answer)


def report_from(answer: dict[str, Any]) -> AgentReport:
    """An agent's report from its answer's JSON object; AgentError names what is wrong."""
    try:
        return AgentReport.model_validate(answer)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "the report"
        raise AgentError(f"unusable report: {where}: {first['msg']}") from None


def probe_via(
    agent: str, address: str, *, secret: str, timeout: float, ca: Path | None = None
) -> bool:
    """Whether the agent at `agent` reaches `address`'s gossip port (runtime/agent.py)."""
    try:
        answer = call_json(
            Endpoint(agent, ca),
            "GET",
            f"/v1/probe?{urlencode({'address': address})}",
            timeout=timeout,
            headers={"Authorization": f"Bearer {secret}"},
        )
    except HttpJsonError as exc:
        raise AgentError(str(exc)) from exc
    return probe_answer_from(answer)


def probe_answer_from(answer: dict[str, Any]) -> bool:
    """Whether a probe answer says the address is reachable; AgentError if it says neither."""
    reachable = answer.get("reachable")
    if not isinstance(reachable, bool):
        raise AgentError(f"unusable probe answer: reachable is {reachable!r}, not true or false")
    return reachable


def addresses_from_tasks(
    tasks: list[dict[str, Any]], port: int, scheme: str = "http"
) -> dict[str, str]:
    """Node id -> SCHEME://ADDRESS:PORT of each running task (first non-ingress network)."""
    out: dict[str, str] = {}
    for task in tasks:
        if (task.get("Status") or {}).get("State") != "running" or not task.get("NodeID"):
            continue
        for attachment in task.get("NetworksAttachments") or []:
            network = attachment.get("Network") or {}
            if (network.get("Spec") or {}).get("Ingress"):
                continue
            addresses = attachment.get("Addresses") or []
            if addresses:
                host = str(addresses[0]).split("/")[0]
                out[str(task["NodeID"])] = f"{scheme}://{host}:{port}"
                break
    return out


def discover_agents(
    client: docker.DockerClient, service: str, port: int, scheme: str = "http"
) -> dict[str, str]:
    try:
        tasks = client.api.tasks(filters={"service": service, "desired-state": "running"})
    except (docker.errors.DockerException, requests.RequestException) as exc:
        # A manager amid a Raft election times out (requests' error, not Docker's).
        raise AgentError(f"cannot list the tasks of {service}: {exc}") from exc
    return addresses_from_tasks(tasks, port, scheme)
