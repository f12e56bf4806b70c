"""Owners, failover, failback, anti-affinity and rack spread on a real 4-node swarm.

The sandbox has two racks (node-1, node-2 in r1; node-3, node-4 in r2); node-1 is the
only manager and is never failed. Preferred owners are chosen where Swarm would not put
the tasks itself (filler services load them first), so no test passes by chance.
"""

from __future__ import annotations

import contextlib
import itertools
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import docker
import pytest
import requests

from controller.adapters.engine import update_service_spec
from controller.adapters.engine_http import engine_url, post_json
from controller.sandbox import Sandbox, SandboxSpec

from .support import (
    ControllerThread,
    OffsetClock,
    RunningSampler,
    clean_client,
    running_by_node,
    task_ids_by_node,
    wait_until,
)

pytestmark = [pytest.mark.swarm, pytest.mark.slow]
RACKS = {
    "node-1": {"rack": "r1"},
    "node-2": {"rack": "r1"},
    "node-3": {"rack": "r2"},
    "node-4": {"rack": "r2"},
}
_names = itertools.count()

# Node-2 flaps three times within a minute below: a crash-looping node that the default
# quarantine (3 exits in 1 h) would pause for 2 h. These tests are about owners, so the
# quarantine stays out of the way (test_health_swarm.py shows it).
POLICY = """\
apiVersion: placement/v1
controller:
  move-cooldown: 2s
  resync-interval: 1s
nodes:
  quarantine: {failures: 100}
"""


@pytest.fixture(scope="module")
def racks() -> Iterator[Sandbox]:
    from tests.conftest import require_swarm_host, sandbox_name  # noqa: PLC0415

    require_swarm_host()
    sandbox = Sandbox.up(
        SandboxSpec(name=sandbox_name("own"), nodes=4, node_labels=RACKS, heartbeat_seconds=1.0)
    )
    try:
        yield sandbox
    finally:
        sandbox.down()


@pytest.fixture
def client(racks: Sandbox) -> Iterator[docker.DockerClient]:
    with clean_client(racks) as c:
        yield c


@pytest.fixture
def policy(tmp_path: Path) -> Path:
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY)
    return path


def _name(prefix: str) -> str:
    return f"{prefix}{next(_names)}"


def _fill(racks: Sandbox, *hosts: str) -> None:
    """Unmanaged filler tasks, so Swarm's own choice avoids these hosts."""
    names = [_name(f"fill{host[-1]}-") for host in hosts for _ in range(2)]
    for name, host in zip(names, [h for h in hosts for _ in range(2)], strict=True):
        racks.create_service(name, constraints=[f"node.hostname=={host}"])
    racks.wait_services_running(names)


def _managed(**settings: str) -> dict[str, str]:
    labels = {"placement.managed": "true"}
    labels.update({f"placement.{k.replace('_', '-')}": v for k, v in settings.items()})
    return labels


def _on(c: docker.DockerClient, name: str, hosts: set[str], timeout: float = 60) -> None:
    wait_until(
        lambda: set(running_by_node(c, name)) == hosts, timeout, f"{name} running on {hosts}"
    )


def _operation(c: docker.DockerClient, service: str) -> str | None:
    """The controller's replica operation in flight on the service, if any."""
    labels: dict[str, str] = c.api.inspect_service(service)["Spec"].get("Labels") or {}
    return labels.get("swarm-placement.operation")


def _crash(racks: Sandbox, node: str) -> None:
    assert node != "node-1", "node-1 is the only manager: failing it ends the swarm"
    racks.fail(node, "crash")
    racks.wait_node_state(node, "down")


def _restore(racks: Sandbox, node: str) -> None:
    racks.restore(node)
    racks.wait_node_state(node, "ready")


