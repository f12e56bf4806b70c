"""Listing tasks with only the fields the controller reads.

A task document is mostly its spec (container, resources, networks, platforms): about
1.3 KB of JSON, of which the snapshot and the failure history read nine fields. msgspec
decodes those into plain dicts and skips the rest without building it: at 20,000 tasks
about a fifth of the time of decoding every document, and nothing large to free after
(bench/cycle_scale.py). The dicts have the shape of docker-py's answers, so the same
converters read them (adapters/attrs, adapters/health_attrs).
"""

from __future__ import annotations

import json
from typing import Any, TypedDict, cast

import docker
import docker.utils
import msgspec
import requests
import urllib3.exceptions

from controller.adapters.attrs import Attrs
from controller.adapters.engine_http import engine_url, get_stream

# Typed Any: the converters judge each value (a bad one makes that task unreadable), so
# the decoder only checks that the objects are objects.


class _Version(TypedDict, total=False):
    Index: Any


class _Status(TypedDict, total=False):
    State: Any
    Err: Any
    Message: Any
    Timestamp: Any


class TaskFields(TypedDict, total=False):
    """What task_from_attrs and failure_events_from_attrs read of a task."""

    ID: Any
    ServiceID: Any
    NodeID: Any
    Slot: Any
    DesiredState: Any
    Status: _Status
    Version: _Version


_DECODER = msgspec.json.Decoder(list[TaskFields])


def decode_tasks(raw: bytes) -> list[Attrs]:
    """The answer of `GET /tasks`, each task cut to TaskFields. An answer of another
    shape (a field the engine left null, say) is decoded whole, as docker-py would."""
    try:
        return cast(list[Attrs], _DECODER.decode(raw))
    except (msgspec.ValidationError, msgspec.DecodeError):
        return cast(list[Attrs], json.loads(raw))


def list_tasks(client: docker.DockerClient, *, desired_state: str | tuple[str, ...]) -> list[Attrs]:
    """`GET /tasks?filters={"desired-state":[...]}`, through docker-py's session (its
    transport, API version and errors: adapters/engine_http), decoded by `decode_tasks`."""
    wanted = [desired_state] if isinstance(desired_state, str) else list(desired_state)
    filters = docker.utils.convert_filters({"desired-state": wanted})
    api = client.api
    response = get_stream(api, engine_url(api, "/tasks"), params={"filters": filters})
    try:
        return decode_tasks(read_body(response))
    finally:
        response.close()


def read_body(response: requests.Response) -> bytes:
    """The whole body in one read: `response.content` gathers it in 10 KB pieces, a
    third of the time of listing 40,000 tasks (bench/cycle_scale.py). A transport error
    is raised as requests raises it, so the callers' error mapping holds."""
    try:
        return cast(bytes, response.raw.read(decode_content=True))
    except urllib3.exceptions.HTTPError as exc:
        raise requests.ConnectionError(exc, response=response) from exc
