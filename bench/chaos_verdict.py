"""The chaos verdict: every triple in the results, scored by the pre-registered rule.

    python bench/chaos_verdict.py                       # print the verdict and its tables
    python bench/chaos_verdict.py --docs docs/chaos.md  # and write them into the page

Reads every `<triple>.json` in bench/results/<protocol>/ (bench/chaos_pairs.py writes
them), scores each service's loss again from the kept samples, and applies the rule of
bench/chaos-protocol.md: each triple gives an A/B pair (the controller against the first
run of Swarm alone) and an A/A pair (the second run of Swarm alone against the first).
Nothing is left out: a file of another length, seed or protocol is named and not scored,
a failed attempt is listed, silence is counted beside the verdict. The verdict says how
many of the registered triples it has; with fewer than all, it is provisional. Exit
status 0 on PASS, 1 on FAIL, 2 on INCONCLUSIVE or provisional.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import chaos_protocol as protocol
from chaos_app import SERVICES, UNMANAGED
from chaos_audit import audit
from chaos_stats import holm, sign_flip_p
from chaos_verdict_tables import BEGIN, END, report

ROOT = Path(__file__).resolve().parents[1]
NAMES = [s.name for s in SERVICES]


def losses_of(arm: dict[str, Any]) -> dict[str, float]:
    """Replica-seconds lost per service, from the kept samples: each sample's shortfall
    (wanted less running, when positive) held until the next sample."""
    samples = arm["samples_seen"]
    lost = dict.fromkeys(NAMES, 0.0)
    for i, (t, _answered, running, desired, _faulted) in enumerate(samples):
        upto = samples[i + 1][0] if i + 1 < len(samples) else t + 0.5
        for j, name in enumerate(NAMES):
            lost[name] += max(0, desired[j] - running[j]) * (upto - t)
    return {k: round(v, 1) for k, v in lost.items()}


def log_ratio(b: float, a: float) -> float:
    return math.log((b + protocol.OFFSET) / (a + protocol.OFFSET))


def _arms_of(doc: dict[str, Any]) -> set[str]:
    """A triple's arms in the verdict: all but the optional dry-run arm."""
    return set(doc.get("order", ())) - {protocol.DRY_RUN}


def load(results: Path, minutes: float = protocol.MINUTES, trial: bool = False) -> dict[str, Any]:
    """The scored triples, and everything else found, by what it is. A `trial` scores
    the triples of a trial of the harness instead (its `trial-` seeds too, of `minutes`),
    and says so."""
    registered = protocol.by_id()
    scored, other, failed = [], [], []
    for path in sorted(results.glob("*.json")):
        doc = json.loads(path.read_text())
        if ".failed-" in path.name:
            failed.append({"file": path.name, "error": doc.get("error", "?")})
            continue
        triple = registered.get(doc.get("triple", ""))
        if trial and str(doc.get("triple", "")).startswith("trial-"):
            triple = protocol.Triple(doc["triple"], doc.get("seed", 0), protocol.ARMS)
        why = None
        if doc.get("protocol") != protocol.NAME or triple is None:
            why = f"not a triple of {protocol.NAME}"
        elif doc.get("minutes") != minutes:
            why = f"{doc.get('minutes')} min, not the registered {protocol.MINUTES:g}"
        elif doc.get("seed") != triple.seed or _arms_of(doc) != set(triple.order):
            why = "arms or seed other than registered"
        if why is not None:
            other.append({"file": path.name, "why": why})
            continue
        for label, arm in doc["arms"].items():
            arm["lost"] = losses_of(arm)
            arm["audit"] = audit(arm)
            arm["label"] = label
        scored.append(doc)
    order = [*registered]
    scored.sort(key=lambda doc: (order.index(doc["triple"]) if doc["triple"] in order else 0,
                                 doc["triple"]))  # fmt: skip
    return {"triples": scored, "other": other, "failed": failed}


