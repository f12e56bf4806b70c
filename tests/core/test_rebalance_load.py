"""Load rebalancing: hot nodes by reservations or measured usage, the exclusion lever."""

from __future__ import annotations

from dataclasses import replace

from controller.core.actions import SetReplicas, SetServiceConstraints
from controller.core.clock import time_of_day
from controller.core.labels import EXCLUDED_LABEL, EXCLUDED_SINCE_LABEL, exclusion_constraint
from controller.core.model import NodeUsage, Resources, Service
from controller.policy import RebalanceMode

from .builders import running, service, snapshot
from .rebalance_builders import (
    CPU,
    NOW,
    layout,
    memory,
    nodes,
    outcomes,
    policy,
    reasons,
    rebalancing,
    run,
)

PERIODIC = RebalanceMode.PERIODIC
LOAD_KEYS = [f"load:n{i}" for i in (1, 2, 3)]


def hog(name: str, node_n: int, cpu: float) -> tuple[Service, list]:  # type: ignore[type-arg]
    """An unmanaged service reserving `cpu` CPUs on one node."""
    svc = replace(service(name, replicas=1), reservations=Resources(int(cpu * CPU), 0))
    return svc, [running(svc, node_n, 1)]


def periodic(aggressiveness: int = 3, **kw: object):  # type: ignore[no-untyped-def]
    return policy(mode=PERIODIC, aggressiveness=aggressiveness, **kw)  # type: ignore[arg-type]


def due(ns, **fields):  # type: ignore[no-untyped-def]
    """Memory with the imbalances persisted and a periodic round due."""
    return memory(ns, persisted=LOAD_KEYS, last_round=0.0, **fields)


def _constraints(result) -> SetServiceConstraints:  # type: ignore[no-untyped-def]
    (action,) = result.actions
    assert isinstance(action, SetServiceConstraints)
    return action


def test_a_node_hot_by_reservations_sheds_a_service_by_an_exclusion() -> None:
    ns = nodes(cpus=1)
    big, big_tasks = hog("big", 1, 0.5)
    web = rebalancing("web", 1, cpu=0.2)
    snap = snapshot(ns, [big, web], [*big_tasks, *layout(web, [1, 0, 0])])
    result = run(snap, due(ns), pol=periodic())
    action = _constraints(result)
    assert action.service_name == "web"
    assert action.constraints == (*web.constraints, exclusion_constraint("n1"))
    assert action.evicts_from == ("n1",)
    assert action.set_labels == {EXCLUDED_LABEL: "n1", EXCLUDED_SINCE_LABEL: f"{NOW:.3f}"}
    assert outcomes(result) == ["move"]
    assert "take its load off hot node-1" in reasons(result)


def test_aggressiveness_one_leaves_a_mild_imbalance_alone() -> None:
    ns = nodes(cpus=1)
    big, big_tasks = hog("big", 1, 0.5)
    web = rebalancing("web", 1, cpu=0.2)
    snap = snapshot(ns, [big, web], [*big_tasks, *layout(web, [1, 0, 0])])
    for level in (1, 2):  # 70 % is not above 80 % nor above 70 %
        result = run(snap, due(ns), pol=periodic(level))
        assert result.actions == () and outcomes(result) == []


def test_measured_usage_is_the_load_where_an_agent_reports_it() -> None:
    ns = nodes(cpus=1)
    web = rebalancing("web", 1)  # no reservation: an even share of the measured usage
    other = service("other", replicas=2)
    tasks = [*layout(web, [1, 0, 0]), running(other, 1, 1), running(other, 1, 2)]
    usage = {
        "n1": NodeUsage(cpu=0.9, memory=0.1),
        "n2": NodeUsage(0.1, 0.1),
        "n3": NodeUsage(0.1, 0.1),
    }
    snap = replace(snapshot(ns, [other, web], tasks), usage=usage)
    moved = _constraints(run(snap, due(ns), pol=periodic(1)))
    assert moved.evicts_from == ("n1",)
    calm = replace(snap, usage={**usage, "n1": NodeUsage(0.75, 0.1)})
    assert run(calm, due(ns), pol=periodic(1)).actions == ()


def test_a_move_that_would_make_another_node_hot_is_refused() -> None:
    ns = nodes(cpus=1)
    hogs = [hog(f"big{i}", i, 0.5 if i == 1 else 0.45) for i in (1, 2, 3)]
    web = rebalancing("web", 1, cpu=0.2)
    tasks = [t for _, ts in hogs for t in ts] + layout(web, [1, 0, 0])
    result = run(snapshot(ns, [*(s for s, _ in hogs), web], tasks), due(ns), pol=periodic())
    assert result.actions == ()
    assert "web: it would make another node hot" in reasons(result)


def test_a_move_must_improve_by_the_minimum() -> None:
    ns = nodes(cpus=1)
    big, big_tasks = hog("big", 1, 0.6)
    web = rebalancing("web", 1, cpu=0.02)
    snap = snapshot(ns, [big, web], [*big_tasks, *layout(web, [1, 0, 0])])
    result = run(snap, due(ns), pol=periodic())
    assert result.actions == ()
    assert "web: the improvement is below the minimum" in reasons(result)


