"""Both arms counted alike: writes and overruns read against the decision log both ways."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from chaos_audit import audit, decided_writes

IDS = {"node-1": "id1", "node-2": "id2", "node-3": "id3", "node-4": "id4"}


def _d(t: float, rule: str, outcome: str, action: str) -> dict[str, Any]:
    return {"t": t, "rule": rule, "outcome": outcome, "subject": "", "action": action}


def _run(
    decisions: list[dict[str, Any]] | None = None,
    seen: list[list[Any]] | None = None,
    overruns: dict[str, list[tuple[float, int, list[list[Any]]]]] | None = None,
) -> dict[str, Any]:
    services: dict[str, Any] = {s: {} for s in ("db", "api", "web", "cache", "batch", "legacy")}
    for name, found in (overruns or {}).items():
        services[name] = {
            "overrun_at": [[t, out] for t, out, _ in found],
            "overrun_stops": [stops for _, _, stops in found],
        }
    return {"decisions": decisions or [], "writes_seen": seen or [], "node_ids": IDS,
            "services": services}  # fmt: skip


API_OFF_2 = "service app_api: constraints = ['node.id!=id2'], evicting from ['id2']"


def test_a_write_a_guard_held_back_was_not_decided() -> None:
    decisions = [
        _d(5.0, "owners", "move", API_OFF_2),
        _d(5.0, "guard", "defer", API_OFF_2),
        _d(6.0, "owners", "move", API_OFF_2),
    ]
    assert [(w.t, w.subject) for w in decided_writes(decisions)] == [(6.0, "service api")]


def test_two_rules_naming_one_write_and_one_deferring_it_leave_it_written() -> None:
    action = "service app_batch: constraints = ['node.labels.swarm-placement.deny.app_batch!=true']"
    decisions = [
        _d(31.8, "records", "recover", action),
        _d(31.8, "adoption", "adopt", action),
        _d(31.8, "adoption", "defer", action),
        _d(31.8, "records", "mirror", "records: save 1 service record(s), drop 0"),
    ]
    assert [w.subject for w in decided_writes(decisions)] == ["service batch"]


def test_writes_are_matched_both_ways() -> None:
    run = _run(
        decisions=[_d(10.0, "owners", "steer", API_OFF_2), _d(50.0, "owners", "steer", API_OFF_2)],
        seen=[[11.0, "service api", "spec"], [30.0, "service web", "spec"]],
    )
    found = audit(run)
    assert (found["observed_writes"], found["decided_writes"]) == (2, 2)
    assert found["unexplained_writes"] == [[30.0, "service web"]]  # no decision: a look
    assert [w[0] for w in found["unseen_decided_writes"]] == [50.0]  # never seen written


def test_a_decided_write_to_the_unmanaged_service_counts_though_unseen() -> None:
    run = _run(decisions=[_d(3.0, "owners", "steer", "service app_legacy: replicas = 3")])
    assert audit(run)["unmanaged_writes"] == 1
    assert audit(_run(seen=[[4.0, "service legacy", "spec"]]))["unmanaged_writes"] == 1
    assert audit(_run())["unmanaged_writes"] == 0


def _after(decisions: list[dict[str, Any]], service: str, host: str, t: float = 12.0) -> int:
    run = _run(decisions=decisions, overruns={service: [(t, 2, [[t, host], [t, host]])]})
    found = audit(run)
    assert found["overruns"] == 1
    return len(found["overruns_after_write"])


def test_an_overrun_follows_a_write_only_if_that_write_could_stop_its_tasks() -> None:
    steer = [_d(10.0, "owners", "steer", API_OFF_2)]
    assert _after(steer, "api", "node-2") == 1  # constraints that node-2 no longer meets
    assert _after(steer, "api", "node-3") == 0  # node-3 still meets them
    assert _after(steer, "web", "node-2") == 0  # another service's write
    assert _after(steer, "api", "node-2", t=40.0) == 0  # long after the write
    scale = [_d(10.0, "failover", "trim", "service app_api: replicas = 2")]
    assert _after(scale, "api", "node-4") == 1  # a replica count stops wherever Swarm likes
    hostname = [_d(10.0, "x", "move", "service app_api: constraints = ['node.hostname==node-1']")]
    assert _after(hostname, "api", "node-3") == 1
    assert _after(hostname, "api", "node-1") == 0


def test_a_node_write_stops_what_its_labels_concern() -> None:
    mark = "node node-2: labels set {'swarm-placement.deny.app_api': 'true'} remove []"
    assert _after([_d(10.0, "nodes", "label", mark)], "api", "node-2") == 1
    assert _after([_d(10.0, "nodes", "label", mark)], "legacy", "node-2") == 0
    assert _after([_d(10.0, "nodes", "label", mark)], "api", "node-3") == 0
    drain = "node node-2: availability = drain"
    assert _after([_d(10.0, "nodes", "quarantine", drain)], "legacy", "node-2") == 1


def test_a_write_only_the_observer_saw_counts_as_a_cause() -> None:
    run = _run(seen=[[10.5, "service api", "spec"]], overruns={"api": [(12.0, 2, [[12.0, "n"]])]})
    [after] = audit(run)["overruns_after_write"]
    assert after["write"] == [10.5, "service api", ""]
    # Swarm alone: no decisions, no writes seen; its overruns are its own.
    alone = audit(_run(overruns={"legacy": [(12.0, 1, [[12.0, "node-3"]])]}))
    assert (alone["overruns"], alone["overruns_after_write"]) == (1, [])


def test_label_constraints_are_read_with_the_labels_the_node_had() -> None:
    # A steer that keeps every task where it runs: node-4 has no deny mark, so it still
    # meets `deny!=true`, and a stop there 8 s later is not the write's doing.
    steer = "service app_api: constraints = ['node.labels.swarm-placement.deny.app_api!=true']"
    decisions = [_d(59.0, "owners", "steer", steer)]
    labels = {"node-4": [[0.0, {"rack": "r2"}]]}
    run = _run(decisions=decisions, overruns={"api": [(67.0, 2, [[67.0, "node-4"]])]})
    assert audit({**run, "node_labels": labels})["overruns_after_write"] == []
    # Marked denied a moment before the stop: now the write refuses node-4.
    labels["node-4"].append([60.0, {"rack": "r2", "swarm-placement.deny.app_api": "true"}])
    assert len(audit({**run, "node_labels": labels})["overruns_after_write"]) == 1


def test_a_stop_long_after_a_write_is_not_its_doing() -> None:
    scale = [_d(52.0, "failover", "trim", "service app_web: replicas = 3")]
    assert _after(scale, "web", "node-3", t=53.5) == 1
    assert _after(scale, "web", "node-3", t=67.1) == 0
