"""The raw Engine API requests (adapters/engine_http) against an engine on a unix socket:
what goes on the wire, and docker-py's own errors for a failed answer."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import docker
import docker.errors
import pytest

from controller.adapters.engine import (
    ConflictError,
    GoneError,
    create_config,
    update_node_spec,
    update_service_spec,
)
from controller.adapters.engine_http import engine_url, get_stream, post_json
from controller.adapters.task_list import list_tasks
from tests.replay.fake_engine import Answers, FakeEngine


@pytest.fixture
def engine() -> Iterator[tuple[FakeEngine, docker.DockerClient]]:
    fake = FakeEngine()
    with fake.client() as client:
        yield fake, client


def test_a_spec_goes_out_as_read_at_its_version_under_the_negotiated_api(
    engine: tuple[FakeEngine, Any],
) -> None:
    fake, client = engine
    spec = {"Name": "web", "Labels": {"a": "b"}, "Mode": {"Replicated": {"Replicas": 3}}}
    update_service_spec(client, "svc/1", 42, spec, timeout=(1.0, 2.0))
    update_node_spec(client, "node1", 7, {"Availability": "pause", "Labels": {}})
    assert fake.take_writes() == [
        {"path": "/services/svc/1/update", "version": "42", "body": spec},
        {
            "path": "/nodes/node1/update",
            "version": "7",
            "body": {"Availability": "pause", "Labels": {}},
        },
    ]
    assert engine_url(client.api, "/x/{0}", "a b").endswith(f"/v{client.api.api_version}/x/a%20b")


def test_top_level_nulls_are_left_out_as_docker_py_leaves_them_out(
    engine: tuple[FakeEngine, Any],
) -> None:
    fake, client = engine
    post_json(client.api, engine_url(client.api, "/configs/x/update"), data={"A": None, "B": 1})
    assert fake.take_writes()[0]["body"] == {"B": 1}


def test_a_created_config_answers_its_id(engine: tuple[FakeEngine, Any]) -> None:
    fake, client = engine
    assert create_config(client, "mirror", b"data", {"k": "v"}) == "replay-mirror"
    (write,) = fake.take_writes()
    assert write["path"] == "/configs/create" and write["body"]["Labels"] == {"k": "v"}


def test_failed_answers_are_docker_pys_errors_and_a_listing_keeps_only_its_fields(
    engine: tuple[FakeEngine, Any],
) -> None:
    fake, client = engine
    with pytest.raises(docker.errors.NotFound, match="service not found"):
        get_stream(client.api, engine_url(client.api, "/services/nope"))
    fake.answers = Answers(tasks=[{"ID": "t1", "ServiceID": "s", "Extra": {"big": 1}}])
    assert list_tasks(client, desired_state="running") == [{"ID": "t1", "ServiceID": "s"}]

    def refuse(path: str, query: Any, body: Any) -> tuple[int, Any]:
        return 500, {"message": "rpc error: update out of sequence"}

    fake.post = refuse  # type: ignore[method-assign]
    with pytest.raises(ConflictError, match="out of sequence"):
        update_service_spec(client, "svc1", 1, {"Name": "web"})

    def gone(path: str, query: Any, body: Any) -> tuple[int, Any]:
        return 404, {"message": "service svc1 not found"}

    fake.post = gone  # type: ignore[method-assign]
    with pytest.raises(GoneError, match="not found"):
        update_service_spec(client, "svc1", 1, {"Name": "web"})
