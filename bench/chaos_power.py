"""The chaos protocol's power: which true effects its registered triples can show
"within 10 %" for, given the noise its A/A pairs show.

    python bench/chaos_power.py --results DIR [--trial-minutes M] [--pairs N]

Reads the A/A pairs (the two runs of Swarm alone in each triple) of DIR, takes each
service's spread (SD of log((second + 10) / (first + 10))), and draws many sets of N
A/B pairs whose log ratios are normal with that spread about log(r), for several true
ratios r of the controller's loss to Swarm alone's. Each set is judged by the verdict's
own rule (bench/chaos_verdict.py: sign-flip tests, Holm over the six services). It
prints, per service and r, the share of sets in which the service PASSes: the chance
the registered number of triples shows "within 10 %" when the truth is r.

The normal draw is an assumption (the losses are lumpy), and the spread comes from a
handful of A/A pairs, so read the figures as rough.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import chaos_protocol as protocol
from chaos_stats import spread
from chaos_verdict import NAMES, judge, score

RATIOS = (0.5, 0.7, 0.8, 0.9, 1.0, 1.05)
DRAWS = 100


def power(sd: dict[str, float], n: int, ratio: float, draws: int = DRAWS) -> dict[str, float]:
    """Per service, the share of `draws` sets of `n` pairs in which it PASSes when the
    true ratio is `ratio` and the pairs' log ratios spread by `sd`."""
    rng = random.Random(f"power-{n}-{ratio}")
    passes = dict.fromkeys(sd, 0)
    for _ in range(draws):
        diffs = {s: [rng.gauss(math.log(ratio), sd[s]) for _ in range(n)] for s in sd}
        for s, judged in judge(diffs, {}).items():
            passes[s] += judged["verdict"] == "PASS"
    return {s: passes[s] / draws for s in sd}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, required=True)
    parser.add_argument("--trial-minutes", type=float, help="score trial triples of this length")
    parser.add_argument("--pairs", type=int, default=len(protocol.SEEDS))
    parser.add_argument("--draws", type=int, default=DRAWS, help="sets drawn per ratio")
    args = parser.parse_args()
    trial = args.trial_minutes is not None
    scored = score(args.results, args.trial_minutes or protocol.MINUTES, trial)
    aa = scored["calibration"]
    sd = {s: spread(aa[s]["diffs"]) for s in NAMES}
    print(f"{len(scored['triples'])} A/A pairs; SD of the log ratio per service: "
          + ", ".join(f"{s} {v:.2f}" for s, v in sd.items()))  # fmt: skip
    if any(math.isnan(v) for v in sd.values()):
        print("too few A/A pairs for a spread")
        return 2
    print(f"\nchance of PASS with {args.pairs} A/B pairs, by the true ratio "
          "(controller's loss to Swarm alone's):\n")  # fmt: skip
    print("| service | SD | " + " | ".join(f"r = {r:g}" for r in RATIOS) + " |")
    print("|---|---|" + "---|" * len(RATIOS))
    table = {r: power(sd, args.pairs, r, args.draws) for r in RATIOS}
    for s in NAMES:
        cells = " | ".join(f"{100 * table[r][s]:.0f} %" for r in RATIOS)
        print(f"| {s} | {sd[s]:.2f} | {cells} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
