"""Random documents, texts and labels: only clean validation errors, never a crash."""

from __future__ import annotations

import io
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from controller.adapters.policy_file import PolicyFileError, load_policy_text
from controller.policy import (
    LABEL_KEYS,
    Policy,
    PolicyValidationError,
    ResolvedService,
    policy_from_data,
    resolve_service,
    summarize_policy_change,
)
from controller.policy.document import PolicyDocument
from controller.policy.problems import field_names, model_at

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _all_field_names() -> list[str]:
    paths: list[tuple[str | int, ...]] = [
        (),
        ("services", 0),
        ("services", 0, "match"),
        ("nodes",),
        ("nodes", "groups", "g"),
        ("nodes", "quarantine"),
        ("controller",),
        ("controller", "budgets"),
    ]
    names: set[str] = set()
    for path in paths:
        model = model_at(PolicyDocument, path)
        assert model is not None, path
        names.update(field_names(model))
    return sorted(names)


KEYS = _all_field_names()
SAMPLE_VALUES = [
    "placement/v1",
    "high",
    "low",
    "2500",
    "30s",
    "1h30m",
    "window 22:00-06:00",
    "immediate",
    "3/10m",
    "rack",
    "site",
    "none",
    "node-2,node-3",
    "on",
    "off",
    "yes",
    "soft",
    "hard",
    "periodic",
    "on-join",
    "UTC",
    "Europe/Paris",
    "25%",
    "db*",
    "",
]
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**6), max_value=10**6),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(SAMPLE_VALUES),
)
keys = st.one_of(st.sampled_from(KEYS), st.text(max_size=8))
values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(keys, children, max_size=5),
    max_leaves=25,
)
documents = st.fixed_dictionaries(
    {"apiVersion": st.sampled_from(["placement/v1", "placement/v1", "v1"])},
    optional={
        "defaults": st.dictionaries(keys, values, max_size=6),
        "services": st.lists(st.dictionaries(keys, values, max_size=6), max_size=4),
        "nodes": st.dictionaries(keys, values, max_size=4),
        "controller": st.dictionaries(keys, values, max_size=5),
        "other": values,
    },
)
# Mostly-valid documents, so the fuzz also reaches policy building and change summaries.
GOOD_VALUES: dict[str, list[Any]] = {
    "managed": [True, False, "yes", "off"],
    "priority": ["high", "low", 0, 2999, "1500"],
    "preferred-nodes": [["node-1", "node-2"], "node-3", [], "ssd"],
    "possible-nodes": [["node-1"], "", "a,b"],
    "failback": ["never", "immediate", "window 22:00-06:00", "Window 1:00-2:00"],
    "failback-delay": ["30s", 0, 12.5, "1h30m"],
    "anti-affinity": [["frontend"], "a,b"],
    "anti-affinity-mode": ["soft", "HARD"],
    "spread": ["rack", "site", "none"],
    "preemptible": [True, "no"],
    "max-unavailable": [0, 1, "3"],
    "failover-threshold": ["3/10m", "none", "1/1s"],
    "rebalance": [True, "on"],
}
settings_maps = st.dictionaries(
    st.sampled_from(sorted(GOOD_VALUES)),
    st.one_of(
        st.sampled_from(sorted(GOOD_VALUES)).flatmap(lambda k: st.sampled_from(GOOD_VALUES[k])),
        scalars,
    ),
    max_size=5,
)
matches = st.fixed_dictionaries(
    {},
    optional={
        "name": st.sampled_from(["db*", "web", "*"]),
        "stack": st.sampled_from(["prod", "b*"]),
        "labels": st.dictionaries(st.sampled_from(["tier", "team"]), st.sampled_from(["db", "*"])),
    },
)
near_valid = st.fixed_dictionaries(
    {"apiVersion": st.just("placement/v1")},
    optional={
        "defaults": settings_maps,
        "services": st.lists(
            st.tuples(matches, settings_maps).map(lambda pair: {"match": pair[0], **pair[1]}),
            max_size=4,
        ),
        "nodes": st.fixed_dictionaries(
            {},
            optional={
                "groups": st.dictionaries(
                    st.sampled_from(["ssd", "gpu"]),
                    st.sampled_from([{"hostnames": ["n1"]}, {"labels": {"disk": "ssd"}}, {}]),
                ),
                "quarantine": st.fixed_dictionaries(
                    {}, optional={"failures": st.integers(0, 5), "max-fraction": st.floats(0, 1)}
                ),
            },
        ),
        "controller": st.fixed_dictionaries(
            {},
            optional={
                "aggressiveness": st.integers(0, 6),
                "resync-interval": st.sampled_from(["10s", 5, 0]),
                "rebalance-mode": st.sampled_from(["off", "on-join", "periodic", "never"]),
                "budgets": st.fixed_dictionaries(
                    {}, optional={"actions-per-cycle": st.integers(-1, 9)}
                ),
            },
        ),
    },
)
YAML_CHARS = list(":-[]{}&*!|>'\"#%@`,?<=~ \n\t") + list("abkpvy019.")
yaml_like_text = st.text(alphabet=st.sampled_from(YAML_CHARS), max_size=120)


