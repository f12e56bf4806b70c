"""A short narrated scenario on the sample sandbox, so a newcomer sees the controller work.

`./dev run` plays it beside the controller: db's preferred owner crashes (failover) and
comes back (failback after the policy's failback-delay), then a high-priority service
arrives that fits only if the low-priority, preemptible batch makes room (preemption).
Each step says what is about to happen and what Swarm then shows, read from the swarm,
so the words never run ahead of the facts. The decisions say why, in the controller's
log and on its web view.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from controller.sandbox.samples import SAMPLE_COMMAND
from controller.sandbox.sandbox import Sandbox

Say = Callable[[str], None]

CPU = 1_000_000_000  # nano-CPUs
BATCH_CPU = 1.2  # each batch replica reserves this much of a node's 2 CPUs
URGENT = "urgent"
STEP_TIMEOUT = 120.0
HOME = "node-2"  # db's first preferred owner (samples.py)
SETTLE_SECONDS = 5.0


class TourStoppedError(Exception):
    """The controller ended, or the operator interrupted: the tour stops where it is."""


class Tour:
    def __init__(self, sandbox: Sandbox, say: Say, stop: threading.Event) -> None:
        self.sandbox, self._say, self._stop = sandbox, say, stop
        self.client: Any = None

    def say(self, text: str) -> None:
        self._say(f"tour: {text}")

    def _wait(self, what: str, test: Callable[[], Any], timeout: float = STEP_TIMEOUT) -> Any:
        deadline = time.monotonic() + timeout
        while not self._stop.is_set():
            found = test()
            if found:
                return found
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what} did not happen within {timeout:.0f} s")
            self._stop.wait(0.5)
        raise TourStoppedError

    def running_on(self, service: str) -> dict[str, int]:
        hosts = {n["ID"]: n["Description"]["Hostname"] for n in self.client.api.nodes()}
        placed: dict[str, int] = {}
        for task in self.client.api.tasks(filters={"service": service}):
            if task["Status"]["State"] == "running" and task["DesiredState"] == "running":
                host = hosts.get(task.get("NodeID", ""), "?")
                placed[host] = placed.get(host, 0) + 1
        return placed

    def replicas(self, service: str) -> int:
        spec = self.client.api.inspect_service(service)["Spec"]
        return int(spec["Mode"]["Replicated"]["Replicas"])

    def play(self) -> None:
        self.client = self.sandbox.client()
        try:
            self._failover_and_failback()
            self._preemption()
            self.say("done. The controller goes on; Ctrl-C stops it and removes the sandbox.")
        finally:
            self.client.close()

    def _failover_and_failback(self) -> None:
        home = HOME  # db's first preferred owner: the controller moves it there first
        self._wait(f"db on {home}", lambda: self.running_on("db") == {home: 1})
        self._stop.wait(SETTLE_SECONDS)  # let the first placement settle before a fault
        self.say(
            f"db runs on {home}, its first preferred owner "
            f"(placement.preferred-nodes=node-2,node-3). Crashing {home} now: watch db fail over."
        )
        crashed = time.monotonic()
        self.sandbox.fail(home, "crash")
        away = self._wait(
            "db running elsewhere", lambda: _one_of(self.running_on("db"), unlike=home)
        )
        self.say(
            f"db runs on {away}, {time.monotonic() - crashed:.1f} s after the crash "
            "(the failover rule surged it rather than wait for Swarm's restart delay)."
        )
        self._stop.wait(5)
        self.say(
            f"{home} comes back. db fails back once {home} has stayed ready for "
            "failback-delay (30 s in policies/example.yaml): a node that just returned may "
            "fail again."
        )
        self.sandbox.restore(home)
        returned = time.monotonic()
        self._wait(f"db back on {home}", lambda: self.running_on("db") == {home: 1})
        self.say(f"db is back on {home}, {time.monotonic() - returned:.0f} s after it returned.")

    def _preemption(self) -> None:
        self.say(
            f"batch (priority low, preemptible) now reserves {BATCH_CPU:g} CPU per replica, "
            "as a busy batch job would."
        )
        _reserve_cpu(self.client, "batch", BATCH_CPU)
        self._wait(
            "batch running with its reservation",
            lambda: sum(self.running_on("batch").values()) == 2,
        )
        self.say(
            f"{URGENT} arrives: priority high, 3 replicas of {BATCH_CPU:g} CPU on nodes of 2 CPUs. "
            "Only one fits beside batch: the controller scales batch down to make room."
        )
        self.client.api.create_service(
            task_template=self._urgent_template(),
            name=URGENT,
            mode={"Replicated": {"Replicas": 3}},
            labels={"placement.managed": "true", "placement.priority": "high"},
        )
        self._wait(f"{URGENT} running 3", lambda: sum(self.running_on(URGENT).values()) == 3)
        self.say(
            f"{URGENT} runs 3 of 3; batch was scaled to {self.replicas('batch')} "
            "(its operator's count is kept in its labels: the controller gives it back when "
            "there is room again)."
        )

    def _urgent_template(self) -> dict[str, Any]:
        image = self.client.api.inspect_service("db")["Spec"]["TaskTemplate"]["ContainerSpec"][
            "Image"
        ]
        return {
            "ContainerSpec": {"Image": image, "Command": list(SAMPLE_COMMAND)},
            "Resources": {"Reservations": {"NanoCPUs": int(BATCH_CPU * CPU)}},
        }


def _one_of(placed: dict[str, int], unlike: str | None = None) -> str | None:
    hosts = [h for h, n in placed.items() if n and h != unlike]
    return hosts[0] if len(hosts) == 1 and sum(placed.values()) == 1 else None


def _reserve_cpu(client: Any, service: str, cpus: float) -> None:
    """As `docker service update --reserve-cpu`: the rest of the spec as it is."""
    attrs = client.api.inspect_service(service)
    template = attrs["Spec"]["TaskTemplate"]
    template.setdefault("Resources", {}).setdefault("Reservations", {})["NanoCPUs"] = int(
        cpus * CPU
    )
    client.api.update_service(
        attrs["ID"],
        version=attrs["Version"]["Index"],
        task_template=template,
        fetch_current_spec=True,
    )


def play_in_background(sandbox: Sandbox, say: Say, stop: threading.Event) -> threading.Thread:
    """The tour in a thread of its own; a failed step is said, never raised."""

    def run() -> None:
        try:
            Tour(sandbox, say, stop).play()
        except TourStoppedError:
            return
        except Exception as exc:  # a demo must not take the run down with it
            say(f"tour: stopped: {exc}")

    thread = threading.Thread(target=run, name="tour", daemon=True)
    thread.start()
    return thread
