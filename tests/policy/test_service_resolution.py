"""Precedence (built-in < file defaults < matching rules in order < labels) and last good."""

from __future__ import annotations

from collections.abc import Mapping

from controller.adapters.policy_file import load_policy_text
from controller.policy import (
    STACK_LABEL,
    Policy,
    ResolvedService,
    ServiceSettings,
    resolve_service,
    resolve_services,
)

FILE = """\
apiVersion: placement/v1
defaults:
  managed: true
  priority: low
  failback-delay: 45s
services:
  - match: {name: "db*"}
    priority: medium
    preferred-nodes: [node-1]
  - match: {name: db-main}
    priority: high
  - match: {stack: billing}
    anti-affinity: [money]
  - match: {labels: {tier: "d?"}}
    max-unavailable: 0
  - match: {name: "web*"}
    priority: none
"""


def resolve(
    labels: Mapping[str, str] | None = None,
    *,
    name: str = "db-main",
    policy: Policy | None = None,
    previous: ResolvedService | None = None,
    service_id: str = "id-1",
) -> ResolvedService:
    return resolve_service(
        policy or load_policy_text(FILE),
        service_name=name,
        service_id=service_id,
        labels=labels or {},
        previous=previous,
    )


def test_default_policy_gives_builtin_settings_everywhere() -> None:
    only_version = load_policy_text("apiVersion: placement/v1\n")
    assert only_version == Policy.default()
    resolved = resolve(policy=only_version, name="anything")
    assert resolved.settings == ServiceSettings()
    assert set(resolved.sources.values()) == {"default"}
    assert resolved.errors == () and not resolved.stale


def test_file_defaults_override_builtin() -> None:
    resolved = resolve(name="other")
    assert resolved.settings.failback_delay_seconds == 45.0
    assert resolved.sources["failback_delay_seconds"] == "file:defaults"
    assert resolved.settings.priority == 1000
    assert resolved.sources["max_unavailable"] == "default"


def test_every_matching_rule_applies_and_later_rules_win() -> None:
    resolved = resolve(name="db-main")
    assert resolved.settings.priority == 3000  # rule 1 beats rule 0
    assert resolved.sources["priority"] == "file:services[1] (match name=db-main)"
    assert resolved.settings.preferred_nodes == ("node-1",)  # rule 0 still applies
    assert resolved.sources["preferred_nodes"] == "file:services[0] (match name=db*)"
    other_db = resolve(name="db-replica")
    assert other_db.settings.priority == 2000
    assert other_db.sources["priority"] == "file:services[0] (match name=db*)"


def test_rule_order_decides_not_specificity() -> None:
    text = FILE.replace('  - match: {name: "web*"}\n    priority: none\n', "") + (
        '  - match: {name: "db*"}\n    priority: none\n'
    )
    resolved = resolve(policy=load_policy_text(text))
    assert resolved.settings.priority == 0
    assert resolved.sources["priority"] == "file:services[4] (match name=db*)"


def test_match_by_stack_and_by_label_glob() -> None:
    labels = {STACK_LABEL: "billing", "tier": "db"}
    resolved = resolve(labels, name="ledger")
    assert resolved.settings.anti_affinity == ("money",)
    assert resolved.settings.max_unavailable == 0
    assert resolved.sources["max_unavailable"] == "file:services[3] (match labels.tier=d?)"
    unmatched = resolve({STACK_LABEL: "billing-2", "tier": "dbx"}, name="ledger")
    assert unmatched.settings.anti_affinity == ()
    assert unmatched.settings.max_unavailable == 1


def test_match_needs_every_criterion() -> None:
    text = (
        "apiVersion: placement/v1\n"
        'services:\n  - match: {name: "a*", stack: s}\n    priority: high\n'
    )
    policy = load_policy_text(text)
    assert resolve({STACK_LABEL: "s"}, name="ab", policy=policy).settings.priority == 3000
    assert resolve({}, name="ab", policy=policy).settings.priority == 2000
    assert resolve({STACK_LABEL: "s"}, name="b", policy=policy).settings.priority == 2000


def test_labels_override_the_file() -> None:
    resolved = resolve({"placement.priority": "250", "placement.preferred-nodes": ""})
    assert resolved.settings.priority == 250
    assert resolved.sources["priority"] == "label placement.priority"
    assert resolved.settings.preferred_nodes == ()  # an empty label clears the file's list
    assert resolved.sources["preferred_nodes"] == "label placement.preferred-nodes"
    assert resolved.settings.failback_delay_seconds == 45.0


