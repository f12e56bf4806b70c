"""Planner bench, two checkouts in one run: the ratio of their plan times.

`planner_scale.py` measures one checkout; comparing two runs made at different moments
on a shared machine compares the machine's load as much as the code. This runs the same
measurement (planner_scale's cluster, settled, then its steady and node-down plans) in
each checkout's own interpreter, alternately A, B, A, B, ..., so both see the same
noise, and reports the median over rounds of each checkout's figure and the ratio
after/before of those medians.

Each round is one process per checkout and size: it builds the cluster, settles it, and
times `snapshot_from_attrs` and both plans (best of --repeat, as planner_scale does).
Raw figures (every round of every checkout) are written as JSON to --out.

Usage: python bench/planner_ab.py --before DIR --after DIR [--sizes 100,1000]
                                  [--rounds 3] [--repeat 5] [--out FILE]
DIR is a checkout with its own `.venv` (`./dev setup`). No Docker needed.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

METRICS = ("snapshot_s", "plan_steady_s", "plan_down_s")

# Run inside a checkout, with its interpreter: its own planner_scale, its own controller.
_ONE = """
import json, sys
sys.path.insert(0, "bench")
import planner_scale as b
size, repeat = int(sys.argv[1]), int(sys.argv[2])
pol = b.policy("standby", None)
attrs = b.cluster_attrs(size)
memory, rounds = b.settle(attrs, pol)
text = json.dumps(attrs)
del attrs
out = {"nodes": size, "settle_rounds": rounds}
out.update(b.timings(json.loads(text), pol, memory, repeat, False))
print(json.dumps(out))
"""


def commit_of(checkout: Path) -> str:
    return subprocess.run(
        ["git", "-C", str(checkout), "rev-parse", "HEAD"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def run_one(checkout: Path, size: int, repeat: int) -> dict[str, Any]:
    python = checkout / ".venv" / "bin" / "python"
    done = subprocess.run(
        [str(python), "-c", _ONE, str(size), str(repeat)],
        cwd=checkout,
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="checkout A")
    parser.add_argument("--after", type=Path, required=True, help="checkout B")
    parser.add_argument("--sizes", default="100,1000", help="node counts, comma-separated")
    parser.add_argument("--rounds", type=int, default=3, help="A/B pairs per size")
    parser.add_argument("--repeat", type=int, default=5, help="runs per timing; the best counts")
    parser.add_argument("--out", type=Path, default=None, help="raw results (JSON)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    checkouts = {"before": args.before.resolve(), "after": args.after.resolve()}
    raw: dict[str, Any] = {
        "bench": "planner_ab",
        "commits": {name: commit_of(path) for name, path in checkouts.items()},
        "python": platform.python_version(),
        "sizes": sizes,
        "rounds": args.rounds,
        "repeat": args.repeat,
        "runs": [],
    }
    for size in sizes:
        for round_ in range(args.rounds):
            for name, path in checkouts.items():  # A then B, every round
                result = run_one(path, size, args.repeat)
                raw["runs"].append({"checkout": name, "round": round_, **result})
                figures = " ".join(f"{m}={result[m] * 1000:.1f}ms" for m in METRICS)
                print(f"{size:>6} round {round_} {name:<6} {figures}", flush=True)
    print()
    print(f"{'nodes':>6} {'metric':<14} {'before':>10} {'after':>10} {'after/before':>12}")
    summary: list[dict[str, Any]] = []
    for size in sizes:
        for metric in METRICS:
            medians = {
                name: statistics.median(
                    r[metric] for r in raw["runs"] if r["checkout"] == name and r["nodes"] == size
                )
                for name in checkouts
            }
            ratio = medians["after"] / medians["before"]
            summary.append({"nodes": size, "metric": metric, **medians, "after_over_before": ratio})
            print(
                f"{size:>6} {metric:<14} {medians['before'] * 1000:>8.1f}ms "
                f"{medians['after'] * 1000:>8.1f}ms {ratio:>12.3f}"
            )
    raw["summary"] = summary
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(raw, indent=1) + "\n")
        print(f"raw results: {args.out}")
    return 0


if __name__ == "__main__":
    start = time.monotonic()
    code = main()
    print(f"({time.monotonic() - start:.0f} s)", file=sys.stderr)
    sys.exit(code)