@pytest.mark.second_engine
def test_preferred_owners_failover_and_graceful_failback(racks, client, policy) -> None:  # type: ignore[no-untyped-def]
    _fill(racks, "node-2", "node-3")
    db = _name("db")
    racks.create_service(db, replicas=2)
    racks.wait_services_running([db])
    assert set(running_by_node(client, db)).isdisjoint({"node-2", "node-3"}), "Swarm's own pick"
    spec = client.api.inspect_service(db)
    labels = _managed(preferred_nodes="node-2,node-3", failback="immediate", failback_delay="4s")
    new = {**spec["Spec"], "Labels": {**spec["Spec"].get("Labels", {}), **labels}}
    url = engine_url(client.api, "/services/{0}/update", spec["ID"])
    post_json(client.api, url, data=new, params={"version": spec["Version"]["Index"]})

    with ControllerThread(racks.manager_host, policy=policy) as ctl:
        _on(client, db, {"node-2", "node-3"})
        on_node3 = task_ids_by_node(client, db)["node-3"]

        _crash(racks, "node-2")
        wait_until(lambda: sum(running_by_node(client, db).values()) == 2, 30, "failover")
        hosts = set(running_by_node(client, db))
        assert "node-2" not in hosts and "node-3" in hosts
        # Swarm may put node-2's replacement on node-3 too; the failback then stops one of
        # node-3's two tasks, whichever Swarm's scale-down picks.
        kept_on_node3 = task_ids_by_node(client, db)["node-3"]
        assert on_node3 <= kept_on_node3

        with RunningSampler(racks.manager_host, db) as sampler:
            _restore(racks, "node-2")
            wait_until(
                lambda: running_by_node(client, db) == {"node-2": 1, "node-3": 1}, 60, "failback"
            )
        log = ctl.out.getvalue()
        print(log)
        assert sampler.minimum >= 1, sampler.samples
        left = task_ids_by_node(client, db)["node-3"]
        assert len(left) == 1 and left <= kept_on_node3, "only the moved task restarts"
    assert "failback to preferred owner #1" in log


def test_failback_never_leaves_the_task_where_it_failed_over(racks, client, policy) -> None:  # type: ignore[no-untyped-def]
    db = _name("db")
    racks.create_service(
        db, labels=_managed(preferred_nodes="node-2", failback="never", failback_delay="1s")
    )
    with ControllerThread(racks.manager_host, policy=policy) as ctl:
        _on(client, db, {"node-2"})
        _crash(racks, "node-2")
        wait_until(lambda: running_by_node(client, db), 30, "failover")
        elsewhere = set(running_by_node(client, db))
        _restore(racks, "node-2")
        time.sleep(6)  # well past failback-delay and several cycles
        assert set(running_by_node(client, db)) == elsewhere
    assert "failback is never" in ctl.out.getvalue()


def test_failback_waits_for_its_window(racks, client, policy) -> None:  # type: ignore[no-untyped-def]
    clock = OffsetClock()
    start = datetime.now(UTC) + timedelta(hours=3)
    window = f"window {start:%H:%M}-{start + timedelta(hours=1):%H:%M}"
    db = _name("db")
    racks.create_service(
        db, labels=_managed(preferred_nodes="node-2", failback=window, failback_delay="1s")
    )
    with ControllerThread(racks.manager_host, policy=policy, clock=clock) as ctl:
        _on(client, db, {"node-2"})
        _crash(racks, "node-2")
        wait_until(lambda: running_by_node(client, db), 30, "failover")
        _restore(racks, "node-2")
        time.sleep(5)
        assert "node-2" not in running_by_node(client, db), "moved outside the window"
        clock.offset = 3 * 3600 + 120  # the window opens
        _on(client, db, {"node-2"}, timeout=60)
    assert "is closed" in ctl.out.getvalue()


def test_a_flapping_node_causes_at_most_one_failback(racks, client, policy) -> None:  # type: ignore[no-untyped-def]
    db = _name("db")
    racks.create_service(
        db, labels=_managed(preferred_nodes="node-2", failback="immediate", failback_delay="8s")
    )
    with ControllerThread(racks.manager_host, policy=policy) as ctl:
        _on(client, db, {"node-2"})
        placed = len(ctl.out.getvalue())
        started = time.monotonic()
        for _ in range(2):
            _crash(racks, "node-2")
            wait_until(lambda: running_by_node(client, db), 30, "failover")
            _restore(racks, "node-2")
        assert time.monotonic() - started < 60, "the flaps took more than a minute"
        _on(client, db, {"node-2"}, timeout=60)
        time.sleep(4)
    moves = ctl.out.getvalue()[placed:].count(f'subject="service {db}" outcome=move')
    assert moves == 1, ctl.out.getvalue()


