"""The suite's chaos check: one short pair, judged for gross harm only, against a limit
calibrated from A/A pairs of the same kind.

    python bench/chaos_ci.py --calibrate N   # N more A/A pairs into bench/results/chaos-ci/
    python bench/chaos_ci.py                 # the limit the kept A/A pairs give

tests/integration/test_chaos_swarm.py runs one schedule (SEED, MINUTES) in two arms
side by side, each in a process of its own: Swarm alone and the controller. One such
pair cannot tell a 20 % gain from a 20 % loss (bench/chaos-protocol.md does that, over
many pairs); it can catch gross harm. The pair fails if

- the controller wrote to the unmanaged service (seen by the observer or decided in
  its log), or
- a budget overrun followed a controller write that could have caused it
  (bench/chaos_audit.py), or
- some service's log((controller + 10) / (alone + 10)) of replica-seconds lost is above
  LIMIT_QUANTILE of the same figure's largest over the services in each A/A pair: two
  runs of Swarm alone, side by side, on the same schedule. The pairs are those kept in
  bench/results/chaos-ci/ (this schedule) and the A/A pair of every triple of the
  protocol in bench/results/chaos-2/ (longer schedules of other seeds, run the same
  way). Those pairs are the check's calibration: run more with --calibrate (each takes
  about as long as the test), and the limit follows.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from chaos_app import SERVICES, replicas_of
from chaos_audit import audit
from chaos_record import code_version, compact, write_json
from chaos_schedule import make_schedule, start_placement
from chaos_side import side_by_side as arms_at_once
from chaos_stats import quantile

SEED = 7
MINUTES = 1.5
OFFSET = 10.0
LIMIT_QUANTILE = 0.99
RESULTS = Path(__file__).resolve().parent / "results" / "chaos-ci"
PROTOCOL_RESULTS = RESULTS.parent / "chaos-2"  # the protocol's triples: A/A pairs too


def side_by_side(arms: list[str], names: list[str], work: Path) -> list[dict[str, Any]]:
    """The schedule in each arm at once, each on its own sandbox and in a process of its
    own, starting together (bench/chaos_side.py). The machine's load then weighs on every
    arm alike. Raises the first arm's error, if one failed."""
    events = make_schedule(SEED, MINUTES)
    start = start_placement(SEED, replicas_of("A"))
    out = []
    for result in arms_at_once(arms, names, events, start, work):
        if isinstance(result, Exception):
            raise result
        out.append(result)
    return out


def log_ratios(b: dict[str, Any], a: dict[str, Any]) -> dict[str, float]:
    return {
        s.name: math.log(
            (b["services"][s.name]["lost"] + OFFSET) / (a["services"][s.name]["lost"] + OFFSET)
        )
        for s in SERVICES
    }


def worst_of_pair(pair: dict[str, Any]) -> float:
    """The largest |log ratio| over the services of one A/A pair: a pair of this check
    (`left`, `right`) or a triple of the protocol (`first`, `second`)."""
    arms = pair["arms"]
    a, b = (arms["left"], arms["right"]) if "left" in arms else (arms["first"], arms["second"])
    return max(abs(v) for v in log_ratios(b, a).values())


def calibration(results: Path = RESULTS, triples: Path = PROTOCOL_RESULTS) -> list[dict[str, Any]]:
    """The A/A pairs the limit is drawn from: this check's own, and the protocol's
    registered triples (the verdict's own files: failed attempts and trials are not)."""
    import chaos_protocol  # noqa: PLC0415 - the protocol's names, only here

    registered = {f"{t}.json" for t in chaos_protocol.by_id()}
    own = [json.loads(p.read_text()) for p in sorted(results.glob("aa-*.json"))]
    protocol_aa = [json.loads(p.read_text()) for p in sorted(triples.glob("t-*.json"))
                   if p.name in registered]  # fmt: skip
    return own + protocol_aa


def limit(pairs: list[dict[str, Any]]) -> float:
    return limit_of([worst_of_pair(p) for p in pairs])


def limit_of(worst: list[float]) -> float:
    return quantile(worst, LIMIT_QUANTILE)


def gross_harm(alone: dict[str, Any], ctl: dict[str, Any], most: float) -> list[str]:
    """Every sign of gross harm in the controller's arm, in words; empty when none."""
    found = audit(ctl)
    out = []
    if found["unmanaged_writes"]:
        out.append(f"{found['unmanaged_writes']} write(s) to the unmanaged service")
    for o in found["overruns_after_write"]:
        out.append(
            f"{o['service']}: budget overrun ({o['out']} down) at {o['t']} s, its stop at "
            f"{o['stop'][0]} s on {o['stop'][1]} after the write at {o['write'][0]} s: "
            f"{o['write'][2] or o['write'][1]}"
        )
    for name, value in log_ratios(ctl, alone).items():
        if value > most:
            out.append(
                f"{name}: lost {ctl['services'][name]['lost']} replica-s with the "
                f"controller, {alone['services'][name]['lost']} alone: log ratio "
                f"{value:.2f} above the A/A limit {most:.2f}"
            )
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calibrate", type=int, default=0, help="run this many A/A pairs")
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args()
    args.results.mkdir(parents=True, exist_ok=True)
    for _ in range(args.calibrate):
        n = len(list(args.results.glob("aa-*.json"))) + 1
        began = time.monotonic()
        with tempfile.TemporaryDirectory() as tmp:
            tag = f"ca{os.getpid() % 10000}"
            left, right = side_by_side(["alone", "alone"], [f"{tag}l", f"{tag}r"], Path(tmp))
        document = {
            "kind": "AA side by side", "seed": SEED, "minutes": MINUTES,
            "code": code_version(), "seconds": round(time.monotonic() - began, 1),
            "arms": {"left": compact(left), "right": compact(right)},
        }  # fmt: skip
        write_json(args.results / f"aa-{n:03}.json", document)
        worst = worst_of_pair(document)
        print(f"aa-{n:03}: {document['seconds']} s, worst |log ratio| {worst:.2f}", flush=True)
    pairs = calibration(args.results)
    worst = [worst_of_pair(p) for p in pairs]
    print(
        f"{len(pairs)} A/A pairs; worst |log ratio| per pair: {sorted(round(w, 2) for w in worst)}"
    )
    if len(pairs) > 1:
        print(f"limit ({LIMIT_QUANTILE:g} quantile): {limit(pairs):.2f}")
        # How often a pair of Swarm alone would fail the limit the others set: the
        # check's false alarms, estimated by leaving each pair out in turn.
        others = [worst[:i] + worst[i + 1 :] for i in range(len(worst))]
        over = sum(1 for w, rest in zip(worst, others, strict=True) if w > limit_of(rest))
        print(f"left out in turn, {over} of {len(pairs)} A/A pairs exceed the others' limit")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
