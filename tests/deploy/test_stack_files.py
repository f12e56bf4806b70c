"""compose.yaml, compose.otel.yaml and deploy/Dockerfile agree with the code they run.

The real proof is tests/integration/test_deploy_swarm.py (a stack on a sandbox swarm);
these checks are fast and catch a renamed option or a dropped setting at once.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from controller.adapters.policy_file import load_policy_file
from controller.cli.main import build_parser
from controller.runtime.endpoints import LOOP_STALE_SECONDS

ROOT = Path(__file__).resolve().parents[2]


def _load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = YAML(typ="safe").load((ROOT / name).read_text())
    return data


@pytest.fixture(scope="module")
def controller() -> dict[str, Any]:
    service: dict[str, Any] = _load("compose.yaml")["services"]["controller"]
    return service


def test_two_replicas_on_managers_never_two_on_one(controller: dict[str, Any]) -> None:
    deploy = controller["deploy"]
    assert deploy["replicas"] == 2
    assert deploy["placement"]["constraints"] == ["node.role == manager"]
    assert deploy["placement"]["max_replicas_per_node"] == 1
    assert deploy["labels"]["placement.managed"] == "false", "it must never place itself"
    assert deploy["update_config"]["parallelism"] == 1
    assert {"cpus", "memory"} <= set(deploy["resources"]["reservations"])


def test_socket_policy_config_and_token_secret_land_where_the_options_read_them(
    controller: dict[str, Any],
) -> None:
    env = controller["environment"]
    (socket,) = [v for v in controller["volumes"] if v["target"] == "/var/run/docker.sock"]
    assert socket["type"] == "bind" and "/var/run/docker.sock" in socket["source"]
    assert controller["configs"][0]["target"] == env["PLACEMENT_POLICY"]
    secret = controller["secrets"][0]["target"]
    assert env["PLACEMENT_METRICS_TOKEN_FILE"] == f"/run/secrets/{secret}"
    assert env["PLACEMENT_LEASE_NAME"] == "{{.Service.Name}}-lease"
    assert "PLACEMENT_LEASE_SERVICE" not in env, "the lease is no longer on the service"
    assert "{{.Task.Name}}" in env["PLACEMENT_LEASE_HOLDER"]
    assert controller["healthcheck"]["test"] == ["CMD", "swarm-placement-probe", "healthz"]


def test_every_variable_the_stack_sets_is_an_option_of_run(
    controller: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    env = {
        k: re.sub(r"\$\{[A-Z_]+:-([^}]*)\}", r"\1", v) for k, v in controller["environment"].items()
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    args = build_parser().parse_args(controller["command"])
    assert str(args.policy) == env["PLACEMENT_POLICY"]
    assert args.lease_name == env["PLACEMENT_LEASE_NAME"]
    assert args.lease_holder == env["PLACEMENT_LEASE_HOLDER"]
    assert float(args.lease_lifetime) == float(env["PLACEMENT_LEASE_LIFETIME"])
    assert args.http == env["PLACEMENT_HTTP"]
    assert str(args.metrics_token_file) == env["PLACEMENT_METRICS_TOKEN_FILE"]
    assert args.agent_service == env["PLACEMENT_AGENT_SERVICE"]
    assert str(args.agent_secret_file) == env["PLACEMENT_AGENT_SECRET_FILE"]
    assert args.health_listen == env["PLACEMENT_HEALTH_LISTEN"]
    assert str(args.health_token_file) == env["PLACEMENT_HEALTH_TOKEN_FILE"]
    targets = {f"/run/secrets/{s['target']}" for s in controller["secrets"]}
    assert env["PLACEMENT_HEALTH_TOKEN_FILE"] in targets
    assert str(args.ui_token_file) == env["PLACEMENT_UI_TOKEN_FILE"] in targets
    # The fast path is the stack's default: liveness, with the agents' indirect probes.
    assert args.liveness is True


def test_an_agent_on_every_node_reachable_by_the_controllers(
    controller: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    stack = _load("compose.yaml")
    agent = stack["services"]["agent"]
    assert agent["deploy"]["mode"] == "global"
    assert agent["deploy"]["labels"]["placement.managed"] == "false"
    assert set(agent["networks"]) & set(controller["networks"])
    env = agent["environment"]
    port = env["PLACEMENT_AGENT_LISTEN"].rsplit(":", 1)[1]
    assert port == "9810"
    [secret] = [s for s in agent["secrets"] if s["source"] == "agent-secret"]
    assert env["PLACEMENT_AGENT_SECRET_FILE"] == f"/run/secrets/{secret['target']}"
    assert secret["source"] in {s["source"] for s in controller["secrets"]}
    assert controller["environment"]["PLACEMENT_AGENT_SERVICE"].endswith("_agent")
    for key, value in env.items():
        monkeypatch.setenv(key, re.sub(r"\$\{[A-Z_]+:-([^}]*)\}", r"\1", value))
    args = build_parser().parse_args(agent["command"])
    assert args.listen == env["PLACEMENT_AGENT_LISTEN"]
    assert str(args.secret_file) == env["PLACEMENT_AGENT_SECRET_FILE"]
    assert args.usage == "host" and str(args.proc) == env["PLACEMENT_AGENT_PROC"]
    assert args.docker_proxy, "the agent reaches Docker read-only, and not as root"


def test_the_stacks_network_is_encrypted() -> None:
    network = _load("compose.yaml")["networks"]["placement"]
    assert network["driver"] == "overlay" and "encrypted" in network["driver_opts"]


def test_the_stacks_sample_policy_is_valid_and_opt_in() -> None:
    config = _load("compose.yaml")["configs"]["policy"]
    default = re.search(r":-([^}]*)\}", config["file"])
    assert default is not None
    policy = load_policy_file(ROOT / default.group(1)).policy
    assert policy.defaults.get("managed") is False


def test_the_otel_file_adds_to_the_stack_and_uses_what_the_main_file_defines() -> None:
    main, otel = _load("compose.yaml"), _load("compose.otel.yaml")
    # The docker CLI before 25 (Debian 12's) refuses a stack file without a version.
    assert main["version"] == otel["version"] == "3.8"
    assert otel["services"]["controller"]["environment"]["PLACEMENT_TRACE_EXPORTER"] == "otlp"
    for name, service in otel["services"].items():
        for network in service.get("networks", []):
            assert network in main["networks"] | otel.get("networks", {}), (name, network)
        for secret in service.get("secrets", []):
            assert secret["source"] in main["secrets"], (name, secret)
    assert (ROOT / otel["configs"]["otel-collector"]["file"]).is_file()


def test_the_dockerfile_takes_its_base_as_an_argument_and_probes_with_a_real_script() -> None:
    text = (ROOT / "deploy" / "Dockerfile").read_text()
    # By digest: a tag can be moved to another image by whoever can push to it.
    assert re.search(r"^ARG BASE=python:3\.12-slim@sha256:[0-9a-f]{64}$", text, re.MULTILINE)
    assert len(re.findall(r"^FROM \$\{BASE\}", text, re.MULTILINE)) == 2, "multi-stage"
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert "swarm-placement-probe" in scripts and "swarm-placement-probe" in text


def test_the_healthchecks_ask_a_unix_socket_no_network_client_reaches(
    controller: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    text = (ROOT / "deploy" / "Dockerfile").read_text()
    found = re.search(r"PLACEMENT_PROBE_SOCKET=(\S+)", text)
    assert found is not None, "the image names the probe socket"
    agent = _load("compose.yaml")["services"]["agent"]
    for service in (controller, agent):
        # No address given: the probe asks the socket the image names (cli/healthcheck.py).
        assert service["healthcheck"]["test"] == ["CMD", "swarm-placement-probe", "healthz"]
        # It fails when the process is stuck (no tick for LOOP_STALE_SECONDS), not when a
        # loaded node is slow to start the check itself.
        timeout = float(service["healthcheck"]["timeout"].removesuffix("s"))
        assert timeout >= LOOP_STALE_SECONDS, service["healthcheck"]
        monkeypatch.setenv("PLACEMENT_PROBE_SOCKET", found.group(1))
        args = build_parser().parse_args(service["command"])
        assert str(args.probe_socket) == found.group(1)


def test_the_stack_speaks_only_tls_with_certificates_as_secrets(
    controller: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every token and the agents' secret would otherwise cross the network in clear."""
    stack = _load("compose.yaml")
    agent = stack["services"]["agent"]
    for service in (controller, agent):
        env = {
            k: re.sub(r"\$\{[A-Z_]+:-([^}]*)\}", r"\1", v)
            for k, v in service["environment"].items()
        }
        mounted = {f"/run/secrets/{s['target']}": s["source"] for s in service["secrets"]}
        for key in ("PLACEMENT_TLS_CERT_FILE", "PLACEMENT_TLS_KEY_FILE"):
            assert mounted[env[key]] in stack["secrets"], (key, service["command"])
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        args = build_parser().parse_args(service["command"])
        assert args.tls_cert_file is not None and args.tls_key_file is not None
    env = controller["environment"]
    assert env["PLACEMENT_AGENT_CA_FILE"] in {
        f"/run/secrets/{s['target']}" for s in controller["secrets"]
    }, "the controllers reach the agents over https:// and believe only the stack's CA"
    collector = _load("deploy/otel-collector.yaml")["receivers"]["prometheus"]["config"]
    assert collector["scrape_configs"][0]["scheme"] == "https"


