"""Room as Swarm's scheduler counts it, and where Swarm's scale-down takes tasks from."""

from __future__ import annotations

from dataclasses import replace

from controller.core.capacity import (
    UNLIMITED,
    ScaleDown,
    copies_fitting,
    demand,
    observe_room,
    scale_down,
)
from controller.core.model import Availability, Resources, TaskState
from controller.core.replicas import BASE_LABEL

from .builders import snapshot
from .capacity_builders import on, pending, slot_nodes, slots, svc


def test_copies_fitting_takes_the_scarcest_resource() -> None:
    need = Resources(nano_cpus=500_000_000, memory_bytes=100, generic={"slot": 1})
    free = Resources(nano_cpus=2_000_000_000, memory_bytes=250, generic={"slot": 5})
    assert copies_fitting(free, need) == 2
    assert copies_fitting(free, Resources()) == UNLIMITED
    assert copies_fitting(Resources(generic={"slot": -1}), slots(1)) == 0


def test_room_counts_reserving_tasks_on_nodes_that_accept_tasks() -> None:
    low = svc("low", 4)
    starting = replace(on(low, 2, first_slot=9)[0], state=TaskState.STARTING)
    nodes = slot_nodes(2, 2, 2)
    nodes[2] = replace(nodes[2], availability=Availability.PAUSE)
    room = observe_room(snapshot(nodes, [low], [*on(low, 1, 1), starting, *pending(low, 1)]))
    assert room.free == {"n1": slots(0), "n2": slots(1)}
    assert room.counts == {low.id: {"n1": 2, "n2": 1}}
    assert room.fit_count(low, ["n1", "n2", "n3"]) == 1


def test_max_replicas_per_node_caps_the_fit() -> None:
    web = replace(svc("web", 2), max_replicas_per_node=1)
    room = observe_room(snapshot(slot_nodes(4, 4), [web], on(web, 1)))
    assert room.fit_count(web, ["n1", "n2"]) == 1
    placed = room.place(web, ["n1", "n2"], 5)
    assert placed.counts[web.id] == {"n1": 1, "n2": 1}


def test_place_fills_nodes_with_fewest_tasks_of_the_service_first() -> None:
    web = svc("web", 3)
    room = observe_room(snapshot(slot_nodes(3, 3, 3), [web], on(web, 1, 1)))
    after = room.place(web, ["n1", "n2", "n3"], 2)
    assert after.counts[web.id] == {"n1": 2, "n2": 1, "n3": 1}


def test_scale_down_takes_unassigned_tasks_first() -> None:
    low = svc("low", 5)
    snap = snapshot(slot_nodes(2, 2), [low], on(low, 1, 1, 2) + pending(low, 2))
    assert scale_down(snap, low, 2) == ScaleDown(certain={})
    assert scale_down(snap, low, 3) == ScaleDown(certain={"n1": 1})


def test_scale_down_levels_the_busiest_nodes_and_leaves_ties_to_swarm() -> None:
    low = svc("low", 7)
    snap = snapshot(slot_nodes(3, 2, 2), [low], on(low, 1, 1, 1, 2, 2, 3, 3))
    assert scale_down(snap, low, 1) == ScaleDown(certain={"n1": 1})
    tie = scale_down(snap, low, 2)
    assert tie == ScaleDown(certain={"n1": 1}, tied=("n1", "n2", "n3"), picks=1)
    assert tie.outcomes() == [{"n1": 2}, {"n1": 1, "n2": 1}, {"n1": 1, "n3": 1}]
    assert scale_down(snap, low, 4) == ScaleDown(certain={"n1": 2, "n2": 1, "n3": 1})
    assert scale_down(snap, low, 7).certain == {"n1": 3, "n2": 2, "n3": 2}


def test_demand_is_pending_tasks_up_to_what_the_service_wants() -> None:
    surge = {
        BASE_LABEL: "2",
        "swarm-placement.replicas-set": "4",
        "swarm-placement.operation": "surge",
    }
    web = svc("web", 4, labels=surge)
    assert demand(snapshot(slot_nodes(2, 2), [web], on(web, 1) + pending(web, 3)), web) == 1
    plain = svc("plain", 4)
    assert demand(snapshot(slot_nodes(2, 2), [plain], on(plain, 1) + pending(plain, 3)), plain) == 3


def test_during_an_update_each_slot_waiting_for_room_counts_once() -> None:
    web = replace(svc("web", 3), update_state="updating")
    old_and_new = pending(web, 1, first_slot=2) + [
        replace(t, id=f"{t.id}-new") for t in pending(web, 1, first_slot=2)
    ]
    beside_running = pending(web, 1, first_slot=1)  # start-first, next to the running one
    tasks = on(web, 1) + old_and_new + beside_running
    assert demand(snapshot(slot_nodes(2, 2), [web], tasks), web) == 2
