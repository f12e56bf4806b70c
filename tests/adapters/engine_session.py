"""The part of docker-py's client that adapters/engine_http uses, for fakes to build on.

A fake low-level client subclasses `EngineSession` and answers `raw_post(path, body,
params, timeout)` (and, for listings, `raw_get(path, params)`) with plain values, or
raises docker-py's errors as the engine's answers would make them.
"""

from __future__ import annotations

import json
from typing import Any

import requests


def json_response(value: Any, status: int = 200) -> requests.Response:
    response = requests.Response()
    response.status_code = status
    response._content = json.dumps(value).encode()
    response.headers["Content-Type"] = "application/json"
    return response


class EngineSession:
    base_url = "http+docker://localhost"
    api_version = "1.41"
    timeout = 60

    def _path(self, url: str) -> str:
        prefix = f"{self.base_url}/v{self.api_version}"
        assert url.startswith(prefix), url
        return url.removeprefix(prefix)

    def post(
        self,
        url: str,
        *,
        data: str,
        params: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        timeout: Any = None,
    ) -> requests.Response:
        assert (headers or {}).get("Content-Type") == "application/json"
        answer = self.raw_post(self._path(url), json.loads(data), params or {}, timeout)
        return json_response(answer)

    def get(
        self, url: str, *, params: dict[str, Any] | None = None, stream: bool, timeout: Any = None
    ) -> Any:
        return self.raw_get(self._path(url), params or {})

    def raw_post(self, path: str, body: Any, params: dict[str, Any], timeout: Any) -> Any:
        raise NotImplementedError

    def raw_get(self, path: str, params: dict[str, Any]) -> Any:
        raise NotImplementedError
