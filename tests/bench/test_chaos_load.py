"""The chaos benchmark reads the machine's and the controller's CPU from /proc, and names
the nodes Swarm marked down that no fault of the schedule touched."""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from chaos_load import LoadMeter, machine_ticks, process_ticks
from chaos_report import load_line
from chaos_run import load_of, unprompted_downs
from chaos_sample import Sample


def _proc(root: Path, machine: tuple[int, int], process: int | None) -> None:
    busy, idle = machine
    # user nice system idle iowait irq softirq steal: busy split over user and system
    (root / "stat").write_text(f"cpu  {busy // 2} 0 {busy - busy // 2} {idle} 0 0 0 0\ncpu0 1\n")
    if process is not None:
        (root / "42").mkdir(exist_ok=True)
        # a command name with a space and a ')' in it, as proc(5) allows
        fields = ["S", *["0"] * 10, str(process - process // 3), str(process // 3)]
        (root / "42" / "stat").write_text(f"42 (python ) x) {' '.join(fields)} 0 0\n")
    elif (root / "42" / "stat").exists():
        (root / "42" / "stat").unlink()


def test_the_parsers_read_proc_s_fields() -> None:
    assert machine_ticks("cpu  10 2 8 70 10 0 0 0\ncpu0 5") == (20, 100)
    assert process_ticks("7 (a b) c) S 1 2 3 4 5 6 7 8 9 10 30 12 0 0") == 42


def test_the_meter_gives_shares_since_the_last_read(tmp_path: Path) -> None:
    pid: list[int | None] = [42]
    meter = LoadMeter(lambda: pid[0], proc=tmp_path)
    _proc(tmp_path, (100, 900), 10)
    assert meter.read() == (0.0, 0.0)  # nothing to compare with yet
    cores = os.cpu_count() or 1
    _proc(tmp_path, (100 + 150, 900 + 50), 10 + 20)  # 200 jiffies of all cores
    busy, controller = meter.read()
    assert busy == 0.75
    assert controller == round(20 * cores / 200, 3)
    _proc(tmp_path, (250 + 100, 950 + 100), None)  # the controller was SIGKILLed
    assert meter.read() == (0.5, 0.0)
    pid[0] = None
    _proc(tmp_path, (350 + 100, 1050 + 100), None)
    assert meter.read() == (0.5, 0.0)


def _sample(t: float, nodes: dict[str, str], faulted: list[str] = (), **load: float) -> Sample:
    return Sample(t, {}, {}, nodes=nodes, faulted=list(faulted), **load)


def test_a_down_no_fault_explains_is_a_span_with_the_load_before_it() -> None:
    ready = {"node-1": "ready", "node-2": "ready"}
    samples = [_sample(t, ready, busy=0.9, controller_cpu=0.3) for t in (80.0, 85.0, 90.0)]
    samples += [_sample(92.5, {**ready, "node-2": "down"}, busy=1.0)]
    samples += [Sample(93.0, {}, {}, answered=False)]  # an election: the span goes on
    samples += [_sample(93.5, {**ready, "node-2": "down"})]
    samples += [_sample(94.0, ready)]
    assert unprompted_downs(samples) == [
        {
            "host": "node-2",
            "from": 92.5,
            "to": 94.0,
            "busy_before": 0.9,
            "controller_cpu_before": 0.3,
        }
    ]


def test_a_down_the_schedule_caused_is_not_unprompted() -> None:
    # node-1 crashed by the schedule, then restored at 40 s and still down until its
    # agent reconnects: the schedule's doing. node-3 stays down long after: Swarm's.
    samples = [_sample(10.0, {"node-1": "down"}, ["node-1"])]
    samples += [_sample(39.5, {"node-1": "down"}, ["node-1"])]
    samples += [_sample(45.0, {"node-1": "down", "node-3": "ready"})]
    samples += [_sample(80.0, {"node-1": "ready", "node-3": "down"})]
    downs = unprompted_downs(samples)
    assert [(d["host"], d["from"]) for d in downs] == [("node-3", 80.0)]


def test_the_report_line_names_each_down_and_the_run_s_load() -> None:
    samples = [_sample(0.0, {}, busy=0.5, controller_cpu=0.1)]
    samples += [_sample(0.5, {}, busy=1.0, controller_cpu=0.3)]
    run = {
        "load": load_of(samples),
        "unprompted_downs": [
            {
                "host": "node-2",
                "from": 92.5,
                "to": 112.8,
                "busy_before": 0.97,
                "controller_cpu_before": 0.05,
            },
        ],
    }
    line = load_line(run)
    assert line.startswith("machine 75 % busy, controller 0.20 cores (peak 0.30); 1 node(s)")
    assert "node-2 92.5-112.8 s, the 10 s before: machine 97 % busy, controller 0.05" in line
    assert load_line({}) == "load not recorded"
