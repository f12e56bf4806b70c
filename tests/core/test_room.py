"""A node is a target only if Swarm will accept the task there (placement/fits).

Each test makes node-2, the preferred owner of a service placed on node-1, refuse the
task for one reason Swarm's scheduler has; the owners rule must then leave the task
where it is and say why.
"""

from __future__ import annotations

from dataclasses import replace

from controller.core.actions import SetReplicas, SetServiceConstraints
from controller.core.capacity import observe_room
from controller.core.kernel.candidates import Candidates
from controller.core.memory import Memory
from controller.core.model import ClusterSnapshot, Node, Resources, Service
from controller.core.plan import Plan, plan
from controller.core.rules import rules_named
from controller.core.rules.owners.assign import PlacementInputs, assign
from controller.core.rules.owners.fits import Fits
from controller.policy import Policy

from .builders import MANAGED, node, running, service, snapshot

NOW = 1_000_000.0
STABLE = Memory(node_ready_since={f"n{i}": 0.0 for i in range(1, 5)}, started=True)
GIB = 1 << 30
CPU = 1_000_000_000
BIG = Resources(8 * CPU, 16 * GIB, {"slot": 4})


def owners_only(snap: ClusterSnapshot) -> Plan:
    return plan(
        snapshot=snap,
        policy=Policy.default(),
        memory=STABLE,
        now=NOW,
        rules=rules_named("owners"),
    )


def nodes(**node2: object) -> list[Node]:
    """Four roomy linux/amd64 nodes; node-2 changed as given."""
    made = [
        replace(node(i, manager=i == 1), capacity=BIG, platform_os="linux", platform_arch="x86_64")
        for i in range(1, 5)
    ]
    made[1] = replace(made[1], **node2)  # type: ignore[arg-type]
    return made


def db(**fields: object) -> Service:
    """A stop-first service never steered before, preferring node-2."""
    svc = service("db", labels={**MANAGED, "placement.preferred-nodes": "node-2"})
    return replace(svc, update_order="stop-first", **fields)  # type: ignore[arg-type]


def filler(**fields: object) -> Service:
    """A service the controller does not manage, pinned to node-2."""
    return replace(service("fill", constraints=["node.hostname==node-2"]), **fields)  # type: ignore[arg-type]


def refused(snap: ClusterSnapshot, reason: str) -> None:
    result = owners_only(snap)
    moving = [
        a
        for a in result.actions
        if isinstance(a, SetReplicas) or (isinstance(a, SetServiceConstraints) and a.evicts_from)
    ]
    assert moving == [], "moved to a node Swarm would not run the task on"
    assert not [d for d in result.decisions if d.outcome == "move"]
    keep = [d.reason for d in result.decisions if d.outcome == "keep"]
    assert f"node-2 is preferred, but {reason}" in keep, result.decisions