def _dump(data: Any) -> str:
    out = io.StringIO()
    yaml = YAML(typ="safe", pure=True)
    yaml.sort_base_mapping_type_on_output = False
    yaml.dump(data, out)
    return out.getvalue()


def _clean(errors: list[str]) -> None:
    assert errors
    for error in errors:
        assert isinstance(error, str) and error and "\n" not in error


@FUZZ
@given(st.one_of(st.text(max_size=300), yaml_like_text))
def test_random_text_gives_a_policy_or_clean_errors(text: str) -> None:
    try:
        load_policy_text(text, source="fuzz.yaml")
    except PolicyFileError as exc:
        _clean(exc.errors)
        assert all(error.startswith("fuzz.yaml") for error in exc.errors)


@FUZZ
@given(st.binary(max_size=200))
def test_random_bytes_give_a_policy_or_clean_errors(data: bytes) -> None:
    try:
        load_policy_text(data, source="fuzz.yaml")
    except PolicyFileError as exc:
        _clean(exc.errors)


@FUZZ
@given(st.one_of(documents, near_valid))
def test_random_structures_through_the_loader(document: dict[str, Any]) -> None:
    try:
        direct: Policy | None = policy_from_data(document)
    except PolicyValidationError as exc:
        assert exc.problems
        direct = None
    try:
        via_yaml: Policy | None = load_policy_text(_dump(document), source="fuzz.yaml")
    except PolicyFileError as exc:
        _clean(exc.errors)
        via_yaml = None
    # The YAML text and the data it came from are judged the same way.
    assert (direct is None) == (via_yaml is None)
    if direct is not None:
        assert via_yaml == direct
        assert summarize_policy_change(direct, direct) == "no change"
        assert isinstance(summarize_policy_change(Policy.default(), direct), str)


@FUZZ
@given(
    labels=st.dictionaries(
        st.one_of(st.sampled_from(LABEL_KEYS), st.text(max_size=15)),
        st.one_of(st.sampled_from(SAMPLE_VALUES), st.text(max_size=15)),
        max_size=6,
    ),
    earlier=st.dictionaries(
        st.sampled_from(LABEL_KEYS), st.sampled_from(SAMPLE_VALUES), max_size=4
    ),
)
def test_random_labels_never_raise(labels: dict[str, str], earlier: dict[str, str]) -> None:
    policy = Policy.default()
    previous: ResolvedService = resolve_service(
        policy, service_name="s", service_id="i", labels=earlier
    )
    resolved = resolve_service(
        policy, service_name="s", service_id="i", labels=labels, previous=previous
    )
    if resolved.errors:
        assert all(error.startswith("service s: label placement.") for error in resolved.errors)
        if previous.good_labels is not None:
            assert resolved.stale and resolved.settings == previous.settings
        else:
            assert not resolved.stale and resolved.settings.managed is False
    else:
        assert not resolved.stale
        assert resolved.good_labels == {
            k: v for k, v in labels.items() if k.startswith("placement.")
        }
