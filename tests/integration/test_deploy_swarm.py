"""The controller deployed as a stack: image, compose.yaml, leader failover, metrics.

On a sandbox of three managers and a worker (node-4), the image is built with no registry
(a Debian base made by debootstrap, wheels from this host), loaded into every node, and
`docker stack deploy -c compose.yaml` starts two controller replicas and an agent on every
node. Through the stack:
a service that prefers node-4 is placed there, fails over when node-4 dies and fails
back when it returns. Then the lease holder's node is killed: the other replica takes
the lease and handles the next failover and failback. /metrics of the new leader is
scraped, and a rotated policy config is picked up. The lease lives in a config of its own:
the controller's service is never written by the controller, so rolling it back returns
to the operator's previous deploy.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest
import trustme
from prometheus_client.parser import text_string_to_metric_families
from ruamel.yaml import YAML

from controller.adapters.engine_http import engine_url, post_json
from controller.core.lease import Lease, lease_from_labels
from controller.sandbox import Sandbox, SandboxError
from controller.sandbox.app_image import build_controller_image, load_into

from .support import running_by_node, wait_until

pytestmark = [pytest.mark.swarm, pytest.mark.slow, pytest.mark.alone]
ROOT = Path(__file__).resolve().parents[2]
STACK = "placement"
CONTROLLER = f"{STACK}_controller"
LEASE = f"{CONTROLLER}-lease"  # compose.yaml: PLACEMENT_LEASE_NAME
TOKEN = "metrics-token-for-the-test"
LIFETIME = 6
# As docs/operations-deploy.md makes it: the names the stack's clients use.
CERTIFICATE_NAMES = ("controller", "tasks.controller", "localhost", "127.0.0.1")
# Inside a controller's container: the stack's CA, to speak TLS to its own ports.
IN_CONTAINER_TLS = (
    "import ssl\ncontext = ssl.create_default_context(cafile='/run/secrets/placement-tls-ca')\n"
)
POLICY = """\
apiVersion: placement/v1
defaults:
  managed: false
controller:
  move-cooldown: 2s
  resync-interval: 1s
