"""Differential chaos, one pair: one random fault schedule, Swarm alone and another arm.

    python bench/chaos.py --seed N --minutes M [--json FILE] [--logs DIR] [--heartbeat S]
    python bench/chaos.py --seed N --minutes M --noise     # Swarm alone, twice
    python bench/chaos.py --seed N --minutes M --dry-run   # the controller writing nothing

To look into one schedule. The verdict is not this: it is the pre-registered protocol
of bench/chaos-protocol.md over many pairs (bench/chaos_pairs.py runs them,
bench/chaos_verdict.py scores them), since one pair's loss is mostly where its tasks
happened to sit when a node failed.

The schedule (drawn from the seed, times from the start) mixes node crashes and restarts,
network cuts and heals, a manager's crash, controller SIGKILLs and restarts, stack
redeploys (same and changed file), operator edits through the docker command line
(replicas, constraints), unmanage and re-manage, a bad label (placement.priority=hgih), a
health storm (every node `failed` on the webhook) and a placement plugin that hangs.
Each arm runs on a fresh 4-node sandbox (3 managers, racks r1/r1/r2/r2), warmed up alike
from the placement the seed draws; the controller starts at t = 0. Swarm alone runs
first, then the other arm.

Per service it reports replica-seconds below the operator's count, task restarts, writes
(the unmanaged service must get none), stops on sound nodes with no operator edit to
explain them, budget overruns, and how long after the last fault the cluster converged;
then the writes and overruns read against the controller's decision log
(bench/chaos_audit.py). Exit status 1 if the controller wrote to the unmanaged service
or a budget overrun followed one of its writes, else 0. Needs root, like the sandbox.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from chaos_app import replicas_of
from chaos_audit import audit
from chaos_report import losses, table
from chaos_run import run_once
from chaos_schedule import last_fault_at, make_schedule, start_placement, to_json


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--minutes", type=float, default=3.0, help="length of the schedule")
    parser.add_argument("--json", type=Path, help="write every figure here as JSON")
    parser.add_argument("--logs", type=Path, help="keep the controller's log and files here")
    parser.add_argument("--heartbeat", type=float, default=1.0, help="dispatcher heartbeat (s)")
    other = parser.add_mutually_exclusive_group()
    other.add_argument("--noise", action="store_true", help="both arms Swarm alone")
    other.add_argument("--dry-run", action="store_true", help="the controller in --dry-run")
    args = parser.parse_args()
    second = "alone" if args.noise else "dry-run" if args.dry_run else "controller"

    events = make_schedule(args.seed, args.minutes)
    start = start_placement(args.seed, replicas_of("A"))
    print(f"seed {args.seed}, {args.minutes:g} min, last fault at {last_fault_at(events)} s:")
    print("  starting on: " + "; ".join(f"{k} {','.join(v)}" for k, v in start.items()))
    for e in events:
        print(f"  {e.describe()}")
    tag = f"ch{os.getpid() % 100000}"
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = args.logs or Path(tmp)
        for label, arm in (("swarm", "alone"), ("other", second)):
            print(f"\narm: {arm} ...", flush=True)
            results[label] = run_once(
                f"{tag}-{label[:3]}",
                events,
                arm=arm,
                work=work / f"{label}-{arm}",
                heartbeat=args.heartbeat,
                start=start,
            )
            for done in results[label]["events"]:
                print(f"  {done['at']:>6}s {done['event']}: {done['detail']}")
    swarm, ctl = results["swarm"], results["other"]
    audits = {label: audit(run) for label, run in results.items()}
    if args.json:
        document = {
            "seed": args.seed,
            "minutes": args.minutes,
            "heartbeat": args.heartbeat,
            "arms": ["alone", second],
            "schedule": to_json(events),
            "start_placement": start,
            "swarm": swarm,
            "controller": ctl,
            "audit": audits,
        }
        args.json.write_text(json.dumps(document, indent=2, default=list))
    print(f"\nseed {args.seed}, {args.minutes:g} min, heartbeat {args.heartbeat:g} s\n")
    print(f"the second arm is {second}: it stands in the controller's columns\n")
    print(table(swarm, ctl))
    print("\nwhere the second arm lost more:\n" + losses(swarm, ctl))
    harm = []
    for label, found in audits.items():
        print(f"\n{label}: {json.dumps(found, default=list)}")
        if found["unmanaged_writes"] or found["overruns_after_write"]:
            harm.append(label)
    print("\n" + ("no write to the unmanaged service, no overrun after a write" if not harm
                  else f"harm in: {', '.join(harm)}"))  # fmt: skip
    return 1 if harm and second == "controller" else 0


if __name__ == "__main__":
    raise SystemExit(main())
