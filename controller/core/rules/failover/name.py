"""The two failover rules: their names, written only here: the spec, every
decision and the metrics take it from this module."""

FAILOVER = "failover"
SPECULATIVE = "speculative"
