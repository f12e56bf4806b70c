"""What-if simulation: the pure planner against a simulated swarm (see run.py)."""

from controller.core.simulate.run import DEFAULT_TICK, Entry, Simulation, simulate
from controller.core.simulate.scenario import VERBS, ScenarioError, Step, parse_scenario
from controller.core.simulate.scheduler import Refusal, Scheduler
from controller.core.simulate.sim_values import SwarmTimings
from controller.core.simulate.swarm_model import SimSwarm

__all__ = [
    "DEFAULT_TICK",
    "VERBS",
    "Entry",
    "Refusal",
    "ScenarioError",
    "Scheduler",
    "SimSwarm",
    "Simulation",
    "Step",
    "SwarmTimings",
    "parse_scenario",
    "simulate",
]
