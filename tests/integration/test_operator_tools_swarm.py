"""The operator commands on the shared 3-node sandbox swarm: plan, explain, snapshot and
simulate, each checked against what the real controller and the real Swarm then do.

The swarm has a 1 s heartbeat, racks r1/r1/r2 and `slot=2` on every node (conftest).
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from controller.cli.main import main
from controller.core.labels import steering_constraint

from .support import (
    ControllerThread,
    all_versions,
    clean_client,
    constraints_of,
    running_by_node,
    wait_until,
)

pytestmark = pytest.mark.swarm
MANAGED = {"placement.managed": "true"}
POLICY = """\
apiVersion: placement/v1
controller:
  resync-interval: 1s
  move-cooldown: 2s
"""
_names = itertools.count()


def _name(prefix: str) -> str:
    return f"{prefix}{next(_names)}"


@pytest.fixture
def client(swarm, monkeypatch) -> Iterator[docker.DockerClient]:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("DOCKER_HOST", swarm.manager_host)
    with clean_client(swarm) as c:
        yield c


@pytest.fixture
def policy(tmp_path: Path) -> Path:
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY)
    return path


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert code == 0, f"{argv[0]} exited {code}: {err}"
    return out


def _pending_for_resources(client: docker.DockerClient, name: str) -> bool:
    tasks = client.api.tasks(filters={"service": name, "desired-state": "running"})
    return any("insufficient resources" in t["Status"].get("Err", "") for t in tasks)


def test_plan_shows_the_writes_run_makes_and_explain_says_why_a_task_is_pending(  # type: ignore[no-untyped-def]
    swarm, client, policy, capsys
) -> None:
    web, idle, big = _name("pweb"), _name("pidle"), _name("pbig")
    swarm.create_service(web, labels={**MANAGED, "placement.preferred-nodes": "node-3"})
    swarm.create_service(idle)
    swarm.create_service(big, labels=MANAGED, reserve_generic={"slot": 3})
    swarm.wait_services_running([web, idle])
    wait_until(lambda: _pending_for_resources(client, big), 30, f"{big} pending")

    planned = json.loads(_cli(capsys, "plan", "--policy", str(policy), "--json"))["actions"]
    by_name = {a["target"]["name"]: a for a in planned}
    assert set(by_name) == {f"service {web}", f"service {big}"}, planned
    assert by_name[f"service {web}"]["rule"] == "owners"
    assert by_name[f"service {big}"]["rule"] == "adoption"
    human = _cli(capsys, "plan", "--policy", str(policy))
    assert f"[owners] service {web}: set-constraints" in human
    assert "nothing was written" in human

    before = all_versions(client)
    _cli(capsys, "run", "--once", "--policy", str(policy))
    after = all_versions(client)
    changed = {key for key, version in after.items() if before.get(key) != version}
    assert changed == {f"service {web}", f"service {big}"}, "run wrote something plan did not show"
    for name, action in ((web, by_name[f"service {web}"]), (big, by_name[f"service {big}"])):
        assert constraints_of(client, name) == action["fields"]["constraints"]
    assert steering_constraint(big) in constraints_of(client, big)

    told = _cli(capsys, "explain", big, "--policy", str(policy))
    assert "Swarm says: no suitable node (insufficient resources on 3 nodes)" in told
    for node in swarm.nodes:
        assert f"{node}: insufficient resources: needs slot=3, slot=2 free" in told
    assert "[preemption]" in told  # the controller's own reason: nothing can make room
    assert json.loads(_cli(capsys, "explain", idle, "--json"))["managed"] is False


def _settled(client: docker.DockerClient, name: str, hosts: dict[str, int]) -> bool:
    spec = client.api.inspect_service(name)
    updating = (spec.get("UpdateStatus") or {}).get("State") == "updating"
    return (
        running_by_node(client, name) == hosts
        and not updating
        and "swarm-placement.operation" not in (spec["Spec"].get("Labels") or {})
    )


def test_simulate_matches_the_real_swarm_on_failover_then_failback_and_explain_names_the_rule(  # type: ignore[no-untyped-def]
    swarm, client, policy, tmp_path, capsys
) -> None:
    """db prefers node-2 then node-3 and fails back at once; plain, unmanaged, avoids
    node-1 and starts on node-2 (a filler makes node-3 busier), so losing node-2 moves
    it to node-3 for good. The same scenario is then run on the simulator from a
    snapshot taken at rest, and both end with the same placement."""
    db, plain, filler = _name("sdb"), _name("splain"), _name("sfill")
    swarm.create_service(filler, constraints=["node.hostname==node-3"])
    swarm.wait_services_running([filler])
    swarm.create_service(plain, constraints=["node.hostname!=node-1"])
    swarm.wait_services_running([plain])
    client.api.remove_service(filler)
    labels = {
        **MANAGED,
        "placement.preferred-nodes": "node-2,node-3",
        "placement.failback": "immediate",
        "placement.failback-delay": "2s",
    }
    swarm.create_service(db, replicas=2, labels=labels)
    with ControllerThread(swarm.manager_host, policy=policy) as ctl:
        wait_until(lambda: _settled(client, db, {"node-2": 1, "node-3": 1}), 60, "db at rest")
        ctl.wait_cycles(2)
        snapshot = tmp_path / "snapshot.json"
        _cli(capsys, "snapshot", "save", str(snapshot))
        start = {db: running_by_node(client, db), plain: running_by_node(client, plain)}

        swarm.fail("node-2", "crash")
        swarm.wait_node_state("node-2", "down")
        wait_until(lambda: _settled(client, db, {"node-1": 1, "node-3": 1}), 60, "failover")
        wait_until(lambda: running_by_node(client, plain) == {"node-3": 1}, 60, "plain moved")
        swarm.restore("node-2")
        swarm.wait_node_state("node-2", "ready")
        wait_until(lambda: _settled(client, db, {"node-2": 1, "node-3": 1}), 60, "failback")
        ctl.wait_cycles(3)
        real = {db: running_by_node(client, db), plain: running_by_node(client, plain)}
        log = tmp_path / "controller.log"
        log.write_text(ctl.out.getvalue())
        told = _cli(capsys, "explain", db, "--policy", str(policy), "--log", str(log))

    assert start == {db: {"node-2": 1, "node-3": 1}, plain: {"node-2": 1}}
    assert real == {db: {"node-2": 1, "node-3": 1}, plain: {"node-3": 1}}
    scenario = "fail node-2; wait 20s; restore node-2; wait 40s"
    simulated = json.loads(
        _cli(
            capsys,
            "simulate",
            "--snapshot",
            str(snapshot),
            "--policy",
            str(policy),
            "--scenario",
            scenario,
            "--json",
        )
    )
    assert simulated["heartbeat_seconds"] == 1.0, "the snapshot records the swarm's heartbeat"
    assert simulated["initial"][db] == start[db] and simulated["initial"][plain] == start[plain]
    assert {db: simulated["final"][db], plain: simulated["final"][plain]} == real
    sources = {e["rule"] for e in simulated["timeline"] if e["source"] == "write"}
    assert {"failover", "owners"} <= sources, "the simulated controller surged and failed back"

    replica_on_node2 = told.split(" on node-2: running", 1)[1].split(f"{db}.", 1)[0]
    assert "preferred owner #1" in replica_on_node2
    assert "came here:" in replica_on_node2
    assert "[owners] move - a task from node-1 to node-2: failback to preferred owner #1" in (
        replica_on_node2
    )


def test_policy_show_reads_a_live_service_and_names_each_source(  # type: ignore[no-untyped-def]
    swarm, client, tmp_path, capsys
) -> None:
    """`policy show` against the real manager: file defaults, a matching file rule and the
    service's own labels, each value with where it came from; a bad label is exit 1."""
    name = _name("show")
    policy = tmp_path / "show.yaml"
    policy.write_text(
        "apiVersion: placement/v1\n"
        "defaults:\n  managed: true\n  failback-delay: 45s\n"
        f"services:\n  - match: {{name: {name}*}}\n    priority: high\n"
    )
    swarm.create_service(
        name, labels={"placement.preferred-nodes": "node-2", "placement.failback": "never"}
    )
    out = _cli(capsys, "policy", "show", "--service", name, "--policy", str(policy))
    lines = out.splitlines()
    assert lines[0].startswith(f"service {name} (id ")
    rows = {r[0]: r[1:] for r in (re.split(r"\s{2,}", line) for line in lines[4:])}
    assert rows["managed"] == ["true", "file:defaults"]
    assert rows["failback-delay"] == ["45s", "file:defaults"]
    assert rows["priority"][0] == "high (3000)" and rows["priority"][1].startswith("file:")
    assert rows["preferred-nodes"] == ["node-2", "label placement.preferred-nodes"]
    assert rows["failback"] == ["never", "label placement.failback"]

    broken = _name("broken")
    swarm.create_service(broken, labels={"placement.priority": "urgent"})
    capsys.readouterr()
    assert main(["policy", "show", "--service", broken, "--policy", str(policy)]) == 1
    assert 'label placement.priority="urgent": expected high' in capsys.readouterr().err