"""


@pytest.fixture
def stack(make_sandbox, tmp_path) -> Iterator[tuple[Sandbox, dict[str, str]]]:  # type: ignore[no-untyped-def]
    cli = shutil.which("docker")
    if cli is None:
        pytest.fail("the docker command line (docker.io) is needed for `docker stack deploy`")
    sandbox = make_sandbox(nodes=4, managers=3)
    started = time.monotonic()
    built = build_controller_image(sandbox.docker_host("node-1"))
    load_into([sandbox.docker_host(n) for n in sandbox.nodes[1:]], built)
    print(f"image {built.image_id}: {built.timings()}, {time.monotonic() - started:.1f} s")
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    env = {
        **os.environ,
        "PLACEMENT_IMAGE": built.image_id,
        # Each sandbox node's engine listens on a socket of its own: Swarm expands the
        # template on the node, so each replica mounts its own manager's socket.
        "PLACEMENT_DOCKER_SOCKET": f"{sandbox.state.dir}/{{{{.Node.Hostname}}}}/docker.sock",
        "PLACEMENT_LEASE_LIFETIME": str(LIFETIME),
        # Each replica of a rolling update is watched this long before the next goes.
        "PLACEMENT_UPDATE_MONITOR": "5s",
        "PLACEMENT_POLICY_FILE": str(policy),
        "PLACEMENT_POLICY_VERSION": "1",
        # The sandbox's nodes share this host's /proc: agents sum their containers instead.
        "PLACEMENT_AGENT_USAGE": "containers",
        "DOCKER_CLI": cli,
    }
    client = sandbox.client()
    client.secrets.create(name="placement-metrics-token", data=TOKEN.encode())
    client.secrets.create(name="placement-agent-secret", data=b"agent-secret-for-the-test")
    client.secrets.create(name="placement-health-token", data=b"health-token-for-the-test")
    client.secrets.create(name="placement-ui-token", data=b"ui-token-for-the-test")
    # The stack speaks only TLS: a certificate for the controllers, another for the
    # agents (every node holds the agents' key, none the controllers').
    ca = trustme.CA()
    cert = ca.issue_cert(*CERTIFICATE_NAMES)
    agent = ca.issue_cert("agent.swarm-placement")
    client.secrets.create(name="placement-tls-cert", data=cert.cert_chain_pems[0].bytes())
    client.secrets.create(name="placement-tls-key", data=cert.private_key_pem.bytes())
    client.secrets.create(name="placement-agent-tls-cert", data=agent.cert_chain_pems[0].bytes())
    client.secrets.create(name="placement-agent-tls-key", data=agent.private_key_pem.bytes())
    client.secrets.create(name="placement-tls-ca", data=ca.cert_pem.bytes())
    client.close()
    yield sandbox, env


def _kernel_has_esp() -> bool:
    """Whether this kernel can carry an encrypted overlay (IPsec ESP); unknown means yes."""
    for path in (Path("/proc/config.gz"), Path(f"/boot/config-{os.uname().release}")):
        if path.exists():
            raw = path.read_bytes()
            text = (gzip.decompress(raw) if path.suffix == ".gz" else raw).decode()
            return re.search(r"^CONFIG_INET_ESP=[ym]$", text, re.M) is not None
    return True


def _compose_file(env: dict[str, str]) -> Path:
    """compose.yaml as shipped; on a kernel built without ESP (some VM kernels), the same
    without the network's encryption, which such a kernel cannot carry (the test would
    otherwise measure the kernel, not the stack)."""
    if _kernel_has_esp():
        return ROOT / "compose.yaml"
    text = (ROOT / "compose.yaml").read_text()
    plain = re.sub(r"\n    driver_opts:\n      encrypted: \"true\"\n", "\n", text)
    network = YAML(typ="safe").load(plain)["networks"]["placement"]
    assert "driver_opts" not in network, "compose.yaml's network changed: update this test"
    copy = Path(env["PLACEMENT_POLICY_FILE"]).with_name("compose-no-esp.yaml")
    copy.write_text(plain)
    print("this kernel has no IPsec ESP (CONFIG_INET_ESP): the overlay is not encrypted")
    return copy


def _deploy(sandbox: Sandbox, env: dict[str, str]) -> None:
    result = subprocess.run(
        [env["DOCKER_CLI"], "stack", "deploy", "--resolve-image", "never", "-c",
         str(_compose_file(env)), STACK],
        env={**env, "DOCKER_HOST": sandbox.manager_host},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr


def _lease(sandbox: Sandbox) -> Lease | None:
    try:
        client = sandbox.client()
        try:
            labels = client.api.inspect_config(LEASE)["Spec"].get("Labels") or {}
        finally:
            client.close()
    except docker.errors.DockerException:
        return None  # a manager election under way, or no holder has created it yet
    return lease_from_labels(labels)


def _versions(sandbox: Sandbox) -> tuple[int, int]:
    """The Version.Index of the controller's service and of its lease config."""
    client = sandbox.client()
    try:
        service = client.api.inspect_service(CONTROLLER)["Version"]["Index"]
        return int(service), int(client.api.inspect_config(LEASE)["Version"]["Index"])
    finally:
        client.close()


def _service_stays_put_while_the_lease_renews(sandbox: Sandbox, renewals: int = 3) -> None:
    service, lease = _versions(sandbox)
    wait_until(
        lambda: _versions(sandbox)[1] >= lease + renewals,
        60,
        f"{renewals} renewals of the lease",
        interval=0.5,
    )
    assert _versions(sandbox)[0] == service, "something wrote the controller's service"


def _update_state(sandbox: Sandbox) -> str | None:
    client = sandbox.client()
    try:
        return (client.api.inspect_service(CONTROLLER).get("UpdateStatus") or {}).get("State")
    finally:
        client.close()


