"""Health-led failover, agents, the plugin protocol and quarantine on a real 4-node swarm.

node-1 is the only manager and is never failed. The controller runs in a thread of the
test with its webhook on a free local port; agents and the reference plugin run as real
processes of their own (each with its node's Docker socket), so killing one is real.
Timings are printed, not asserted: bench/health_failover.py measures them side by side.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from controller.adapters.attrs import timestamp_from_attrs
from controller.core.health.incidents import RETURN_GRACE_SECONDS
from controller.core.health.node_marks import PAUSED, QUARANTINE_UNTIL, health_key
from controller.core.labels import deny_label, steering_constraint
from controller.runtime.health_inputs import HealthConfig
from controller.sandbox import Sandbox, SandboxSpec

from .health_support import (
    agents,
    create_service,
    elapsed,
    free_port,
    kill,
    node_attrs,
    post_health,
    reference_plugin,
    reset_nodes,
    wait_for,
)
from .support import (
    ControllerThread,
    OffsetClock,
    RunningSampler,
    clean_client,
    doubled_slots,
    running_by_node,
    task_ids_by_node,
    tasks_table,
    wait_steady,
    wait_until,
)

pytestmark = [pytest.mark.swarm, pytest.mark.slow]
TOKEN = "health-token-for-tests"
SECRET = "agent-secret-for-tests"
_names = itertools.count()

POLICY = """\
apiVersion: placement/v1
defaults:
  managed: true
controller:
  resync-interval: 1s
  move-cooldown: 2s
