"""One dry-run cycle for the command line: observe and plan exactly as `run` does.

`plan` and `explain` use the reconciler itself in dry-run mode, so what they show is
what a controller started now would do in its first cycle: the same observation, the
same policy, an empty memory (nodes ready so far date from Swarm's last change to
them), and nothing written. Outside inputs (health webhook, agents, plugins) are not
gathered: a running controller that has them may plan differently.
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable
from dataclasses import dataclass

from controller.adapters.engine import EngineClient, observe_cluster
from controller.adapters.writes import Rehearsal
from controller.core.model import ClusterSnapshot
from controller.core.plan import Plan
from controller.policy import Policy
from controller.runtime.reconciler import Reconciler
from controller.runtime.tracing import DecisionLog, get_tracer, make_tracer_provider


@dataclass(frozen=True)
class DryRun:
    snapshot: ClusterSnapshot
    plan: Plan
    now: float


def plan_once(
    client: EngineClient, policy: Policy, *, clock: Callable[[], float] = time.time
) -> DryRun:
    provider = make_tracer_provider("none")
    now = clock()
    try:
        reconciler = Reconciler(
            observe=lambda: observe_cluster(client),
            executor=Rehearsal(lambda _: None),
            policy=lambda: policy,
            tracer=get_tracer(provider),
            decision_log=DecisionLog(io.StringIO()),
            clock=lambda: now,
        )
        cycle = reconciler.reconcile({"plan"})
    finally:
        provider.shutdown()
    assert cycle.snapshot is not None  # set by every cycle
    return DryRun(snapshot=cycle.snapshot, plan=cycle.plan, now=now)
