"""Run the chaos protocol's pairs, one after another, resuming where the results stop.

    python bench/chaos_pairs.py            # the next registered pair not yet in the results
    python bench/chaos_pairs.py --all      # every one left, one after another
    nohup python bench/chaos_pairs.py --all > chaos-pairs.log 2>&1 &   # in the background
    python bench/chaos_pairs.py --list     # the registered pairs, and which are done

Each pair (bench/chaos_protocol.py, bench/chaos-protocol.md) runs its arms in their
registered order, each on a fresh sandbox, and its figures go to
bench/results/<protocol>/<pair>.json when all its arms are done: a pair is in the
results whole or not at all, so the runner can be stopped at any moment and started
again in any session; it takes up the first pair with no file. A lock per pair keeps
two runners from taking the same one. It runs on committed code only, and only on the
code of the pairs already there (the controller's tree and the bench's files), unless
told otherwise. A pair the harness could not finish (the stack
did not deploy, a sandbox error) leaves `<pair>.failed-N.json` with the error, which
the verdict lists, and is run again from its first arm. `--minutes` and `--results`
run the registered pairs shorter, elsewhere, to try the harness: such files name their
length, and the verdict scores only the registered one. Needs root, like the sandbox.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import chaos_protocol as protocol
from chaos_app import replicas_of
from chaos_record import code_version, compact, write_json
from chaos_run import run_once
from chaos_schedule import make_schedule, start_placement, to_json

RESULTS = Path(__file__).resolve().parent / "results"


def same_code(results: Path) -> str | None:
    """Why this code is not the code of the pairs already in `results`, if it is not."""
    now = code_version()
    if now["changed"]:
        return f"uncommitted changes: {', '.join(now['changed'])}"
    for path in sorted(results.glob("*.json")):
        if ".failed-" in path.name:
            continue
        code = json.loads(path.read_text()).get("code", {})
        if (code.get("controller"), code.get("bench")) != (now["controller"], now["bench"]):
            return f"{path.name} ran on other code (commit {str(code.get('commit'))[:10]})"
    return None


def run_pair(pair: protocol.Pair, minutes: float, logs: Path) -> dict[str, Any]:
    events = make_schedule(pair.seed, minutes)
    start = start_placement(pair.seed, replicas_of("A"))
    began = time.time()
    document: dict[str, Any] = {
        "protocol": protocol.NAME,
        "pair": pair.id,
        "kind": pair.kind,
        "seed": pair.seed,
        "minutes": minutes,
        "heartbeat": protocol.HEARTBEAT,
        "order": list(pair.order),
        "start_placement": start,
        "schedule": to_json(events),
        "code": code_version(),
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
        "load_before": os.getloadavg(),
        "arms": {},
        "seconds": {},
    }
    for label in pair.order:
        print(f"{pair.id}: {label} ({pair.arm(label)}) ...", flush=True)
        t0 = time.monotonic()
        result = run_once(
            f"cv{os.getpid() % 10000}{label[0]}",
            events,
            arm=pair.arm(label),
            work=logs / pair.id / label,
            heartbeat=protocol.HEARTBEAT,
            start=start,
        )
        took = round(time.monotonic() - t0, 1)
        document["arms"][label] = compact(result)
        document["seconds"][label] = took
        lost = ", ".join(f"{n} {f['lost']}" for n, f in result["services"].items())
        print(f"{pair.id}: {label} took {took} s; lost {lost}", flush=True)
    document["seconds"]["pair"] = round(time.time() - began, 1)
    document["load_after"] = os.getloadavg()
    return document


@contextlib.contextmanager
def claimed(results: Path, only: str | None, skip: set[str]) -> Iterator[protocol.Pair | None]:
    """The first registered pair with no result and no other runner on it, locked."""
    for pair in protocol.registered():
        if (only and pair.id != only) or pair.id in skip:
            continue
        if (results / f"{pair.id}.json").exists():
            continue
        lock = (results / f".{pair.id}.lock").open("w")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()
            continue
        try:
            if (results / f"{pair.id}.json").exists():  # finished while we looked
                continue
            yield pair
            return
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
            lock.close()
    yield None


def _stop(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


def main() -> int:
    # `kill PID` (or Ctrl-C, even when started in the background) stops the runner the
    # way an exception would: the arm's sandbox and controller are taken down, and the
    # pair under way leaves no file, to be run again whole.
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--all", action="store_true", help="every pair left, not only the next")
    parser.add_argument("--only", help="this pair only (its id, e.g. ab-101)")
    parser.add_argument("--list", action="store_true", help="list the pairs and which are done")
    parser.add_argument("--results", type=Path, help="default bench/results/<protocol>")
    parser.add_argument("--minutes", type=float, default=protocol.MINUTES, help="trials only")
    parser.add_argument("--logs", type=Path, help="keep each arm's controller log and files")
    parser.add_argument(
        "--other-code", action="store_true", help="run even on code other than the results'"
    )
    args = parser.parse_args()
    results = args.results or RESULTS / protocol.NAME
    results.mkdir(parents=True, exist_ok=True)
    if args.list:
        for pair in protocol.registered():
            done = (results / f"{pair.id}.json").exists()
            print(f"{pair.id:8} {pair.kind} {' '.join(pair.order):28} {'done' if done else ''}")
        return 0
    other = same_code(results)
    if other is not None and not args.other_code:
        print(f"not run: {other}; one protocol runs on one code (--other-code runs anyway)")
        return 2
    failed_here: set[str] = set()  # run again by the next runner, not by this one
    while True:
        with claimed(results, args.only, failed_here) as pair:
            if pair is None:
                print(f"no registered pair left to run in {results}")
                return 0
            with tempfile.TemporaryDirectory() as tmp:
                try:
                    document = run_pair(pair, args.minutes, args.logs or Path(tmp))
                except Exception as exc:
                    failed = sorted(results.glob(f"{pair.id}.failed-*.json"))
                    write_json(
                        results / f"{pair.id}.failed-{len(failed) + 1}.json",
                        {"pair": pair.id, "minutes": args.minutes, "error": repr(exc),
                         "traceback": traceback.format_exc(), "code": code_version(),
                         "when": datetime.now(UTC).isoformat(timespec="seconds")},
                    )  # fmt: skip
                    failed_here.add(pair.id)
                    print(f"{pair.id}: failed ({exc!r}); it runs again next time", flush=True)
                else:
                    write_json(results / f"{pair.id}.json", document)
                    print(f"{pair.id}: done in {document['seconds']['pair']} s", flush=True)
        if not args.all:
            return 0


if __name__ == "__main__":
    raise SystemExit(main())
