"""A stop-first service leaves nodes that are no possible owner of it, whatever the layout
(rules/owners/escape_moves), never more than max-unavailable below its count.

Each layout runs the real `plan()` (every rule, default policy) against the what-if
simulator's Swarm (core/simulate): its scheduler, its stop-first updater (one task at a
time, each replacement running before the next stops), its scale-down order. The running
count is sampled after every write and every tick, and every cycle's writes are checked
to be named by a decision whose reason reads a time as a time.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace

from hypothesis import given, settings
from hypothesis import strategies as st

from controller.core.actions import SetReplicas
from controller.core.decisions import Code
from controller.core.kernel.ledger import moved_from
from controller.core.labels import possible_constraint
from controller.core.memory import Memory
from controller.core.model import ClusterSnapshot, Node, Resources, Service
from controller.core.plan import Plan, plan
from controller.core.simulate import SimSwarm, SwarmTimings
from controller.policy import Policy

from .builders import MANAGED, node, running, service, snapshot
from .test_reason_times import EPOCH, EPOCH_LIKE

T0 = EPOCH  # a moment of today: a reason that shows epoch seconds is caught
TICK = 0.5
RESYNC = 2.0
TIMINGS = SwarmTimings(heartbeat_seconds=1.0)
CPU = 1_000_000_000


def stop_first(
    replicas: int,
    possible: str,
    *,
    max_unavailable: int | None = None,
    reserve_cpus: float = 0.0,
    parallelism: int = 1,
) -> Service:
    """A managed stop-first service as `docker service create` makes it (update
    parallelism 1 unless told), with its possible owners, never steered before."""
    labels = {**MANAGED, "placement.possible-nodes": possible}
    if max_unavailable is not None:
        labels["placement.max-unavailable"] = str(max_unavailable)
    return replace(
        service("web", replicas=replicas, labels=labels),
        update_order="stop-first",
        update_batch=parallelism,
        reservations=Resources(int(reserve_cpus * CPU)),
    )


def nodes_of(count: int = 4, *, cpus: float = 0.0) -> list[Node]:
    """node-1 the manager; with `cpus`, every node has that many CPUs."""
    out = [node(i, manager=i == 1) for i in range(1, count + 1)]
    if cpus:
        out = [replace(n, capacity=Resources(int(cpus * CPU), 1 << 34)) for n in out]
    return out


def layout(svc: Service, nodes: list[Node], on: tuple[int, ...]) -> ClusterSnapshot:
    return snapshot(nodes, [svc], [running(svc, n, slot) for slot, n in enumerate(on, start=1)])


@dataclass
class Run:
    final: dict[str, int]  # hostname -> running tasks at the end
    minimum: int  # the fewest running (on nodes holding tasks) at any moment
    constrained: bool  # the possible-owner constraint is in place at the end
    plans: list[Plan]
    writes: int

    def unexplained(self) -> list[str]:
        """Writes no decision names, fallbacks, and reasons with epoch seconds."""
        out: list[str] = []
        for result in self.plans:
            named = [d.action for d in result.decisions]
            out += [f"no decision: {a}" for a in result.actions if a not in named]
            out += [d.reason for d in result.decisions if d.outcome == "write"]
            out += [d.reason for d in result.decisions if EPOCH_LIKE.search(d.reason)]
        return out


def run(snap: ClusterSnapshot, *, seconds: float = 90.0) -> Run:
    """The controller (every rule, default policy but a 2 s resync) on the simulated swarm
    for `seconds`: a cycle after every change and every resync, as the runtime runs."""
    policy = Policy.default()
    policy = replace(policy, controller=replace(policy.controller, resync_interval_seconds=RESYNC))
    swarm = SimSwarm(snap, TIMINGS, T0)
    (svc,) = [s for s in snap.services if s.labels.get("placement.managed")]
    memory, now, next_resync = Memory(), T0, T0
    minimum, plans, writes = swarm.running(svc.id), [], 0
    while now < T0 + seconds:
        swarm.step(now)
        minimum = min(minimum, swarm.running(svc.id))
        if swarm.changed or now >= next_resync:
            swarm.changed, next_resync = False, now + RESYNC
            result = plan(snapshot=swarm.snapshot(), policy=policy, memory=memory, now=now)
            memory = result.memory
            for action in result.actions:
                if (left := moved_from(action)) and hasattr(action, "service_id"):
                    memory = memory.note_move(action.service_id, now, left)
            swarm.apply(result.actions)
            plans.append(result)
            writes += len(result.actions)
            minimum = min(minimum, swarm.running(svc.id))
        now += TICK
    final_svc = swarm.services[svc.id]
    return Run(
        final=swarm.placement()[svc.name],
        minimum=minimum,
        constrained=possible_constraint(svc.name) in final_svc.constraints,
        plans=plans,
        writes=writes,
    )


def reasons(result: Run, outcome: str) -> list[str]:
    return [d.reason for p in result.plans for d in p.decisions if d.outcome == outcome]


# --- finding 8: the layout a new user gets ---------------------------------------------


def test_finding_8_tasks_on_a_manager_and_a_worker_outside_two_owners_move() -> None:
    """4 nodes, node-1 the manager; 3 stop-first replicas, no reservations, possible
    owners node-2 and node-3; Swarm started them on node-1, node-2 and node-4. A surge of
    two could start back on node-1 or node-4 (every node holds one task but node-3), and
    the surge that covers both (four) is more than the count: at 905f1cc the rule kept
    them there for good. Every task reaches a possible owner, never below 3 - 1."""
    svc = stop_first(3, "node-2,node-3")
    result = run(layout(svc, nodes_of(), (1, 2, 4)))
    assert set(result.final) <= {"node-2", "node-3"}, (result.final, reasons(result, "keep"))
    assert sum(result.final.values()) == 3 and result.constrained
    assert result.minimum >= 3 - 1
    assert not result.unexplained(), result.unexplained()


def test_finding_8_moves_at_once_the_first_cycle_it_can() -> None:
    """The cycle that kept the tasks at 905f1cc ('no larger surge fits') now starts the
    move: a surge of one lands on node-3 for sure (the only node without a task)."""
    svc = stop_first(3, "node-2,node-3")
    snap = layout(svc, nodes_of(), (1, 2, 4))
    result = run(snap, seconds=2.0)
    moves = [a for p in result.plans for a in p.actions if isinstance(a, SetReplicas)]
    assert moves and moves[0].replicas == 4, reasons(result, "keep")
    assert not any("no larger surge fits" in r for r in reasons(result, "keep"))


# --- the other layouts -----------------------------------------------------------------


def test_owners_fewer_than_replicas_two_tasks_share_an_owner() -> None:
    """3 replicas, 2 possible owners, no max-replicas-per-node: two tasks end on one
    owner. Every task starts off the owners."""
    svc = stop_first(3, "node-2,node-3")
    result = run(layout(svc, nodes_of(), (1, 4, 4)))
    assert set(result.final) <= {"node-2", "node-3"} and sum(result.final.values()) == 3
    assert sorted(result.final.values()) == [1, 2]
    assert result.minimum >= 2 and result.constrained


def test_one_possible_owner_and_no_reservations_every_task_moves_by_surge() -> None:
    """One possible owner, 3 replicas on the other nodes: each round's surge covers one
    node to leave, and the service never runs fewer than 3."""
    svc = stop_first(3, "node-2")
    result = run(layout(svc, nodes_of(), (1, 3, 4)))
    assert result.final == {"node-2": 3} and result.constrained
    assert result.minimum >= 3


def test_where_no_surge_covers_the_tasks_leave_as_swarm_moves_them() -> None:
    """One possible owner, node-3, with room for the 3 tasks (3 CPUs, 1 each) and none
    beyond; two tasks share node-1. Once node-4's task has moved by surge, every surge
    lands on node-1 (it holds fewer tasks than node-3, and has room): the last two leave
    as Swarm's updater moves them for a constraint, one at a time, each replacement
    running before the next stops: never more than max-unavailable 1 below."""
    svc = stop_first(3, "node-3", reserve_cpus=1.0)
    result = run(layout(svc, nodes_of(cpus=3.0), (1, 1, 4)))
    assert result.final == {"node-3": 3} and result.constrained
    assert result.minimum == 3 - 1
    assert any("leave as Swarm moves them" in r for r in reasons(result, "move"))
    assert not result.unexplained(), result.unexplained()


def test_with_max_unavailable_0_only_surges_move_tasks() -> None:
    """The same finding-8 layout with max-unavailable 0: the partial surges still move
    every task, and the service never runs fewer than 3."""
    svc = stop_first(3, "node-2,node-3", max_unavailable=0)
    result = run(layout(svc, nodes_of(), (1, 2, 4)))
    assert set(result.final) <= {"node-2", "node-3"} and sum(result.final.values()) == 3
    assert result.minimum >= 3


def test_with_max_unavailable_0_and_no_surge_the_tasks_stay_and_it_says_why() -> None:
    """The layout above with max-unavailable 0: node-4's task moves by surge; for the two
    on node-1 no surge covers and stopping one first is not allowed: they stay, and the
    gap is reported with the budget."""
    svc = stop_first(3, "node-3", reserve_cpus=1.0, max_unavailable=0)
    result = run(layout(svc, nodes_of(cpus=3.0), (1, 1, 4)), seconds=30.0)
    assert result.minimum >= 3
    assert result.final == {"node-1": 2, "node-3": 1}
    gaps = [d.reason for d in result.plans[-1].decisions if d.code == Code.POSSIBLE_UNENFORCED]
    assert gaps and "max-unavailable 0" in gaps[0], gaps


def test_reservations_with_room_for_one_more_task_on_each_owner() -> None:
    """Each node has 2 CPUs, each task reserves 1: the surges are sized to the little
    room there is, each round's exclusion leaves room for the replacements Swarm's
    updater starts, and the service never runs fewer than 3."""
    svc = stop_first(3, "node-2,node-3", reserve_cpus=1.0)
    result = run(layout(svc, nodes_of(cpus=2.0), (1, 2, 4)))
    assert set(result.final) <= {"node-2", "node-3"} and sum(result.final.values()) == 3
    assert result.minimum >= 3 and result.constrained


def test_a_surge_whose_replacements_would_have_no_room_is_not_made() -> None:
    """4 replicas on 2-CPU nodes, one each; possible owners node-2 and node-3. The one
    surge that covers node-1 and node-4 (four more) fits, but fills every node: Swarm's
    updater would then find no room for the first replacement, hold the second task, and
    the move would stall (at 905f1cc the rule then undid its own exclusion every other
    cycle). Instead node-1 goes by a smaller surge, and node-4, which no surge can cover
    then, as Swarm's updater moves it, within max-unavailable 1."""
    svc = stop_first(4, "node-2,node-3", reserve_cpus=1.0)
    result = run(layout(svc, nodes_of(cpus=2.0), (4, 2, 1, 3)))
    assert result.final == {"node-2": 2, "node-3": 2} and result.constrained
    assert result.minimum >= 4 - 1
    assert not result.unexplained(), result.unexplained()


