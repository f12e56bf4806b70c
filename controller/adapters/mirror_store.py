"""The mirror (core/mirror) in the labels of a Docker config of its own.

Read once per cycle with the rest of the cluster (engine.observe_mirror). Written
like every other object: the spec just read, only the mirror's labels changed, at the
version the plan was made from (Swarm refuses a stale one with `update out of sequence`).
Missing, it is created by the first write that has a copy to keep.
"""

from __future__ import annotations

import copy

import docker

from controller.adapters.engine import (
    ConflictError,
    create_config,
    inspect_config,
    update_config_spec,
)
from controller.adapters.write_fence import UNFENCED, WriteFence
from controller.core.actions import SetMirror
from controller.core.mirror import MIRROR_CONFIG, patched

CONFIG_DATA = b"The swarm-placement records mirror: its state is in this config's labels.\n"


def write_mirror(
    client: docker.DockerClient, action: SetMirror, fence: WriteFence = UNFENCED
) -> None:
    if not action.config_id:
        labels = _changed({}, action)
        fence.check()
        create_config(client, MIRROR_CONFIG, CONFIG_DATA, labels, timeout=fence.request_timeout)
        return
    attrs = inspect_config(client, action.config_id)
    current = int(attrs["Version"]["Index"])
    if current != action.version:
        raise ConflictError(
            f"config {MIRROR_CONFIG} changed since it was observed "
            f"(version {action.version} -> {current})"
        )
    spec = copy.deepcopy(dict(attrs["Spec"]))
    spec["Labels"] = _changed(dict(spec.get("Labels") or {}), action)
    fence.check()
    update_config_spec(
        client, action.config_id, action.version, spec, timeout=fence.request_timeout
    )


def _changed(labels: dict[str, str], action: SetMirror) -> dict[str, str]:
    return patched(labels, action.drop, action.save)
