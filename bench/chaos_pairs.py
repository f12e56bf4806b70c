"""Run the chaos protocol's triples on one pinned commit, resuming where the results stop.

    python bench/chaos_pairs.py            # the next registered triple not yet in the results
    python bench/chaos_pairs.py --all      # every one left, one after another
    nohup python bench/chaos_pairs.py --all > chaos-pairs.log 2>&1 &   # in the background
    python bench/chaos_pairs.py --list     # the registered triples, and which are done
    python bench/chaos_pairs.py --all --commit abc1234   # on that commit's code

A triple (bench/chaos_protocol.py, bench/chaos-protocol.md) runs its arms at once, each
on a sandbox of its own (bench/chaos_side.py): Swarm alone, the controller, Swarm alone
again; its figures go to bench/results/<protocol>/<triple>.json when every arm is done,
so the runner can be stopped at any moment and started again in any session; it takes
up the first triple with no file. A lock per triple keeps two runners from taking the
same one.

Pinned code: the runner checks the commit out (HEAD unless --commit says) into a git
worktree of its own under a temporary directory, runs the bench and the controller from
there, and removes it at the end, so the working tree may change while it runs. Every
triple records its commit, the controller's tree and the chaos bench's files; a runner
on other code refuses to add to results that hold triples already (--other-code runs
anyway, and the verdict then names every code). Runs on the same code add up.

A triple the harness could not finish leaves `<triple>.failed-N.json` with the error,
which the verdict lists, and is run again whole. `--minutes`, `--seed` and `--results`
run triples shorter, of other seeds, elsewhere, to try the harness: such files name
their length and seed, and the verdict scores only the registered ones. Needs root.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import chaos_protocol as protocol
from chaos_app import replicas_of
from chaos_record import code_version, compact, write_json
from chaos_schedule import make_schedule, start_placement, to_json
from chaos_side import side_by_side, stop_workers

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
_POOLS: list[ProcessPoolExecutor] = []  # the arms' workers, to stop on a signal


def same_code(results: Path, now: dict[str, Any] | None = None) -> str | None:
    """Why this code (`now`: code_version()) is not the code of the triples already in
    `results`, if it is not."""
    now = now or code_version()
    if now["changed"]:
        return f"uncommitted changes: {', '.join(now['changed'])}"
    for path in sorted(results.glob("*.json")):
        if ".failed-" in path.name:
            continue
        code = json.loads(path.read_text()).get("code", {})
        if (code.get("controller"), code.get("bench")) != (now["controller"], now["bench"]):
            return f"{path.name} ran on other code (commit {str(code.get('commit'))[:10]})"
    return None


def sandbox_names(pid: int, labels: tuple[str, ...]) -> list[str]:
    """The sandboxes a runner process makes, one per arm: known from its PID alone, so
    that the process that started it can take them down if it dies."""
    return [f"c2-{pid % 100000}-{label[0]}" for label in labels]


def run_triple(
    triple: protocol.Triple, minutes: float, logs: Path, dry_run: bool
) -> dict[str, Any]:
    events = make_schedule(triple.seed, minutes)
    start = start_placement(triple.seed, replicas_of("A"))
    labels = triple.order + ((protocol.DRY_RUN,) if dry_run else ())
    began = time.time()
    document: dict[str, Any] = {
        "protocol": protocol.NAME,
        "triple": triple.id,
        "seed": triple.seed,
        "minutes": minutes,
        "heartbeat": protocol.HEARTBEAT,
        "order": list(labels),
        "start_placement": start,
        "schedule": to_json(events),
        "code": code_version(),
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
        "load_before": os.getloadavg(),
        "arms": {},
    }
    print(f"{triple.id}: {', '.join(labels)} at once ...", flush=True)
    results = side_by_side(
        [triple.arm(label) for label in labels],
        sandbox_names(os.getpid(), labels),
        events,
        start,
        logs / triple.id,
        heartbeat=protocol.HEARTBEAT,
        pool_out=_POOLS,
    )
    _POOLS.clear()
    errors = [f"{label}: {r!r}" for label, r in zip(labels, results, strict=True)
              if isinstance(r, Exception)]  # fmt: skip
    if errors:
        raise RuntimeError("; ".join(errors))
    for label, result in zip(labels, results, strict=True):
        assert not isinstance(result, Exception)
        document["arms"][label] = compact(result)
        lost = ", ".join(f"{n} {f['lost']}" for n, f in result["services"].items())
        print(f"{triple.id}: {label} lost {lost}", flush=True)
    document["seconds"] = round(time.time() - began, 1)
    document["load_after"] = os.getloadavg()
    return document


@contextlib.contextmanager
def claimed(
    results: Path, triples: list[protocol.Triple], skip: set[str]
) -> Iterator[protocol.Triple | None]:
    """The first of `triples` with no result and no other runner on it, locked."""
    for triple in triples:
        if triple.id in skip or (results / f"{triple.id}.json").exists():
            continue
        lock = (results / f".{triple.id}.lock").open("w")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()
            continue
        try:
            if (results / f"{triple.id}.json").exists():  # finished while we looked
                continue
            yield triple
            return
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
            lock.close()
    yield None


def _stop(signum: int, _frame: object) -> None:
    for pool in _POOLS:
        stop_workers(pool)
    raise KeyboardInterrupt(signal.Signals(signum).name)


def run_pinned(args: argparse.Namespace) -> int:
    """The runner proper, from the pinned worktree: every triple asked for, one by one."""
    import controller  # noqa: PLC0415 - only here: which tree it comes from is the point

    if not Path(controller.__file__).resolve().is_relative_to(ROOT):
        print(f"not run: the controller imports from {controller.__file__}, not {ROOT}")
        return 2
    results = args.results
    other = same_code(results)
    if other is not None and not args.other_code:
        print(f"not run: {other}; one protocol runs on one code (--other-code runs anyway)")
        return 2
    if args.seed:  # a trial: these seeds, in the registered arrangement
        triples = [protocol.Triple(f"trial-{s}", s, protocol.ARMS) for s in args.seed]
    else:
        triples = [t for t in protocol.registered() if not args.only or t.id == args.only]
    print(f"code {code_version()['commit'][:10]} from {ROOT}", flush=True)
    failed_here: set[str] = set()  # run again by the next runner, not by this one
    while True:
        with claimed(results, triples, failed_here) as triple:
            if triple is None:
                print(f"no triple left to run in {results}")
                return 0
            with tempfile.TemporaryDirectory(prefix="chaos-arms-") as tmp:
                try:
                    document = run_triple(triple, args.minutes, args.logs or Path(tmp),
                                          args.dry_run)  # fmt: skip
                except Exception as exc:
                    failed = sorted(results.glob(f"{triple.id}.failed-*.json"))
                    write_json(
                        results / f"{triple.id}.failed-{len(failed) + 1}.json",
                        {"triple": triple.id, "minutes": args.minutes, "error": repr(exc),
                         "traceback": traceback.format_exc(), "code": code_version(),
                         "when": datetime.now(UTC).isoformat(timespec="seconds")},
                    )  # fmt: skip
                    failed_here.add(triple.id)
                    print(f"{triple.id}: failed ({exc!r}); it runs again next time", flush=True)
                else:
                    write_json(results / f"{triple.id}.json", document)
                    print(f"{triple.id}: done in {document['seconds']} s", flush=True)
        if not args.all:
            return 0


@contextlib.contextmanager
def pinned_worktree(commit: str) -> Iterator[Path]:
    """A detached git worktree of `commit` in a temporary directory, removed after."""
    tmp = Path(tempfile.mkdtemp(prefix="chaos-code-"))
    tree = tmp / "code"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(tree), commit],
                   check=True)  # fmt: skip
    try:
        yield tree
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)],
                       check=False)  # fmt: skip
        shutil.rmtree(tmp, ignore_errors=True)
        subprocess.run(["git", "-C", str(ROOT), "worktree", "prune"], check=False)


def _passed_on(args: argparse.Namespace) -> list[str]:
    """The arguments the pinned runner gets: all but the commit, the paths made whole."""
    out = ["--minutes", str(args.minutes)]
    out += ["--all"] if args.all else []
    out += ["--only", args.only] if args.only else []
    out += [f"--seed={s}" for s in args.seed or []]
    out += ["--dry-run"] if args.dry_run else []
    out += ["--logs", str(args.logs.resolve())] if args.logs else []
    out += ["--other-code"] if args.other_code else []
    return out


def run_from_worktree(args: argparse.Namespace, argv: list[str]) -> int:
    """Start this runner again from a worktree of the commit asked for, wait for it,
    take down any sandbox it left (were it killed), remove the worktree."""
    done = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--verify", f"{args.commit}^{{commit}}"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        print(f"not run: no commit {args.commit!r}")
        return 2
    commit = done.stdout.strip()
    with pinned_worktree(commit) as tree:
        env = {**os.environ, "PYTHONPATH": str(tree)}
        command = [sys.executable, str(tree / "bench" / "chaos_pairs.py"), "--pinned",
                   "--results", str(args.results.resolve()), *argv]  # fmt: skip
        print(f"pinned: commit {commit[:10]}, worktree {tree}", flush=True)
        child = subprocess.Popen(command, cwd=tree, env=env)

        def forward(signum: int, _frame: object) -> None:
            child.send_signal(signum)

        signal.signal(signal.SIGTERM, forward)
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C reaches it too
        code = child.wait()
        _sweep(child.pid)
        return code


def _sweep(pid: int) -> None:
    """Take down any sandbox the runner `pid` left behind (only if it died unclean)."""
    from controller.sandbox.state import sandbox_dir  # noqa: PLC0415
    from controller.sandbox.teardown import teardown_sandbox  # noqa: PLC0415

    for name in sandbox_names(pid, (*protocol.ARMS, protocol.DRY_RUN)):
        if sandbox_dir(name).exists():
            print(f"taking down sandbox {name}, left by runner {pid}", flush=True)
            with contextlib.suppress(Exception):
                teardown_sandbox(name)


def main() -> int:
    # `kill PID` (or Ctrl-C) stops the runner the way an exception would: each arm's
    # sandbox and controller are taken down, and the triple under way leaves no file.
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--all", action="store_true", help="every triple left, not only the next")
    parser.add_argument("--only", help="this triple only (its id, e.g. t-201)")
    parser.add_argument("--list", action="store_true", help="list the triples and which are done")
    parser.add_argument("--commit", default="HEAD", help="the commit whose code runs")
    parser.add_argument("--results", type=Path, default=RESULTS / protocol.NAME)
    parser.add_argument("--minutes", type=float, default=protocol.MINUTES, help="trials only")
    parser.add_argument("--seed", type=int, action="append", help="trials: these seeds instead")
    parser.add_argument("--dry-run", action="store_true", help="a dry-run arm too (no verdict)")
    parser.add_argument("--logs", type=Path, help="keep each arm's controller log and files")
    parser.add_argument("--pinned", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--other-code", action="store_true", help="run even on code other than the results'"
    )
    args = parser.parse_args()
    args.results.mkdir(parents=True, exist_ok=True)
    if args.list:
        for t in protocol.registered():
            done = (args.results / f"{t.id}.json").exists()
            print(f"{t.id:8} {' '.join(t.order):28} {'done' if done else ''}")
        return 0
    if not args.pinned:
        return run_from_worktree(args, _passed_on(args))
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    return run_pinned(args)


if __name__ == "__main__":
    raise SystemExit(main())
