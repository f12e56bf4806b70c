"""Spec mutations change exactly one field and leave the rest byte-identical."""

from __future__ import annotations

import copy
import json

import pytest

from controller.adapters.writes import node_spec_with, service_spec_with
from controller.core.actions import (
    SetNodeAvailability,
    SetNodeLabels,
    SetReplicas,
    SetServiceConstraints,
)
from controller.core.model import Availability

SERVICE_SPEC = {
    "Name": "web",
    "Labels": {"placement.managed": "true"},
    "TaskTemplate": {
        "ContainerSpec": {"Image": "sha256:abc", "Args": ["sleep", "3600"]},
        "Resources": {"Limits": {}, "Reservations": {}},
        "RestartPolicy": {"Condition": "any", "Delay": 5000000000, "MaxAttempts": 0},
        "Placement": {"Constraints": ["node.role==worker"], "Platforms": []},
        "ForceUpdate": 3,
        "Runtime": "container",
    },
    "Mode": {"Replicated": {"Replicas": 4}},
    "UpdateConfig": {"Parallelism": 1, "Order": "start-first"},
    "EndpointSpec": {"Mode": "vip"},
}

NODE_SPEC = {"Labels": {"rack": "r1"}, "Role": "worker", "Availability": "active"}


def _diff_paths(a: object, b: object, path: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out: list[str] = []
        for key in sorted(set(a) | set(b)):
            out += _diff_paths(a.get(key), b.get(key), f"{path}.{key}")
        return out
    return [] if a == b else [path]


def test_constraints_change_only_placement_constraints() -> None:
    original = copy.deepcopy(SERVICE_SPEC)
    action = SetServiceConstraints("id", "web", 7, ("node.role==worker", "node.labels.x!=true"))
    new = service_spec_with(SERVICE_SPEC, action)
    assert original == SERVICE_SPEC, "the input spec must not be mutated"
    assert _diff_paths(SERVICE_SPEC, new) == [".TaskTemplate.Placement.Constraints"]
    assert new["TaskTemplate"]["Placement"]["Constraints"] == list(action.constraints)
    assert new["TaskTemplate"]["ForceUpdate"] == 3  # a changed ForceUpdate restarts everything


def test_constraints_added_where_the_spec_had_no_placement() -> None:
    spec = copy.deepcopy(SERVICE_SPEC)
    del spec["TaskTemplate"]["Placement"]
    new = service_spec_with(spec, SetServiceConstraints("id", "web", 1, ("node.role==worker",)))
    assert new["TaskTemplate"]["Placement"] == {"Constraints": ["node.role==worker"]}


def test_replicas_change_only_the_count() -> None:
    new = service_spec_with(SERVICE_SPEC, SetReplicas("id", "web", 7, 6))
    assert _diff_paths(SERVICE_SPEC, new) == [".Mode.Replicated.Replicas"]
    assert new["Mode"]["Replicated"]["Replicas"] == 6


def test_replicas_refused_for_a_global_service() -> None:
    spec = {**SERVICE_SPEC, "Mode": {"Global": {}}}
    with pytest.raises(ValueError, match="replicated"):
        service_spec_with(spec, SetReplicas("id", "web", 1, 2))


def test_service_labels_set_and_remove_touch_only_labels() -> None:
    action = SetReplicas(  # the count it has: only the labels change
        "id",
        "web",
        7,
        4,
        set_labels={"swarm-placement.x": "1"},
        remove_labels=("placement.managed", "absent"),
    )
    new = service_spec_with(SERVICE_SPEC, action)
    assert _diff_paths(SERVICE_SPEC, new) == [
        ".Labels.placement.managed",
        ".Labels.swarm-placement.x",
    ]
    assert new["Labels"] == {"swarm-placement.x": "1"}


def test_node_labels_keep_the_rest_of_the_full_spec() -> None:
    action = SetNodeLabels("n1", "node-1", 3, set_labels={"swarm-placement.deny.web": "true"})
    new = node_spec_with(NODE_SPEC, action)
    assert new == {
        "Labels": {"rack": "r1", "swarm-placement.deny.web": "true"},
        "Role": "worker",
        "Availability": "active",
    }
    removed = node_spec_with(
        new, SetNodeLabels("n1", "node-1", 4, remove_labels=("swarm-placement.deny.web",))
    )
    assert removed == NODE_SPEC


def test_node_availability() -> None:
    new = node_spec_with(NODE_SPEC, SetNodeAvailability("n1", "node-1", 3, Availability.DRAIN))
    assert _diff_paths(NODE_SPEC, new) == [".Availability"]
    assert new["Availability"] == "drain"


def test_mutations_are_json_serialisable() -> None:
    json.dumps(service_spec_with(SERVICE_SPEC, SetReplicas("id", "web", 1, 2)))
