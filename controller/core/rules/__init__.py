"""The rule registry: one module per rule, run in this order every cycle."""

from __future__ import annotations

from controller.core.context import Rule
from controller.core.rules.adoption import adopt_services, release_node_labels

RULES: tuple[tuple[str, Rule], ...] = (
    ("adoption", adopt_services),
    ("release", release_node_labels),
)