def test_a_stop_first_service_is_never_moved_off_a_hot_node_by_exclusion() -> None:
    """An exclusion stops a stop-first task before its replacement has a node: whatever
    max-unavailable allows, the load move leaves it where it is and says why."""
    ns = nodes(cpus=1)
    big, big_tasks = hog("big", 1, 0.3)
    web = rebalancing("web", 4, cpu=0.2, order="stop-first")
    for budget in ("1", "2"):
        roomy = replace(web, labels={**web.labels, "placement.max-unavailable": budget})
        snap = snapshot(ns, [big, roomy], [*big_tasks, *layout(roomy, [2, 1, 1])])
        refused = run(snap, due(ns), pol=periodic())
        assert refused.actions == ()
        assert "stop-first: a load move would stop its 2 task(s) there" in reasons(refused)
    start_first = replace(web, update_order="start-first")
    snap = snapshot(ns, [big, start_first], [*big_tasks, *layout(start_first, [2, 1, 1])])
    assert _constraints(run(snap, due(ns), pol=periodic())).evicts_from == ("n1",)


def test_levels_four_and_five_also_balance_against_the_mean() -> None:
    ns = nodes(cpus=1)
    big, big_tasks = hog("big", 1, 0.17)
    side = [hog(f"side{i}", i, 0.1) for i in (2, 3)]
    web = rebalancing("web", 1, cpu=0.15)
    services = [big, *(s for s, _ in side), web]
    tasks = [*big_tasks, *(t for _, ts in side for t in ts), *layout(web, [1, 0, 0])]
    snap = snapshot(ns, services, tasks)
    # 32 %, 10 %, 10 %: the mean is 17 %; no absolute threshold is crossed.
    assert run(snap, due(ns), pol=periodic(3)).actions == ()
    assert run(snap, due(ns), pol=periodic(4)).actions == ()  # not 15 points above the mean
    assert _constraints(run(snap, due(ns), pol=periodic(5))).service_name == "web"  # 10 points


def test_a_hot_node_must_stay_hot_for_the_levels_cycles() -> None:
    ns = nodes(cpus=1)
    big, big_tasks = hog("big", 1, 0.5)
    web = rebalancing("web", 1, cpu=0.2)
    snap = snapshot(ns, [big, web], [*big_tasks, *layout(web, [1, 0, 0])])
    mem = memory(ns, last_round=0.0)
    first = run(snap, mem, pol=periodic())
    assert first.actions == ()
    assert "waiting for it to persist 3 cycles" in reasons(first)


def test_no_second_move_off_a_node_while_one_is_under_way() -> None:
    ns = nodes(cpus=1)
    big, big_tasks = hog("big", 1, 0.3)
    api = replace(rebalancing("api", 1, cpu=0.3), update_state="updating")
    web = rebalancing("web", 1, cpu=0.2)
    tasks = [*big_tasks, *layout(api, [1, 0, 0]), *layout(web, [1, 0, 0])]
    result = run(snapshot(ns, [api, big, web], tasks), due(ns), pol=periodic())
    assert result.actions == ()
    assert "api is moving already" in reasons(result)


def test_a_count_surge_never_lands_on_a_hot_node() -> None:
    ns = nodes(cpus=1)
    big, big_tasks = hog("big", 3, 0.7)
    web = rebalancing("web", 6, cpu=0.01)
    snap = snapshot(ns, [big, web], [*big_tasks, *layout(web, [3, 3, 0])])
    mem = memory(ns, returned={"n3": 20.0}, persisted=[f"count:{web.id}"])
    result = run(snap, mem)
    assert not any(isinstance(a, SetReplicas) for a in result.actions)
    assert "it would make node-3 hot" in reasons(result)


def test_the_exclusion_is_kept_for_the_cooldown_then_lifted_moving_nothing() -> None:
    ns = nodes(cpus=1)
    web = rebalancing("web", 2, cpu=0.1)
    excluded = replace(
        web,
        constraints=(*web.constraints, exclusion_constraint("n1")),
        labels={**web.labels, EXCLUDED_LABEL: "n1", EXCLUDED_SINCE_LABEL: f"{NOW - 100:.3f}"},
    )
    snap = snapshot(ns, [excluded], layout(excluded, [0, 1, 1]))
    kept = run(snap, memory(ns))
    assert kept.actions == ()
    assert outcomes(kept) == ["keep"]
    later = run(snap, memory(ns), now=NOW + 201)
    action = _constraints(later)
    assert action.constraints == web.constraints
    assert action.evicts_from == ()
    assert set(action.remove_labels) == {EXCLUDED_LABEL, EXCLUDED_SINCE_LABEL}
    assert outcomes(later) == ["lift"]


def test_a_skew_no_surge_can_even_out_is_explained() -> None:
    ns = nodes(2, cpus=1)
    big, big_tasks = hog("big", 2, 0.9)  # node-2 is full with its one task of web
    web = rebalancing("web", 4, cpu=0.1)
    snap = snapshot(ns, [big, web], [*big_tasks, *layout(web, [3, 1])])
    mem = memory(ns, returned={"n2": 20.0}, persisted=[f"count:{web.id}"])
    result = run(snap, mem)
    assert not any(isinstance(a, SetReplicas) for a in result.actions)
    assert "no surge can even it out" in reasons(result)


def test_a_hot_node_whose_services_are_cooling_says_so() -> None:
    ns = nodes(cpus=1)
    big, big_tasks = hog("big", 1, 0.5)
    web = rebalancing("web", 1, cpu=0.2)
    snap = snapshot(ns, [big, web], [*big_tasks, *layout(web, [1, 0, 0])])
    result = run(snap, due(ns, last_move={web.id: NOW - 10}), pol=periodic())
    assert result.actions == ()
    moved = f"no service can move: web: moved at {time_of_day(NOW - 10)}, cooldown 300 s"
    assert moved in reasons(result)