def test_a_restarted_controller_still_distrusts_a_flapping_preferred_owner(
    racks, client, policy
) -> None:  # type: ignore[no-untyped-def]
    """node-2 goes down three times; the controller that saw it is replaced by a new one
    (as when the node under it dies). The new one reads the downs back from the records
    mirror and waits the damped 16 s (4 s doubled twice) before failing db back; one
    that had forgotten them would move db after its 4 s watch."""
    db = _name("db")
    racks.create_service(
        db, labels=_managed(preferred_nodes="node-2", failback="immediate", failback_delay="4s")
    )
    with ControllerThread(racks.manager_host, policy=policy) as first:
        _on(client, db, {"node-2"})
        for _ in range(3):
            _crash(racks, "node-2")
            wait_until(lambda: running_by_node(client, db), 30, "failover")
            _restore(racks, "node-2")
        # Let the last failover's surge be trimmed before this controller stops: a surge
        # left behind is a second slot Swarm may start on the returned node-2.
        wait_until(
            lambda: (
                _operation(client, db) is None and sum(running_by_node(client, db).values()) == 1
            ),
            30,
            "the last surge trimmed",
        )
        assert "node-2" not in running_by_node(client, db)
    node_2 = next(n["ID"] for n in client.api.nodes() if n["Description"]["Hostname"] == "node-2")
    labels = client.api.inspect_config("swarm-placement-records")["Spec"]["Labels"]
    assert len(labels[f"swarm-placement.downs.{node_2}"].split(",")) == 3, labels
    with ControllerThread(racks.manager_host, policy=policy) as ctl:
        started = time.monotonic()
        while time.monotonic() - started < 9:
            assert "node-2" not in running_by_node(client, db), (
                first.out.getvalue() + ctl.out.getvalue()
            )
            time.sleep(0.3)
        _on(client, db, {"node-2"}, timeout=60)
    assert "once ready 16 s" in ctl.out.getvalue(), ctl.out.getvalue()


def _coming_up_on(c: docker.DockerClient, service: str, host: str) -> bool:
    """A task Swarm wants running on `host` has started there but does not run yet."""
    node = next(n["ID"] for n in c.api.nodes() if n["Description"]["Hostname"] == host)
    return any(
        t.get("NodeID") == node and t["Status"]["State"] in ("preparing", "starting")
        for t in c.api.tasks(filters={"service": service, "desired-state": "running"})
    )


def _wanted_on(c: docker.DockerClient, service: str, node_id: str) -> bool:
    tasks = c.api.tasks(filters={"service": service, "desired-state": "running"})
    return any(t.get("NodeID") == node_id for t in tasks)


def test_a_failback_whose_node_dies_before_its_task_runs_is_called_off(
    racks, client, policy
) -> None:  # type: ignore[no-untyped-def]
    """db's failback task on node-2 is still coming up (its health check passes 6 s after
    it starts) when node-2 dies again. Swarm's updater would wait for that task, and the
    replacement Swarm restarts could only go to node-2: the moment node-2 came back the
    move would finish onto it, however recently it failed. The controller calls the move
    off as soon as node-2 is down: the task that runs elsewhere is never stopped, and the
    failback comes again once node-2 has stayed up for its damped delay."""
    db = _name("db")
    racks.create_service(
        db,
        labels=_managed(preferred_nodes="node-2", failback="immediate", failback_delay="3s"),
        healthy_after_seconds=6,
    )
    with ControllerThread(racks.manager_host, policy=policy) as ctl:
        _on(client, db, {"node-2"}, timeout=90)
        node_2 = next(
            n["ID"] for n in client.api.nodes() if n["Description"]["Hostname"] == "node-2"
        )
        _crash(racks, "node-2")
        wait_until(
            lambda: (
                _operation(client, db) is None and sum(running_by_node(client, db).values()) == 1
            ),
            60,
            "the failover done and its surge trimmed",
        )
        ((away, kept),) = task_ids_by_node(client, db).items()
        _restore(racks, "node-2")
        wait_until(lambda: _coming_up_on(client, db, "node-2"), 60, "the failback's task")
        _crash(racks, "node-2")
        wait_until(
            lambda: "call off the move onto node-2" in ctl.out.getvalue(), 30, "the call-off"
        )
        # Back at once, node-2 gets the failback only once ready 6 s (3 s doubled for its
        # second down), not from the stalled move.
        _restore(racks, "node-2")
        back = time.monotonic()
        while time.monotonic() - back < 5:
            assert not _wanted_on(client, db, node_2), ctl.out.getvalue()
            time.sleep(0.3)
        assert task_ids_by_node(client, db) == {away: kept}, ctl.out.getvalue()
        _on(client, db, {"node-2"}, timeout=90)