def test_other_labels_are_ignored() -> None:
    labels = {"com.example.owner": "team", "placementx.priority": "bad", "swarm-placement.x": "1"}
    resolved = resolve(labels)
    assert resolved.errors == ()
    assert resolved.good_labels == {}


def test_unknown_placement_label_is_named() -> None:
    resolved = resolve({"placement.prio": "high"}, name="web")
    assert resolved.errors == (
        'service web: label placement.prio="high": unknown label; did you mean placement.priority?',
    )
    odd = resolve({"placement.zzz": "1"}, name="web")
    assert odd.errors[0].startswith(
        'service web: label placement.zzz="1": unknown label; expected one of: placement.managed, '
    )


def test_every_label_problem_is_reported() -> None:
    labels = {"placement.priority": "urgent", "placement.spread": "row", "placement.nope": "x"}
    resolved = resolve(labels, name="web")
    assert [error.split(":")[1].strip() for error in resolved.errors] == [
        'label placement.nope="x"',
        'label placement.priority="urgent"',
        'label placement.spread="row"',
    ]


def test_bad_labels_without_earlier_good_state_mean_unmanaged() -> None:
    resolved = resolve({"placement.managed": "true", "placement.priority": "urgent"})
    assert resolved.settings.managed is False
    assert resolved.sources["managed"].startswith("label errors")
    assert not resolved.stale
    assert resolved.good_labels is None
    assert resolved.error_summary is not None
    assert "treated as unmanaged until fixed" in resolved.error_summary
    # The file's settings still show, so `policy show` explains the rest.
    assert resolved.settings.priority == 3000


def test_bad_labels_keep_the_last_good_labels() -> None:
    good = resolve({"placement.priority": "2500", "placement.spread": "rack"})
    assert good.good_labels == {"placement.priority": "2500", "placement.spread": "rack"}
    bad = resolve({"placement.priority": "urgent"}, previous=good)
    assert bad.stale
    assert bad.settings == good.settings
    assert bad.sources["priority"] == "label placement.priority (last good value)"
    assert bad.errors[0].startswith('service db-main: label placement.priority="urgent"')
    assert bad.error_summary is not None and "keeping the last good settings" in bad.error_summary
    still_bad = resolve({"placement.priority": "worse"}, previous=bad)
    assert still_bad.stale and still_bad.settings == good.settings
    fixed = resolve({"placement.priority": "low"}, previous=still_bad)
    assert not fixed.stale and fixed.errors == ()
    assert fixed.settings.priority == 1000 and fixed.settings.spread is None


def test_last_good_labels_apply_over_a_reloaded_file() -> None:
    good = resolve({"placement.priority": "2500"})
    reloaded = load_policy_text(FILE.replace("failback-delay: 45s", "failback-delay: 2m"))
    bad = resolve({"placement.priority": "urgent"}, policy=reloaded, previous=good)
    assert bad.stale
    assert bad.settings.failback_delay_seconds == 120.0
    assert bad.settings.priority == 2500


def test_last_good_state_survives_a_file_that_invalidates_old_labels() -> None:
    good = resolve({"placement.spread": "rack"})
    no_racks = load_policy_text("apiVersion: placement/v1\nnodes: {fault-domains: {site: dc}}\n")
    bad = resolve({"placement.spread": "nowhere"}, policy=no_racks, previous=good)
    assert bad.stale and bad.settings == good.settings and bad.sources == good.sources


def test_previous_state_of_another_service_is_not_used() -> None:
    good = resolve({"placement.priority": "2500"}, service_id="old-id")
    bad = resolve({"placement.priority": "urgent"}, previous=good, service_id="new-id")
    assert not bad.stale and bad.settings.managed is False


def test_previous_good_state_without_labels_is_kept() -> None:
    good = resolve({})
    bad = resolve({"placement.priority": "urgent"}, previous=good)
    assert bad.stale and bad.settings == good.settings


def test_resolve_services_carries_previous_state_by_id() -> None:
    policy = load_policy_text(FILE)
    first = resolve_services(policy, [("a", "db-main", {"placement.priority": "42"})])
    second = resolve_services(policy, [("a", "db-main", {"placement.priority": "x"})], first)
    assert second["a"].stale and second["a"].settings.priority == 42


def test_setting_rows_show_value_and_source() -> None:
    rows = {name: (value, source) for name, value, source in resolve().setting_rows()}
    assert rows["priority"] == ("high (3000)", "file:services[1] (match name=db-main)")
    assert rows["failback-delay"] == ("45s", "file:defaults")
    assert rows["failback"] == ("never", "default")
    assert rows["preferred-nodes"] == ("node-1", "file:services[0] (match name=db*)")
