"""Properties of rebalancing over random swarms, replayed with Swarm's ties broken at random.

A rebalancing plan never makes a service's task counts more skewed, never raises the
most loaded node's load, never makes a node hot that was not, never exceeds a budget,
never relies on a node the service's constraints exclude, and is deterministic.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import TypeVar

from hypothesis import given, settings
from hypothesis import strategies as st

from controller.core.actions import SetReplicas, SetServiceConstraints
from controller.core.counts import plan_surge_trim, spread
from controller.core.guards import disrupted_nodes
from controller.core.kernel.levels import level_for
from controller.core.memory import Memory
from controller.core.model import (
    Availability,
    ClusterSnapshot,
    Node,
    NodeUsage,
    Resources,
    Service,
)
from controller.core.plan import Plan, plan
from controller.core.rules import rules_named
from controller.core.rules.rebalance.rebalance_memory import REBALANCE_MEMORY, RebalanceMemory
from controller.policy import Budgets, ControllerSettings, Policy, RebalanceMode

from .builders import node, running, service, snapshot
from .rebalance_builders import CPU, GIB, NOW, layout, rebalancing
from .rebalance_sim import SimSwarm

T = TypeVar("T")

CPU_STEPS = [0.0, 0.05, 0.1, 0.2, 0.3, 0.5]


@st.composite
def swarms(draw: st.DrawFn, *, usage: bool = False) -> ClusterSnapshot:
    """Nodes of 1-4 CPUs in two zones, opted-in services (some zoned), unmanaged hogs;
    with `usage`, some nodes also report measured usage."""
    count = draw(st.integers(2, 5))
    nodes = []
    for i in range(1, count + 1):
        made = node(
            i,
            manager=i == 1,
            availability=draw(st.sampled_from([Availability.ACTIVE] * 4 + [Availability.PAUSE])),
            labels={"zone": draw(st.sampled_from(["a", "b"]))},
        )
        cpus = draw(st.sampled_from([1, 2, 4]))
        nodes.append(replace(made, capacity=Resources(cpus * CPU, 4 * GIB)))
    services: list[Service] = []
    tasks = []
    for name in draw(st.lists(st.sampled_from(["web", "api", "db", "cache"]), unique=True)):
        zoned = draw(st.booleans())
        svc = rebalancing(
            name,
            draw(st.integers(1, 8)),
            cpu=draw(st.sampled_from(CPU_STEPS)),
            order=draw(st.sampled_from(["start-first", "stop-first"])),
            constraints=["node.labels.zone==a"] if zoned else [],
            max_unavailable=draw(st.sampled_from(["0", "1", "1", "2"])),
        )
        allowed = [
            n for n in range(1, count + 1) if not zoned or nodes[n - 1].labels["zone"] == "a"
        ]
        if not allowed:
            continue
        services.append(svc)
        for slot in range(1, (svc.replicas or 0) + 1):
            tasks.append(running(svc, draw(st.sampled_from(allowed)), slot))
    for index in range(draw(st.integers(0, 2))):
        hog = service(f"hog{index}", replicas=1)
        hog = replace(hog, reservations=Resources(int(draw(st.sampled_from(CPU_STEPS)) * CPU), 0))
        services.append(hog)
        tasks.append(running(hog, draw(st.integers(1, count)), 1))
    snap = snapshot(nodes, services, tasks)
    if usage:
        fractions = st.floats(0.0, 1.2, allow_nan=False)
        reports = draw(st.dictionaries(st.sampled_from([n.id for n in nodes]), fractions))
        snap = replace(snap, usage={k: NodeUsage(v, v / 2) for k, v in reports.items()})
    return snap


@st.composite
def policies(draw: st.DrawFn) -> Policy:
    budgets = Budgets(
        actions_per_cycle=draw(st.sampled_from([0, 1, 2, 10, 10])),
        actions_per_node=draw(st.sampled_from([0, 1, 2, 2, 3])),
        actions_per_service=draw(st.sampled_from([0, 1, 1, 1])),
    )
    return Policy(
        controller=ControllerSettings(
            rebalance_mode=RebalanceMode.PERIODIC,
            aggressiveness=draw(st.integers(1, 5)),
            budgets=budgets,
        )
    )


def settled(snap: ClusterSnapshot) -> Memory:
    """Every node ready for long, every imbalance persisted, a periodic round due."""
    keys = [f"count:{s.id}" for s in snap.services] + [f"load:{n.id}" for n in snap.nodes]
    return Memory(node_ready_since={n.id: 0.0 for n in snap.nodes}, started=True).with_slice(
        REBALANCE_MEMORY, RebalanceMemory(streaks={k: (10, 0.0) for k in keys}, last_round=0.0)
    )


def run(snap: ClusterSnapshot, pol: Policy) -> Plan:
    return plan(
        snapshot=snap,
        policy=pol,
        memory=settled(snap),
        now=NOW,
        rules=rules_named("rebalance"),
    )


@settings(max_examples=300, deadline=None)
@given(swarms(usage=True), policies())
def test_the_plan_is_deterministic(snap: ClusterSnapshot, pol: Policy) -> None:
    first, second = run(snap, pol), run(snap, pol)
    assert first.actions == second.actions
    assert first.decisions == second.decisions
    assert first.memory == second.memory


@settings(max_examples=300, deadline=None)
@given(swarms(usage=True), policies())
def test_every_budget_holds_and_the_rule_never_relies_on_the_guards(
    snap: ClusterSnapshot, pol: Policy
) -> None:
    result = run(snap, pol)
    budgets = pol.controller.budgets
    per_node: dict[str, int] = {}
    per_service: dict[str, int] = {}
    disruptive = [a for a in result.actions if disrupted_nodes(a)]
    assert len(disruptive) <= budgets.actions_per_cycle
    for action in disruptive:
        for node_id in disrupted_nodes(action):
            per_node[node_id] = per_node.get(node_id, 0) + 1
        sid = action.service_id  # type: ignore[union-attr]
        per_service[sid] = per_service.get(sid, 0) + 1
    assert all(v <= budgets.actions_per_node for v in per_node.values())
    assert all(v <= budgets.actions_per_service for v in per_service.values())
    assert not [d for d in result.decisions if d.rule == "guard"]


@settings(max_examples=400, deadline=None)
@given(swarms(), policies(), st.randoms(use_true_random=False))
def test_replayed_with_any_tie_break_nothing_gets_worse(
    snap: ClusterSnapshot, pol: Policy, rng: random.Random
) -> None:
    replay(snap, pol, rng)


def replay(snap: ClusterSnapshot, pol: Policy, rng: random.Random) -> None:
    """Plan one cycle, carry it out in `SimSwarm` with Swarm's ties broken by `rng`, and
    check that nothing got worse."""
    result = run(snap, pol)
    sim = SimSwarm(snap, rng)
    level = level_for(pol.controller.aggressiveness)
    measured = [n for n in snap.nodes if n.accepts_tasks]
    before = {n.id: sim.load(n) for n in measured}
    spreads = {}
    for action in result.actions:
        svc = snap.service_by_id[action.service_id]  # type: ignore[union-attr]
        if isinstance(action, SetReplicas):
            # The skew is measured where the service can be: a node whose reservations
            # leave no room for one more task and that holds none cannot be balanced.
            nodes = {n.id for n in sim.takers(svc, svc.constraints)} | set(sim.counts(svc.id))
            spreads[svc.id] = (spread(sim.counts(svc.id), nodes), nodes)
        if isinstance(action, SetServiceConstraints) and action.evicts_from:
            assert set(svc.constraints) <= set(action.constraints), "a move never widens"
        received = sim.apply(action)  # raises if a moved task had nowhere to go
        allowed = {n.id for n in sim.allowed(svc, getattr(action, "constraints", svc.constraints))}
        assert set(received) <= allowed, "a task went to a node its constraints exclude"
    for sid, (was, nodes) in spreads.items():
        assert spread(sim.counts(sid), nodes) < was, "a count move must reduce the skew"
    after = {n.id: sim.load(n) for n in measured}
    if before:
        assert max(after.values()) <= max(before.values()) + 1e-9
    for node_id, load in after.items():
        if before[node_id] <= level.absolute:
            assert load <= level.absolute + 1e-9, f"{node_id} was made hot"


class ScriptedTies(random.Random):
    """Breaks each tie by the index its script gives (0 past its end), and records the
    picks and how many choices each tie had."""

    def __init__(self, script: list[int]) -> None:
        super().__init__(0)
        self.script = script
        self.picks: list[int] = []
        self.widths: list[int] = []

    def choice(self, seq: Sequence[T]) -> T:
        at = len(self.picks)
        pick = self.script[at] if at < len(self.script) else 0
        self.picks.append(pick)
        self.widths.append(len(seq))
        return seq[pick]


def every_tie_break() -> Iterator[ScriptedTies]:
    """One ScriptedTies per sequence of Swarm's tie-breaks, until all have been replayed
    (depth first: the last tie with a choice left takes its next one)."""
    script: list[int] = []
    while True:
        rng = ScriptedTies(script)
        yield rng
        ties = zip(rng.picks, rng.widths, strict=True)
        open_ties = [i for i, (pick, width) in enumerate(ties) if pick + 1 < width]
        if not open_ties:
            return
        last = open_ties[-1]
        script = [*rng.picks[:last], rng.picks[last] + 1]


# Budgets that let several moves through in one cycle, at aggressiveness 3 (hot: 60 %).
ROOMY = Policy(
    controller=ControllerSettings(
        rebalance_mode=RebalanceMode.PERIODIC,
        aggressiveness=3,
        budgets=Budgets(actions_per_cycle=10, actions_per_node=3, actions_per_service=1),
    )
)


def _cpu_node(n: int, cpus: int) -> Node:
    return replace(node(n, manager=n == 1), capacity=Resources(cpus * CPU, 4 * GIB))


def test_a_count_move_never_counts_on_room_an_earlier_move_may_leave_free() -> None:
    """api (0.05 CPU) moves one task to node-3 or node-4 (a tie). node-4 has 1 CPU, half
    of it reserved by a hog: with api's task it has no room for a task of web (0.5 CPU),
    without it it has. Planning web's move as if api's task certainly took node-4's
    room sent web's task to node-3 only; where Swarm put api's task on node-3, web's
    went to node-4 as often: node-4 full (made hot), and web still 2/1/0/1."""
    api = rebalancing("api", 3, cpu=0.05, max_unavailable="1")
    web = rebalancing("web", 4, cpu=0.5, max_unavailable="1")
    hog = replace(service("hog0"), reservations=Resources(CPU // 2, 0))
    busy = replace(service("hog1"), reservations=Resources(CPU // 10, 0))
    snap = snapshot(
        [_cpu_node(1, 4), _cpu_node(2, 2), _cpu_node(3, 4), _cpu_node(4, 1)],
        [api, web, hog, busy],
        [
            *layout(api, [2, 1, 0, 0]),
            *layout(web, [2, 2, 0, 0]),
            running(hog, 4, 1),
            running(busy, 2, 1),
        ],
    )
    replayed = 0
    for rng in every_tie_break():
        replay(snap, ROOMY, rng)
        replayed += 1
    assert replayed > 1  # the ties were there to break


def test_a_count_move_never_counts_on_room_an_earlier_trim_may_free() -> None:
    """The property's own shrunk counterexample. api (0.2 CPU, 4/2/2/0) surges by 2
    onto node-4 and trims 2 from node-1, whose 1 CPU then has room for a task of web
    (0.5 CPU). web (0/2/1/0) was planned as if node-1 stayed full, its new task on
    node-4; with node-1 freed and holding none of web's tasks, Swarm sends it there as
    often: node-1 0.8 -> 0.9, above the hottest node before."""
    api = rebalancing("api", 8, cpu=0.2, max_unavailable="1")
    web = rebalancing("web", 3, cpu=0.5, max_unavailable="1")
    snap = snapshot(
        [_cpu_node(1, 1), _cpu_node(2, 2), _cpu_node(3, 2), _cpu_node(4, 2)],
        [api, web],
        [*layout(api, [4, 2, 2, 0]), *layout(web, [0, 2, 1, 0])],
    )
    for rng in every_tie_break():
        replay(snap, ROOMY, rng)


def test_a_load_move_never_counts_on_room_an_earlier_move_may_leave_free() -> None:
    """The same with a load move: cache's task leaves hot node-1 for the node with the
    fewest of its tasks, node-3 or node-4, but node-4's room for it depends on where
    api's count move puts its task."""
    api = rebalancing("api", 3, cpu=0.05, max_unavailable="1")
    cache = rebalancing("cache", 2, cpu=0.5, max_unavailable="1")
    hog = replace(service("hog0"), reservations=Resources(CPU // 2, 0))
    warm = replace(service("hog1"), reservations=Resources(CPU // 5, 0))
    snap = snapshot(
        [_cpu_node(1, 1), _cpu_node(2, 4), _cpu_node(3, 4), _cpu_node(4, 1)],
        [api, cache, hog, warm],
        [
            *layout(api, [1, 2, 0, 0]),
            *layout(cache, [1, 1, 0, 0]),
            running(hog, 4, 1),
            running(warm, 1, 1),
        ],
    )
    replayed = 0
    for rng in every_tie_break():
        replay(snap, ROOMY, rng)
        replayed += 1
    assert replayed > 1


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(st.sampled_from("abcdef"), st.integers(0, 6), min_size=1),
    st.dictionaries(st.sampled_from("abcdef"), st.integers(1, 4)),
)
def test_a_surge_trim_only_adds_where_there_is_room_and_moves_the_fewest_tasks(
    counts: dict[str, int], room: dict[str, int]
) -> None:
    plan_ = plan_surge_trim(counts, room, {}, max_surge=sum(counts.values()))
    if plan_ is None:
        return
    assert plan_.receivers <= set(room)
    assert plan_.spread_after < plan_.spread_before
    # No smaller surge would have reached the same balance.
    for k in range(1, plan_.surge):
        smaller = plan_surge_trim(counts, room, {}, max_surge=k)
        assert smaller is None or smaller.spread_after > plan_.spread_after
