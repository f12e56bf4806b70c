"""A secret that would cross the network in clear is said at every start, loudly."""

from __future__ import annotations

import io
import logging
from pathlib import Path

import pytest

from controller.runtime.health_inputs import HealthConfig
from controller.runtime.loop import Controller, RunConfig
from controller.runtime.plaintext import is_loopback, plaintext_secrets
from controller.runtime.policy_source import PolicySource

STACK = HealthConfig(webhook=("0.0.0.0", 9465), webhook_token="t", agent_service="p_agent")


def test_the_stack_without_tls_names_every_secret_in_clear() -> None:
    said = plaintext_secrets(
        http=("0.0.0.0", 9464), tls=False, metrics_token=True, ui=True,
        health=STACK,
    )  # fmt: skip
    assert len(said) == 4
    assert "the metrics token crosses the network in clear" in said[0]
    assert "the web view's token and session cookie" in said[1]
    assert said[2].startswith("--health-listen 0.0.0.0:9465 speaks plain HTTP: the webhook's")
    assert "the agents of p_agent are reached over plain HTTP" in said[3]
    assert all("docs/operations-deploy.md, TLS" in s for s in said)


def test_with_tls_and_the_agents_ca_nothing_is_said(tmp_path: Path) -> None:
    sealed = HealthConfig(
        webhook=("0.0.0.0", 9465), webhook_token="t", agent_service="p_agent", agent_ca=tmp_path
    )
    assert not plaintext_secrets(
        http=("0.0.0.0", 9464), tls=True, metrics_token=True, ui=True,
        health=sealed,
    )  # fmt: skip


def test_loopback_is_no_network_but_a_listed_agent_elsewhere_is() -> None:
    agents = HealthConfig(
        agents=(("node-1", "http://127.0.0.1:9810"), ("node-2", "http://10.0.0.5:9810"))
    )
    said = plaintext_secrets(
        http=("127.0.0.1", 9464), tls=False, metrics_token=True, ui=True,
        health=agents,
    )  # fmt: skip
    assert said == [
        "the agent http://10.0.0.5:9810 is reached over plain HTTP: the agents' secret "
        "crosses the network in clear; list it as https:// with --agent-ca-file"
    ]
    assert is_loopback("::1") and is_loopback("localhost") and not is_loopback("0.0.0.0")


def test_the_controller_says_it_in_its_log_and_on_stderr(caplog: pytest.LogCaptureFixture) -> None:
    out = io.StringIO()
    controller = Controller(
        RunConfig(http=("0.0.0.0", 0), metrics_token="m"),
        PolicySource(None),
        out=out,
        handle_signals=False,
    )
    with caplog.at_level(logging.WARNING):
        controller._warn_plaintext()
    assert "warning: --http 0.0.0.0:0 speaks plain HTTP: the metrics token" in out.getvalue()
    assert any("the metrics token crosses the network" in r.message for r in caplog.records)
    assert controller.server is not None
    controller.server.close()
