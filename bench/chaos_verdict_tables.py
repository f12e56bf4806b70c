"""The chaos verdict's tables, in Markdown: what bench/chaos_verdict.py prints and
writes into docs/chaos.md between the BEGIN and END marks."""

from __future__ import annotations

import math
from typing import Any

import chaos_protocol as protocol
from chaos_app import SERVICES, UNMANAGED
from chaos_stats import mean, quantile, spread

BEGIN = "<!-- chaos-verdict: begin (written by bench/chaos_verdict.py --docs) -->"
END = "<!-- chaos-verdict: end -->"
NAMES = [s.name for s in SERVICES]


def _f(value: float, digits: int = 2) -> str:
    return "-" if value is None or math.isnan(value) else f"{value:.{digits}f}"


def _p(value: float, n: int = 1) -> str:
    if not n or math.isnan(value):
        return "-"
    return f"{value:.4f}" if value >= 0.0001 else "<0.0001"


def _name(service: str) -> str:
    return f"{service} (unmanaged)" if service in UNMANAGED else service


def slot_effect(aa: dict[str, Any]) -> list[str]:
    """Services whose A/A pairs show one run of Swarm alone worse than the other: the
    two arms of a triple differ in nothing but their sandbox, so this is the harness."""
    return [
        f"{s}: second run {'worse' if v['p_harm'] < protocol.ALPHA else 'better'}"
        for s, v in aa.items()
        if min(v["p_harm"], v["p_better"]) < protocol.ALPHA
    ]


def report(scored: dict[str, Any]) -> str:
    triples = scored["triples"]
    commits = sorted({t["code"]["commit"][:10] for t in triples})
    codes = {(t["code"].get("controller"), t["code"].get("bench")) for t in triples}
    changed = [t["triple"] for t in triples if t["code"]["changed"]]
    trees = sorted({str(t["code"].get("controller"))[:10] for t in triples})
    wall = sum(t["seconds"] for t in triples)
    head = [
        f"**Verdict: {scored['verdict']}.** Protocol `{protocol.NAME}` "
        f"(bench/chaos-protocol.md): {len(triples)} of {scored['want']} triples (each an "
        f"A/B pair and an A/A pair), {scored['minutes']:g}-minute schedules; code "
        f"{', '.join(commits) or '-'} (controller tree {', '.join(trees) or '-'})"
        + (f" (uncommitted changes in {', '.join(changed)})" if changed else "")
        + (f"; **the triples ran on {len(codes)} different codes**" if len(codes) > 1 else "")
        + f"; {wall / 60:.1f} minutes of wall time, triple by triple.",
        "",
    ]
    effect = slot_effect(scored["calibration"])
    if effect:
        head += [f"The two runs of Swarm alone differ (the harness, not the controller): "
                 f"{'; '.join(effect)}.", ""]  # fmt: skip
    return "\n".join(
        head
        + _main_table(scored["main"], triples)
        + _calibration_table(scored["calibration"], scored["presence"])
        + _arms_table(triples)
        + _triples_table(scored)
    )


def _totals(pairs: list[dict[str, Any]], label: str, service: str) -> float:
    return sum(p["arms"][label]["lost"][service] for p in pairs)


