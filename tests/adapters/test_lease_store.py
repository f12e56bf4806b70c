"""The lease store against a fake of Swarm's config API, with the answers measured on
dockerd 20.10 and 26.1: a stale version is `update out of sequence` (500), a changed
Data is 400 "only updates to Labels are allowed", a taken name is 409."""

from __future__ import annotations

import base64
import copy
from typing import Any

import anyio
import docker.errors
import pytest
import requests

from controller.adapters.engine import ConflictError
from controller.adapters.lease_store import CONFIG_DATA, ConfigLeaseStore, LeaseRead
from controller.core.lease import Lease, labels_of
from controller.runtime.lease_keeper import LeaseConfig, LeaseKeeper
from tests.adapters.engine_session import EngineSession

NAME = "placement_controller-lease"


def _error(status: int, text: str) -> docker.errors.APIError:
    response = requests.Response()
    response.status_code = status
    return docker.errors.APIError(text, response=response, explanation=text)


class FakeConfigApi(EngineSession):
    """The part of docker-py's APIClient the store uses, over configs kept like Swarm's."""

    def __init__(self) -> None:
        self.configs: dict[str, dict[str, Any]] = {}  # by ID
        self.index = 10
        self.updates = 0

    def _find(self, name_or_id: str) -> dict[str, Any]:
        for config in self.configs.values():
            if name_or_id in (config["ID"], config["Spec"]["Name"]):
                return config
        raise docker.errors.NotFound(f"config {name_or_id} not found")

    def inspect_config(self, name_or_id: str) -> dict[str, Any]:
        return copy.deepcopy(self._find(name_or_id))

    def create_config(
        self, name: str, data: bytes, labels: dict[str, str] | None = None
    ) -> dict[str, str]:
        if any(c["Spec"]["Name"] == name for c in self.configs.values()):
            raise _error(
                409, f"rpc error: code = AlreadyExists desc = config {name} already exists"
            )
        self.index += 1
        config_id = f"cfg{self.index}"
        spec = {"Name": name, "Labels": dict(labels or {}), "Data": base64.b64encode(data).decode()}
        self.configs[config_id] = {"ID": config_id, "Version": {"Index": self.index}, "Spec": spec}
        return {"ID": config_id}

    def raw_post(
        self, url: str, data: dict[str, Any], params: dict[str, Any], timeout: Any
    ) -> dict[str, str] | None:
        if url == "/configs/create":
            return self.create_config(
                data["Name"], base64.b64decode(data["Data"]), labels=data["Labels"]
            )
        assert params
        config = self._find(url.split("/")[2])
        if params["version"] != config["Version"]["Index"]:
            raise _error(500, "rpc error: code = Unknown desc = update out of sequence")
        if data["Data"] != config["Spec"]["Data"] or data["Name"] != config["Spec"]["Name"]:
            raise _error(400, "only updates to Labels are allowed")
        self.index += 1
        config["Version"]["Index"] = self.index
        config["Spec"] = copy.deepcopy(data)
        self.updates += 1


class FakeClient:
    def __init__(self, api: FakeConfigApi) -> None:
        self.api = api


def _lease(holder: str, term: int = 1) -> Lease:
    stamp = "2026-01-01T00:00:00.000+00:00"
    return Lease(holder=holder, renewed_at=stamp, lifetime=15, term=term)


def _store(api: FakeConfigApi) -> ConfigLeaseStore:
    return ConfigLeaseStore(FakeClient(api), NAME)


def test_no_config_reads_as_no_lease_and_the_first_write_creates_it() -> None:
    api = FakeConfigApi()
    store = _store(api)
    empty = store.read()
    assert empty.lease is None and empty.problem is None and empty.version is None
    assert not api.configs, "a read never writes"
    store.write(empty, _lease("a"))
    (config,) = api.configs.values()
    assert config["Spec"]["Name"] == NAME
    assert base64.b64decode(config["Spec"]["Data"]) == CONFIG_DATA
    read = store.read()
    assert read.lease == _lease("a") and read.version == config["Version"]["Index"]