def test_nothing_without_a_credential_is_published_on_the_nodes() -> None:
    """A published port answers on every node of the swarm (the routing mesh): Jaeger's
    UI, which asks no credential and shows every decision, was one."""
    for name in ("compose.yaml", "compose.otel.yaml"):
        for service, spec in _load(name)["services"].items():
            assert "ports" not in spec, (name, service)


def test_the_agents_hold_a_key_of_their_own_never_the_controllers() -> None:
    """The agent runs on every node: with the controllers' key, any node taken could
    pose as a controller to every client of the stack."""
    stack = _load("compose.yaml")
    services = stack["services"]
    key_of = {
        name: {
            s["source"]
            for s in spec["secrets"]
            if f"/run/secrets/{s['target']}" == spec["environment"]["PLACEMENT_TLS_KEY_FILE"]
        }
        for name, spec in services.items()
    }
    assert key_of["controller"] and key_of["agent"], key_of
    assert not key_of["controller"] & key_of["agent"], key_of
    agent_secrets = {s["source"] for s in services["agent"]["secrets"]}
    assert not agent_secrets & key_of["controller"], "the controllers' key reaches every node"
    names = {stack["secrets"][s]["name"] for s in key_of["controller"] | key_of["agent"]}
    assert len(names) == 2, names


