"""The web view's document, and /ui, /ui/state and /ui/events over real HTTP, logged in
(tests/runtime/test_ui_access.py has the login and the refusals)."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import anyio
import anyio.from_thread
import pytest

from controller.core.decisions import Decision, Outcome
from controller.core.health.node_marks import QUARANTINE_UNTIL
from controller.core.labels import deny_label
from controller.core.memory import Memory
from controller.core.model import NodeState, Task, TaskState
from controller.core.plan import plan
from controller.policy import policy_from_data
from controller.runtime.http_app import make_app
from controller.runtime.http_server import HttpServer
from controller.runtime.reconciler import CycleResult
from controller.runtime.ui_access import UiAccess
from controller.runtime.view_document import Logged, view_document
from controller.runtime.web_view import WebView
from tests.core.builders import MANAGED, node, running, service, snapshot

NOW = 1_800_000_000.0
TOKEN = "view-token"
ACCESS = UiAccess(token=TOKEN, clock=lambda: NOW)
POLICY = policy_from_data(
    {"apiVersion": "placement/v1", "nodes": {"fault-domains": {"rack": "rack"}}}
)
WEB = service(
    "web",
    replicas=3,
    labels={
        **MANAGED,
        "placement.preferred-nodes": "node-2",
        "placement.possible-nodes": "node-1,node-2",
    },
)
PLAIN = service("plain", replicas=1)
# A stop-first task on node-1, which is no possible owner of it, with its data there: it
# stays, and the service says its possible owners are not yet enforced, and why.
API = replace(
    service("api", replicas=1, labels={**MANAGED, "placement.possible-nodes": "node-2"}),
    update_order="stop-first",
    local_data=("volume api-data",),
)


def _cycle() -> CycleResult:
    nodes = [
        node(1, manager=True, labels={"rack": "r1"}),
        node(2, labels={"rack": "r1"}),
        node(
            3,
            state=NodeState.DOWN,
            labels={"rack": "r2", QUARANTINE_UNTIL: str(NOW + 600), deny_label("web"): "true"},
        ),
    ]
    pending = Task(
        id="t-web-3",
        service_id=WEB.id,
        node_id="",
        slot=3,
        desired_state=TaskState.RUNNING,
        state=TaskState.PENDING,
        error="no suitable node (insufficient resources on 2 nodes)",
    )
    snap = snapshot(
        nodes,
        [WEB, PLAIN, API],
        [running(WEB, 1, 1), running(WEB, 2, 2), pending, running(PLAIN, 2, 1), running(API, 1, 1)],
    )
    result = plan(snapshot=snap, policy=POLICY, memory=Memory(), now=NOW)
    return CycleResult(
        plan=result, snapshot=snap, logged=list(result.decisions), trace_id="ab" * 16
    )


def test_the_document_groups_nodes_by_fault_domain_with_marks_tasks_and_owners() -> None:
    cycle = _cycle()
    assert cycle.snapshot is not None
    said = Decision("guard", "service web", Outcome.HOLD, "older")
    doc = view_document(
        snapshot=cycle.snapshot,
        plan=cycle.plan,
        policy=POLICY,
        timeline=[Logged(NOW - 5, said), Logged(NOW, said, "cd" * 16)],
        role="leader",
        now=NOW,
        trace_url="http://traces/{trace_id}",
    )
    assert doc["fault_domain_level"] == "rack"
    layout = {d["name"]: [n["hostname"] for n in d["nodes"]] for d in doc["domains"]}
    assert layout == {"r1": ["node-1", "node-2"], "r2": ["node-3"]}
    nodes = {n["hostname"]: n for d in doc["domains"] for n in d["nodes"]}
    assert nodes["node-3"]["state"] == "down"
    assert "quarantined" in nodes["node-3"]["marks"] and "denies web" in nodes["node-3"]["marks"]
    assert nodes["node-1"]["marks"] == []
    assert [(t["service"], t["slot"]) for t in nodes["node-2"]["tasks"]] == [
        ("plain", 1),
        ("web", 2),
    ]
    web = next(s for s in doc["services"] if s["service"]["name"] == "web")
    assert (web["preferred"], web["possible"]) == (["node-2"], ["node-1", "node-2"])
    assert (web["desired"], web["running"], web["managed"]) == (3, 2, True)
    assert web["pending"][0]["swarm"].startswith("no suitable node")
    assert web["possible_unenforced"] is None
    api = next(s for s in doc["services"] if s["service"]["name"] == "api")
    gap = api["possible_unenforced"]
    assert gap["tasks"] == {"node-1": 1} and gap["count"] == 1
    assert "its data is local to its node (volume api-data)" in gap["why"], gap
    assert gap["reason"].startswith("possible owners not yet enforced: 1 task(s) on node-1: ")
    assert set(web["pending"][0]["nodes"]) == {"node-1", "node-2", "node-3"}
    assert {
        "setting": "preferred-nodes",
        "value": "node-2",
        "source": "label placement.preferred-nodes",
    } in web["settings"]
    plain = next(s for s in doc["services"] if s["service"]["name"] == "plain")
    assert plain["preferred"] == [] and plain["settings"] != []
    assert [d["trace_id"] for d in doc["decisions"]] == ["cd" * 16, None]  # newest first


def test_a_suspected_node_is_marked() -> None:
    cycle = _cycle()
    assert cycle.snapshot is not None
    suspected = Decision("suspicion", "node node-2", Outcome.SUSPECT, "gossip and probes")
    planned = replace(cycle.plan, decisions=(*cycle.plan.decisions, suspected))
    doc = view_document(
        snapshot=cycle.snapshot, plan=planned, policy=POLICY, timeline=[], role="leader", now=NOW
    )
    nodes = {n["hostname"]: n for d in doc["domains"] for n in d["nodes"]}
    assert nodes["node-2"]["marks"] == ["suspected"]


class Served:
    def __init__(self, view: WebView, server: HttpServer, portal: Any) -> None:
        self.view, self.server, self.portal = view, server, portal

    def get(
        self, path: str, headers: dict[str, str] | None = None
    ) -> tuple[int, dict[str, str], bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=5)
        try:
            conn.request(
                "GET", path, headers={"Authorization": f"Bearer {TOKEN}", **(headers or {})}
            )
            reply = conn.getresponse()
            return reply.status, {k.lower(): v for k, v in reply.getheaders()}, reply.read()
        finally:
            conn.close()

    def update(self, cycle: CycleResult) -> None:
        self.portal.call(self.view.update, cycle, POLICY, "leader")


@pytest.fixture
def served() -> Iterator[Served]:
    view = WebView(ACCESS, clock=lambda: NOW)
    server = HttpServer([("127.0.0.1", 0)], make_app(view.routes(), home="/ui"))
    with anyio.from_thread.start_blocking_portal() as portal:
        running_ = portal.start_task_soon(server.run)
        try:
            yield Served(view, server, portal)
        finally:
            running_.cancel()


def test_the_page_and_its_files_are_served_with_a_strict_policy(served: Served) -> None:
    status, headers, body = served.get("/ui")
    assert status == 200 and headers["content-type"].startswith("text/html")
    assert b'<script src="/ui/app.js"' in body and b"http" not in body.split(b"<body>")[0]
    assert "default-src 'self'" in headers["content-security-policy"]
    for path, kind in (("/ui/app.js", "text/javascript"), ("/ui/app.css", "text/css")):
        status, headers, _ = served.get(path)
        assert status == 200 and headers["content-type"].startswith(kind)
    status, headers, _ = served.get("/")
    assert status == 303 and headers["location"] == "/ui"


def test_the_state_waits_for_a_cycle_then_the_stream_pushes_every_cycle(served: Served) -> None:
    status, _, body = served.get("/ui/state")
    assert status == 503 and b"no cycle has completed yet" in body
    served.update(_cycle())
    status, _, body = served.get("/ui/state")
    assert status == 200 and json.loads(body)["role"] == "leader"

    conn = http.client.HTTPConnection("127.0.0.1", served.server.port, timeout=10)
    conn.request("GET", "/ui/events", headers={"Authorization": f"Bearer {TOKEN}"})
    reply = conn.getresponse()
    assert reply.status == 200 and reply.getheader("content-type", "").startswith(
        "text/event-stream"
    )

    def next_state() -> dict[str, Any]:
        event = None
        while True:
            line = reply.readline().decode().rstrip("\n")
            if line.startswith("event: "):
                event = line.removeprefix("event: ")
            elif line.startswith("data: ") and event == "state":
                return json.loads(line.removeprefix("data: "))  # type: ignore[no-any-return]

    first = next_state()
    nodes = {n["hostname"]: n["state"] for d in first["domains"] for n in d["nodes"]}
    assert nodes["node-3"] == "down"
    later = _cycle()
    assert later.snapshot is not None
    back = tuple(replace(n, state=NodeState.READY) for n in later.snapshot.nodes)
    later = replace(later, snapshot=replace(later.snapshot, nodes=back), logged=[])
    served.update(later)
    second = next_state()  # the connection's timeout fails the test if nothing is pushed
    nodes = {n["hostname"]: n["state"] for d in second["domains"] for n in d["nodes"]}
    assert nodes["node-3"] == "ready"
    # The timeline keeps what earlier cycles logged.
    assert len(second["decisions"]) == len(first["decisions"]) > 0
    conn.close()


def test_views_waking_on_the_same_cycle_share_one_build(monkeypatch: pytest.MonkeyPatch) -> None:
    view = WebView(ACCESS, clock=lambda: NOW)
    built = []
    build = view._build
    monkeypatch.setattr(view, "_build", lambda *a: built.append(1) or build(*a))

    async def main() -> list[bytes | None]:
        view.update(_cycle(), POLICY, "leader")
        bodies: list[bytes | None] = []

        async def read() -> None:
            bodies.append(await view.state())

        async with anyio.create_task_group() as group:
            for _ in range(5):
                group.start_soon(read)
        return bodies

    bodies = anyio.run(main)
    assert len(bodies) == 5 and len(set(bodies)) == 1 and bodies[0]
    assert len(built) == 1
