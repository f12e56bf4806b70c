"""The Engine API requests docker-py has no public call for, through its own client.

Each function takes the low-level client (`docker.DockerClient.api`, a `docker.APIClient`).

docker-py's public calls cover the reads; for the raw writes (a service, node or config
spec sent back as read, at the version read, with a bounded timeout) and the task
listing read as a stream (adapters/task_list), it has only private helpers. These
requests go through the same client by its public surface: its HTTP session's
`get`/`post` (a requests.Session, so its transport for unix sockets, TCP and TLS, and
its headers), its `base_url` and negotiated `api_version`, its default `timeout`, and
docker-py's public `create_api_error_from_http_exception`, so a caller sees the same
APIError and NotFound as from docker-py's own calls. One way for every raw request.
"""

from __future__ import annotations

import json
from typing import Any, cast
from urllib.parse import quote

import docker
import docker.errors
import requests

# A request's timeout: seconds, (connect, read), or None for the client's own.
RequestTimeout = float | tuple[float, float] | None


def engine_url(api: docker.APIClient, path: str, *parts: str) -> str:
    """`path` (`/services/{0}/update`) under the client's base URL and API version,
    each part quoted as docker-py quotes them."""
    quoted = (quote(part, safe="/:") for part in parts)
    return f"{api.base_url}/v{api.api_version}{path.format(*quoted)}"


def _timeout(api: docker.APIClient, timeout: RequestTimeout) -> float | tuple[float, float]:
    return cast(float, api.timeout) if timeout is None else timeout


def raise_for_status(response: requests.Response) -> None:
    """docker-py's error for a failed answer: NotFound for a 404, else APIError."""
    try:
        response.raise_for_status()
    except requests.HTTPError as exc:
        docker.errors.create_api_error_from_http_exception(exc)


def post_json(
    api: docker.APIClient,
    url: str,
    *,
    data: Any,
    params: dict[str, Any] | None = None,
    timeout: RequestTimeout = None,
    answer: bool = False,
) -> Any:
    """POST `data` as JSON; with `answer`, the answer's JSON (else None).

    Top-level null values are left out, as docker-py leaves them out of every body it
    sends (old engines cannot read null as a string)."""
    body = {k: v for k, v in data.items() if v is not None} if isinstance(data, dict) else data
    response = api.post(
        url,
        data=json.dumps(body),
        params=params,
        headers={"Content-Type": "application/json"},
        timeout=_timeout(api, timeout),
    )
    raise_for_status(response)
    return response.json() if answer else None


def get_stream(
    api: docker.APIClient,
    url: str,
    *,
    params: dict[str, Any] | None = None,
    timeout: RequestTimeout = None,
) -> requests.Response:
    """GET whose body is left unread (the caller reads it, and closes the response);
    a failed answer raises as `raise_for_status`, closed."""
    response = cast(
        requests.Response, api.get(url, params=params, stream=True, timeout=_timeout(api, timeout))
    )
    try:
        raise_for_status(response)
    except docker.errors.APIError:
        response.close()
        raise
    return response
