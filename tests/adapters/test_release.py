"""The release procedure against a fake swarm that applies writes as Swarm would."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from types import SimpleNamespace

from controller.adapters.docker_read import ServiceNotFoundError
from controller.adapters.engine import ConflictError
from controller.adapters.release_run import Releaser, live_leases
from controller.core.actions import Action, SetNodeAvailability, SetNodeLabels
from controller.core.apply import apply_actions
from controller.core.labels import (
    EXCLUDED_LABEL,
    exclusion_constraint,
    possible_constraint,
    possible_label,
    steering_constraint,
)
from controller.core.lease import HOLDER_LABEL, LIFETIME_LABEL, RENEWED_AT_LABEL, TERM_LABEL
from controller.core.model import Availability, ClusterSnapshot, Node, Service, Unreadable
from controller.core.replicas import BASE_LABEL, OPERATION_LABEL, SET_LABEL
from tests.core.builders import node, service, snapshot

MARK = possible_label("db")


@dataclass
class FakeSwarm:
    state: ClusterSnapshot
    conflicts: int = 0  # the next writes that lose a race with another writer
    written: list[Action] = field(default_factory=list)

    def snapshot(self) -> ClusterSnapshot:
        return self.state

    def service(self, name: str) -> Service:
        for s in self.state.services:
            if name in (s.id, s.name):
                return s
        raise ServiceNotFoundError(f"no service named {name!r}")

    def node(self, node_id: str) -> Node:
        return self.state.node_by_id[node_id]

    def write(self, action: Action) -> None:
        if self.conflicts:
            self.conflicts -= 1
            self.bump()
            raise ConflictError("update out of sequence")
        target = (
            self.node(action.node_id)
            if isinstance(action, SetNodeLabels | SetNodeAvailability)
            else self.service(action.service_id)
        )
        assert target.version == action.version, "a write from a stale read"
        self.written.append(action)
        self.state = apply_actions(self.state, (action,))

    def bump(self) -> None:
        """Someone else wrote every object meanwhile."""
        self.state = replace(
            self.state,
            services=tuple(replace(s, version=s.version + 1) for s in self.state.services),
            nodes=tuple(replace(n, version=n.version + 1) for n in self.state.nodes),
        )


def _db(**changes: object) -> Service:
    db = service(
        "db",
        replicas=1,
        labels={
            "placement.managed": "true",
            EXCLUDED_LABEL: "n4",
            BASE_LABEL: "3",
            SET_LABEL: "1",
            OPERATION_LABEL: "hold",
        },
        constraints=(
            "node.role==worker",
            steering_constraint("db"),
            possible_constraint("db"),
            exclusion_constraint("n4"),
        ),
    )
    return replace(db, **changes)  # type: ignore[arg-type]


def _swarm(db: Service) -> FakeSwarm:
    nodes = [
        node(1, manager=True),
        node(2, labels={MARK: "true", "swarm-placement.deny.db": "true"}),
        node(
            3,
            labels={MARK: "true", "swarm-placement.paused": "health"},
            availability=Availability.PAUSE,
        ),
        node(4, availability=Availability.PAUSE),
    ]
    plain = service("plain", labels={"team": "x"}, constraints=["node.role==worker"])
    return FakeSwarm(snapshot(nodes, [db, plain]))


def _releaser(swarm: FakeSwarm, dry_run: bool = False) -> tuple[Releaser, list[str]]:
    lines: list[str] = []
    return Releaser(swarm=swarm, dry_run=dry_run, say=lines.append), lines


def test_a_service_gets_its_constraints_then_its_count_back() -> None:
    swarm = _swarm(_db())
    releaser, lines = _releaser(swarm)
    releaser.service("db")
    db = swarm.service("db")
    assert db.constraints == ("node.role==worker",)
    assert dict(db.labels) == {"placement.managed": "true"} and db.replicas == 3
    assert len(swarm.written) == 2 and len(lines) == 2 and releaser.complete
    assert lines[0].startswith("[release] service db: release - ")
    assert "back to the operator's recorded 3" in lines[1]


def test_a_dry_run_writes_nothing_and_says_every_write() -> None:
    swarm = _swarm(_db())
    releaser, lines = _releaser(swarm, dry_run=True)
    releaser.everything()
    assert swarm.written == []
    assert all(line.startswith("dry run: [release]") for line in lines)
    assert [line.split(":")[1].strip() for line in lines] == [
        "[release] service db",
        "[release] service db",
        "[release] node node-2",
        "[release] node node-3",
    ]


def test_a_conflict_is_planned_again_from_a_fresh_read() -> None:
    swarm = _swarm(_db())
    swarm.conflicts = 2
    releaser, _ = _releaser(swarm)
    releaser.service("db")
    assert swarm.service("db").replicas == 3 and releaser.complete


def test_a_service_that_keeps_changing_is_reported_and_left() -> None:
    swarm = _swarm(_db())
    swarm.conflicts = 99
    releaser, lines = _releaser(swarm)
    releaser.service("db")
    assert not releaser.complete and "fail - it kept changing" in lines[-1]


def test_everything_then_the_nodes_and_only_the_controllers_pause() -> None:
    swarm = _swarm(_db())
    releaser, _ = _releaser(swarm)
    releaser.everything()
    assert releaser.complete
    nodes = swarm.state.node_by_id
    assert not any(k.startswith("swarm-placement.") for n in nodes.values() for k in n.labels)
    assert nodes["n3"].availability is Availability.ACTIVE
    assert nodes["n4"].availability is Availability.PAUSE  # the operator's


def test_a_mark_whose_service_waits_stays_and_the_run_is_incomplete() -> None:
    swarm = _swarm(_db(update_state="paused"))
    releaser, lines = _releaser(swarm)
    releaser.everything()
    assert not releaser.complete
    assert swarm.state.node_by_id["n2"].labels == {MARK: "true"}  # the deny label went
    assert any("[release] service db: wait - Swarm's rollout is paused" in line for line in lines)
    assert any("required by db" in line for line in lines)


def test_an_unreadable_service_is_reported() -> None:
    swarm = _swarm(_db())
    swarm.state = replace(swarm.state, unreadable=(Unreadable("service", "s-x", "x", "bad"),))
    releaser, lines = _releaser(swarm)
    releaser.everything()
    assert not releaser.complete and "[release] service x: fail - cannot be read" in lines[0]
    assert swarm.state.node_by_id["n2"].labels == {}
    # an unreadable "db" may need its mark: it stays
    swarm = _swarm(service("other"))
    swarm.state = replace(swarm.state, unreadable=(Unreadable("service", "s-db", "db", "bad"),))
    _releaser(swarm)[0].everything()
    assert swarm.state.node_by_id["n2"].labels == {MARK: "true"}


class _Api:
    def __init__(self, *labels: dict[str, str]) -> None:
        self._configs = [{"Spec": {"Name": f"c{i}", "Labels": ls}} for i, ls in enumerate(labels)]

    def configs(self) -> list[dict[str, object]]:
        return self._configs


def _lease(holder: str, renewed: str) -> dict[str, str]:
    return {
        HOLDER_LABEL: holder,
        RENEWED_AT_LABEL: renewed,
        LIFETIME_LABEL: "15",
        TERM_LABEL: "3",
    }


def test_a_lease_renewed_within_its_lifetime_is_live() -> None:
    now = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
    client = SimpleNamespace(
        api=_Api(
            _lease("a", "2026-01-01T11:59:30.000+00:00"),  # live
            _lease("b", "2026-01-01T11:50:00.000+00:00"),  # lapsed: its holder died
            _lease("", "2026-01-01T11:59:59.000+00:00"),  # released by a clean stop
            {"other": "label"},
            {HOLDER_LABEL: "x"},  # not a readable lease
        )
    )
    assert live_leases(client, now) == [  # type: ignore[arg-type]
        "config c0: held by a, renewed 2026-01-01T11:59:30.000+00:00"
    ]