"""


@pytest.fixture(scope="module")
def four() -> Iterator[Sandbox]:
    from tests.conftest import require_swarm_host, sandbox_name  # noqa: PLC0415

    require_swarm_host()
    sandbox = Sandbox.up(SandboxSpec(name=sandbox_name("hl"), nodes=4, heartbeat_seconds=1.0))
    try:
        yield sandbox
    finally:
        sandbox.down()


@pytest.fixture
def client(four: Sandbox) -> Iterator[docker.DockerClient]:
    with clean_client(four, also=reset_nodes) as c:
        yield c


@pytest.fixture
def policy(tmp_path: Path) -> Path:
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY)
    return path


def _name(prefix: str) -> str:
    return f"{prefix}{next(_names)}"


def _webhook() -> HealthConfig:
    return HealthConfig(webhook=("127.0.0.1", 0), webhook_token=TOKEN)


def _port(ctl: ControllerThread) -> int:
    assert ctl.controller.server is not None
    return ctl.controller.server.port


def _availability(c: docker.DockerClient, host: str) -> str:
    return str(node_attrs(c, host)["Spec"]["Availability"])


def _labels(c: docker.DockerClient, host: str) -> dict[str, str]:
    return dict(node_attrs(c, host)["Spec"].get("Labels") or {})


def _start(
    four: Sandbox,
    client: docker.DockerClient,
    name: str,
    replicas: int = 4,
    *,
    adopted: bool = False,
) -> None:
    """`adopted`: created with the steering constraint already there, so its tasks carry
    it (as after any restart of an adopted service): only the deny label can evict them."""
    constraints = [steering_constraint(name)] if adopted else []
    create_service(client, name, four.image_id, replicas=replicas, constraints=constraints)
    four.wait_services_running([name])
    wait_until(lambda: len(running_by_node(client, name)) == min(replicas, 4), 30, "spread")


@pytest.mark.second_engine
def test_a_failed_node_is_evicted_at_once_kept_across_a_restart_and_released(
    four, client, policy
) -> None:  # type: ignore[no-untyped-def]
    web = _name("web")
    _start(four, client, web, adopted=True)
    legacy = _name("legacy")  # unmanaged: the controller never touches it
    create_service(client, legacy, four.image_id, replicas=4, labels={"placement.managed": "false"})
    four.wait_services_running([legacy])
    legacy_before = task_ids_by_node(client, legacy)
    with ControllerThread(four.manager_host, policy=policy, health=_webhook()) as ctl:
        ctl.wait_cycles(2)
        assert "node-2" in running_by_node(client, web)
        started = time.monotonic()
        status, answer = post_health(
            _port(ctl),
            {"node": "node-2", "state": "failed", "reason": "storage path lost", "ttl": 600},
            token=TOKEN,
        )
        assert status == 202, answer
        assert answer["hostname"] == "node-2"
        wait_until(
            lambda: (
                "node-2" not in running_by_node(client, web)
                and sum(running_by_node(client, web).values()) == 4
            ),
            30,
            "web running elsewhere",
        )
        print(f"health-led failover: 4 of 4 running off node-2 {elapsed(started)} s after the POST")
        # Not paused: a pause would keep the unmanaged services' new tasks off it too.
        assert _availability(client, "node-2") == "active"
        assert _labels(client, "node-2")[deny_label(web)] == "true"
        wait_until(
            lambda: (
                not client.api.inspect_service(web)["Spec"]["Labels"].get(
                    "swarm-placement.operation"
                )
            ),
            30,
            "the surge trimmed",
        )
    assert task_ids_by_node(client, legacy) == legacy_before, "unmanaged tasks untouched"

    # A restarted controller keeps node-2 failed from its labels alone.
    with ControllerThread(four.manager_host, policy=policy, health=_webhook()) as ctl:
        ctl.wait_cycles(3)
        assert health_key("webhook") in _labels(client, "node-2")
        assert _labels(client, "node-2")[deny_label(web)] == "true"
        status, _ = post_health(_port(ctl), {"node": "node-2", "state": "ok"}, token=TOKEN)
        assert status == 202
        wait_until(
            lambda: not {k for k in _labels(client, "node-2") if k.startswith("swarm-placement.")},
            30,
            "its labels gone",
        )
    print(ctl.out.getvalue())


def test_losing_an_agent_is_not_a_node_failure(four, client, policy, tmp_path) -> None:  # type: ignore[no-untyped-def]
    web = _name("web")
    _start(four, client, web)
    before = task_ids_by_node(client, web)
    secret = tmp_path / "secret"
    secret.write_text(SECRET)
    hosts = {n: four.docker_host(n) for n in four.nodes}
    with agents(hosts, secret, tmp_path) as running:
        health = HealthConfig(
            agents=tuple((host, url) for host, (_, url) in running.items()),
            agent_secret=SECRET,
            agent_interval=1.0,
            agent_timeout=1.0,
        )
        with ControllerThread(four.manager_host, policy=policy, health=health) as ctl:
            inputs = ctl.controller.inputs
            assert inputs is not None and inputs.agents is not None
            collector = inputs.agents

            def measured() -> set[str]:
                snapshot = inputs.latest()
                if snapshot is None:
                    return set()
                usage = collector.inputs(snapshot, time.time()).usage
                return {snapshot.node_by_id[n].hostname for n in usage}

            wait_until(lambda: measured() == set(four.nodes), 90, "usage from every agent")
            kill(running["node-2"][0])
            wait_for('subject="agent node-2" outcome=skip', ctl.out, 30)
            assert measured() == set(four.nodes) - {"node-2"}, "node-2 falls back to reservations"
            time.sleep(3)  # several more cycles
            log = ctl.out.getvalue()
    assert task_ids_by_node(client, web) == before, "no task moved"
    assert _availability(client, "node-2") == "active"
    assert not {k for k in _labels(client, "node-2") if k.startswith("swarm-placement.")}
    assert "outcome=surge" not in log and "outcome=failed" not in log, log
    assert "an agent lost is no node failure" in log


def test_a_plugin_veto_moves_the_service_off_and_a_dead_plugin_is_noted(
    four, client, policy, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    db, other = _name("db"), _name("api")
    _start(four, client, db)
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    topology = tmp_path / "topology.json"
    topology.write_text(
        json.dumps(
            {
                "nodes": {
                    "node-1": {"storage": ["san-a"]},
                    "node-2": {"storage": ["san-a"]},
                    "node-3": {"storage": []},
                    "node-4": {"storage": ["san-a"]},
                },
                "services": {db: {"requires": ["san-a"]}},
            }
        )
    )
    health = HealthConfig(plugin_dirs=(str(plugins),), plugin_timeout=1.0, plugin_retry=2.0)
    with (
        reference_plugin(plugins / "topology.sock", topology, tmp_path) as plugin,
        ControllerThread(four.manager_host, policy=policy, health=health) as ctl,
    ):
        wait_until(lambda: "node-3" not in running_by_node(client, db), 30, "db off node-3")
        wait_until(lambda: sum(running_by_node(client, db).values()) == 4, 30, "4 running")
        assert _labels(client, "node-3")[deny_label(db)] == "true"
        assert "vetoed by plugin topology: no path to san-a" in ctl.out.getvalue()

        kill(plugin)
        wait_for('subject="plugin topology" outcome=skip', ctl.out, 30)
        # The controller goes on: a new service is adopted, the veto is lifted.
        create_service(client, other, four.image_id, replicas=1)
        wait_until(
            lambda: any(
                "swarm-placement.deny" in c
                for c in client.api.inspect_service(other)["Spec"]["TaskTemplate"]
                .get("Placement", {})
                .get("Constraints", [])
            ),
            30,
            "the new service adopted",
        )
        wait_until(lambda: deny_label(db) not in _labels(client, "node-3"), 30, "veto lifted")
        log = ctl.out.getvalue()
    print(log)
    assert "goes on without it" in log


def test_a_crash_looping_node_is_quarantined_then_released(four, client, tmp_path) -> None:  # type: ignore[no-untyped-def]
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        POLICY
        + "nodes:\n  quarantine: {failures: 3, period: 1h, duration: 2h, max-fraction: 25%}\n"
    )
    web = _name("web")
    _start(four, client, web)
    clock = OffsetClock()
    with ControllerThread(four.manager_host, policy=policy, clock=clock) as ctl:
        ctl.wait_cycles(2)
        for _ in range(3):
            four.fail("node-4", "crash")
            four.wait_node_state("node-4", "down")
            ctl.wait_cycles(2)  # the controller sees it down
            four.restore("node-4")
            four.wait_node_state("node-4", "ready")
        wait_until(lambda: QUARANTINE_UNTIL in _labels(client, "node-4"), 30, "quarantined")
        until = float(_labels(client, "node-4")[QUARANTINE_UNTIL])
        assert 7000 < until - clock() <= 7200
        assert "3 ungraceful exit(s)" in ctl.out.getvalue()
        # Kept from the managed services, not paused: Swarm places the rest there as before.
        assert _availability(client, "node-4") == "active"
        assert PAUSED not in _labels(client, "node-4")
        legacy, db = _name("legacy"), _name("db")
        create_service(
            client,
            legacy,
            four.image_id,
            labels={"placement.managed": "false"},
            constraints=["node.hostname==node-4"],
        )
        preferred = {"placement.preferred-nodes": "node-4", "placement.failback": "immediate"}
        create_service(client, db, four.image_id, labels=preferred)
        wait_until(lambda: running_by_node(client, legacy) == {"node-4": 1}, 60, "legacy there")
        wait_until(lambda: sum(running_by_node(client, db).values()) == 1, 60, "db running")
        ctl.wait_cycles(3)
        assert "node-4" not in running_by_node(client, db), "the quarantine keeps db off node-4"
        clock.offset = 2 * 3600 + 60  # the duration is over
        wait_until(lambda: running_by_node(client, db) == {"node-4": 1}, 90, "db on node-4")
        time.sleep(3)
        assert float(_labels(client, "node-4")[QUARANTINE_UNTIL]) == until, (
            "its old exits never count again"
        )
    print(ctl.out.getvalue())


def test_bad_input_is_rejected_and_the_controller_is_unaffected_then_degraded_works(
    four, client, policy, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    web = _name("web")
    _start(four, client, web)
    before = task_ids_by_node(client, web)
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    topology = tmp_path / "topology.json"
    topology.write_text(json.dumps({"fault": "garbage"}))
    health = HealthConfig(
        webhook=("127.0.0.1", 0),
        webhook_token=TOKEN,
        webhook_max_body=1024,
        plugin_dirs=(str(plugins),),
        plugin_timeout=1.0,
        plugin_retry=2.0,
    )
    good = {"node": "node-2", "state": "failed", "reason": "x", "ttl": 60}
    with (
        reference_plugin(plugins / "garbage.sock", topology, tmp_path),
        ControllerThread(four.manager_host, policy=policy, health=health) as ctl,
    ):
        ctl.wait_cycles(2)
        port = _port(ctl)
        cases = [
            ("no token", post_health(port, good, token=None), 401),
            ("wrong token", post_health(port, good, token="nope"), 401),
            (
                "oversized body",
                post_health(port, None, token=TOKEN, raw=b'{"node": "' + b"x" * 5000 + b'"}'),
                413,
            ),
            ("malformed JSON", post_health(port, None, token=TOKEN, raw=b'{"node": '), 400),
            ("unknown node", post_health(port, {**good, "node": "node-9"}, token=TOKEN), 404),
            ("bad state", post_health(port, {**good, "state": "meh"}, token=TOKEN), 422),
            ("extra field", post_health(port, {**good, "extra": 1}, token=TOKEN), 422),
            ("negative ttl", post_health(port, {**good, "ttl": -1}, token=TOKEN), 422),
            ("not an object", post_health(port, [good], token=TOKEN), 422),
            (
                "not JSON",
                post_health(port, good, token=TOKEN, content_type="text/plain"),
                415,
            ),
        ]
        for what, (status, answer), expected in cases:
            assert status == expected, (what, status, answer)
            assert answer.get("error"), (what, answer)
        wait_for('subject="plugin garbage" outcome=skip', ctl.out, 30)
        assert "answered something that is not a JSON object" in ctl.out.getvalue()
        cycles = ctl.cycles
        time.sleep(3)
        assert ctl.cycles > cycles, "the controller keeps cycling"
        assert ctl.controller.inputs is not None
        assert not ctl.controller.inputs.store.live(time.time()), "nothing was taken"
        assert task_ids_by_node(client, web) == before
        assert all(_availability(client, n) == "active" for n in four.nodes)
        # And a good report still works afterwards.
        status, _ = post_health(port, {**good, "state": "degraded"}, token=TOKEN)
        assert status == 202
        wait_until(
            lambda: health_key("webhook") in _labels(client, "node-2"), 30, "degraded: marked"
        )
        # web is preemptible (the default): it moves off the degraded node, in budget.
        wait_until(
            lambda: (
                "node-2" not in running_by_node(client, web)
                and sum(running_by_node(client, web).values()) == 4
            ),
            30,
            "preemptible work off node-2",
        )
        assert f"refuse {web} (node degraded)" in ctl.out.getvalue()
    print(ctl.out.getvalue())


def test_two_degraded_nodes_half_a_second_apart_stop_one_replica_at_a_time(
    four, client, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    """api: 3 stop-first replicas that reserve CPU and memory, max-unavailable 1, one on
    each worker. node-2 and node-3 are reported degraded 0.5 s apart: their preemptible
    work moves off one replica at a time, so api never runs fewer than 2 (the ledger
    counts the first one's replacement as down until it runs). Where Swarm put that
    replacement on node-3 before its report came, node-3 holds two of api's tasks: a deny
    label would stop both at once, so they stay, and a decision says why."""
    loose = tmp_path / "policy.yaml"
    # Two of four nodes reported: above the default panic share, which would hold both.
    loose.write_text(POLICY + "  health-panic-threshold: 0.6\n")
    api = _name("api")
    create_service(
        client,
        api,
        four.image_id,
        replicas=3,
        constraints=["node.role==worker"],
        order="stop-first",
        reserve=(0.1, 32 << 20),
    )
    four.wait_services_running([api])
    wait_until(lambda: len(running_by_node(client, api)) == 3, 30, "one task on each worker")
    with ControllerThread(four.manager_host, policy=loose, health=_webhook()) as ctl:
        ctl.wait_cycles(2)
        with RunningSampler(four.manager_host, api, interval=0.1) as sampler:
            for host in ("node-2", "node-3"):
                report = {"node": host, "state": "degraded", "reason": "disk", "ttl": 600}
                status, answer = post_health(_port(ctl), report, token=TOKEN)
                assert status == 202, answer
                time.sleep(0.5)
            wait_until(
                lambda: (
                    health_key("webhook") in _labels(client, "node-3")
                    and "node-2" not in running_by_node(client, api)
                    and sum(running_by_node(client, api).values()) == 3
                ),
                60,
                "api off node-2 and both nodes marked",
            )
            placed = running_by_node(client, api)
            if placed.get("node-3") == 1:
                wait_until(lambda: running_by_node(client, api) == {"node-4": 3}, 60, "node-3 shed")
            else:
                wait_for("keeps its tasks here for now", ctl.out, 30)
        print(f"api {placed}, running sampled every 0.1 s: min {sampler.minimum} of 3")
        assert sampler.minimum >= 2, "two replicas were down at once"
        assert "max-unavailable 1 for " + api in ctl.out.getvalue()
    print(ctl.out.getvalue())


def _ready_for(client: docker.DockerClient, hostname: str) -> float:
    """Seconds since Swarm last changed the node (its status or spec)."""
    node = next(n for n in client.api.nodes() if n["Description"]["Hostname"] == hostname)
    return time.time() - timestamp_from_attrs(node["UpdatedAt"])


def test_a_service_failing_on_one_node_is_moved_off_it(four, client, policy) -> None:  # type: ignore[no-untyped-def]
    flaky = _name("flaky")
    labels = {"placement.managed": "true", "placement.failover-threshold": "2/10m"}
    with ControllerThread(four.manager_host, policy=policy) as ctl:
        ctl.wait_cycles(2)
        # Failures in the first 30 s after a node turned ready are its return's: wait until
        # node-3 has been ready that long (the controller dates it from Swarm's UpdatedAt).
        time.sleep(max(0.0, RETURN_GRACE_SECONDS + 1 - _ready_for(client, "node-3")))
        create_service(
            client,
            flaky,
            four.image_id,
            replicas=4,
            labels=labels,
            healthcheck=["CMD-SHELL", '[ "$NODE" != node-3 ]'],  # unhealthy on node-3 only
        )
        wait_until(
            lambda: _labels(client, "node-3").get(deny_label(flaky)) == "true", 90, "moved off"
        )
        # Exactly 4, one per slot, and staying so: Swarm's updater may leave a slot
        # running two tasks (a restart racing the rollout of the controller's
        # constraint), which the controller's tidy write clears; a count of 4 on the
        # way up proves nothing.
        try:
            wait_steady(
                lambda: (
                    sum(running_by_node(client, flaky).values()) == 4
                    and not doubled_slots(client, flaky)
                ),
                hold=15,
                timeout=120,
                what="4 running, one per slot",
            )
        except AssertionError as error:
            raise AssertionError(
                f"{error}\n{tasks_table(client, flaky)}\n{ctl.out.getvalue()}"
            ) from None
        assert "node-3" not in running_by_node(client, flaky)
        assert f"swarm-placement.unhealthy.{flaky}" in _labels(client, "node-3")
        log = ctl.out.getvalue()
    print(log)
    assert "outcome=move-off" in log and "task failure(s) on node-3" in log


def test_an_unused_port_is_needed_for_the_webhook(four, policy) -> None:  # type: ignore[no-untyped-def]
    import socket  # noqa: PLC0415

    port = free_port()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port))
        taken.listen()
        with pytest.raises(OSError):
            ControllerThread(
                four.manager_host,
                policy=policy,
                health=HealthConfig(webhook=("127.0.0.1", port), webhook_token=TOKEN),
            )
