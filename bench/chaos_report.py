"""One chaos pair's tables: Swarm alone and the other arm side by side. One pair judges
no loss (bench/chaos_verdict.py does, over the protocol's pairs); these say where it went."""

from __future__ import annotations

from typing import Any

from chaos_app import SERVICES, UNMANAGED

CONVERGE_LIMIT = 60.0  # seconds after the last fault


def ratio(controller: float, swarm: float) -> float | None:
    """controller / swarm-alone; 0 of 0 is 1 (equal); something of nothing is None (inf)."""
    if swarm > 0:
        return controller / swarm
    return 1.0 if controller == 0 else None


def comparable(swarm: dict[str, Any], ctl: dict[str, Any]) -> list[str]:
    """Why the two runs cannot be compared, if they cannot: an event that was not done
    in one of them (an edit refused throughout a long election, no leader to crash), or
    a run in which managers did not answer for more than a tenth of its samples."""
    out = []
    for label, run in (("Swarm alone", swarm), ("controller", ctl)):
        for e in run["events"]:
            detail = str(e["detail"])
            if detail.startswith(("failed", "no leader")):
                out.append(f"{label}: {e['at']}s {e['event']} was not done: {detail[:120]}")
        if run["failed_samples"] > run["samples"] / 10:
            out.append(
                f"{label}: no manager answered {run['failed_samples']} of {run['samples']} samples"
            )
    return out


def _fmt_ratio(value: float | None) -> str:
    return "inf" if value is None else f"{value:.2f}"


def _row(cells: list[object]) -> str:
    widths = (8, 7, 9, 6, 7, 5, 8, 5, 6, 5, 5, 5, 8, 8)
    return " ".join(
        f"{c!s:>{w}}" if i else f"{c!s:<{w}}"
        for i, (c, w) in enumerate(zip(cells, widths, strict=True))
    )


def table(swarm: dict[str, Any], ctl: dict[str, Any]) -> str:
    top = ["", "lost", "replica-s", "ratio", "outage", "s", "restarts", "", "writes", ""]
    top += ["stops", "", "overruns", ""]
    pairs = ["swarm", "ctl"] * 6
    lines = [_row(top), _row(["service", *pairs[:2], "", *pairs[2:]])]
    keys = ("lost", "outage", "restarts", "writes", "stops", "overruns")
    totals = {(run, k): 0.0 for run in ("a", "b") for k in keys}
    for s in SERVICES:
        a, b = swarm["services"][s.name], ctl["services"][s.name]
        for k in keys:
            totals["a", k] += a.get(k, 0.0)
            totals["b", k] += b.get(k, 0.0)
        lines.append(
            _row(
                [
                    s.name + ("*" if s.name in UNMANAGED else ""),
                    f"{a['lost']:.1f}",
                    f"{b['lost']:.1f}",
                    _fmt_ratio(ratio(b["lost"], a["lost"])),
                    f"{a.get('outage', 0.0):.1f}",
                    f"{b.get('outage', 0.0):.1f}",
                    a["restarts"],
                    b["restarts"],
                    a["writes"],
                    b["writes"],
                    a["stops"],
                    b["stops"],
                    a["overruns"],
                    b["overruns"],
                ]
            )
        )
    t = {k: totals[k] for k in totals}
    lines.append(
        _row(
            [
                "total",
                f"{t['a', 'lost']:.1f}",
                f"{t['b', 'lost']:.1f}",
                _fmt_ratio(ratio(t["b", "lost"], t["a", "lost"])),
                f"{t['a', 'outage']:.1f}",
                f"{t['b', 'outage']:.1f}",
                int(t["a", "restarts"]),
                int(t["b", "restarts"]),
                int(t["a", "writes"]),
                int(t["b", "writes"]),
                int(t["a", "stops"]),
                int(t["b", "stops"]),
                int(t["a", "overruns"]),
                int(t["b", "overruns"]),
            ]
        )
    )
    lines.append("* unmanaged: the controller must never write it")
    lines.append("outage s: seconds with none of the service's replicas running")
    for label, run in (("Swarm alone", swarm), ("controller", ctl)):
        lines.append(
            f"{label}: converged {run['converged_after']} s after the last fault "
            f"({run['last_fault_at']} s); writes to unmanaged services {run['unmanaged_writes']}, "
            f"node writes {run['node_writes']}; {run['samples']} samples, "
            f"{run['failed_samples']} failed (no manager answered)"
        )
    for label, run in (("Swarm alone", swarm), ("controller", ctl)):
        lines.append(f"{label}: {load_line(run)}")
    return "\n".join(lines)


