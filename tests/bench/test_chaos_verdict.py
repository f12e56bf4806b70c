"""The chaos verdict: scored from the kept samples by the pre-registered rule, with
nothing left out, and written into the page's marked block only."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import chaos_protocol as protocol
from chaos_app import SERVICES
from chaos_verdict import BEGIN, END, judge, losses_of, report, score, verdict_of, write_docs

NAMES = [s.name for s in SERVICES]


def _arm(lost: dict[str, int], overruns: dict[str, Any] | None = None) -> dict[str, Any]:
    """An arm whose samples lose exactly `lost` replica-seconds per service."""
    wanted = [100] * len(NAMES)
    short = [100 - lost.get(n, 0) for n in NAMES]
    services: dict[str, Any] = {n: {"lost": float(lost.get(n, 0))} for n in NAMES}
    for name, found in (overruns or {}).items():
        services[name].update(found)
    return {
        "samples_seen": [[0.0, True, short, wanted, []], [1.0, True, wanted, wanted, []]],
        "samples": 2, "failed_samples": 0, "services": services, "decisions": [],
        "writes_seen": [], "node_ids": {}, "events": [], "manager_faults": [],
        "load": {"busy": 0.5, "controller_cpu": 0.0}, "warm_up": {"as_planned": True},
        "t0": 1000.0,
    }  # fmt: skip


def _triple(t: protocol.Triple, arms: dict[str, dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {
        "protocol": protocol.NAME, "triple": t.id, "seed": t.seed,
        "minutes": protocol.MINUTES, "order": list(arms), "arms": arms,
        "code": {"commit": "c0ffee", "controller": "t", "bench": "b", "changed": []},
        "seconds": 300.0, "load_before": [1.0, 1.0, 1.0], **extra,
    }  # fmt: skip


def test_losses_are_scored_again_from_the_samples() -> None:
    arm = _arm({"db": 7, "legacy": 3})
    assert losses_of(arm) == {"db": 7.0, "api": 0.0, "web": 0.0, "cache": 0.0, "batch": 0.0,
                              "legacy": 3.0}  # fmt: skip


def _judged(diffs: list[float], faults: list[str] | None = None) -> str:
    return str(judge({"db": diffs}, {"db": faults or []})["db"]["verdict"])


def test_the_rule_fails_harm_passes_a_gain_and_leaves_noise_open() -> None:
    assert _judged([0.3, 0.5, 0.2, 0.4, 0.6, 0.3, 0.25, 0.35] * 2) == "FAIL"
    assert _judged([-0.3, -0.5, -0.2, -0.4, -0.1, -0.3, -0.25, -0.35] * 2) == "PASS"
    assert _judged([0.4, -0.4, 0.3, -0.35, 0.2, -0.25, 0.1, -0.05] * 2) == "INCONCLUSIVE"
    # Equal losses everywhere: not shown worse, and shown within 10 %.
    assert _judged([0.0] * 16) == "PASS"
    # Too few pairs to show anything.
    assert _judged([-0.3, -0.5]) == "INCONCLUSIVE"


def test_a_hard_fault_fails_a_service_whatever_its_losses() -> None:
    assert _judged([-0.3] * 16, ["ab-101: 1 write(s) to unmanaged legacy"]) == "FAIL"


def test_holm_weighs_each_service_against_all_six() -> None:
    # One service alone would pass at 0.05 with five pairs (p = 1/32); among six, not.
    gain = [-0.5] * 5
    alone = judge({"db": gain}, {})
    among = judge({n: gain if n == "db" else [0.0] * 5 for n in NAMES}, {})
    assert alone["db"]["verdict"] == "PASS"
    assert among["db"]["verdict"] == "INCONCLUSIVE"
    assert among["db"]["p_within"] == pytest.approx(6 / 32)


def test_the_verdict_is_provisional_until_every_triple_is_in() -> None:
    judged = {n: {"verdict": "PASS"} for n in NAMES}
    assert verdict_of(judged, 16, 16) == "PASS"
    assert verdict_of(judged, 5, 16) == "PASS (provisional: 5 of 16 triples)"
    judged["legacy"] = {"verdict": "FAIL"}
    assert verdict_of(judged, 16, 16) == "FAIL"


def _write(results: Path, doc: dict[str, Any], name: str | None = None) -> None:
    (results / (name or f"{doc['triple']}.json")).write_text(json.dumps(doc))


def test_every_file_is_scored_or_named_and_the_page_gets_the_tables(tmp_path: Path) -> None:
    first, second, third, fourth = protocol.registered()[:4]
    gain = {n: 10 for n in NAMES}
    more = {n: 30 for n in NAMES}
    late = {**_arm(gain), "t0": 1001.5}  # its t = 0 came 1.5 s after the others'
    _write(tmp_path, _triple(first, {
        "first": _arm(more), "controller": late, "second": _arm(gain)}))  # fmt: skip
    _write(tmp_path, _triple(second, {"first": _arm(gain), "controller": _arm(gain),
                                      "second": _arm(more), "dry-run": _arm(more)}))  # fmt: skip
    short = _triple(third, {"first": _arm(gain), "controller": _arm(gain),
                            "second": _arm(gain)}, minutes=1.5)  # fmt: skip
    _write(tmp_path, short)
    _write(tmp_path, {"triple": fourth.id, "error": "RuntimeError('no deploy')"},
           f"{fourth.id}.failed-1.json")  # fmt: skip
    scored = score(tmp_path)
    assert [t["triple"] for t in scored["triples"]] == [first.id, second.id]
    assert scored["other"] == [
        {"file": f"{third.id}.json", "why": f"1.5 min, not the registered {protocol.MINUTES:g}"}
    ]
    assert [f["file"] for f in scored["failed"]] == [f"{fourth.id}.failed-1.json"]
    # A/B: the controller against the first run; A/A: the second run against the first.
    assert scored["main"]["db"]["diffs"] == [pytest.approx(math.log(20 / 40)), 0.0]
    assert scored["calibration"]["db"]["diffs"] == [
        pytest.approx(math.log(20 / 40)), pytest.approx(math.log(40 / 20))]  # fmt: skip
    # The dry-run arm, where there is one, against the first run; never in the verdict.
    assert scored["presence"]["db"]["diffs"] == [pytest.approx(math.log(40 / 20))]
    want = len(protocol.SEEDS)
    assert scored["verdict"].endswith(f"(provisional: 2 of {want} triples)")
    text = report(scored)
    assert text.startswith(f"**Verdict: {scored['verdict']}.**")
    assert "| db | 2 | 40.0 | 20.0 | 0.50 | 0.71 | 0 of 2 |" in text
    assert "10.0 minutes of wall time" in text
    assert f"| {first.id} | first 180.0, controller 60.0, second 60.0 | yes | 1.5 | 5.0 |" in text
    assert f"Not scored: {third.id}.json (1.5 min, not the registered" in text
    assert f"Failed attempt: {fourth.id}.failed-1.json: RuntimeError('no deploy')" in text

    page = tmp_path / "chaos.md"
    page.write_text(f"# Chaos\n\nbefore\n\n{BEGIN}\nold figures\n{END}\n\nafter\n")
    write_docs(page, "NEW TABLES")
    assert page.read_text() == f"# Chaos\n\nbefore\n\n{BEGIN}\nNEW TABLES\n{END}\n\nafter\n"


def test_an_overrun_after_a_controller_write_fails_its_service(tmp_path: Path) -> None:
    overrun = {"api": {"overrun_at": [[12.0, 2]], "overrun_stops": [[[12.0, "node-2"]]]}}
    controller = _arm({}, overrun)
    controller["decisions"] = [
        {"t": 10.0, "rule": "owners", "outcome": "move",
         "action": "service app_api: constraints = ['node.hostname!=node-2']"}
    ]  # fmt: skip
    _write(tmp_path, _triple(protocol.registered()[0], {
        "first": _arm({}), "controller": controller, "second": _arm({})}))  # fmt: skip
    scored = score(tmp_path)
    assert scored["main"]["api"]["verdict"] == "FAIL"
    assert scored["main"]["web"]["verdict"] == "INCONCLUSIVE"  # one triple shows nothing
    assert scored["verdict"].startswith("FAIL")
    # The same overrun in a run of Swarm alone is nobody's write: it fails nothing.
    assert scored["calibration"]["api"]["faults"] == []


def test_a_trial_is_scored_only_when_asked_and_says_so(tmp_path: Path) -> None:
    arms = {"first": _arm({"db": 5}), "controller": _arm({}), "second": _arm({})}
    _write(tmp_path, _triple(protocol.registered()[0], arms, minutes=1.0))
    trial = protocol.Triple("trial-901", 901, protocol.ARMS)
    _write(tmp_path, _triple(trial, arms, minutes=1.0))
    assert score(tmp_path)["triples"] == []
    scored = score(tmp_path, minutes=1.0)
    assert [t["triple"] for t in scored["triples"]] == [protocol.registered()[0].id, "trial-901"]
    assert scored["verdict"].endswith("(a trial of 1-minute triples)")


def test_the_chaos_page_has_the_block_the_verdict_is_written_into() -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "chaos.md").read_text()
    assert page.count(BEGIN) == page.count(END) == 1
    assert page.index(BEGIN) < page.index(END)