def _roll_back(sandbox: Sandbox) -> dict[str, Any]:
    """`docker service rollback` of the controller's service; its spec once done."""
    client = sandbox.client()
    try:
        api = client.api
        attrs = api.inspect_service(CONTROLLER)
        url = engine_url(api, "/services/{0}/update", attrs["ID"])
        params = {"version": attrs["Version"]["Index"], "rollback": "previous"}
        post_json(api, url, data=attrs["Spec"], params=params)
    finally:
        client.close()
    wait_until(lambda: _update_state(sandbox) == "rollback_completed", 180, "the rollback")
    client = sandbox.client()
    try:
        return dict(client.api.inspect_service(CONTROLLER)["Spec"])
    finally:
        client.close()


def _holder_node(lease: Lease) -> str:
    return lease.holder.rsplit("@", 1)[1]


def _metrics(sandbox: Sandbox, lease: Lease) -> dict[str, float]:
    """Scrape /metrics inside the holder's container: sample name{labels} -> value."""
    task, node = lease.holder.rsplit("@", 1)
    client = sandbox.client(node)
    try:
        container = client.containers.get(task)
        code, out = container.exec_run(
            ["python3", "-c",
             IN_CONTAINER_TLS +
             "import urllib.request as u; r = u.Request('https://127.0.0.1:9464/metrics', "
             f"headers={{'Authorization': 'Bearer {TOKEN}'}}); "
             "print(u.urlopen(r, context=context).read().decode())"]
        )  # fmt: skip
    finally:
        client.close()
    assert code == 0, out.decode()
    samples: dict[str, float] = {}
    for family in text_string_to_metric_families(out.decode()):
        for s in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()))
            samples[f"{s.name}{{{labels}}}"] = s.value
    return samples


def _post_health(sandbox: Sandbox, lease: Lease, body: dict[str, object]) -> dict[str, Any]:
    """POST /v1/health from inside the holder's container, with the token of its secret."""
    task, node = lease.holder.rsplit("@", 1)
    client = sandbox.client(node)
    try:
        code, out = client.containers.get(task).exec_run(
            ["python3", "-c",
             IN_CONTAINER_TLS +
             "import json, sys, urllib.request as u\n"
             "token = open('/run/secrets/placement-health-token').read().strip()\n"
             "r = u.Request('https://127.0.0.1:9465/v1/health', data=sys.argv[1].encode(), "
             "headers={'Authorization': 'Bearer ' + token, 'Content-Type': 'application/json'})\n"
             "print(u.urlopen(r, context=context).read().decode())",
             json.dumps(body)]
        )  # fmt: skip
    finally:
        client.close()
    assert code == 0, out.decode()
    return dict(json.loads(out.decode()))


def _live_holder(sandbox: Sandbox, expected: Lease) -> Lease:
    """The lease holder whose container runs (waiting up to two lease lifetimes for one).

    Should `expected`'s container have exited, the stack survives it: another replica
    takes the lease. The exit is printed with what Docker says about it, so a run shows it.
    """
    lease = wait_until(
        lambda: (r := _lease(sandbox)) and r.holder and _exited(sandbox, r) is None and r,
        LIFETIME * 2 + 30,
        "a lease holder whose container runs",
        interval=0.5,
    )
    if lease.holder != expected.holder:
        print(f"the leader {expected.holder} gave way to {lease.holder}: "
              f"{_exited(sandbox, expected) or 'still running'}")  # fmt: skip
    return lease


def _exited(sandbox: Sandbox, lease: Lease) -> str | None:
    """None while the holder's container runs; otherwise what Docker says of it."""
    task, node = lease.holder.rsplit("@", 1)
    try:
        client = sandbox.client(node)
    except docker.errors.DockerException as exc:
        return f"its engine on {node} does not answer: {exc}"
    try:
        container = client.containers.get(task)
        state = container.attrs["State"]
        if state.get("Running"):
            return None
        health = (state.get("Health") or {}).get("Log") or []
        tail = container.logs(tail=5).decode(errors="replace").strip()
        return (
            f"{state.get('Status')} exit {state.get('ExitCode')} oom-killed "
            f"{state.get('OOMKilled')} error {state.get('Error')!r} health "
            f"{[h.get('Output', '').strip() for h in health[-3:]]} last log {tail!r}"
        )
    except docker.errors.DockerException as exc:
        return f"cannot inspect it: {exc}"
    finally:
        client.close()


