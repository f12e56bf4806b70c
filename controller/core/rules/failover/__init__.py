"""Failover: a node's lost replicas started at once rather than after Swarm's restart
delay, on a confirmed loss (`failover_rule`) or a suspected one (`speculative`)."""

from controller.core.rules.failover.failover_exemptions import FAILOVER_EXEMPTIONS
from controller.core.rules.failover.failover_rule import plan_failover
from controller.core.rules.failover.speculative import plan_speculative

__all__ = ["FAILOVER_EXEMPTIONS", "plan_failover", "plan_speculative"]
