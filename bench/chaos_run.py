"""One arm of the chaos benchmark: a fresh sandbox swarm, the stack, the schedule, the
measurements. `run_once` is what bench/chaos.py, bench/chaos_pairs.py and the real-swarm
test call."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from chaos_app import RACKS, SERVICES, STACK, UNMANAGED, replicas_of
from chaos_faults import Chaos, Controller
from chaos_load import LoadMeter
from chaos_sample import INTERVAL, Recorder, Sample, Tally
from chaos_schedule import Event

from controller.sandbox import Sandbox, SandboxSpec

QUIET = 10.0  # converged: every service at its count and no write for this long
SETTLE_LIMIT = 120.0  # how long after the last fault convergence is waited for
SETUP_LIMIT = 180.0
# A node the schedule restored reads `down` until its agent reconnects: only a down this
# long after the node's last fault is one the schedule did not cause.
DOWN_GRACE = 30.0
BEFORE_DOWN = 10.0  # how far back the load before an unprompted down is read


ARMS = ("alone", "controller", "dry-run")


def run_once(
    name: str,
    events: list[Event],
    *,
    arm: str,
    work: Path,
    heartbeat: float = 1.0,
    start: Mapping[str, Iterable[str]] | None = None,
    ready: Callable[[], object] | None = None,
) -> dict[str, Any]:
    """Bring a sandbox up, run the schedule on it in one arm (Swarm alone, with the
    controller, or with the controller in --dry-run), measure, take the sandbox down.
    Returns the run's figures (see `summarize`).

    Every arm warms up alike: the stack deployed with each service kept to its `start`
    nodes (chaos_schedule.start_placement), deployed again as the stack file says (no
    task moves), and quiet for 10 s. t = 0 then, and only then the controller starts:
    its adoption of the stack is measured, and no arm starts from a placement another
    arm's controller made. `ready`, if given, is called once warmed up, just before t = 0:
    arms that run side by side wait there for each other, so that their faults fall at
    the same moments."""
    if arm not in ARMS:
        raise ValueError(f"unknown arm {arm!r}: use one of {', '.join(ARMS)}")
    work.mkdir(parents=True, exist_ok=True)
    spec = SandboxSpec(
        name=name, nodes=4, managers=3, node_labels=RACKS, heartbeat_seconds=heartbeat
    )
    with Sandbox.up(spec) as sandbox:
        desired = replicas_of("A")
        ctl = Controller(sandbox, work, dry_run=arm == "dry-run") if arm != "alone" else None
        recorder = Recorder(
            desired=desired,
            budgets={s.name: s.max_unavailable for s in SERVICES},
            prefix=f"{STACK}_",
        )
        chaos = Chaos(sandbox, recorder, ctl, work, desired)
        recorder.hosts = chaos.managers
        recorder.faulted = lambda: set(chaos.faulted)
        recorder.meter = LoadMeter(lambda: _pid_of(ctl))
        # Node IDs by hostname: the decision log's constraints name nodes by ID.
        node_ids = {str(n["hostname"]): str(n["id"]) for n in sandbox.node_info()}
        recorder.begin()
        try:
            warm = _warm_up(chaos, recorder, start)
            warm["leader"] = next(
                (str(n["hostname"]) for n in sandbox.node_info() if n.get("leader")), ""
            )
            if ready is not None:
                ready()
            recorder.reset()
            wall_start = time.time()
            if ctl is not None:
                ctl.start(chaos.managers()[0])
            chaos.run(events)
            last = recorder.now()
            converged = _wait_converged(recorder, last)
        finally:
            recorder.close()
            if chaos.plugin is not None:
                chaos.plugin.close()
            if ctl is not None:
                ctl.stop()
    decisions = _decisions(ctl.log, wall_start) if ctl is not None else []
    result = summarize(recorder.tally, recorder.baseline, chaos, last, converged, decisions)
    # The wall-clock moment of t = 0: arms run side by side share it (bench/chaos_side.py).
    result.update(arm=arm, node_ids=node_ids, warm_up=warm, t0=round(wall_start, 2))
    result["manager_faults"] = chaos.manager_faults
    (work / "result.json").write_text(json.dumps(result, indent=2, default=list))
    return result


def _warm_up(
    chaos: Chaos, recorder: Recorder, start: Mapping[str, Iterable[str]] | None
) -> dict[str, Any]:
    """Deploy the stack (pinned to `start` first, if given) and wait until it is quiet.
    Returns how long that took and where each service's tasks then ran."""
    began = recorder.now()
    steps = [start, None] if start is not None else [None]
    for pins in steps:
        since = recorder.now()
        deployed, said = chaos.deploy(pins)
        if not deployed:
            raise RuntimeError(f"the stack did not deploy: {said}")
        what = "the stack to run" + (" where the warm-up pins it" if pins else "")
        _wait_quiet(recorder, since=since, limit=SETUP_LIMIT, what=what)
    placement = recorder.tally.samples[-1].where
    wanted = {k: sorted(v) for k, v in start.items()} if start is not None else None
    return {
        "seconds": round(recorder.now() - began, 1),
        "placement": placement,  # service -> hostname -> tasks, at t = 0
        "as_planned": wanted is None or _spread_over(placement, wanted),
    }