def test_reservations_with_room_for_a_surge() -> None:
    """Reservations, and room: the move is by surge, never below the count."""
    svc = stop_first(3, "node-2,node-3", reserve_cpus=0.5)
    result = run(layout(svc, nodes_of(cpus=4.0), (1, 2, 4)))
    assert set(result.final) <= {"node-2", "node-3"} and sum(result.final.values()) == 3
    assert result.minimum >= 3


def test_no_room_on_the_owners_at_all_keeps_the_tasks() -> None:
    """The possible owners have room for one task in all: nothing is stopped for a
    replacement that would have no node."""
    svc = stop_first(3, "node-2,node-3", reserve_cpus=1.0)
    nodes = nodes_of(cpus=2.0)
    nodes[1] = replace(nodes[1], capacity=Resources(CPU // 2, 1 << 34))  # node-2: none
    nodes[2] = replace(nodes[2], capacity=Resources(CPU, 1 << 34))  # node-3: one
    result = run(layout(svc, nodes, (1, 3, 4)), seconds=20.0)
    assert result.minimum >= 3
    assert sum(result.final.values()) == 3


def test_a_manager_among_the_nodes_to_leave_that_runs_other_tasks() -> None:
    """node-1, the manager, runs other services' tasks too (the controller's own, say),
    so Swarm ranks it last among nodes holding as many of the service's tasks: the
    tasks there and on node-4 still reach the possible owners."""
    svc = stop_first(3, "node-2,node-3")
    other = replace(service("controller", replicas=2), update_order="stop-first")
    nodes = nodes_of()
    tasks = [running(svc, 1, 1), running(svc, 1, 2), running(svc, 4, 3)]
    tasks += [running(other, 1, 1), running(other, 1, 2)]
    result = run(snapshot(nodes, [svc, other], tasks))
    assert set(result.final) <= {"node-2", "node-3"} and sum(result.final.values()) == 3
    assert result.minimum >= 3 - 1 and result.constrained


def test_update_parallelism_0_stops_as_many_as_max_unavailable_allows() -> None:
    """An updater with no parallelism bound stops every excluded task at once: only as
    many nodes are excluded at a time as max-unavailable allows."""
    svc = stop_first(4, "node-2", parallelism=0, max_unavailable=1)
    nodes = nodes_of(5)
    result = run(layout(svc, nodes, (1, 3, 4, 5)))
    assert result.final == {"node-2": 4}
    assert result.minimum >= 4 - 1


# --- a property ------------------------------------------------------------------------


@st.composite
def escapes(draw: st.DrawFn) -> tuple[ClusterSnapshot, int, int]:
    """A stop-first service with tasks anywhere on 4 or 5 nodes, 1 to 3 possible
    owners, max-unavailable 0 to 2, with or without reservations that may leave no room
    to surge; hostnames shuffled, so the simulator's tie-break (by hostname) falls
    differently on the nodes to leave and the owners."""
    count = draw(st.integers(4, 5))
    replicas = draw(st.integers(1, 4))
    owners = draw(st.integers(1, 3))
    unavailable = draw(st.integers(0, 2))
    cpus = draw(st.sampled_from([0.0, 2.0, 3.0]))
    order = draw(st.permutations(range(1, count + 1)))
    nodes = [replace(n, hostname=f"node-{order[i]}") for i, n in enumerate(nodes_of(count))]
    if cpus:
        nodes = [replace(n, capacity=Resources(int(cpus * CPU), 1 << 34)) for n in nodes]
    possible = ",".join(f"node-{order[i]}" for i in range(owners))
    svc = stop_first(replicas, possible, max_unavailable=unavailable, reserve_cpus=cpus and 1.0)
    on = draw(st.lists(st.integers(1, count), min_size=replicas, max_size=replicas))
    per_node = Counter(on)
    if cpus and any(c > cpus for c in per_node.values()):
        on = [(i % count) + 1 for i in range(replicas)]  # each node fits its tasks
    return layout(svc, nodes, tuple(on)), replicas, unavailable


@settings(max_examples=40, deadline=None)
@given(escapes())
def test_escapes_never_go_below_max_unavailable_and_end_on_the_owners(
    case: tuple[ClusterSnapshot, int, int],
) -> None:
    snap, replicas, unavailable = case
    (svc,) = snap.services
    owners = set(svc.labels["placement.possible-nodes"].split(","))
    capacity = [n.capacity.nano_cpus // max(svc.reservations.nano_cpus, 1) for n in snap.nodes]
    room_on_owners = sum(
        c for n, c in zip(snap.nodes, capacity, strict=True) if n.hostname in owners
    )
    result = run(snap, seconds=60.0)
    assert not result.unexplained(), result.unexplained()
    assert result.minimum >= replicas - unavailable, (result.minimum, reasons(result, "move"))
    assert sum(result.final.values()) >= replicas, result.final
    fits = not svc.reservations.nano_cpus or room_on_owners >= replicas
    if fits and unavailable:
        # Room on the owners and a budget: Swarm's own way is always open.
        assert set(result.final) <= owners, (result.final, reasons(result, "keep"))
        assert result.constrained
