"""Typed wrappers around the few docker-py calls the sandbox makes.

docker-py has no type information; these helpers give the rest of the package plain
`str`, `dict` and `list` values, negotiate the API version with the daemon
(`version="auto"`, so dockerd 20.10 and 26 both work) and turn client errors into
SandboxError with the operation named.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import IO, Any, TypeVar

import docker
import docker.errors
import requests.exceptions

from controller.adapters.engine_http import engine_url, post_json
from controller.sandbox.spec import SandboxError

T = TypeVar("T")
DEFAULT_TIMEOUT = 30
SWARM_PORT = 2377

DockerApi = Any  # docker.APIClient
DockerClient = Any  # docker.DockerClient
Attrs = dict[str, Any]


def _call(what: str, fn: Callable[[], T]) -> T:
    try:
        return fn()
    except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
        raise SandboxError(f"{what}: {exc}") from exc


def api_client(docker_host: str, *, timeout: int = DEFAULT_TIMEOUT) -> DockerApi:
    return _call(
        f"connect to {docker_host}",
        lambda: docker.APIClient(base_url=docker_host, version="auto", timeout=timeout),
    )


def docker_client(docker_host: str, *, timeout: int = DEFAULT_TIMEOUT) -> DockerClient:
    return _call(
        f"connect to {docker_host}",
        lambda: docker.DockerClient(base_url=docker_host, version="auto", timeout=timeout),
    )


def import_image(
    api: DockerApi, data: bytes, *, repository: str, tag: str, changes: Sequence[str]
) -> None:
    _call(
        "docker import",
        lambda: api.import_image_from_data(
            data, repository=repository, tag=tag, changes=list(changes)
        ),
    )


def image_id(api: DockerApi, reference: str) -> str:
    attrs: Attrs = _call(f"inspect image {reference}", lambda: api.inspect_image(reference))
    return str(attrs["Id"])


def save_image(api: DockerApi, reference: str) -> Iterator[bytes]:
    chunks: Iterator[bytes] = _call(f"docker save {reference}", lambda: api.get_image(reference))
    yield from chunks


def load_image(api: DockerApi, data: IO[bytes]) -> None:
    def load() -> None:
        for _ in api.load_image(data):
            pass

    _call("docker load", load)


def swarm_init(api: DockerApi, *, advertise_ip: str, heartbeat_ns: int | None) -> str:
    def init() -> str:
        spec = None
        if heartbeat_ns is not None:
            spec = api.create_swarm_spec(dispatcher_heartbeat_period=heartbeat_ns)
        return str(
            api.init_swarm(
                advertise_addr=advertise_ip,
                listen_addr=f"{advertise_ip}:{SWARM_PORT}",
                swarm_spec=spec,
            )
        )

    return _call("docker swarm init", init)


def join_tokens(api: DockerApi) -> tuple[str, str]:
    attrs: Attrs = _call("inspect swarm", api.inspect_swarm)
    tokens = attrs["JoinTokens"]
    return str(tokens["Worker"]), str(tokens["Manager"])


def swarm_join(api: DockerApi, *, manager_ip: str, token: str, advertise_ip: str) -> None:
    _call(
        "docker swarm join",
        lambda: api.join_swarm(
            remote_addrs=[f"{manager_ip}:{SWARM_PORT}"],
            join_token=token,
            listen_addr=f"{advertise_ip}:{SWARM_PORT}",
            advertise_addr=advertise_ip,
        ),
    )


def swarm_leave(api: DockerApi) -> None:
    _call("docker swarm leave", lambda: api.leave_swarm(force=True))


def info(api: DockerApi) -> Attrs:
    attrs: Attrs = _call("docker info", api.info)
    return attrs


def list_nodes(api: DockerApi) -> list[Attrs]:
    nodes: list[Attrs] = _call("docker node ls", api.nodes)
    return nodes


def set_node_labels(api: DockerApi, node_id: str, labels: Mapping[str, str]) -> None:
    """Add `labels` to the node, sending back its whole spec with the current version."""

    def update() -> None:
        attrs = api.inspect_node(node_id)
        spec = dict(attrs["Spec"])
        spec["Labels"] = {**(spec.get("Labels") or {}), **labels}
        api.update_node(node_id, attrs["Version"]["Index"], spec)

    _call(f"label node {node_id}", update)


def create_service(
    api: DockerApi,
    *,
    name: str,
    task_template: Attrs,
    mode: Attrs,
    labels: Mapping[str, str],
    update_config: Attrs,
) -> str:
    result: Attrs = _call(
        f"create service {name}",
        lambda: api.create_service(
            task_template,
            name=name,
            labels=dict(labels),
            mode=mode,
            update_config=update_config,
        ),
    )
    return str(result["ID"])


def set_service_constraints(api: DockerApi, name: str, constraints: list[str]) -> None:
    """Replace a service's placement constraints, sending back its whole spec (Swarm
    leaves a running task where it is when it still meets the new constraints)."""

    def update() -> None:
        attrs = api.inspect_service(name)
        spec = attrs["Spec"]
        spec["TaskTemplate"].setdefault("Placement", {})["Constraints"] = constraints
        url = engine_url(api, "/services/{0}/update", attrs["ID"])
        post_json(api, url, data=spec, params={"version": attrs["Version"]["Index"]})

    _call(f"constrain service {name}", update)


def list_services(api: DockerApi) -> list[Attrs]:
    services: list[Attrs] = _call("docker service ls", api.services)
    return services


def list_tasks(api: DockerApi, filters: Mapping[str, Any] | None = None) -> list[Attrs]:
    tasks: list[Attrs] = _call("docker service ps", lambda: api.tasks(filters=dict(filters or {})))
    return tasks