def _total(samples: dict[str, float], name: str) -> float:
    return sum(v for k, v in samples.items() if k.split("{", 1)[0] == name)


def _holder_log(
    sandbox: Sandbox, lease: Lease, words: tuple[str, ...] = (), last: int = 8
) -> list[str]:
    """The last lines of the holder's log that contain one of `words` (any line if none)."""
    task, node = lease.holder.rsplit("@", 1)
    client = sandbox.client(node)
    try:
        text = client.containers.get(task).logs().decode(errors="replace")
    finally:
        client.close()
    return [line for line in text.splitlines() if not words or any(w in line for w in words)][
        -last:
    ]


def _lease_notes(sandbox: Sandbox, lease: Lease) -> list[str]:
    """What the holder's container said about the lease and the engine."""
    return _holder_log(sandbox, lease, ("lease:", "unreachable"))


# As the agent's own user: the socket itself, then a write through the agent's proxy.
AS_THE_AGENT = """
import socket, sys
try:
    socket.socket(socket.AF_UNIX).connect("/var/run/docker.sock")
    sys.exit("the agent's user opened the Docker socket")
except PermissionError:
    pass
s = socket.socket(socket.AF_UNIX)
s.connect("/run/swarm-placement/docker-read.sock")
s.sendall(b"POST /v1.41/containers/create HTTP/1.1\\r\\nHost: x\\r\\n"
          b"Content-Length: 2\\r\\n\\r\\n{}")
print(s.recv(200).decode().splitlines()[0])
"""


def _agent_reads_docker_only(sandbox: Sandbox) -> None:
    """The agent's process runs as user 65534, which can neither open the Docker socket
    nor write through the agent's proxy (docs/operations-deploy.md)."""
    client = sandbox.client()
    try:
        [task] = client.api.tasks(
            filters={"service": f"{STACK}_agent", "desired-state": "running", "node": "node-4"}
        )
        node = next(n["Description"]["Hostname"] for n in client.api.nodes()
                    if n["ID"] == task["NodeID"])  # fmt: skip
    finally:
        client.close()
    engine = sandbox.client(node)
    try:
        container = engine.containers.get(task["Status"]["ContainerStatus"]["ContainerID"])
        code, out = container.exec_run(["sh", "-c", "grep '^Uid:' /proc/1/status"])
        assert code == 0 and out.decode().split()[1:3] == ["65534", "65534"], out
        code, out = container.exec_run(["python3", "-c", AS_THE_AGENT], user="65534")
    finally:
        engine.close()
    assert code == 0 and out.decode().strip() == "HTTP/1.1 403 Forbidden", out.decode()


def _exec(sandbox: Sandbox, lease: Lease, command: list[str]) -> tuple[int, str]:
    """Run a command in the holder's container: its exit code and output."""
    task, node = lease.holder.rsplit("@", 1)
    client = sandbox.client(node)
    try:
        code, out = client.containers.get(task).exec_run(command)
    finally:
        client.close()
    return int(code), out.decode(errors="replace")


def _signal_holder(sandbox: Sandbox, lease: Lease, signal: str) -> None:
    task, node = lease.holder.rsplit("@", 1)
    client = sandbox.client(node)
    try:
        client.containers.get(task).kill(signal=signal)
    finally:
        client.close()


def _on(sandbox: Sandbox, service: str, hosts: set[str], timeout: float = 90) -> None:
    def check() -> bool:
        client = sandbox.client()
        try:
            return set(running_by_node(client, service)) == hosts
        except docker.errors.DockerException:
            return False
        finally:
            client.close()

    wait_until(check, timeout, f"{service} running on {hosts}", interval=0.3)