def test_a_renewal_changes_only_the_lease_labels_at_the_version_read() -> None:
    api = FakeConfigApi()
    store = _store(api)
    store.write(store.read(), _lease("a"))
    (config,) = api.configs.values()
    config["Spec"]["Labels"]["team"] = "infra"  # an operator's own label stays
    read = store.read()
    store.write(read, _lease("a", term=2))
    after = store.read()
    assert read.version is not None and after.version == read.version + 1
    assert after.lease == _lease("a", term=2)
    assert after.spec["Labels"] == {**labels_of(_lease("a", term=2)), "team": "infra"}
    assert after.spec["Data"] == read.spec["Data"]


def test_a_stale_version_is_a_conflict_and_changes_nothing() -> None:
    api = FakeConfigApi()
    store = _store(api)
    store.write(store.read(), _lease("a"))
    stale = store.read()
    store.write(stale, _lease("a", term=1))  # a renewal lands: the version moves on
    with pytest.raises(ConflictError):
        store.write(stale, _lease("b", term=2))
    assert store.read().lease == _lease("a")


def test_two_replicas_racing_to_create_it_one_wins_the_other_reads_it() -> None:
    api = FakeConfigApi()
    a, b = _store(api), _store(api)
    seen_by_a, seen_by_b = a.read(), b.read()
    a.write(seen_by_a, _lease("a"))
    with pytest.raises(ConflictError):
        b.write(seen_by_b, _lease("b"))
    assert len(api.configs) == 1
    assert b.read().lease == _lease("a")


def test_unreadable_labels_are_a_problem_named_after_the_config() -> None:
    api = FakeConfigApi()
    api.create_config(NAME, b"x", labels={"swarm-placement.lease.holder": "a"})
    read = _store(api).read()
    assert read.lease is None and read.problem is not None
    assert read.problem.startswith(f"config {NAME}: lease labels incomplete")
    assert read.version is not None  # a takeover overwrites them at that version


class _Clock:
    now = 100.0

    def __call__(self) -> float:
        return self.now


def _keeper(api: FakeConfigApi, clock: _Clock, name: str) -> LeaseKeeper:
    return LeaseKeeper(
        LeaseConfig(name=NAME, holder=name, lifetime=15),
        lambda: _store(api),
        say=lambda _: None,
        clock=clock,
        wall_clock=clock,
    )


def _tick(keeper: LeaseKeeper) -> float:
    return anyio.run(keeper._tick)


def test_a_keeper_that_loses_the_race_to_create_the_config_reads_the_winner() -> None:
    api, clock = FakeConfigApi(), _Clock()

    class Racing(ConfigLeaseStore):
        """Another replica creates the config between this one's read and its write."""

        def write(self, read: LeaseRead, lease: Lease) -> None:
            other = _store(api)
            other.write(other.read(), _lease("a"))
            super().write(read, lease)

    b = LeaseKeeper(
        LeaseConfig(name=NAME, holder="b", lifetime=15),
        lambda: Racing(FakeClient(api), NAME),
        say=lambda _: None,
        clock=clock,
        wall_clock=clock,
    )
    _tick(b)
    assert not api.configs, "a lease nobody has taken yet creates nothing"
    clock.now += 15
    assert _tick(b) == 0.0, "a lost race is read again at once"
    _tick(b)
    assert not b.holds() and b.standby_reason() == f"the lease {NAME} is held by a"
    assert len(api.configs) == 1 and _store(api).read().lease == _lease("a")


def test_a_holder_creates_its_config_again_when_it_was_removed() -> None:
    api, clock = FakeConfigApi(), _Clock()
    a = _keeper(api, clock, "a")
    _tick(a)
    clock.now += 15
    _tick(a)
    assert a.holds()
    api.configs.clear()  # `docker config rm` while the lease runs
    clock.now += 5
    _tick(a)
    (config,) = api.configs.values()
    assert a.holds() and config["Spec"]["Labels"]["swarm-placement.lease.holder"] == "a"