def test_status_shows_the_lease_and_the_managed_services_as_table_json_and_yaml(  # type: ignore[no-untyped-def]
    swarm, client, policy, capsys
) -> None:
    from ruamel.yaml import YAML  # noqa: PLC0415

    from controller.runtime.lease_keeper import LeaseConfig  # noqa: PLC0415

    web, idle = _name("sweb"), _name("sidle")
    swarm.create_service(web, labels={**MANAGED, "placement.preferred-nodes": "node-3"})
    swarm.create_service(idle)
    lease = LeaseConfig(name=_name("status-lease"), holder="status-test", lifetime=5.0)
    log = Path(policy).with_name("controller.log")
    with ControllerThread(swarm.manager_host, policy=policy, lease=lease) as ctl:
        wait_until(lambda: running_by_node(client, web) == {"node-3": 1}, 60, f"{web} on node-3")
        # Swarm alone may have started web on node-3 (the session swarm's other services
        # decide) before the controller took its lease: wait for its lease and decisions.
        wait_until(lambda: bool(client.api.configs(filters={"name": lease.name})), 30, "the lease")
        wait_until(lambda: f"service {web}" in ctl.out.getvalue(), 30, f"a decision on {web}")
        leading = json.loads(_cli(capsys, "status", "--policy", str(policy), "-o", "json"))
        log.write_text(ctl.out.getvalue())
    (found,) = [x for x in leading["leases"] if x["name"] == lease.name]
    assert found["holder"] == "status-test" and found["term"] >= 1

    argv = ["status", "--policy", str(policy), "--log", str(log)]
    document = json.loads(_cli(capsys, *argv, "-o", "json"))
    (found,) = [x for x in document["leases"] if x["name"] == lease.name]
    # Stopped cleanly: the holder released the lease, keeping its term.
    assert found["holder"] == "" and found["term"] >= 1 and found["problem"] is None
    services = {s["name"]: s for s in document["services"]}
    assert services[web]["state"] in ("placed", "steered") and services[web]["running"] == 1
    assert idle not in services and document["unmanaged"] >= 1
    assert any(d["subject"] == f"service {web}" for d in document["decisions"])

    table = _cli(capsys, *argv)
    assert re.search(rf"^{lease.name}\s+\(released\)\s+{found['term']}\s", table, re.M), table
    assert re.search(rf"^{web}\s+(placed|steered)\s+1/1", table, re.M), table
    # A move onto node-3, or (Swarm alone put it there) steering that keeps it there.
    assert re.search(rf"\[owners\] service {web}: (move|steer)", table), table
    as_yaml = YAML(typ="safe").load(_cli(capsys, *argv, "-o", "yaml"))
    assert as_yaml == json.loads(_cli(capsys, *argv, "-o", "json"))
