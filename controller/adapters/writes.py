"""Execute actions: fresh read, version check, the one-field change, version-checked write.

The spec mutations are pure functions over the engine's own JSON, tested without Docker.
A write whose object moved on since the plan was made raises ConflictError before any
change is sent; transient failures are retried per call with backoff, and every attempt
passes the write fence (adapters/write_fence: the lease) right before its request.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

import docker
import docker.errors
from tenacity import (
    retry,
    retry_if_exception_type,
    stop_after_attempt,
    wait_random_exponential,
)

from controller.adapters.attrs import Attrs
from controller.adapters.engine import (
    ConflictError,
    TransientError,
    inspect_node,
    inspect_service,
    update_node_spec,
    update_service_spec,
)
from controller.adapters.errors import TerminalError
from controller.adapters.mirror_store import write_mirror
from controller.adapters.write_fence import UNFENCED, WriteFence
from controller.core.actions import (
    Action,
    SetMirror,
    SetNodeAvailability,
    SetNodeLabels,
    SetReplicas,
    SetServiceConstraints,
    describe,
)

JsonDict = dict[str, Any]


def _with_labels(
    labels: Mapping[str, str] | None, to_set: Mapping[str, str], to_remove: tuple[str, ...]
) -> dict[str, str]:
    out = {k: v for k, v in (labels or {}).items() if k not in to_remove}
    out.update(to_set)
    return out


def service_spec_with(spec: Attrs, action: Action) -> JsonDict:
    """The engine's service spec with exactly the action's fields changed.

    Service labels ride in the same update as the change they describe, so the labels
    and the change land together or not at all.
    """
    new: JsonDict = copy.deepcopy(dict(spec))
    match action:
        case SetServiceConstraints(constraints=constraints):
            placement = new.setdefault("TaskTemplate", {}).setdefault("Placement", {})
            placement["Constraints"] = list(constraints)
        case SetReplicas(replicas=replicas):
            replicated = new.get("Mode", {}).get("Replicated")
            if replicated is None:
                raise ValueError("only replicated services have a replica count")
            replicated["Replicas"] = replicas
        case _:
            raise TypeError(f"not a service action: {action!r}")
    to_set, to_remove = action.set_labels, action.remove_labels
    if to_set or to_remove:
        new["Labels"] = _with_labels(new.get("Labels"), to_set, to_remove)
    return new


def node_spec_with(spec: Attrs, action: Action) -> JsonDict:
    """The full node spec (the API replaces it whole) with the action's change."""
    new: JsonDict = copy.deepcopy(dict(spec))
    match action:
        case SetNodeLabels(set_labels=to_set, remove_labels=to_remove):
            new["Labels"] = _with_labels(new.get("Labels"), to_set, to_remove)
        case SetNodeAvailability(availability=availability, set_labels=s, remove_labels=r):
            new["Availability"] = availability.value
            if s or r:
                new["Labels"] = _with_labels(new.get("Labels"), s, r)
        case _:
            raise TypeError(f"not a node action: {action!r}")
    return new


def _check_version(kind: str, name: str, planned: int, current: int) -> None:
    if planned != current:
        raise ConflictError(
            f"{kind} {name} changed since it was observed (version {planned} -> {current})"
        )


_retry_transient = retry(
    retry=retry_if_exception_type(TransientError),
    stop=stop_after_attempt(4),
    wait=wait_random_exponential(multiplier=0.1, max=2.0),
    reraise=True,
)


@_retry_transient
def execute_action(
    client: docker.DockerClient, action: Action, fence: WriteFence = UNFENCED
) -> None:
    """One write, each attempt fenced right before its request (the read before it
    changes nothing)."""
    if isinstance(action, SetMirror):
        write_mirror(client, action, fence)
        return
    timeout = fence.request_timeout
    if isinstance(action, SetNodeLabels | SetNodeAvailability):
        attrs = inspect_node(client, action.node_id)
        _check_version("node", action.hostname, action.version, int(attrs["Version"]["Index"]))
        spec = node_spec_with(attrs["Spec"], action)
        fence.check()
        update_node_spec(client, action.node_id, action.version, spec, timeout=timeout)
        return
    attrs = inspect_service(client, action.service_id)
    _check_version("service", action.service_name, action.version, int(attrs["Version"]["Index"]))
    spec = service_spec_with(attrs["Spec"], action)
    fence.check()
    update_service_spec(client, action.service_id, action.version, spec, timeout=timeout)


Executor = Callable[[Action], None]
MAX_PROBLEM_CHARS = 300


class WriteRefusedError(TerminalError, RuntimeError):
    """Docker refused one write as invalid (a 4xx that is no conflict): as is, it will be
    refused again. The reconciler fails that write alone and lets its object wait."""

    cause = "write-refused"
    words = "Docker refused a write"

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem


class Rehearsal:
    """The executor of a dry run: says what it would write, and writes nothing. The
    reconciler notes nothing of a rehearsed write (no move, no backoff)."""

    def __init__(self, say: Callable[[str], None]) -> None:
        self._say = say

    def __call__(self, action: Action) -> None:
        self._say(f"dry-run: would {describe(action)}")


def docker_executor(client: docker.DockerClient, fence: WriteFence = UNFENCED) -> Executor:
    return naming_refusals(lambda action: execute_action(client, action, fence))


def naming_refusals(execute: Executor) -> Executor:
    """`execute`, with Docker's refusal of a write (a 4xx) as WriteRefusedError."""

    def named(action: Action) -> None:
        try:
            execute(action)
        except docker.errors.APIError as exc:
            if not exc.is_client_error():
                raise  # a 5xx the retries did not cure: the cycle fails, as the engine's
            raise WriteRefusedError(one_line(exc)) from exc

    return named


def one_line(exc: docker.errors.APIError) -> str:
    """Docker's answer as one readable line: status and message, whitespace folded."""
    text = " ".join(str(exc.explanation or exc).split())
    if len(text) > MAX_PROBLEM_CHARS:
        text = text[: MAX_PROBLEM_CHARS - 3] + "..."
    return f"{exc.status_code} {text}"
