"""The chaos benchmark charges each loss to the same event name in both runs."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from chaos_run import _charged_to, summarize
from chaos_sample import Sample, Tally


def _done(at: float, planned: float, event: str, detail: str = "") -> dict[str, object]:
    return {"at": at, "planned": planned, "event": event, "detail": detail}


def test_both_runs_charge_a_loss_to_the_event_as_the_schedule_names_it() -> None:
    # The same schedule, each event done a second apart in the two runs.
    swarm = [_done(339.1, 339.0, "cut node-1"), _done(362.4, 362.0, "crash-manager node-2")]
    ctl = [_done(340.0, 339.0, "cut node-1"), _done(363.5, 362.0, "crash-manager node-2")]
    assert _charged_to(swarm, 345.0) == _charged_to(ctl, 345.0) == "339.0s cut node-1"
    assert _charged_to(swarm, 370.0) == _charged_to(ctl, 370.0) == "362.0s crash-manager node-2"
    assert _charged_to(ctl, 339.5) == "before the first fault"


def test_an_event_during_a_node_fault_names_both() -> None:
    done = [_done(35.1, 35.0, "crash node-3"), _done(40.2, 40.0, "health-storm")]
    assert _charged_to(done, 41.0) == "40.0s health-storm (during 35.0s crash node-3)"
    restored = [*done, _done(50.0, 50.0, "restore node-3"), _done(52.0, 52.0, "deploy-same")]
    assert _charged_to(restored, 53.0) == "52.0s deploy-same"


def test_a_service_with_no_replica_running_counts_as_an_outage() -> None:
    # api (2 replicas): 1 running, then none for 1.5 s, then 2 again.
    running = [1, 0, 0, 0, 2]
    samples = [Sample(t * 0.5, {"api": n}, {"api": 2}) for t, n in enumerate(running)]
    chaos = type("Chaos", (), {"done": [], "increases": {}})()
    summary = summarize(Tally(samples=samples), {}, chaos, last=0.0, converged=0.0, decisions=[])
    api = summary["services"]["api"]
    assert (api["outage"], api["lost"]) == (1.5, 3.5)
