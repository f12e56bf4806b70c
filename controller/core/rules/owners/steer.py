"""From a desired placement to the constraints that make Swarm realise it.

Steering is by exclusion: `node.id!=X` for every node the service should not use now.
- While moving, only the nodes that keep or receive tasks stay allowed, so Swarm's
  replacements (start-first where the service allows) land exactly on the targets.
- At rest (every replica where it should be), one standby node stays allowed besides
  the targets, so when a node fails Swarm fails over natively and at once to the node
  the policy would have chosen.
A service with no placement preference (`ServiceSettings.prefers`: possible owners
alone) is only kept off the nodes it may not use: Swarm's own failover (fewest tasks of
the service first) is already what the policy wants.
`controller.steering` trades these off: `standby` (the default, above), `strict` (no
standby: a lost replica waits until the controller allows its next owner) and `open`
(nothing excluded at rest: Swarm fails over anywhere and the controller moves it after).
On a swarm so large that standby would exclude more than `steering-max-exclusions`
nodes, a settled service is steered open: its spec stays short, at the price of open's
second move on failover.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from controller.core.labels import exclusion_constraints, possible_constraint, steering_constraint
from controller.core.rules.owners.assign import Assignment
from controller.policy import SteeringMode


@dataclass(frozen=True, slots=True)
class Steering:
    constraints: tuple[str, ...]
    excluded: frozenset[str]
    vacate: tuple[str, ...]  # nodes whose tasks the new constraints evict
    reduce: tuple[str, ...]  # nodes that keep some tasks but should hold fewer
    open_at_rest: bool = False  # standby would have excluded more than the cap
    head: tuple[str, ...] = ()  # the constraints before the exclusions
    standby: str | None = None  # the node kept allowed at rest for Swarm's failover

    def keeping(self, nodes: Iterable[str]) -> Steering:
        """The same steering with `nodes` still allowed, so no task there is stopped: a
        stop-first move first surges onto its targets, and excludes its sources only
        once the surged tasks run."""
        excluded = self.excluded.difference(nodes)
        return replace(
            self,
            constraints=(*self.head, *exclusion_constraints(excluded)),
            excluded=excluded,
            vacate=(),
        )


def steer(
    *,
    service_name: str,
    operator_constraints: Iterable[str],
    assignment: Assignment,
    current: Mapping[str, int],
    all_nodes: frozenset[str],
    prefers: bool,
    mode: SteeringMode,
    max_exclusions: int,
    possible: frozenset[str] | None,
    require_possible_label: bool,
) -> Steering:
    desired = assignment.desired
    vacate = tuple(sorted(n for n, c in current.items() if c and not desired.get(n)))
    reduce = tuple(sorted(n for n, c in current.items() if desired.get(n, 0) and c > desired[n]))
    # At rest every desired replica already runs where it should; only then is a standby
    # allowed. While replicas are missing or moving, Swarm must place them on the targets.
    at_rest = all(current.get(n, 0) == desired.get(n, 0) for n in {*current, *desired})
    allowed = {n for n, c in desired.items() if c}
    standby = prefers and at_rest and mode is SteeringMode.STANDBY
    if standby and assignment.standby is not None:
        allowed.add(assignment.standby)
    open_at_rest = standby and len(all_nodes) - len(allowed & all_nodes) > max_exclusions
    if prefers and not (at_rest and (mode is SteeringMode.OPEN or open_at_rest)):
        excluded = all_nodes.difference(allowed)
    else:
        excluded = frozenset(vacate)
    if possible is not None:
        # Until the positive constraint is in place, every other known node is excluded.
        excluded |= all_nodes.difference(possible)
    constraints = [*operator_constraints, steering_constraint(service_name)]
    if require_possible_label:
        constraints.append(possible_constraint(service_name))
    head = tuple(constraints)
    constraints.extend(exclusion_constraints(excluded))
    return Steering(
        head=head,
        constraints=tuple(constraints),
        excluded=excluded,
        vacate=vacate,
        reduce=reduce,
        open_at_rest=open_at_rest,
        standby=assignment.standby if standby and not open_at_rest else None,
    )
