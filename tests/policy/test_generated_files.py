"""Files kept in step with the code: the JSON schema, the reference doc, the examples.

Set PLACEMENT_REGENERATE=1 to rewrite the schema and the doc's generated tables.
"""

from __future__ import annotations

import json
import os
from dataclasses import fields
from pathlib import Path

import pytest

from controller.adapters.policy_file import load_policy_file
from controller.policy import (
    SETTING_NAMES,
    Policy,
    ServiceSettings,
    render_policy_schema,
    resolve_service,
)
from controller.policy.reference import FILE_SECTIONS, update_reference
from controller.policy.service_spec import resolved_fields

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "policies" / "schema.json"
REFERENCE = ROOT / "docs" / "policy-reference.md"
EXAMPLES = sorted((ROOT / "policies").glob("*.yaml"))
REGENERATE = os.environ.get("PLACEMENT_REGENERATE") == "1"


def test_schema_file_is_fresh() -> None:
    if REGENERATE:
        SCHEMA.write_text(render_policy_schema())
    assert SCHEMA.read_text() == render_policy_schema(), (
        "policies/schema.json is stale: run `swarm-placement policy schema > policies/schema.json`"
    )


def test_reference_doc_tables_are_fresh() -> None:
    text = REFERENCE.read_text()
    if REGENERATE:
        text = update_reference(text)
        REFERENCE.write_text(text)
    assert update_reference(text) == text, (
        "docs/policy-reference.md is stale: run the tests once with PLACEMENT_REGENERATE=1"
    )


def test_reference_doc_names_every_setting_and_section() -> None:
    text = REFERENCE.read_text()
    for name in SETTING_NAMES:
        assert f"`{name}`" in text and f"`placement.{name}`" in text
    for path, _ in FILE_SECTIONS:
        assert f"#### `{path}`" in text


def test_every_resolved_field_is_decided_by_a_setting() -> None:
    decided = {field for name in SETTING_NAMES for field in resolved_fields(name)}
    assert decided == {field.name for field in fields(ServiceSettings)}


def test_schema_describes_the_file() -> None:
    schema = json.loads(render_policy_schema())
    assert schema["required"] == ["apiVersion"]
    assert schema["additionalProperties"] is False
    settings = schema["$defs"]["ServiceSettingsSpec"]["properties"]
    assert list(settings) == list(SETTING_NAMES)
    assert all("null" not in json.dumps(spec) for spec in settings.values())


def test_there_are_examples() -> None:
    names = {path.name for path in EXAMPLES}
    assert {
        "example.yaml",
        "database-failback.yaml",
        "web-tier.yaml",
        "batch-preemptible.yaml",
    } <= names


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda path: path.name)
def test_every_policy_file_validates(path: Path) -> None:
    policy = load_policy_file(path).policy
    assert policy != Policy.default()


def test_example_yaml_fits_the_sandbox_services() -> None:
    policy = load_policy_file(ROOT / "policies" / "example.yaml").policy
    web = resolve_service(
        policy,
        service_name="web",
        service_id="w",
        labels={"placement.anti-affinity": "frontend", "placement.spread": "rack"},
    )
    assert web.errors == () and web.settings.managed and web.settings.spread == "rack"
    db = resolve_service(
        policy,
        service_name="db",
        service_id="d",
        labels={"placement.preferred-nodes": "node-2,node-3", "placement.failback": "immediate"},
    )
    assert db.errors == () and db.settings.preferred_nodes == ("node-2", "node-3")
    batch = resolve_service(
        policy, service_name="batch", service_id="b", labels={"placement.priority": "low"}
    )
    assert batch.settings.priority == 1000 and batch.settings.preemptible
    legacy = resolve_service(policy, service_name="legacy", service_id="l", labels={})
    assert legacy.settings.managed is False
