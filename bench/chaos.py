"""Differential chaos: one random fault schedule, Swarm alone and with the controller.

    python bench/chaos.py --seed N --minutes M [--json FILE] [--logs DIR] [--heartbeat S]
    python bench/chaos.py --seed N --minutes M --noise   # Swarm alone, twice

The schedule (drawn from the seed, times from the start) mixes node crashes and restarts,
network cuts and heals, the Raft leader's crash, controller SIGKILLs and restarts, stack
redeploys (same and changed file), operator edits through the docker command line
(replicas, constraints), unmanage and re-manage, a bad label (placement.priority=hgih), a
health storm (every node `failed` on the webhook) and a placement plugin that hangs. It
runs twice, each time on a fresh 4-node sandbox (3 managers, racks r1/r1/r2/r2): once
with Swarm alone, once with the controller (a real process, so it can be SIGKILLed).

Per service it reports replica-seconds below the operator's count, task restarts, writes
(the unmanaged service must get none), stops on sound nodes with no operator edit to
explain them, budget overruns (tasks so stopped and still missing, beyond the service's
max-unavailable) and how long after the last fault the cluster converged. docs/chaos.md
says how each is measured. Exit status 0 only if every target holds (see chaos_report).
With --noise both runs are Swarm alone: what one schedule's two runs differ by when
nothing differs but timing and placement is the measurement's noise, the resolution a
controller-vs-Swarm difference must be read against. Needs root, like the sandbox.
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

from chaos_report import TOLERANCE, losses, table, verdict
from chaos_run import run_once
from chaos_schedule import last_fault_at, make_schedule, to_json


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--minutes", type=float, default=3.0, help="length of the schedule")
    parser.add_argument("--json", type=Path, help="write every figure here as JSON")
    parser.add_argument("--logs", type=Path, help="keep the controller's log and files here")
    parser.add_argument("--heartbeat", type=float, default=1.0, help="dispatcher heartbeat (s)")
    parser.add_argument("--tolerance", type=float, default=TOLERANCE, help="replica-seconds")
    parser.add_argument(
        "--noise", action="store_true", help="both runs Swarm alone: the measurement's noise"
    )
    args = parser.parse_args()

    events = make_schedule(args.seed, args.minutes)
    print(f"seed {args.seed}, {args.minutes:g} min, last fault at {last_fault_at(events)} s:")
    for e in events:
        print(f"  {e.describe()}")
    tag = f"ch{os.getpid() % 100000}"
    with tempfile.TemporaryDirectory() as tmp:
        work = args.logs or Path(tmp)
        results = {}
        for label, controller in (("swarm", False), ("controller", not args.noise)):
            print(f"\nrun: {label} ...", flush=True)
            results[label] = run_once(
                f"{tag}-{label[:3]}",
                events,
                controller=controller,
                work=work / label,
                heartbeat=args.heartbeat,
            )
            for done in results[label]["events"]:
                print(f"  {done['at']:>6}s {done['event']}: {done['detail']}")
    swarm, ctl = results["swarm"], results["controller"]
    failures = verdict(swarm, ctl, args.tolerance)
    if args.json:
        document = {
            "seed": args.seed,
            "minutes": args.minutes,
            "heartbeat": args.heartbeat,
            "noise": args.noise,
            "schedule": to_json(events),
            "swarm": swarm,
            "controller": ctl,
            "failures": failures,
        }
        args.json.write_text(json.dumps(document, indent=2, default=list))
    print(f"\nseed {args.seed}, {args.minutes:g} min, heartbeat {args.heartbeat:g} s\n")
    if args.noise:
        print("both runs are Swarm alone: the second stands in the controller's columns\n")
    print(table(swarm, ctl, args.tolerance))
    print("\nwhere the controller lost more:\n" + losses(swarm, ctl))
    print(
        "\n" + ("targets hold" if not failures else "targets missed:\n  " + "\n  ".join(failures))
    )
    return 0 if not failures else 1


if __name__ == "__main__":
    raise SystemExit(main())
