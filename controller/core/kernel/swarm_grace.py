"""Swarm's own failure detection, from the swarm's dispatcher heartbeat.

swarmkit marks a node down when it has not heard from it for 3 heartbeat periods (plus
some jitter), and a node `unknown` after a Raft election gets twice that, counted from the
election. The period is the swarm's (`docker swarm update --dispatcher-heartbeat`, 5 s by
default), observed with each snapshot; waits that reason about Swarm's verdict scale with
it rather than assume the default.
"""

from __future__ import annotations

from controller.core.model import ClusterSnapshot

DEFAULT_HEARTBEAT_SECONDS = 5.0
# Swarm still calling a node ready this many heartbeat periods after a surge made for it
# is evidence it lives: four times the longest grace (twice the grace after an election,
# 6 periods), 60 s at the default period.
SAYS_ALIVE_PERIODS = 12.0


def heartbeat(snapshot: ClusterSnapshot) -> float:
    """The swarm's dispatcher heartbeat period in seconds (the default when not observed)."""
    period = snapshot.heartbeat_seconds
    return period if period is not None and period > 0 else DEFAULT_HEARTBEAT_SECONDS


def swarm_says_alive_seconds(snapshot: ClusterSnapshot) -> float:
    """How long Swarm must go on calling a node ready before that alone says it lives."""
    return SAYS_ALIVE_PERIODS * heartbeat(snapshot)