# What a stop-first service of a real stack reserves (Swarm counts it on every node).
RESERVED = {"reserve_cpus": 0.25, "reserve_memory_bytes": 64 << 20}


def test_new_possible_owners_take_both_stop_first_tasks_off_other_nodes_by_surge(  # type: ignore[no-untyped-def]
    racks, client, policy
) -> None:
    """Both tasks of a stop-first service run on nodes its new possible owners leave out.
    Requiring the possible owners' mark at once would make Swarm's updater stop each task
    before its replacement starts: the tasks move by surge first, and the constraint
    follows. The service never runs fewer than its two."""
    db = _name("db")
    racks.create_service(db, replicas=2, update_order="stop-first", **RESERVED)
    racks.wait_services_running([db])
    hosts = set(running_by_node(client, db))
    assert len(hosts) == 2, hosts
    owners = sorted(set(racks.nodes) - hosts)
    _relabel(client, db, _managed(possible_nodes=",".join(owners)))
    with (
        RunningSampler(racks.manager_host, db) as sampler,
        ControllerThread(racks.manager_host, policy=policy) as ctl,
    ):
        _on(client, db, set(owners), timeout=90)
        wait_until(lambda: _requires_possible_mark(client, db), 30, "the possible-owner constraint")
    out = ctl.out.getvalue()
    assert sampler.minimum >= 2, (sampler.samples, out)
    assert "possible-owner constraint follows" in out, out


def test_a_node_that_leaves_the_possible_owners_keeps_its_mark_until_its_task_moved(  # type: ignore[no-untyped-def]
    racks, client, policy
) -> None:
    """Removing a possible owner's mark stops the service's task there at once (Swarm's
    constraint enforcer ignores the update order): the mark stays until the stop-first
    task has moved by surge, and the service never runs fewer than its two."""
    db = _name("db")
    racks.create_service(
        db,
        replicas=2,
        update_order="stop-first",
        labels=_managed(possible_nodes="node-2,node-3"),
        **RESERVED,
    )
    with ControllerThread(racks.manager_host, policy=policy):
        _on(client, db, {"node-2", "node-3"}, timeout=90)
        wait_until(lambda: _requires_possible_mark(client, db), 30, "the possible-owner constraint")
    _relabel(client, db, _managed(possible_nodes="node-3,node-4"))
    with (
        RunningSampler(racks.manager_host, db) as sampler,
        ControllerThread(racks.manager_host, policy=policy) as ctl,
    ):
        _on(client, db, {"node-3", "node-4"}, timeout=90)
        label = f"swarm-placement.possible.{db}"
        wait_until(lambda: label not in _node_labels(client, "node-2"), 30, "node-2's mark removed")
    out = ctl.out.getvalue()
    assert sampler.minimum >= 2, (sampler.samples, out)
    assert "still runs tasks here" in out, out