def load_line(run: dict[str, Any]) -> str:
    """How busy the machine was, the controller's CPU, and the nodes Swarm marked down
    that no fault touched, with the CPU just before each (older JSON: not recorded)."""
    load = run.get("load")
    if load is None:
        return "load not recorded"
    downs = run.get("unprompted_downs", [])
    text = (
        f"machine {100 * load['busy']:.0f} % busy, controller {load['controller_cpu']:.2f} "
        f"cores (peak {load['controller_cpu_peak']:.2f}); "
        f"{len(downs)} node(s) marked down that no fault touched"
    )
    for d in downs:
        text += (
            f"\n    {d['host']} {d['from']}-{d['to']} s, the 10 s before: machine "
            f"{100 * d['busy_before']:.0f} % busy, "
            f"controller {d['controller_cpu_before']:.2f} cores"
        )
    return text


def losses(swarm: dict[str, Any], ctl: dict[str, Any]) -> str:
    """Where the controller run lost more than Swarm alone: per service, the faults
    (each loss is charged to the latest event before it) and the actions it took."""
    lines = []
    for s in SERVICES:
        a, b = swarm["services"][s.name], ctl["services"][s.name]
        if b["lost"] <= a["lost"] and not b["overruns"]:
            continue
        lines.append(f"{s.name}: {a['lost']} -> {b['lost']} replica-s")
        events = sorted(set(a["lost_by_event"]) | set(b["lost_by_event"]), key=_at)
        for e in events:
            x, y = a["lost_by_event"].get(e, 0.0), b["lost_by_event"].get(e, 0.0)
            if y > x:
                lines.append(f"    after {e}: swarm {x}, controller {y}")
        if b["actions"]:
            acts = ", ".join(f"{k} {v}" for k, v in sorted(b["actions"].items()))
            lines.append(f"    controller decisions on it: {acts}")
        for label, run in (("swarm", a), ("controller", b)):
            lines.append(f"    where its tasks ran, {label}: {exposure(run)}")
    return "\n".join(lines) if lines else "the controller lost nothing Swarm alone did not"


def exposure(service: dict[str, Any]) -> str:
    """Each node's share of the service's running task-seconds (older JSON: unknown)."""
    on = service.get("task_seconds_on") or {}
    total = sum(on.values())
    if not total:
        return "not recorded"
    return ", ".join(f"{host or '?'} {100 * v / total:.0f} %" for host, v in sorted(on.items()))


def _at(label: str) -> float:
    head = label.split("s ", 1)[0]
    try:
        return float(head)
    except ValueError:
        return -1.0


def timeline(run: dict[str, Any]) -> str:
    """One arm's run as it happened, to read a failed pair back from its log alone: each
    event when it was done and what it answered, which manager led before each manager
    fault, when no manager answered, and when Swarm saw each node other than ready."""
    lines = [
        f"  {e['at']:5.1f}s {e['event']} (planned {e['planned']}, took {e['took']} s): "
        + str(e["detail"])
        for e in run.get("events", [])
    ]
    leaders = [
        f"{m['node']} at {m['planned']} s: {m['leader'] or '?'}"
        for m in run.get("manager_faults", [])
    ]
    lines.append(f"  leader before each manager fault: {', '.join(leaders) or 'none recorded'}")
    samples = run.get("samples_seen", [])
    silent = _spans([(s[0], not s[1]) for s in samples])
    lines.append(f"  no manager answered: {silent or 'never'}")
    hosts = sorted({h for s in samples for h in s[4]})
    for host in hosts:
        seen = [(s[0], s[4].get(host, "?") != "ready") for s in samples if s[1]]
        lines.append(f"  {host} not ready: {_spans(seen) or 'never'}")
    return "\n".join(lines)


def _spans(marks: list[tuple[float, bool]]) -> str:
    """'from-to' spans of consecutive marked samples, in seconds."""
    spans: list[tuple[float, float]] = []
    start: float | None = None
    for t, marked in marks:
        if marked and start is None:
            start = t
        elif not marked and start is not None:
            spans.append((start, t))
            start = None
    if start is not None:  # still marked at the last sample
        spans.append((start, marks[-1][0]))
    return ", ".join(f"{a:.1f}-{b:.1f}" for a, b in spans)
