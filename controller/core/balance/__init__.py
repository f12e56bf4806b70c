"""Rebalancing: count skew and CPU/memory load, with the hysteresis that keeps it calm.

- `levels`: what each aggressiveness (1-5) means, as numbers;
- `controller.core.counts` (below this package: health's deny labels read it too): Swarm's
  own scale-up and scale-down, simulated, to plan a surge-and-trim;
- `load`: node load from reservations or measured usage, and moves off hot nodes;
- `triggers`: node joins and returns, flap damping, periodic rounds, persistence;
- `cycle`: one cycle's working state, budgets, and the checks every move passes;
- `moves` and `shed`: choosing and writing the move off a hot node.
The rule that uses them is `controller.core.rules.rebalance`.
"""
