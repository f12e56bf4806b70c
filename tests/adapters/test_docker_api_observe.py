"""ClusterObserver lists the finished tasks once per interval and reuses them between."""

from __future__ import annotations

from typing import Any

from controller.adapters.docker_api import ClusterObserver


class _Api:
    def __init__(self) -> None:
        self.listings: list[str] = []

    def nodes(self) -> list[Any]:
        return []

    def services(self) -> list[Any]:
        return []

    def tasks(self, filters: dict[str, str]) -> list[Any]:
        self.listings.append(filters["desired-state"])
        return []

    def inspect_config(self, name: str) -> Any:
        import docker.errors  # noqa: PLC0415

        raise docker.errors.NotFound("no records yet")


def test_the_history_is_listed_once_per_interval_the_running_tasks_every_cycle() -> None:
    api = _Api()
    client: Any = type("Client", (), {"api": api})()
    now = [0.0]
    observe = ClusterObserver(client, history_every=lambda: 10.0, clock=lambda: now[0])
    for t in (0.0, 1.0, 9.9, 10.0, 15.0, 20.5):
        now[0] = t
        observe()
    assert api.listings.count("running") == 6
    assert api.listings.count("shutdown") == 3  # at 0, 10 and 20.5
    assert observe.history_listings == 3
