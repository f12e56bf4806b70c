"""The rebalance rule: its name, written only here: the spec, every
decision and the metrics take it from this module."""

RULE = "rebalance"