def _fail_over_and_back(sandbox: Sandbox, service: str) -> str:
    sandbox.fail("node-4", "crash")
    sandbox.wait_node_state("node-4", "down")
    down = time.monotonic()
    wait_until(
        lambda: _running_elsewhere(sandbox, service), 60, f"{service} failed over", interval=0.3
    )
    failed_over = time.monotonic() - down
    sandbox.restore("node-4")
    sandbox.wait_node_state("node-4", "ready")
    ready = time.monotonic()
    _on(sandbox, service, {"node-4"})  # only the controller moves a task back
    return (
        f"running elsewhere {failed_over:.1f} s after node-4 was marked down, back on node-4 "
        f"{time.monotonic() - ready:.1f} s after it was ready again (failback-delay 3 s)"
    )


def _ready_and_active(sandbox: Sandbox, at_least: int, timeout: float = 60) -> str:
    """Wait for `at_least` nodes Swarm calls ready and active; say which, and how long."""
    waited = time.monotonic()

    def nodes() -> list[str]:
        try:
            info = sandbox.node_info()
        except SandboxError:  # no manager answers while a Raft leader is elected
            return []
        up = [n for n in info if n["state"] == "ready" and n["availability"] == "active"]
        return [n["hostname"] for n in up]

    found = wait_until(
        lambda: (up := nodes()) and len(up) >= at_least and up,
        timeout,
        f"{at_least} ready and active nodes",
        interval=0.5,
    )
    return f"{', '.join(sorted(found))} ready and active after {time.monotonic() - waited:.1f} s"


def _running_elsewhere(sandbox: Sandbox, service: str) -> bool:
    client = sandbox.client()
    try:
        hosts = running_by_node(client, service)
    except docker.errors.DockerException:
        return False
    finally:
        client.close()
    return bool(hosts) and "node-4" not in hosts


@contextlib.contextmanager
def _explained(sandbox: Sandbox, lease: Lease) -> Iterator[None]:
    """On a failure, print what the leader's container was (it has been seen to exit),
    its last log lines and db's tasks, for whoever reads a failed run."""
    try:
        yield
    except Exception as exc:
        # The summary line of a failed run shows notes; captured output may be cut.
        exc.add_note(f"the leader {lease.holder}: {_exited(sandbox, lease) or 'running'}")
        try:  # what it last said about db, node-4 and the lease, short enough for a summary
            said = _holder_log(sandbox, lease, ('"service db"', "node-4", "lease:"), last=10)
            exc.add_note("\n".join(line[:400] for line in said))
        except docker.errors.DockerException as err:
            exc.add_note(f"its log cannot be read: {err}")
        with contextlib.suppress(Exception):  # the nodes as Swarm saw them: a panic's base
            exc.add_note(
                "nodes: "
                + ", ".join(
                    f"{n['hostname']} {n['id'][:12]} {n['state']}/{n['availability']}"
                    for n in sandbox.node_info()
                )
            )
        task, node = lease.holder.rsplit("@", 1)
        client = sandbox.client(node)
        try:
            container = client.containers.get(task)
            state = container.attrs["State"]
            health = (state.get("Health") or {}).get("Log") or []
            print(f"leader container: {state.get('Status')} exit {state.get('ExitCode')} "
                  f"oom-killed {state.get('OOMKilled')} error {state.get('Error')!r} "
                  f"health {[h.get('Output', '').strip() for h in health[-3:]]}")  # fmt: skip
            print(container.logs(tail=80).decode(errors="replace"))
        except docker.errors.DockerException as exc:
            print(f"leader container: cannot inspect it: {exc}")
        finally:
            client.close()
        client = sandbox.client()
        try:
            for t in client.api.tasks(filters={"service": "db"}) + client.api.tasks(
                filters={"service": CONTROLLER}
            ):
                status, where = t["Status"], t.get("NodeID", "")[:12]
                code = (status.get("ContainerStatus") or {}).get("ExitCode", "")
                what = f"{t['DesiredState']}/{status['State']} {status.get('Err', '')} {code}"
                print(f"task {t['ID'][:12]} of {t['ServiceID'][:12]} on {where}: {what}")
        finally:
            client.close()
        raise