def judge(diffs: dict[str, list[float]], faults: dict[str, list[str]]) -> dict[str, Any]:
    """The rule, per service: FAIL if shown worse (or a hard fault), PASS if shown no
    more than MARGIN worse, INCONCLUSIVE otherwise; Holm across the services in each
    of the two families of tests."""
    harm = holm({s: sign_flip_p(d, greater=True) for s, d in diffs.items()})
    within = holm(
        {s: sign_flip_p(d, centre=protocol.MARGIN, greater=False) for s, d in diffs.items()}
    )
    # Shown better: not part of the rule; of the A/A pairs, a difference between two
    # arms of the harness that should be alike.
    better = holm({s: sign_flip_p(d, greater=False) for s, d in diffs.items()})
    out = {}
    for s, d in diffs.items():
        if faults.get(s) or (d and harm[s] < protocol.ALPHA):
            verdict = "FAIL"
        elif d and within[s] < protocol.ALPHA:
            verdict = "PASS"
        else:
            verdict = "INCONCLUSIVE"
        out[s] = {"n": len(d), "diffs": d, "p_harm": harm[s], "p_within": within[s],
                  "p_better": better[s], "faults": faults.get(s, []),
                  "verdict": verdict}  # fmt: skip
    return out


def hard_faults(triples: list[dict[str, Any]], label: str) -> dict[str, list[str]]:
    """Per service, each write to an unmanaged service and each overrun after a
    controller write, in that arm of the triples."""
    faults: dict[str, list[str]] = {}
    for doc in triples:
        found = doc["arms"][label]["audit"]
        if found["unmanaged_writes"]:
            for u in UNMANAGED:
                faults.setdefault(u, []).append(
                    f"{doc['triple']}: {found['unmanaged_writes']} write(s) to unmanaged {u}"
                )
        for o in found["overruns_after_write"]:
            faults.setdefault(o["service"], []).append(
                f"{doc['triple']}: overrun at {o['t']} s, {o['write'][0]} s after a write "
                f"({o['write'][2] or o['write'][1]})"
            )
    return faults


def compare(triples: list[dict[str, Any]], b: str, a: str) -> dict[str, Any]:
    diffs = {s: [log_ratio(t["arms"][b]["lost"][s], t["arms"][a]["lost"][s]) for t in triples]
             for s in NAMES}  # fmt: skip
    return judge(diffs, hard_faults(triples, b) if b != "second" else {})


def verdict_of(judged: dict[str, Any], have: int, want: int) -> str:
    verdicts = {v["verdict"] for v in judged.values()}
    word = "FAIL" if "FAIL" in verdicts else "PASS" if verdicts == {"PASS"} else "INCONCLUSIVE"
    return word if have >= want else f"{word} (provisional: {have} of {want} triples)"


def score(results: Path, minutes: float = protocol.MINUTES, trial: bool = False) -> dict[str, Any]:
    trial = trial or minutes != protocol.MINUTES
    found = load(results, minutes, trial)
    triples = found["triples"]
    main = compare(triples, "controller", "first")
    want = len(protocol.SEEDS)
    dry = [t for t in triples if protocol.DRY_RUN in t["arms"]]
    return {
        **found,
        "main": main,
        "presence": compare(dry, protocol.DRY_RUN, "first"),
        "calibration": compare(triples, "second", "first"),
        "verdict": (verdict_of(main, len(triples), want) if triples else "no triple yet")
        + (f" (a trial of {minutes:g}-minute triples)" if trial else ""),
        "minutes": minutes,
        "want": want,
    }


def write_docs(page: Path, text: str) -> None:
    old = page.read_text()
    if BEGIN not in old or END not in old:
        raise SystemExit(f"{page}: no {BEGIN} ... {END} block to write the verdict into")
    head, rest = old.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    page.write_text(f"{head}{BEGIN}\n{text}\n{END}{tail}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=ROOT / "bench/results" / protocol.NAME)
    parser.add_argument("--docs", type=Path, help="write the tables into this page's block")
    parser.add_argument(
        "--trial-minutes", type=float, help="score a trial's triples of this length instead"
    )
    args = parser.parse_args()
    if args.trial_minutes and args.docs:
        parser.error("a trial is not the verdict: --docs takes the registered triples only")
    trial = args.trial_minutes is not None
    scored = score(args.results, args.trial_minutes or protocol.MINUTES, trial)
    text = report(scored)
    print(text)
    if args.docs:
        write_docs(args.docs, text)
    word = scored["verdict"]
    return 0 if word == "PASS" else 1 if word == "FAIL" else 2


if __name__ == "__main__":
    raise SystemExit(main())