def test_cpu_reservations_leave_no_room() -> None:
    svc, fill = db(reservations=Resources(CPU)), filler(reservations=Resources(18 * CPU // 10))
    snap = snapshot(
        nodes(capacity=Resources(2 * CPU, 16 * GIB)),
        [svc, fill],
        [running(svc, 1, 1), running(fill, 2, 1)],
    )
    refused(snap, "no room on node-2: needs cpu=1, cpu=0.2 free")


def test_memory_reservations_leave_no_room() -> None:
    svc, fill = db(reservations=Resources(0, 3 * GIB)), filler(reservations=Resources(0, 3 * GIB))
    snap = snapshot(
        nodes(capacity=Resources(8 * CPU, 4 * GIB)),
        [svc, fill],
        [running(svc, 1, 1), running(fill, 2, 1)],
    )
    refused(snap, "no room on node-2: needs memory=3072MiB, memory=1024MiB free")


def test_generic_resources_leave_no_room() -> None:
    svc = db(reservations=Resources(generic={"gpu": 1}))
    fill = filler(reservations=Resources(generic={"gpu": 1}))
    snap = snapshot(
        nodes(capacity=Resources(8 * CPU, 16 * GIB, {"gpu": 1})),
        [svc, fill],
        [running(svc, 1, 1), running(fill, 2, 1)],
    )
    refused(snap, "no room on node-2: needs gpu=1, gpu=0 free")


def test_a_node_without_the_generic_resource_has_no_room() -> None:
    svc = db(reservations=Resources(generic={"gpu": 1}))
    four = [replace(n, capacity=Resources(8 * CPU, 16 * GIB, {"gpu": 1})) for n in nodes()]
    four[1] = replace(four[1], capacity=Resources(8 * CPU, 16 * GIB))
    refused(
        snapshot(four, [svc], [running(svc, 1, 1)]), "no room on node-2: needs gpu=1, gpu=0 free"
    )


def test_a_host_port_published_there_is_taken() -> None:
    svc, fill = db(host_ports=("8080/tcp",)), filler(host_ports=("8080/tcp",))
    snap = snapshot(nodes(), [svc, fill], [running(svc, 1, 1), running(fill, 2, 1)])
    refused(snap, "host port 8080/tcp is taken on node-2")


def test_the_same_port_over_another_protocol_is_free() -> None:
    svc, fill = db(host_ports=("8080/tcp",)), filler(host_ports=("8080/udp",))
    snap = snapshot(nodes(), [svc, fill], [running(svc, 1, 1), running(fill, 2, 1)])
    assert any(d.outcome == "move" for d in owners_only(snap).decisions)


def test_a_node_of_another_platform_is_refused() -> None:
    svc = db(platforms=(("linux", "arm64"),))
    four = [replace(n, platform_arch="aarch64") for n in nodes()]
    four[1] = replace(four[1], platform_arch="x86_64")
    refused(
        snapshot(four, [svc], [running(svc, 1, 1)]),
        "node-2 is linux/x86_64, the image runs on linux/arm64",
    )


def test_max_replicas_per_node_counts_the_tasks_already_there() -> None:
    svc = replace(service("web", replicas=3), max_replicas_per_node=1)
    snap = snapshot(nodes(), [svc], [running(svc, 2, 1)])
    fits = Fits.observe(snap)
    assert fits.more(svc, "n2") == 0
    assert (
        fits.refusal(svc, "n2") == "node-2 already runs 1 task(s) of it (max-replicas-per-node 1)"
    )
    assert fits.more(svc, "n3") == 1


def test_room_taken_by_an_earlier_move_is_not_counted_twice() -> None:
    svc = replace(service("web"), reservations=Resources(CPU))
    snap = snapshot(nodes(capacity=Resources(CPU, GIB)), [svc])
    fits = Fits.observe(snap)
    assert fits.more(svc, "n2") == 1
    assert fits.taken(svc, {"n2": 1}).refusal(svc, "n2") == (
        "no room on node-2: needs cpu=1, cpu=0 free"
    )


def test_a_moving_task_frees_room_only_on_the_node_it_leaves() -> None:
    svc = db(reservations=Resources(CPU))
    snap = snapshot(nodes(capacity=Resources(CPU, GIB)), [svc], [running(svc, 1, 1)])
    room = observe_room(snap)
    assert room.free["n2"].nano_cpus == CPU  # untouched by the task that would come
    assert room.free["n1"].nano_cpus == 7 * CPU  # its own reservation still counted there


def test_the_assignment_places_no_more_tasks_on_a_node_than_it_has_room_for() -> None:
    everywhere = frozenset({"n1", "n2", "n3"})
    inputs = PlacementInputs(
        replicas=6,
        current={},
        candidates=Candidates(everywhere, everywhere, ("n1",), None),
        domain=None,
        mates={},
        load={},
        hostname={n: n for n in everywhere},
        failback_ready=frozenset(),
        max_moves=0,
        room={"n1": 1, "n2": 2},
    )
    assert assign(inputs).desired == {"n1": 1, "n2": 2, "n3": 3}


def test_a_task_that_fills_its_preferred_owner_stays_there() -> None:
    # The service's own task takes node-2's only slot: node-2 is full, but that is no
    # reason to move the task to the second preferred owner.
    svc = replace(
        db(reservations=Resources(generic={"slot": 1})),
        labels={**MANAGED, "placement.preferred-nodes": "node-2,node-3"},
    )
    four = [replace(n, capacity=Resources(generic={"slot": 1})) for n in nodes()]
    result = owners_only(snapshot(four, [svc], [running(svc, 2, 1)]))
    assert not [d for d in result.decisions if d.outcome == "move"]
    assert all(not getattr(a, "evicts_from", ()) for a in result.actions)


def test_the_standby_is_a_node_with_room() -> None:
    # At rest on node-2, node-1 would be the standby (least busy, then hostname), but
    # Swarm's failover could not place the task there: node-3 is the standby instead.
    svc = db(reservations=Resources(generic={"slot": 1}))
    svc = replace(svc, labels={**svc.labels, "swarm-placement.excluded": ""})
    four = [replace(n, capacity=Resources(generic={"slot": 1})) for n in nodes()]
    four[0] = replace(four[0], capacity=Resources())
    (action,) = owners_only(snapshot(four, [svc], [running(svc, 2, 1)])).actions
    assert isinstance(action, SetServiceConstraints) and not action.evicts_from
    assert {c for c in action.constraints if c.startswith("node.id!=")} == {
        "node.id!=n1",
        "node.id!=n4",
    }