def _main_table(judged: dict[str, Any], ab: list[dict[str, Any]]) -> list[str]:
    lines = [
        "Per service, the controller against Swarm alone (the first run of a triple). "
        "Each triple gives "
        f"log((controller + {protocol.OFFSET:g}) / (alone + {protocol.OFFSET:g})) of the "
        "replica-seconds lost; a service fails if that is shown above 0, passes if it is "
        f"shown below log 1.10 (sign-flip tests, Holm over the six services, "
        f"level {protocol.ALPHA}).",
        "",
        "| service | triples | lost, alone | lost, controller | ratio of sums | "
        "geometric mean ratio | worse in | p worse | p within 10 % | verdict |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in NAMES:
        j = judged[s]
        a, b = _totals(ab, "first", s), _totals(ab, "controller", s)
        worse = sum(1 for d in j["diffs"] if d > 0)
        lines.append(
            f"| {_name(s)} | {j['n']} | {a:.1f} | {b:.1f} | "
            f"{_f(b / a) if a else '-'} | {_f(math.exp(mean(j['diffs'])))} | "
            f"{worse} of {j['n']} | {_p(j['p_harm'], j['n'])} | {_p(j['p_within'], j['n'])} | "
            f"**{j['verdict']}** |"
        )
    faults = [f"- {_name(s)}: {f}" for s in NAMES for f in judged[s]["faults"]]
    if faults:
        lines += ["", "Hard faults (each fails its service):", *faults]
    return [*lines, ""]


def _calibration_table(aa: dict[str, Any], dry: dict[str, Any]) -> list[str]:
    lines = [
        "The noise, and what the controller's presence costs. A/A: the two runs of Swarm "
        "alone in each triple, the second against the first (its spread is the noise an "
        "A/B pair is read against; the second shown worse or better is a flaw of the "
        "harness, since the two differ only in their sandbox). Dry-run, in the triples "
        "that ran one (optional, outside the verdict): the controller observing and "
        "planning, writing nothing, against the first run of Swarm alone.",
        "",
        "| service | A/A pairs | A/A geometric mean | A/A SD of log | A/A largest abs log | "
        "A/A p second worse | A/A p second better | dry-run geometric mean | "
        "dry-run p worse |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for s in NAMES:
        c, d = aa[s], dry[s]
        largest = max((abs(x) for x in c["diffs"]), default=math.nan)
        lines.append(
            f"| {_name(s)} | {c['n']} | {_f(math.exp(mean(c['diffs'])))} | "
            f"{_f(spread(c['diffs']))} | {_f(largest)} | {_p(c['p_harm'], c['n'])} | "
            f"{_p(c['p_better'], c['n'])} | "
            f"{_f(math.exp(mean(d['diffs'])))} | {_p(d['p_harm'], d['n'])} |"
        )
    return [*lines, ""]


def _late(arm: dict[str, Any]) -> list[float]:
    return [float(e["at"]) - float(e.get("planned", e["at"])) for e in arm["events"]]


def _arms_table(pairs: list[dict[str, Any]]) -> list[str]:
    """Every arm kind counted alike: silence, writes both ways, overruns, faults."""
    lines = [
        "Every arm counted alike. Silence (samples no manager answered) is reported and "
        "excludes nothing. Writes are read against the decision log both ways "
        "(bench/chaos_audit.py).",
        "",
        "| arm | runs | samples | no manager answered | writes seen | decided | "
        "seen, not decided | decided, not seen | to unmanaged | overruns | "
        "after a write | manager faults on the leader | events late, median / max s | "
        "controller cores | machine busy | not converged | observer errors |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    by_label: dict[str, list[dict[str, Any]]] = {}
    for p in pairs:
        for label, arm in p["arms"].items():
            by_label.setdefault(label, []).append(arm)
    for label in ("first", "controller", "second", "dry-run"):
        arms = by_label.get(label, [])
        if not arms:
            continue

        def total(key: str, arms: list[dict[str, Any]] = arms) -> int:
            return sum(len(a["audit"][key]) if isinstance(a["audit"][key], list)
                       else a["audit"][key] for a in arms)  # fmt: skip

        faults = [f for a in arms for f in a.get("manager_faults", [])]
        on_leader = sum(1 for f in faults if f["leader"] == f["node"])
        late = [x for a in arms for x in _late(a)]
        lines.append(
            f"| {label} | {len(arms)} | {sum(a['samples'] for a in arms)} | "
            f"{sum(a['failed_samples'] for a in arms)} | {total('observed_writes')} | "
            f"{total('decided_writes')} | {total('unexplained_writes')} | "
            f"{total('unseen_decided_writes')} | {total('unmanaged_writes')} | "
            f"{total('overruns')} | {total('overruns_after_write')} | "
            f"{on_leader} of {len(faults)} | {_f(quantile(late, 0.5), 1)} / "
            f"{_f(max(late, default=math.nan), 1)} | "
            f"{_f(mean([a['load']['controller_cpu'] for a in arms]), 3)} | "
            f"{_f(100 * mean([a['load']['busy'] for a in arms]), 0)} % | "
            f"{sum(1 for a in arms if a.get('converged_after') is None)} | "
            f"{sum(len(a.get('observer_errors', [])) for a in arms)} |"
        )
    return [*lines, ""]


def _triples_table(scored: dict[str, Any]) -> list[str]:
    lines = [
        "Each triple: replica-seconds lost, all services, per arm; how far apart the arms' "
        "t = 0 fell (they wait for each other); its wall time (every arm at once: "
        "sandboxes up, warm-up, schedule, convergence, teardown).",
        "",
        "| triple | arms: lost in all | start placement as planned | t = 0 apart, s | "
        "minutes | load before |",
        "|---|---|---|---|---|---|",
    ]
    for t in scored["triples"]:
        arms = ", ".join(f"{label} {sum(t['arms'][label]['lost'].values()):.1f}"
                         for label in (*protocol.ARMS, protocol.DRY_RUN)
                         if label in t["arms"])  # fmt: skip
        planned = all(arm["warm_up"]["as_planned"] for arm in t["arms"].values())
        starts = [arm["t0"] for arm in t["arms"].values() if "t0" in arm]
        apart = _f(max(starts) - min(starts), 1) if starts else "-"
        lines.append(
            f"| {t['triple']} | {arms} | {'yes' if planned else 'no'} | {apart} | "
            f"{t['seconds'] / 60:.1f} | {_f(t['load_before'][0], 1)} |"
        )
    for o in scored["other"]:
        lines.append(f"\nNot scored: {o['file']} ({o['why']}).")
    for f in scored["failed"]:
        lines.append(f"\nFailed attempt: {f['file']}: {f['error'][:160]}")
    return lines
