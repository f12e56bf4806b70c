"""deploy/grafana-dashboard.json and deploy/prometheus-alerts.yaml name only metrics the
controller exports: a renamed metric would otherwise leave a blank panel or an alert
that can never fire."""

from __future__ import annotations

import json
import re
from pathlib import Path

from prometheus_client.metrics_core import Metric
from ruamel.yaml import YAML

from controller.runtime.lease_keeper import LeaseConfig, LeaseKeeper
from controller.runtime.metrics import Metrics
from controller.runtime.policy_source import PolicySource

ROOT = Path(__file__).resolve().parents[2]
SUFFIXES = {
    "counter": ("_total",),
    "histogram": ("_bucket", "_sum", "_count"),
    "info": ("_info",),
    "gauge": ("",),
}


def _exported() -> set[str]:
    """Every series name the controller can export, with a lease and agents configured
    (the metrics that exist only then), labelled families included."""
    lease = LeaseKeeper(LeaseConfig(name="l", holder="a"), lambda: None, say=print)  # type: ignore[arg-type,return-value]
    metrics = Metrics(PolicySource(None), lease, agents=lambda: 3)
    families: list[Metric] = list(metrics.registry.collect())
    return {f.name + suffix for f in families for suffix in SUFFIXES[f.type]}


def _named(text: str) -> set[str]:
    return set(re.findall(r"\bplacement_[a-z_]+", text))


def _alert_expressions() -> list[str]:
    rules = YAML(typ="safe").load((ROOT / "deploy/prometheus-alerts.yaml").read_text())
    return [r["expr"] for g in rules["groups"] for r in g["rules"]]


def _dashboard_expressions() -> list[str]:
    board = json.loads((ROOT / "deploy/grafana-dashboard.json").read_text())
    return [t["expr"] for p in board["panels"] for t in p["targets"]]


def test_every_metric_the_alerts_and_the_dashboard_name_is_exported() -> None:
    exported = _exported()
    for source, expressions in (
        ("alerts", _alert_expressions()),
        ("dashboard", _dashboard_expressions()),
    ):
        named = set().union(*(_named(e) for e in expressions))
        assert named, source
        assert named <= exported, (source, sorted(named - exported))


def test_the_alerts_cover_what_the_operations_guide_describes() -> None:
    guide = (ROOT / "docs/operations.md").read_text()
    prose = guide[guide.index("## Metrics") :].split("\n## ", 1)[0]
    described = {n.removesuffix("_total") for n in _named(prose)}
    alerted = {
        n.removesuffix("_total").removesuffix("_bucket")
        for e in _alert_expressions()
        for n in _named(e)
    }
    assert described and described <= alerted, sorted(described - alerted)


def test_the_exported_set_is_read_from_the_registry() -> None:
    # The check above is only as good as this list: it must hold what the docs table names.
    exported = _exported()
    for name in (
        "placement_lease_leader",
        "placement_managed_services",
        "placement_nodes_held",
        "placement_webhook_reports_total",
        "placement_plugin_failures_total",
        "placement_build_info",
        "placement_reconcile_duration_seconds_bucket",
    ):
        assert name in exported
    assert "placement_no_such_metric" not in exported