def test_a_stop_first_task_on_a_node_that_is_no_possible_owner_moves_off_it(  # type: ignore[no-untyped-def]
    racks, client, policy
) -> None:
    """Three stop-first tasks, one each on node-2, node-3 and node-4; node-2 and node-3
    are the possible owners. A surge of one could start back on node-4 (every node holds
    one task): the surge is sized so that enough start on the possible owners whatever
    Swarm's tie-break, and the service never runs fewer than max-unavailable allows."""
    api = _name("api")
    racks.create_service(
        api,
        replicas=3,
        update_order="stop-first",
        constraints=["node.hostname!=node-1"],
        **RESERVED,
    )
    racks.wait_services_running([api])
    assert running_by_node(client, api) == {"node-2": 1, "node-3": 1, "node-4": 1}
    _relabel(client, api, _managed(possible_nodes="node-2,node-3"))
    with (
        RunningSampler(racks.manager_host, api) as sampler,
        ControllerThread(racks.manager_host, policy=policy) as ctl,
    ):
        _on(client, api, {"node-2", "node-3"}, timeout=90)
        wait_until(lambda: sum(running_by_node(client, api).values()) == 3, 60, "back at 3")
        wait_until(
            lambda: _requires_possible_mark(client, api), 30, "the possible-owner constraint"
        )
    out = ctl.out.getvalue()
    print(f"running at least {sampler.minimum} of 3 over {len(sampler.samples)} samples")
    assert sampler.minimum >= 3 - 1, (sampler.samples, out)  # max-unavailable: 1
    assert "whichever node Swarm picks" in out or "start 1 task(s) on the targets" in out, out


def _relabel(client: docker.DockerClient, name: str, labels: dict[str, str]) -> None:
    """Add or change labels only, as `docker service update --label-add` does: no rollout."""
    attrs = client.api.inspect_service(name)
    spec = attrs["Spec"]
    spec["Labels"] = {**(spec.get("Labels") or {}), **labels}
    update_service_spec(client, attrs["ID"], int(attrs["Version"]["Index"]), spec)


def _requires_possible_mark(client: docker.DockerClient, name: str) -> bool:
    spec = client.api.inspect_service(name)["Spec"]
    constraints = spec["TaskTemplate"].get("Placement", {}).get("Constraints") or []
    return f"node.labels.swarm-placement.possible.{name}==true" in constraints


def _node_labels(client: docker.DockerClient, hostname: str) -> dict[str, str]:
    (found,) = [n for n in client.api.nodes() if n["Description"]["Hostname"] == hostname]
    return dict(found["Spec"].get("Labels") or {})


def test_possible_owners_are_hard_even_when_all_are_down(racks, client, policy) -> None:  # type: ignore[no-untyped-def]
    web = _name("web")
    racks.create_service(web, replicas=2, labels=_managed(possible_nodes="node-3,node-4"))
    with ControllerThread(racks.manager_host, policy=policy) as ctl:
        _on(client, web, {"node-3", "node-4"})
        _crash(racks, "node-3")
        _crash(racks, "node-4")
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline:
            assert not running_by_node(client, web), "ran outside its possible owners"
            time.sleep(0.3)
        pending = client.api.tasks(filters={"service": web, "desired-state": "running"})
        assert any(t["Status"]["State"] == "pending" for t in pending)
        _restore(racks, "node-3")
        _restore(racks, "node-4")
        wait_until(lambda: sum(running_by_node(client, web).values()) == 2, 60, "back")
        assert set(running_by_node(client, web)) <= {"node-3", "node-4"}
    assert "stay pending" in ctl.out.getvalue()


@pytest.mark.parametrize("mode", ["soft", "hard"])
def test_anti_affinity_apart_then_together_or_pending_then_apart(
    racks, client, policy, mode
) -> None:  # type: ignore[no-untyped-def]
    a, b = _name("aa"), _name("ab")
    labels = _managed(
        anti_affinity="front", anti_affinity_mode=mode, possible_nodes="node-2,node-3"
    )
    racks.create_service(a, labels=labels)
    racks.create_service(b, labels=labels)
    with ControllerThread(racks.manager_host, policy=policy) as ctl:

        def apart() -> bool:
            on_a, on_b = running_by_node(client, a), running_by_node(client, b)
            return len(on_a) == len(on_b) == 1 and {*on_a, *on_b} == {"node-2", "node-3"}

        wait_until(apart, 60, "apart on the possible owners")
        victim = next(iter(running_by_node(client, b)))
        survivor = "node-3" if victim == "node-2" else "node-2"
        _crash(racks, victim)
        if mode == "soft":
            _on(client, b, {survivor})
            _on(client, a, {survivor})
        else:
            time.sleep(6)
            assert running_by_node(client, a) == {survivor: 1}
            assert not running_by_node(client, b), "hard anti-affinity shared a node"
        _restore(racks, victim)
        try:
            wait_until(apart, 60, "separated again")
        finally:
            print(ctl.out.getvalue())


