"""`status` from what Swarm stores: each lease reads as its state, held nodes are listed,
and the three output forms carry one document."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace

import pytest
from ruamel.yaml import YAML

from controller.cli.output import emit
from controller.cli.status_cmd import render_status, service_state, status_document
from controller.core.health.node_marks import PAUSED, QUARANTINE_UNTIL
from controller.core.labels import EXCLUDED_LABEL, exclusion_constraint
from controller.core.lease import Lease
from controller.core.memory import Memory
from controller.core.model import Resources
from controller.core.plan import plan
from controller.core.replicas import Operation, change_replicas
from controller.policy import Policy
from controller.runtime.dry_run import DryRun
from tests.core.builders import MANAGED, node, running, service, snapshot

NOW = 1_800_000_000.0


def _recorded(name: str, operation: str, replicas: int) -> object:
    svc = service(name, replicas=3, labels=MANAGED)
    action = change_replicas(svc, replicas=replicas, operation=operation, now=NOW, detail="why")
    return replace(svc, replicas=replicas, labels={**svc.labels, **action.set_labels})


@pytest.mark.parametrize(
    ("operation", "state"),
    [
        (Operation.SURGE, "failed over"),
        (Operation.SPECULATE, "failed over (speculative)"),
        (Operation.PREEMPT, "preempted"),
        (Operation.HOLD, "held"),
    ],
)
def test_a_replica_record_reads_as_its_state(operation: str, state: str) -> None:
    svc = _recorded("db", operation, 1)
    assert service_state(svc) == (state, "replicas 1, the operator's 3: why")  # type: ignore[arg-type]


def test_own_exclusions_read_as_steered_and_an_operators_as_nothing() -> None:
    steered = service(
        "web",
        labels={**MANAGED, EXCLUDED_LABEL: "n2"},
        constraints=[exclusion_constraint("n2")],
    )
    assert service_state(steered) == ("steered", "kept off 1 node(s)")
    operators = service("api", labels=MANAGED, constraints=[exclusion_constraint("n2")])
    assert service_state(operators) == ("placed", "")


def _document() -> dict[str, object]:
    db = _recorded("db", Operation.HOLD, 0)
    web = service("web", replicas=1, labels=MANAGED)
    legacy = service("legacy", labels={"placement.managed": "false"})
    nodes = [
        node(1, manager=True),
        node(2, labels={PAUSED: "quarantine", QUARANTINE_UNTIL: str(NOW + 60)}),
        node(3),
    ]
    snap = snapshot(nodes, [db, web, legacy], [running(web, 3, 1)])  # type: ignore[list-item]
    result = plan(snapshot=snap, policy=Policy.default(), memory=Memory(), now=NOW)
    lease = Lease(holder="ctl.1@node-1", renewed_at="2027-01-15T08:00:00Z", lifetime=15, term=4)
    return status_document(
        DryRun(snapshot=snap, plan=result, now=NOW),
        [("lease", lease, None)],
        [],
        policy=Policy.default(),
    )


def test_the_document_lists_managed_services_held_nodes_and_the_lease() -> None:
    doc = _document()
    assert [(s["name"], s["state"]) for s in doc["services"]] == [("db", "held"), ("web", "placed")]  # type: ignore[attr-defined]
    assert doc["unmanaged"] == 1
    assert doc["nodes"] == [
        {
            "hostname": "node-2",
            "id": "n2",
            "state": "ready",
            "availability": "active",
            "marks": ["paused by the controller", "quarantined"],
        }
    ]
    assert doc["leases"][0]["holder"] == "ctl.1@node-1" and doc["leases"][0]["term"] == 4  # type: ignore[index]
    table = render_status(doc)
    assert "ctl.1@node-1" in table and "paused by the controller; quarantined" in table


def test_json_and_yaml_carry_the_same_document(capsys: pytest.CaptureFixture[str]) -> None:
    doc = _document()
    emit(argparse.Namespace(output="json"), doc, lambda: "")
    as_json = json.loads(capsys.readouterr().out)
    emit(argparse.Namespace(output="yaml"), doc, lambda: "")
    assert YAML(typ="safe").load(capsys.readouterr().out) == as_json
    emit(argparse.Namespace(output="table"), doc, lambda: render_status(doc))
    assert capsys.readouterr().out.startswith("LEASE")


def test_possible_owners_not_yet_enforced_are_listed_with_the_reason() -> None:
    """A stop-first task on node-3, which is no possible owner, and node-2, the only
    one, full: the task stays, and status says so, and why."""
    cpu = Resources(1_000_000_000, 1 << 30)
    nodes = [replace(node(i, manager=i == 1), capacity=cpu) for i in (1, 2, 3)]
    api = service("api", replicas=2, labels={**MANAGED, "placement.possible-nodes": "node-2"})
    api = replace(api, update_order="stop-first", reservations=Resources(1_000_000_000))
    snap = snapshot(nodes, [api], [running(api, 2, 1), running(api, 3, 2)])
    result = plan(snapshot=snap, policy=Policy.default(), memory=Memory(), now=NOW)
    doc = status_document(
        DryRun(snapshot=snap, plan=result, now=NOW), [], [], policy=Policy.default()
    )
    (row,) = doc["services"]  # type: ignore[misc]
    gap = row["possible_owners_unenforced"]
    assert gap["tasks"] == {"node-3": 1} and gap["count"] == 1
    assert gap["reason"].startswith("possible owners not yet enforced: 1 task(s) on node-3: ")
    assert "no allowed node" in gap["why"] and "stay pending" in gap["why"], gap
    table = render_status(doc)
    assert "POSSIBLE OWNERS NOT YET ENFORCED" in table and "node-3 (1)" in table
    assert all(s["possible_owners_unenforced"] is None for s in _document()["services"])  # type: ignore[attr-defined, index]
