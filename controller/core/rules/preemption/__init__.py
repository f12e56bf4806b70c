"""Preemption: room for a pending higher-priority service, taken from lower-priority
ones (`preemption_rule`), and given back once it is no longer needed (`restore`)."""

from controller.core.rules.preemption.preemption_rule import plan_preemption
from controller.core.rules.preemption.restore import plan_restores

__all__ = ["plan_preemption", "plan_restores"]