def _spread_over(placement: dict[str, dict[str, int]], wanted: dict[str, list[str]]) -> bool:
    """Whether every service runs on exactly its wanted nodes, evenly."""
    for service, hosts in wanted.items():
        where = {h: n for h, n in placement.get(service, {}).items() if n}
        if sorted(where) != hosts or len(set(where.values())) > 1:
            return False
    return True


def _converged_at(tally: Tally, since: float) -> float:
    bad = [
        s.t + INTERVAL
        for s in tally.samples
        if s.t >= since and any(s.running.get(k, 0) != v for k, v in s.desired.items())
    ]
    writes = [t for times in tally.writes.values() for t in times if t >= since]
    return max([since, *bad, *writes])


def _wait_quiet(recorder: Recorder, *, since: float, limit: float, what: str) -> None:
    deadline = time.monotonic() + limit
    while True:
        time.sleep(1)
        tally = recorder.tally
        if tally.samples and recorder.now() - _converged_at(tally, since) >= QUIET:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {limit:.0f} s waiting for {what}")


def _wait_converged(recorder: Recorder, last: float) -> float | None:
    """Seconds from the last fault until converged, or None if not within SETTLE_LIMIT."""
    while True:
        time.sleep(1)
        at = _converged_at(recorder.tally, last)
        if recorder.now() - at >= QUIET:
            return round(at - last, 1)
        if recorder.now() - last > SETTLE_LIMIT:
            return None


def _decisions(log: Path, wall_start: float) -> list[dict[str, Any]]:
    """The controller's decisions from its JSON log, timed from the schedule's start."""
    out = []
    for line in log.read_text(errors="replace").splitlines():
        with contextlib.suppress(ValueError):
            data = json.loads(line[line.find("{") :]) if "{" in line else None
            if isinstance(data, dict) and data.get("event") == "decision":
                t = datetime.fromisoformat(data["time"]).timestamp() - wall_start
                out.append({"t": round(t, 1), **{k: v for k, v in data.items() if k != "event"}})
    return out


def summarize(
    tally: Tally,
    baseline: dict[str, set[str]],
    chaos: Chaos,
    last: float,
    converged: float | None,
    decisions: list[dict[str, Any]],
) -> dict[str, Any]:
    done = sorted(chaos.done, key=lambda d: float(str(d["at"])))
    services: dict[str, dict[str, Any]] = {}
    for svc in SERVICES:
        s = svc.name
        lost, by_event, on_node, outage = 0.0, {}, {}, 0.0
        short: list[list[float]] = []  # [from, to, most replicas missing]
        for i, sample in enumerate(tally.samples):
            upto = tally.samples[i + 1].t if i + 1 < len(tally.samples) else sample.t + INTERVAL
            for host, n in sample.where.get(s, {}).items():
                on_node[host] = on_node.get(host, 0.0) + n * (upto - sample.t)
            deficit = max(0, sample.desired.get(s, 0) - sample.running.get(s, 0))
            if sample.desired.get(s, 0) and not sample.running.get(s, 0):
                outage += upto - sample.t
            if deficit:
                cost = deficit * (upto - sample.t)
                lost += cost
                label = _charged_to(done, sample.t)
                by_event[label] = round(by_event.get(label, 0.0) + cost, 1)
                if short and short[-1][1] >= round(sample.t, 1):
                    short[-1][1:] = [round(upto, 1), max(short[-1][2], deficit)]
                else:
                    short.append([round(sample.t, 1), round(upto, 1), deficit])
        started = tally.started.get(s, set()) - baseline.get(s, set())
        services[s] = {
            "lost": round(lost, 1),
            # Seconds with none of its replicas running: what its users saw as an outage.
            "outage": round(outage, 1),
            "restarts": max(0, len(started) - chaos.increases.get(s, 0)),
            "writes": len(tally.writes.get(f"service {s}", [])),
            "stops": tally.stops.get(s, 0),
            "overruns": len(tally.overruns.get(s, [])),
            "overrun_at": tally.overruns.get(s, []),
            "overrun_stops": tally.overrun_stops.get(s, []),  # per overrun: [when, host]
            "stop_log": tally.stop_log.get(s, []),  # every stop counted: [when, host]
            "max_unavailable": svc.max_unavailable,
            "lost_by_event": by_event,
            "task_seconds_on": {h: round(v, 1) for h, v in sorted(on_node.items())},
            "short": short,
            "waiting": tally.waiting.get(s, {}),
            "waiting_at": tally.waiting_at.get(s, {}),  # when each reason was seen
            "doubled_at": tally.doubled_at.get(s, []),  # samples with a slot running two
            "actions": _actions_of(decisions, f"{STACK}_{s}"),
        }
    return {
        "services": services,
        "unmanaged_writes": sum(services[s]["writes"] for s in UNMANAGED),
        "node_writes": sum(len(v) for k, v in tally.writes.items() if k.startswith("node ")),
        "last_fault_at": round(last, 1),
        "converged_after": converged,
        "samples": len(tally.samples),
        "failed_samples": tally.failed_samples,
        "writes_seen": tally.write_log,
        "observer_errors": tally.errors,
        "events": done,
        "decisions": [d for d in decisions if "action" in d or d.get("rule") == "guard"],
        # Every sample, to read a loss back: when, whether a manager answered, what counted
        # running and where, each node's state as the manager answered it, the nodes the
        # schedule had failed, and the replica counts the schedule wanted.
        "samples_seen": [
            [round(x.t, 2), x.answered, x.running, x.where, x.nodes, x.faulted, x.desired]
            for x in tally.samples
        ],
        "unprompted_downs": unprompted_downs(tally.samples),
        "node_labels": tally.node_labels,
        "load": load_of(tally.samples),
    }


