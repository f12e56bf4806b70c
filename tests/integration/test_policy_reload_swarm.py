"""Policy hot reload on a real swarm: apply, reject with the line, keep the last good."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from controller.core.labels import steering_constraint

from .support import ControllerThread, clean_swarm, constraints_of, wait_until

pytestmark = pytest.mark.swarm
_names = itertools.count()

MANAGES_WEB = """\
apiVersion: placement/v1
controller: {resync-interval: 1s}
services:
  - match: {name: "web*"}
    managed: true
"""
BROKEN = """\
apiVersion: placement/v1
controller: {resync-interval: 1s}
services:
  - match: {name: "web*"}
    managed: sometimes
"""
MANAGES_WEB_AND_API = (
    MANAGES_WEB
    + """\
  - match: {name: "api*"}
    managed: true
"""
)


@pytest.fixture
def client(swarm) -> Iterator[docker.DockerClient]:  # type: ignore[no-untyped-def]
    c = docker.DockerClient(base_url=swarm.manager_host, version="auto", timeout=30)
    clean_swarm(c)
    yield c
    clean_swarm(c)
    c.close()


def _adopted(client: docker.DockerClient, name: str) -> bool:
    return steering_constraint(name) in constraints_of(client, name)


def test_reload_applies_rejects_a_broken_file_and_keeps_the_last_good(
    swarm,
    client,
    tmp_path: Path,  # type: ignore[no-untyped-def]
) -> None:
    n = next(_names)
    web, later, api = f"web{n}a", f"web{n}b", f"api{n}"
    path = tmp_path / "policy.yaml"
    path.write_text("apiVersion: placement/v1\ncontroller: {resync-interval: 1s}\n")
    swarm.create_service(web)
    swarm.create_service(api)
    with ControllerThread(swarm.manager_host, policy=path) as ctl:
        ctl.wait_cycles(2)
        assert not _adopted(client, web), "managed before any policy said so"

        path.write_text(MANAGES_WEB)  # 1. a valid change applies on the next cycle
        wait_until(lambda: _adopted(client, web), 30, "web adopted after the reload")
        assert "reloaded: " in ctl.out.getvalue()

        path.write_text(BROKEN)  # 2. rejected, with the line; the old policy stays
        wait_until(lambda: "rejected" in ctl.out.getvalue(), 30, "the broken file rejected")
        rejected = next(line for line in ctl.out.getvalue().splitlines() if "rejected" in line)
        assert "policy.yaml:5:14: services[0].managed" in rejected, rejected
        swarm.create_service(later)  # decided under the last good policy
        wait_until(lambda: _adopted(client, later), 30, "a new web* service still adopted")
        assert not _adopted(client, api)

        path.write_text(MANAGES_WEB_AND_API)  # 3. fixed: applies
        wait_until(lambda: _adopted(client, api), 30, "api adopted after the fix")