@pytest.mark.xfail(
    strict=False,
    reason="a third task is still sometimes replaced on the way back (1 run in 8 since moves "
    "onto returned nodes wait to settle); the cause is not isolated",
)
def test_rack_spread_survives_a_rack_and_returns_with_two_moves(racks, client, policy) -> None:  # type: ignore[no-untyped-def]
    web = _name("web")
    racks.create_service(web, replicas=4, labels=_managed(spread="rack", max_unavailable="2"))

    def per_rack() -> dict[str, int]:
        counts: dict[str, int] = {}
        for host, n in running_by_node(client, web).items():
            rack = RACKS[host]["rack"]
            counts[rack] = counts.get(rack, 0) + n
        return counts

    with ControllerThread(racks.manager_host, policy=policy):
        wait_until(lambda: per_rack() == {"r1": 2, "r2": 2}, 60, "2/2")
        time.sleep(2)  # at rest before the rack fails
        racks.fail("node-3", "crash")
        racks.fail("node-4", "crash")
        # Settled: all four in r1, and any failover surge trimmed back to four.
        wait_until(lambda: per_rack() == {"r1": 4} and not _operation(client, web), 60, "all in r1")
        during = set().union(*task_ids_by_node(client, web).values())
        # Moves wait until the returned nodes have stayed ready a while: had they gone as
        # soon as node-3 alone was back, the surge would put both tasks there, and Swarm's
        # trim (from the busiest nodes, all at 2) could take one of them: a third move.
        with RunningSampler(racks.manager_host, web) as sampler:
            racks.restore("node-3")
            racks.restore("node-4")
            wait_until(lambda: per_rack() == {"r1": 2, "r2": 2}, 90, "2/2 again")
            wait_until(lambda: not _operation(client, web), 60, "trim done")
        after = set().union(*task_ids_by_node(client, web).values())
        assert len(after - during) == 2, "exactly two tasks replaced"
        assert sampler.minimum >= 4


def test_a_failover_trim_on_a_two_one_layout_never_stops_a_running_original_early(
    racks, client, policy
) -> None:  # type: ignore[no-untyped-def]
    """api: 3 stop-first replicas that reserve CPU and memory, two on one node, one on
    another, node-1 and node-4 empty. The node with one dies: Swarm's delayed replacement
    waits on one empty node, the surge runs on the other. Trimmed back to 3 at once,
    Swarm's scale-down would drop the running second copy (a node's second copy goes
    before any first one) and keep the replacement that does not run yet; the trim waits
    until every task runs, so the count never falls below 3 once the surge runs."""
    api = _name("api")
    racks.create_service(
        api,
        replicas=3,
        labels=_managed(),
        constraints=["node.hostname!=node-1", "node.hostname!=node-4"],
        update_order="stop-first",
        # Long enough that the surge runs before the delayed replacement even on a loaded
        # machine: with 2 s both came up together at times, and the trim never had to wait.
        restart_delay_seconds=5.0,
        reserve_cpus=0.1,
        reserve_memory_bytes=32 << 20,
    )
    racks.wait_services_running([api])
    layout = running_by_node(client, api)
    assert sorted(layout.values()) == [1, 2], layout
    single = next(h for h, n in layout.items() if n == 1)
    # Widen placement: a constraint change every task still satisfies restarts nothing.
    attrs = client.api.inspect_service(api)
    spec = attrs["Spec"]
    spec["TaskTemplate"]["Placement"]["Constraints"] = []
    update_service_spec(client, attrs["ID"], attrs["Version"]["Index"], spec)
    try:
        with ControllerThread(racks.manager_host, policy=policy) as ctl:
            ctl.wait_cycles(2)
            assert running_by_node(client, api) == layout, "adoption restarted nothing"
            _crash(racks, single)
            wait_until(lambda: sum(running_by_node(client, api).values()) >= 3, 30, "surged")
            with RunningSampler(racks.manager_host, api, interval=0.1) as sampler:
                wait_until(
                    lambda: (
                        _operation(client, api) is None
                        and client.api.inspect_service(api)["Spec"]["Mode"]["Replicated"][
                            "Replicas"
                        ]
                        == 3
                    ),
                    60,
                    "the surge trimmed",
                )
                wait_until(lambda: sum(running_by_node(client, api).values()) == 3, 30, "3 run")
            print(f"{api} after the surge ran: min {sampler.minimum} running of 3")
            assert "the trim waits until every task runs" in ctl.out.getvalue()
            assert sampler.minimum >= 3, "the trim stopped a running task below the count"
            print(ctl.out.getvalue())
    finally:
        _restore(racks, single)