def test_traces_travel_on_a_network_no_outside_container_joins() -> None:
    """The spans hold every decision, and Jaeger and the OTLP receivers ask no
    credential: on the attachable stack network any container could read or forge them."""
    main, otel = _load("compose.yaml"), _load("compose.otel.yaml")
    networks = otel.get("networks", {})
    for name in ("otel-collector", "jaeger"):
        joined = otel["services"][name]["networks"]
        assert joined, name
        for network in joined:
            assert network not in main["networks"], (name, network, "the stack's network")
            spec = networks[network]
            assert spec.get("attachable") is False and spec.get("internal") is True, spec
    assert "otel-collector" not in main["services"] and "jaeger" not in main["services"]
    assert set(otel["services"]["controller"]["networks"]) >= {"placement", *networks}


def test_the_build_context_leaves_out_what_is_not_the_product() -> None:
    """.dev/ holds the local engines, sandboxes' state and caches: none of it belongs in
    an image's build context, and some of it is private to this machine."""
    ignored = set((ROOT / ".dockerignore").read_text().split())
    assert {".git", ".venv", ".dev", ".engines", "tests", "bench"} <= ignored


def test_open_files_are_bounded_with_room_for_the_connection_caps() -> None:
    from controller.runtime.agent import AGENT_CONNECTIONS  # noqa: PLC0415
    from controller.runtime.http_server import MAX_CONNECTIONS  # noqa: PLC0415

    services = _load("compose.yaml")["services"]
    for name, cap in (("controller", MAX_CONNECTIONS), ("agent", AGENT_CONNECTIONS)):
        nofile = services[name]["ulimits"]["nofile"]
        assert nofile["soft"] == nofile["hard"], name
        assert 4 * cap <= nofile["soft"] <= 65536, (name, nofile)
