"""The suite's gross-harm check can fail: on a write to the unmanaged service, an overrun
after a controller write, or a loss past what two runs of Swarm alone differ by."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from chaos_app import SERVICES
from chaos_ci import gross_harm, limit, worst_of_pair

NAMES = [s.name for s in SERVICES]


def _run(lost: dict[str, float], **extra: Any) -> dict[str, Any]:
    services: dict[str, Any] = {n: {"lost": lost.get(n, 0.0)} for n in NAMES}
    for name, figures in extra.pop("services", {}).items():
        services[name].update(figures)
    return {"services": services, "decisions": [], "writes_seen": [], "node_ids": {}, **extra}


def test_a_service_past_the_a_a_limit_is_gross_harm() -> None:
    alone = _run({"db": 10.0, "web": 30.0})
    assert gross_harm(alone, _run({"db": 10.0, "web": 30.0}), most=0.5) == []
    # web: log((90 + 10) / (30 + 10)) = 0.92 > 0.5
    [harm] = gross_harm(alone, _run({"db": 10.0, "web": 90.0}), most=0.5)
    assert harm.startswith("web: lost 90.0") and "0.92 above the A/A limit 0.50" in harm
    # Less lost than alone is never harm, however far.
    assert gross_harm(alone, _run({"web": 0.0}), most=0.1) == []


def test_a_write_to_the_unmanaged_service_is_gross_harm() -> None:
    ctl = _run({}, writes_seen=[[20.0, "service legacy", "spec"]])
    assert gross_harm(_run({}), ctl, most=5.0) == ["1 write(s) to the unmanaged service"]


def test_an_overrun_after_a_write_that_could_cause_it_is_gross_harm() -> None:
    overrun = {"api": {"overrun_at": [[12.0, 2]], "overrun_stops": [[[11.5, "node-1"]]]}}
    move = {"t": 10.0, "rule": "owners", "outcome": "move",
            "action": "service app_api: constraints = ['node.hostname!=node-1']"}  # fmt: skip
    ctl = _run({}, services=overrun, decisions=[move])
    [harm] = gross_harm(_run({}), ctl, most=5.0)
    assert harm.startswith("api: budget overrun (2 down) at 12.0 s")
    # The same overrun with no write before it is Swarm's own: reported, not harm.
    assert gross_harm(_run({}), _run({}, services=overrun), most=5.0) == []


def test_the_limit_is_the_99th_percentile_of_each_a_a_pair_s_worst_service() -> None:
    def pair(left: float, right: float) -> dict[str, Any]:
        return {"arms": {"left": _run({"db": left}), "right": _run({"db": right})}}

    pairs = [pair(0.0, 10.0 * i) for i in range(11)]  # worst |log| = log((10 i + 10) / 10)
    assert worst_of_pair(pairs[3]) == math.log(4.0)
    assert limit(pairs) == math.log(10.0) + 0.9 * (math.log(11.0) - math.log(10.0))