def test_the_stack_places_fails_over_and_survives_its_leader(stack) -> None:  # type: ignore[no-untyped-def]
    sandbox, env = stack
    deployed = time.monotonic()
    _deploy(sandbox, env)
    first = wait_until(lambda: (r := _lease(sandbox)) and r.holder and r, 120, "a lease holder")
    print(f"deployed: {first.holder} took the lease {time.monotonic() - deployed:.1f} s later")
    client = sandbox.client()
    tasks = client.api.tasks(filters={"service": CONTROLLER, "desired-state": "running"})
    deployed_spec = client.api.inspect_service(CONTROLLER)["Spec"]
    client.close()
    _service_stays_put_while_the_lease_renews(sandbox)
    nodes = {t["NodeID"] for t in tasks}
    assert len(tasks) == 2 and len(nodes) == 2, "two replicas on two managers"
    with _explained(sandbox, first):
        # An agent on every node, and the leader collects from each of them.
        wait_until(
            lambda: _total(_metrics(sandbox, first), "placement_agents_reporting") == 4,
            90,
            "the leader to hear from the four agents",
            interval=1.0,
        )
        # The stack's defaults carry no secret in clear (the agents over https:// too).
        assert not _holder_log(sandbox, first, ("in clear",)), _holder_log(sandbox, first)
        # The crash tests' pause hook is not in the production image.
        code, _ = _exec(sandbox, first, ["python3", "-c", "import controller.runtime.pause_hook"])
        assert code != 0
        _agent_reads_docker_only(sandbox)

    # Fillers make Swarm itself put db anywhere but on node-4, its preferred node.
    for i in range(2):
        sandbox.create_service(f"fill{i}", constraints=["node.hostname==node-4"])
    sandbox.wait_services_running(["fill0", "fill1"])
    sandbox.create_service(
        "db",
        labels={
            "placement.managed": "true",
            "placement.preferred-nodes": "node-4",
            "placement.failback": "immediate",
            "placement.failback-delay": "3s",
        },
    )
    _on(sandbox, "db", {"node-4"})
    print(f"first failover: {_fail_over_and_back(sandbox, 'db')}")

    # The leader's node dies; its replica cannot write any more (its engine is gone).
    first = _lease(sandbox) or first
    old_node = _holder_node(first)
    raft_leader = next(n["hostname"] for n in sandbox.node_info() if n["leader"])
    killed = time.monotonic()
    sandbox.fail(old_node, "crash")
    second = wait_until(
        lambda: (r := _lease(sandbox)) and r.holder and r.holder != first.holder and r,
        90,
        "another replica to take the lease",
        interval=0.2,
    )
    took = time.monotonic() - killed
    print(f"lease: {first.holder} (term {first.term}) -> {second.holder} (term {second.term}) "
          f"{took:.1f} s after its node was killed; lifetime {LIFETIME} s; the killed node "
          f"{'was' if raft_leader == old_node else 'was not'} the Raft leader")  # fmt: skip
    assert _holder_node(second) != old_node and second.term > first.term
    print("\n".join(_lease_notes(sandbox, second)))

    with _explained(sandbox, second):
        print(f"after the new leader took over: {_fail_over_and_back(sandbox, 'db')}")
        # The health webhook of the stack: a monitor's `failed` moves db off node-4 at once,
        # with node-4 up all along; its `ok` releases the node and db fails back. A monitor
        # posts to the replica that leads now (every replica, in compose.yaml's advice).
        failed = {"node": "node-4", "state": "failed", "reason": "storage lost", "ttl": 300}
        # One report may take 34% of the ready and active nodes: 1 of node-2..4, 0 of
        # two. After the Raft leader's node dies Swarm may keep a live node from `ready`
        # a while; a report then is a health panic, by design (docs/health.md).
        print(f"before the report: {_ready_and_active(sandbox, at_least=3)}")
        posted = time.monotonic()
        answer = _post_health(sandbox, _live_holder(sandbox, second), failed)
        assert answer["role"] == "leader" and answer["hostname"] == "node-4"
        wait_until(lambda: _running_elsewhere(sandbox, "db"), 60, "db off node-4", interval=0.3)
        moved = time.monotonic() - posted
        released = time.monotonic()
        _post_health(sandbox, _live_holder(sandbox, second), {"node": "node-4", "state": "ok"})
        _on(sandbox, "db", {"node-4"})
        print(f"webhook: db running off node-4 {moved:.1f} s after `failed`, back on node-4 "
              f"{time.monotonic() - released:.1f} s after `ok` (failback-delay 3 s)")  # fmt: skip

        leader = _live_holder(sandbox, second)
        _signal_holder(sandbox, leader, "SIGHUP")  # a policy reload
        wait_until(
            lambda: _total(_metrics(sandbox, leader), "placement_policy_reloads_total") >= 1,
            30,
            "the reload to count",
        )
        samples = _metrics(sandbox, leader)
        print("\n".join(f"{k} {v}" for k, v in sorted(samples.items()) if "_bucket" not in k))
        assert samples["placement_lease_leader{}"] == 1
        assert samples[f"placement_lease_holder{{holder={leader.holder},lease={LEASE}}}"] == 1
        for name in (
            "placement_reconcile_duration_seconds_count",
            "placement_actions_total",
            "placement_decisions_total",
            "placement_failbacks_total",
            "placement_moves_total",
            "placement_lease_acquisitions_total",
            "placement_policy_reloads_total",
        ):
            assert _total(samples, name) > 0, name
        for name in ("placement_failovers_total", "placement_preemptions_total"):
            assert name in {k.split("{", 1)[0] for k in samples}, name
        assert _total(samples, "placement_policy_errors_total") == 0

    # Rotate the policy config: a new config, the replicas restart one by one with it.
    policy = Path(env["PLACEMENT_POLICY_FILE"])
    policy.write_text(POLICY.replace("resync-interval: 1s", "resync-interval: 2s"))
    digest = hashlib.sha256(policy.read_bytes()).hexdigest()
    rotating = time.monotonic()
    _deploy(sandbox, {**env, "PLACEMENT_POLICY_VERSION": "2"})

    def rotated() -> bool:
        lease = _lease(sandbox)
        if lease is None or not lease.holder:
            return False
        try:
            samples = _metrics(sandbox, lease)
        except (docker.errors.DockerException, AssertionError):
            return False  # the holder is being replaced
        return (
            f"placement_policy_info{{path=/etc/swarm-placement/policy.yaml,sha256={digest}}}"
            in samples
        )

    wait_until(rotated, 180, "the leader to run the rotated policy", interval=1.0)
    print(f"rotated policy in force on the leader {time.monotonic() - rotating:.1f} s later")
    client = sandbox.client()
    spec = client.api.inspect_service(CONTROLLER)["Spec"]
    client.close()
    assert "Constraints" not in spec["TaskTemplate"]["Placement"] or all(
        "swarm-placement" not in c for c in spec["TaskTemplate"]["Placement"]["Constraints"]
    ), "the controller placed itself"

    # Rolling the controller back returns to the operator's first deploy, not to a
    # controller write: nothing but the operator wrote the service since.
    wait_until(lambda: _update_state(sandbox) == "completed", 180, "the rotation to complete")
    _service_stays_put_while_the_lease_renews(sandbox)
    rolling_back = time.monotonic()
    assert _roll_back(sandbox) == deployed_spec
    print(f"rolled back to the first deploy in {time.monotonic() - rolling_back:.1f} s")
    wait_until(lambda: (r := _lease(sandbox)) and r.holder, 60, "a holder after the rollback")