def _pid_of(ctl: Controller | None) -> int | None:
    return ctl.process.proc.pid if ctl is not None and ctl.process is not None else None


def unprompted_downs(samples: list[Sample]) -> list[dict[str, Any]]:
    """Spans in which a manager reported a node down or disconnected that the schedule had
    not failed (nor within DOWN_GRACE before): Swarm's own doing, as after an election on
    a busy machine. Each with the machine's and the controller's CPU just before it."""
    spans: list[dict[str, Any]] = []
    open_: dict[str, dict[str, Any]] = {}
    faulted_at: dict[str, float] = {}
    for i, sample in enumerate(samples):
        faulted_at.update(dict.fromkeys(sample.faulted, sample.t))
        if not sample.answered:
            continue  # no view this sample: an open span stays open
        upto = samples[i + 1].t if i + 1 < len(samples) else sample.t + INTERVAL
        for host, state in sample.nodes.items():
            down = state in ("down", "disconnected") and host not in sample.faulted
            if down and sample.t - faulted_at.get(host, -1e9) > DOWN_GRACE:
                if host not in open_:
                    open_[host] = {"host": host, "from": round(sample.t, 1)}
                    spans.append(open_[host])
                    open_[host].update(_load_before(samples, sample.t))
                open_[host]["to"] = round(upto, 1)
            else:
                open_.pop(host, None)
    return spans


def _load_before(samples: list[Sample], t: float) -> dict[str, float]:
    window = [s for s in samples if t - BEFORE_DOWN <= s.t < t]
    if not window:
        return {"busy_before": 0.0, "controller_cpu_before": 0.0}
    return {
        "busy_before": round(sum(s.busy for s in window) / len(window), 2),
        "controller_cpu_before": round(sum(s.controller_cpu for s in window) / len(window), 2),
    }


def load_of(samples: list[Sample]) -> dict[str, float]:
    """The run's mean machine busy share and the controller's mean and peak cores."""
    if not samples:
        return {"busy": 0.0, "controller_cpu": 0.0, "controller_cpu_peak": 0.0}
    return {
        "busy": round(sum(s.busy for s in samples) / len(samples), 2),
        "controller_cpu": round(sum(s.controller_cpu for s in samples) / len(samples), 3),
        "controller_cpu_peak": round(max(s.controller_cpu for s in samples), 2),
    }


def _charged_to(done: list[dict[str, Any]], t: float) -> str:
    """The latest event before `t`, and the node fault under way then if it is another.
    Events are named by their time in the schedule, not when they happened: the two runs
    do an event at slightly different moments, and must charge their losses to one name."""
    latest, node_fault = "before the first fault", ""
    for d in done:
        if float(d["at"]) > t:
            break
        latest = f"{d.get('planned', d['at'])}s {d['event']}"
        kind = str(d["event"]).split()[0]
        if kind in ("crash", "cut", "crash-manager"):
            node_fault = latest
        elif kind in ("restore", "heal"):
            node_fault = ""
    if node_fault and node_fault != latest:
        return f"{latest} (during {node_fault})"
    return latest


def _actions_of(decisions: list[dict[str, Any]], service: str) -> dict[str, int]:
    """Per rule, how many actions the controller decided on this service (or on a node
    for it), and how many the guards held back."""
    out: dict[str, int] = {}
    for d in decisions:
        text = f"{d.get('subject', '')} {d.get('action', '')}"
        if service not in text or ("action" not in d and d.get("rule") != "guard"):
            continue
        key = f"{d['rule']}:{d['outcome']}"
        out[key] = out.get(key, 0) + 1
    return out