# A new user's policy: every default (move cooldown 5 minutes, max-unavailable 1), but a
# resync every second so that the test waits for Swarm, not for the timer.
NEW_USER_POLICY = """\
apiVersion: placement/v1
controller:
  resync-interval: 1s
"""


def _running_on_live_nodes(client: docker.DockerClient, name: str) -> int:
    """Running tasks of the service on nodes Swarm reports ready."""
    live = {n["ID"] for n in client.api.nodes() if n["Status"]["State"] == "ready"}
    return sum(
        1
        for t in client.api.tasks(filters={"service": name, "desired-state": "running"})
        if t["Status"]["State"] == "running" and t.get("NodeID") in live
    )


class _LiveSampler(RunningSampler):
    """RunningSampler, counting only tasks on nodes Swarm reports ready."""

    def _run(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(docker.errors.DockerException, requests.RequestException):
                self.samples.append(_running_on_live_nodes(self._client, self._service))
            self._stop.wait(self._interval)


def test_stop_first_tasks_on_a_manager_and_a_worker_reach_two_possible_owners(  # type: ignore[no-untyped-def]
    racks, client, tmp_path
) -> None:
    """Issue 46, finding 8, as a new user meets it: 3 stop-first replicas without
    reservations, possible owners node-2 and node-3, and Swarm started them on node-1
    (the manager), node-2 and node-4. A surge that covers both nodes to leave whatever
    Swarm's tie-break would be more than the count, and the rule kept the tasks there
    for good. Now every task reaches a possible owner within 60 s, never more than
    max-unavailable (1) below 3 while they move, the default cooldown notwithstanding."""
    _fill(racks, "node-3")  # Swarm's own pick then leaves node-3 out
    api = _name("api")
    racks.create_service(
        api,
        replicas=3,
        update_order="stop-first",
        labels=_managed(possible_nodes="node-2,node-3"),
    )
    racks.wait_services_running([api])
    assert running_by_node(client, api) == {"node-1": 1, "node-2": 1, "node-4": 1}
    policy = tmp_path / "policy.yaml"
    policy.write_text(NEW_USER_POLICY)
    owners = {"node-2", "node-3"}
    with (
        _LiveSampler(racks.manager_host, api) as sampler,
        ControllerThread(racks.manager_host, policy=policy) as ctl,
    ):
        wait_until(
            lambda: (
                (on := running_by_node(client, api)) and set(on) <= owners and sum(on.values()) == 3
            ),
            60,
            "every task on node-2 or node-3",
        )
        wait_until(
            lambda: _requires_possible_mark(client, api), 30, "the possible-owner constraint"
        )
    out = ctl.out.getvalue()
    print(f"running at least {sampler.minimum} of 3 over {len(sampler.samples)} samples")
    assert sampler.minimum >= 3 - 1, (sampler.samples, out)
    assert "no larger surge fits" not in out, out
