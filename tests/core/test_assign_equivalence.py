"""The incremental assignment decides exactly as the direct statement of it does.

`assign_reference.reference_assign` evaluates the whole objective for every candidate
node and move; `assign` works by deltas and looks at plain nodes only through the least
busy of each domain. On random inputs (duplicate hostnames, ties, paused nodes,
preferred owners, mates, plugin scores, spread or not) both give the same placement,
moves, standby, unplaced count and evictions.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from controller.core.kernel.candidates import Candidates
from controller.core.rules.owners.assign import PlacementInputs, assign, node_order

from .assign_reference import reference_assign

NODES = [f"n{i}" for i in range(1, 10)]


@st.composite
def inputs(draw: st.DrawFn) -> PlacementInputs:
    nodes = NODES[: draw(st.integers(1, len(NODES)))]
    keepable = frozenset(n for n in nodes if draw(st.integers(0, 4)))
    placeable = frozenset(n for n in keepable if draw(st.integers(0, 5)))
    preferred = tuple(draw(st.lists(st.sampled_from(nodes), max_size=4, unique=True)))
    spread = draw(st.booleans())
    racks = {n: draw(st.sampled_from(["r1", "r2", "r3", "r4", "r5", ""])) for n in nodes}
    small = st.integers(0, 3)
    load = {n: draw(st.integers(0, 4)) for n in nodes}
    hostname = {n: draw(st.sampled_from(["a", "b", "c", n])) for n in nodes}
    domain = racks.__getitem__ if spread else None
    # The owners rule shares one order over every node of the cycle; alone, assign
    # builds its own over the nodes it is given.
    shared = (
        node_order(nodes, load=load, hostname=hostname, domain=domain)
        if draw(st.booleans())
        else None
    )
    return PlacementInputs(
        replicas=draw(st.integers(0, 9)),
        current={n: c for n in nodes if (c := draw(st.integers(0, 3)))},
        candidates=Candidates(
            keepable=keepable, placeable=placeable, preferred=preferred, possible=None
        ),
        domain=domain,
        mates={n: c for n in nodes if (c := draw(small))} if draw(st.booleans()) else {},
        load=load,
        # Few names, so hostnames collide and the node ID has to break the tie.
        hostname=hostname,
        failback_ready=frozenset(n for n in preferred if draw(st.booleans())),
        max_moves=draw(st.integers(0, 3)),
        scores={n: s for n in nodes if (s := draw(st.sampled_from([0.0, 0.0, 0.5, 1.0])))},
        order=shared,
    )


@settings(max_examples=1500, deadline=None)
@given(inputs())
def test_assign_matches_the_reference(placement: PlacementInputs) -> None:
    got, want = assign(placement), reference_assign(placement)
    assert dict(got.desired) == dict(want.desired)
    assert got.moves == want.moves
    assert got.standby == want.standby
    assert got.unplaced == want.unplaced
    assert dict(got.evicted) == dict(want.evicted)


def test_a_cluster_of_plain_nodes_is_looked_at_through_the_least_busy() -> None:
    """Many interchangeable nodes: the least busy one takes the missing replica, and
    the standby is the next least busy."""
    nodes = [f"n{i:03d}" for i in range(200)]
    load = {n: 5 + (i % 7) for i, n in enumerate(nodes)}
    load["n150"], load["n020"] = 1, 2
    placement = PlacementInputs(
        replicas=1,
        current={},
        candidates=Candidates(
            keepable=frozenset(nodes), placeable=frozenset(nodes), preferred=(), possible=None
        ),
        domain=None,
        mates={},
        load=load,
        hostname={n: f"host-{n}" for n in nodes},
        failback_ready=frozenset(),
        max_moves=1,
    )
    got = assign(placement)
    assert dict(got.desired) == {"n150": 1}
    assert got.standby == "n020"
    assert got == reference_assign(placement)
