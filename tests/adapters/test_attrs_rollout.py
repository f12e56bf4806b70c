"""Whose rollout it is: Spec against PreviousSpec, read as the guards need it."""

from __future__ import annotations

import copy
from typing import Any

from controller.adapters.attrs import service_from_attrs
from controller.core.labels import EXCLUDED_LABEL, exclusion_constraint, steering_constraint

OPERATOR = ["node.role==worker"]


def _spec(constraints: list[str], labels: dict[str, str] | None = None, image: str = "a") -> Any:
    return {
        "Name": "web",
        "Labels": labels or {},
        "Mode": {"Replicated": {"Replicas": 2}},
        "TaskTemplate": {
            "ContainerSpec": {"Image": image},
            "Placement": {"Constraints": constraints} if constraints else {},
            "ForceUpdate": 0,
        },
    }


def _attrs(spec: Any, previous: Any, state: str | None = "paused") -> Any:
    attrs = {"ID": "s", "Version": {"Index": 9}, "Spec": spec, "PreviousSpec": previous}
    if state is not None:
        attrs["UpdateStatus"] = {"State": state}
    return attrs


def test_a_rollout_of_only_the_controller_s_constraints_is_its_own() -> None:
    ours = [*OPERATOR, steering_constraint("web"), exclusion_constraint("n2")]
    spec = _spec(ours, {EXCLUDED_LABEL: "n2"})
    service = service_from_attrs(_attrs(spec, _spec(OPERATOR)))
    assert service.rollout_is_own and service.own_rollout_paused and not service.in_rollout
    # From one steering of its own to another, exclusions each read from their own spec.
    before = _spec([*OPERATOR, exclusion_constraint("n3")], {EXCLUDED_LABEL: "n3"})
    assert service_from_attrs(_attrs(spec, before)).rollout_is_own
    # No PreviousSpec placement at all is the same as an empty one.
    bare = copy.deepcopy(_spec([]))
    del bare["TaskTemplate"]["Placement"]
    assert service_from_attrs(_attrs(_spec([steering_constraint("web")]), bare)).rollout_is_own


def test_an_operator_s_change_makes_the_rollout_theirs() -> None:
    ours = [*OPERATOR, steering_constraint("web")]
    forced = _spec(ours)
    forced["TaskTemplate"]["ForceUpdate"] = 1
    cases = {
        "image": (_spec(ours, image="b"), _spec(ours)),
        "operator constraint": (_spec(["node.role==manager", ours[1]]), _spec(ours)),
        # A node.id!= the labels do not record is the operator's, not an exclusion of ours.
        "unrecorded exclusion": (_spec([*ours, exclusion_constraint("n2")]), _spec(ours)),
        "forced": (forced, _spec(ours)),
    }
    for why, (spec, previous) in cases.items():
        service = service_from_attrs(_attrs(spec, previous))
        assert not service.rollout_is_own, why
        assert service.in_rollout, why


def test_no_rollout_or_no_previous_spec_is_nobody_s() -> None:
    spec = _spec([steering_constraint("web")])
    assert not service_from_attrs(_attrs(spec, _spec([]), state=None)).rollout_is_own
    no_previous = _attrs(spec, None)
    del no_previous["PreviousSpec"]
    assert not service_from_attrs(no_previous).rollout_is_own
    unreadable = _spec([])
    unreadable["TaskTemplate"]["Placement"] = {"Constraints": "node.role==worker"}
    assert not service_from_attrs(_attrs(spec, unreadable)).rollout_is_own


def test_the_update_batch_is_the_parallelism_only_when_a_failure_stops_the_update() -> None:
    def batch(config: Any) -> int:
        spec = _spec([])
        if config is not None:
            spec["UpdateConfig"] = config
        return service_from_attrs({"ID": "s", "Version": {"Index": 1}, "Spec": spec}).update_batch

    assert batch(None) == 1  # SwarmKit's defaults: parallelism 1, pause, ratio 0
    assert batch({"Parallelism": 2, "FailureAction": "pause"}) == 2
    assert batch({"Parallelism": 1, "FailureAction": "rollback", "MaxFailureRatio": 0}) == 1
    assert batch({"Parallelism": 0, "FailureAction": "pause"}) == 0  # all at once
    assert batch({"Parallelism": 1, "FailureAction": "continue"}) == 0
    assert batch({"Parallelism": 1, "FailureAction": "pause", "MaxFailureRatio": 0.5}) == 0
