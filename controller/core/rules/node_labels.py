"""The controller's own node labels: possible-owner marks in, stale marks out.

All of a node's label changes from every service go out in one write per node, so a
cluster-wide policy change costs one write per node rather than one per service and node.
Adding a possible-owner label stops nothing; the constraint that requires it is added
only once every possible owner carries it (see the owners rule).
"""

from __future__ import annotations

from controller.core.actions import Action, SetNodeLabels, describe
from controller.core.context import PlanContext, RuleOutput
from controller.core.decisions import Decision
from controller.core.labels import (
    DENY_LABEL_PREFIX,
    POSSIBLE_LABEL_PREFIX,
    POSSIBLE_VALUE,
    possible_label,
)
from controller.core.placement.candidates import expand_owner_list

RULE = "node-labels"


def plan_node_labels(ctx: PlanContext) -> RuleOutput:
    managed = ctx.managed_services()
    managed_names = {s.name for s in managed}
    wanted_possible: dict[str, set[str]] = {n.id: set() for n in ctx.snapshot.nodes}
    for service in managed:
        settings = ctx.settings(service.id)
        if not settings.possible_nodes:
            continue
        for node_id in expand_owner_list(
            settings.possible_nodes, ctx.snapshot.nodes, ctx.policy.groups
        ):
            wanted_possible[node_id].add(possible_label(service.name))

    actions: list[Action] = []
    decisions: list[Decision] = []
    for node in ctx.snapshot.nodes:
        have_possible = {k for k in node.labels if k.startswith(POSSIBLE_LABEL_PREFIX)}
        stale_deny = {
            k
            for k in node.labels
            if k.startswith(DENY_LABEL_PREFIX)
            and k.removeprefix(DENY_LABEL_PREFIX) not in managed_names
        }
        to_set = {
            k: POSSIBLE_VALUE
            for k in sorted(wanted_possible[node.id])
            if node.labels.get(k) != POSSIBLE_VALUE
        }
        to_remove = tuple(sorted((have_possible - wanted_possible[node.id]) | stale_deny))
        if not to_set and not to_remove:
            continue
        # Removing a possible mark evicts that service's tasks from the node (hard owners).
        evicts = tuple(s.id for s in managed if possible_label(s.name) in to_remove)
        action = SetNodeLabels(
            node_id=node.id,
            hostname=node.hostname,
            version=node.version,
            set=to_set,
            remove=to_remove,
            evicts=evicts,
        )
        actions.append(action)
        decisions.append(
            Decision(
                RULE,
                f"node {node.hostname}",
                "label",
                "possible-owner marks follow the policy; marks of services no longer "
                "managed are released",
                action=describe(action),
            )
        )
    return RuleOutput(tuple(actions), tuple(decisions))
