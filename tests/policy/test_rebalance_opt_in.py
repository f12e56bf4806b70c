"""`placement.rebalance=on` alone opts a service in; the file's defaults do not."""

from __future__ import annotations

from controller.adapters.policy_file import load_policy_text
from controller.policy import Policy, resolve_service


def _resolve(labels: dict[str, str], policy: Policy | None = None):  # type: ignore[no-untyped-def]
    return resolve_service(
        policy or Policy.default(), service_name="web", service_id="id-1", labels=labels
    )


def test_the_rebalance_label_alone_makes_the_service_managed_and_says_why() -> None:
    resolved = _resolve({"placement.rebalance": "on"})
    assert resolved.settings.managed and resolved.settings.rebalance
    assert resolved.sources["managed"] == "implied by rebalance (label placement.rebalance)"


def test_an_explicit_managed_wins_over_the_implication() -> None:
    resolved = _resolve({"placement.rebalance": "on", "placement.managed": "false"})
    assert not resolved.settings.managed
    assert resolved.sources["managed"] == "label placement.managed"


def test_rebalance_off_implies_nothing() -> None:
    assert not _resolve({"placement.rebalance": "off"}).settings.managed


def test_a_file_rule_implies_it_but_the_file_defaults_do_not() -> None:
    text = (
        "apiVersion: placement/v1\n"
        "defaults: {rebalance: true}\n"
        "services:\n"
        "  - match: {name: web}\n"
        "    rebalance: true\n"
    )
    policy = load_policy_text(text, source="p.yaml")
    web = _resolve({}, policy)
    assert web.settings.managed
    assert web.sources["managed"].startswith("implied by rebalance (file:")
    other = resolve_service(policy, service_name="other", service_id="id-2", labels={})
    assert other.settings.rebalance and not other.settings.managed
