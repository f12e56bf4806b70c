"""One-line summaries of what a reload changed."""

from __future__ import annotations

from dataclasses import fields

from controller.adapters.policy_file import load_policy_text
from controller.policy import Policy, summarize_policy_change
from controller.policy.changes import file_name
from controller.policy.document import ControllerSpec, QuarantineSpec
from controller.policy.problems import field_names
from controller.policy.settings import ControllerSettings, QuarantineSettings

BASE = """\
apiVersion: placement/v1
defaults: {priority: medium, failback-delay: 30s}
services:
  - match: {name: "db*"}
    preferred-nodes: [node-1]
nodes:
  groups:
    ssd: {hostnames: [n1]}
controller: {resync-interval: 10s}
"""


def test_no_change() -> None:
    assert summarize_policy_change(Policy.default(), Policy.default()) == "no change"
    assert summarize_policy_change(load_policy_text(BASE), load_policy_text(BASE)) == "no change"


def test_each_kind_of_change_is_named() -> None:
    new = """\
apiVersion: placement/v1
defaults: {priority: high, spread: rack}
services:
  - match: {name: "db-*"}
    preferred-nodes: [node-1, node-2]
  - match: {stack: web}
    failback: window 22:00-06:00
nodes:
  fault-domains: {rack: rack}
  groups:
    gpu: {labels: {gpu: "yes"}}
  quarantine: {max-fraction: 50%}
controller: {resync-interval: 1m, rebalance-mode: off, budgets: {actions-per-node: 4}}
"""
    summary = summarize_policy_change(load_policy_text(BASE), load_policy_text(new))
    assert summary == (
        "defaults.priority medium (2000) -> high (3000); "
        "defaults.failback-delay 30s -> unset; "
        "defaults.spread unset -> rack; "
        "services[0].match name=db* -> name=db-*; "
        "services[0].preferred-nodes node-1 -> node-1,node-2; "
        "services[1] added (match stack=web); "
        "nodes.fault-domains site=site,rack=rack,chassis=chassis -> rack=rack; "
        "nodes.groups.ssd removed; and 5 more"
    )


def test_controller_and_quarantine_changes() -> None:
    old = load_policy_text("apiVersion: placement/v1\n")
    new = load_policy_text(
        "apiVersion: placement/v1\nnodes: {quarantine: {period: 30m}}\n"
        "controller: {timezone: Europe/Paris, aggressiveness: 5}\n"
    )
    assert summarize_policy_change(old, new) == (
        "nodes.quarantine.period 1h -> 30m; controller.aggressiveness 3 -> 5; "
        "controller.timezone UTC -> Europe/Paris"
    )
    removed = summarize_policy_change(load_policy_text(BASE), old)
    assert "services[0] removed (match name=db*)" in removed


def test_file_names_match_the_file_format() -> None:
    controller_fields = [f.name for f in fields(ControllerSettings)]
    assert [file_name(name) for name in controller_fields] == field_names(ControllerSpec)
    quarantine_fields = [f.name for f in fields(QuarantineSettings)]
    assert [file_name(name) for name in quarantine_fields] == field_names(QuarantineSpec)
