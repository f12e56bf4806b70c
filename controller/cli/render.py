"""Actions and decisions for people: hostnames beside node IDs, long exclusion lists cut.

Machines get the exact texts (`--json`); a person reading a plan on a large swarm does
not need a thousand `node.id!=...` constraints spelled out to see what changes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from controller.core.actions import Action, SetReplicas, SetServiceConstraints, describe

SHOWN = 8  # names listed before "and N more"


def hostnames(node_ids: Iterable[str], hosts: Mapping[str, str]) -> str:
    names = [hosts.get(n, n) for n in node_ids]
    more = f" and {len(names) - SHOWN} more" if len(names) > SHOWN else ""
    return ", ".join(names[:SHOWN]) + more


def change(action: Action, hosts: Mapping[str, str]) -> str:
    """What the action changes, without its target (`constraints = ...`)."""
    if isinstance(action, SetServiceConstraints):
        kept = [c for c in action.constraints if not c.startswith("node.id!=")]
        off = [c.removeprefix("node.id!=") for c in action.constraints if c not in kept]
        text = f"constraints = {kept}"
        if off:
            text += f" + node.id!= {len(off)} node(s): {hostnames(off, hosts)}"
        if action.evicts_from:
            text += f"; evicts tasks from {hostnames(action.evicts_from, hosts)}"
        return text
    if isinstance(action, SetReplicas) and action.evicts_from:
        trim = hostnames(action.evicts_from, hosts)
        return f"replicas = {action.replicas}, may stop tasks on {trim}"
    text = describe(action).split(": ", 1)[-1]
    for node_id, host in hosts.items():
        text = text.replace(f"'{node_id}'", f"'{node_id}' ({host})")
    return text
