"""The mirror's write: only its own labels change, at the observed version."""

from __future__ import annotations

from typing import Any

import pytest

from controller.adapters import mirror_store
from controller.adapters.engine import ConflictError
from controller.adapters.write_fence import WriteFence
from controller.core.actions import SetMirror
from controller.core.mirror import DOWNS_PREFIX, ENTRY_PREFIX, MOVES_PREFIX, Mirror

LABELS = {
    "com.example.owner": "ops",  # not the mirror's: kept as it is
    ENTRY_PREFIX + "svc-a": "a-old",
    ENTRY_PREFIX + "svc-b": "b",
    DOWNS_PREFIX + "node-1": "100.000",
    DOWNS_PREFIX + "node-2": "200.000",
    MOVES_PREFIX + "svc-a": '{"at":100.0}',
}


def _written(monkeypatch: pytest.MonkeyPatch, action: SetMirror) -> dict[str, Any]:
    config = {"Version": {"Index": 7}, "Spec": {"Name": "records", "Labels": dict(LABELS)}}
    calls: dict[str, Any] = {}

    def update(
        client: object, config_id: str, version: int, spec: dict[str, Any], **kwargs: Any
    ) -> None:
        calls.update(config_id=config_id, version=version, spec=spec)

    monkeypatch.setattr(mirror_store, "inspect_config", lambda client, config_id: config)
    monkeypatch.setattr(mirror_store, "update_config_spec", update)
    mirror_store.write_mirror(object(), action)  # type: ignore[arg-type]
    assert config["Spec"]["Labels"] == LABELS, "the observed spec is not changed in place"
    return calls


def test_a_write_drops_and_saves_only_the_mirror_s_labels(monkeypatch: pytest.MonkeyPatch) -> None:
    action = SetMirror(
        config_id="cfg",
        version=7,
        save={
            ENTRY_PREFIX + "svc-a": "a-new",
            ENTRY_PREFIX + "svc-c": "c",
            DOWNS_PREFIX + "node-3": "300.000",
            MOVES_PREFIX + "svc-c": '{"at":300.0}',
        },
        drop=(ENTRY_PREFIX + "svc-b", DOWNS_PREFIX + "node-1", MOVES_PREFIX + "svc-a"),
    )
    calls = _written(monkeypatch, action)
    assert (calls["config_id"], calls["version"]) == ("cfg", 7)
    assert calls["spec"]["Labels"] == {
        "com.example.owner": "ops",
        ENTRY_PREFIX + "svc-a": "a-new",
        ENTRY_PREFIX + "svc-c": "c",
        DOWNS_PREFIX + "node-2": "200.000",
        DOWNS_PREFIX + "node-3": "300.000",
        MOVES_PREFIX + "svc-c": '{"at":300.0}',
    }
    # Read back, each kind of entry under its own prefix.
    mirror = Mirror.from_labels("cfg", 8, calls["spec"]["Labels"])
    assert set(mirror.entries) == {"svc-a", "svc-c"} and set(mirror.downs) == {"node-2", "node-3"}
    assert mirror.service_moves["svc-c"].at == 300.0


def test_a_stale_version_is_refused_before_anything_is_written(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(ConflictError, match="version 6 -> 7"):
        _written(monkeypatch, SetMirror(config_id="cfg", version=6, drop=(ENTRY_PREFIX + "svc-b",)))


class FencedError(Exception):
    pass


def _closed() -> None:
    raise FencedError


@pytest.mark.parametrize("config_id", ["cfg", ""], ids=["update", "create"])
def test_a_mirror_write_passes_the_fence_and_is_bounded(
    monkeypatch: pytest.MonkeyPatch, config_id: str
) -> None:
    config = {"Version": {"Index": 7}, "Spec": {"Name": "records", "Labels": {}}}
    sent: list[object] = []
    monkeypatch.setattr(mirror_store, "inspect_config", lambda client, config_id: config)
    for name in ("update_config_spec", "create_config"):
        monkeypatch.setattr(mirror_store, name, lambda *a, **kw: sent.append(kw["timeout"]))
    action = SetMirror(config_id=config_id, version=7, save={ENTRY_PREFIX + "svc-a": "a"})
    with pytest.raises(FencedError):
        mirror_store.write_mirror(object(), action, WriteFence(check=_closed, within=2.0))  # type: ignore[arg-type]
    assert sent == []
    mirror_store.write_mirror(object(), action, WriteFence(within=2.0))  # type: ignore[arg-type]
    ((connect, read),) = sent  # type: ignore[misc]
    assert 0 < connect + read < 2.0
