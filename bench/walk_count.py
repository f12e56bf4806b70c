"""Count the walk of one setting, `placement.preferred-nodes`, from the label to the write.

docs/architecture.md ("One setting, from the label to the write") defines the terms:

- a *hand-off* is a step at which one function gives the value, in a new holder or a
  new form, to a function of another module; a value passed along unchanged in the same
  holder is not counted again;
- a *doubling-back* is the value, or its name, turned back into a form it had before,
  or the same thing computed again.

How this script applies them, so that anyone gets the same figures:

1. `WALK` lists the stations the value passes, in order: the module, the function that
   holds it there and the holder (the field or type it is in). `ast` checks that every
   function exists and that each station's function is named in the body of the
   function that hands the value on (`via`): a walk that no longer matches the code
   fails instead of counting. A hand-off is a station whose module differs from the
   one before it and whose holder differs from the one before it.
2. The value's functions are the stations' functions and, followed through `ast`, the
   functions of the same module they call by name (helpers), plus each station's
   declared `also` (a helper of another module that works on the value).
3. `FORMS` names each form the value, or its name, is turned into, with the `ast`
   pattern that does it. In the value's functions every statement that matches is a
   site. The first site of a form computes it; every further site of that form is a
   doubling-back (the same thing computed again), and every site of an `inverse` form
   is one too (turned back into a form it had before).

Run: `python bench/walk_count.py` (add `--sites` to list every site).
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "controller"


@dataclass(frozen=True)
class Station:
    module: str  # path under controller/
    function: str  # "name" or "Class.name"
    holder: str  # where the value is at this station
    via: str | None = None  # "module:function" whose body names `function` (the hand-off)
    carries: tuple[str, ...] | None = None  # the parameters holding the value (None: all)
    also: tuple[str, ...] = ()  # "module:function" helpers of other modules on the value


# The walk of `placement.preferred-nodes=node-2,node-3`, in order.
WALK: tuple[Station, ...] = (
    Station("adapters/attrs.py", "service_from_attrs", "Spec.Labels (engine attrs)"),
    Station(
        "core/model.py",
        "Service.__post_init__",
        "Service.labels",
        via="adapters/attrs.py:service_from_attrs",
    ),
    Station(
        "core/service_settings.py",
        "resolve_settings",
        "Service.labels",
        via="core/plan.py:_context",
    ),
    Station(
        "policy/service_resolution.py",
        "resolve_service",
        "Service.labels",  # the same mapping, passed as `labels`
        via="core/service_settings.py:resolve_settings",
        carries=("labels",),
    ),
    Station(
        "policy/service_resolution.py",
        "parse_placement_labels",
        "setting name -> label text",
        via="policy/service_resolution.py:resolve_service",
        carries=("labels",),
    ),
    Station(
        "policy/service_spec.py",
        "ServiceSettingsSpec",
        "ServiceSettingsSpec.preferred_nodes",
        via="policy/service_resolution.py:parse_placement_labels",
    ),
    Station(
        "policy/value_syntax.py",
        "parse_names",
        "tuple of names",
        via="policy/field_types.py:<module>",
    ),
    Station(
        "policy/service_resolution.py",
        "parse_placement_labels",
        "Layer: setting name -> parsed value",
        via="policy/service_resolution.py:resolve_service",
        carries=("labels",),
        also=("policy/service_spec.py:spec_value",),
    ),
    Station(
        "policy/service_spec.py",
        "merge_layers",
        "ServiceSettings.preferred_nodes",
        via="policy/service_resolution.py:_merged",
    ),
    Station(
        "core/context.py",
        "PlanContext.settings",
        "ServiceSettings.preferred_nodes",  # the same settings, in PlanContext.resolved
        via="core/plan.py:_context",
    ),
    Station(
        "core/rules/owners/owner_rule.py",
        "_plan_service",
        "ServiceSettings.preferred_nodes",
        via="core/rules/owners/owner_rule.py:_plan_one",
        carries=("settings",),
        also=(
            "core/rules/owners/owner_inputs.py:planning",
            "core/rules/owners/owner_inputs.py:placement_inputs",
            "core/rules/owners/owner_inputs.py:going_on",
        ),
    ),
    Station(
        "core/kernel/candidates.py",
        "find_candidates",
        "Candidates.preferred",
        via="core/rules/owners/owner_rule.py:_plan_service",
        carries=("settings",),
        also=("core/kernel/candidates.py:operator_constraints",),
    ),
    Station(
        "core/rules/owners/assign.py",
        "assign",
        "Assignment.desired",
        via="core/rules/owners/owner_rule.py:_assigned",
    ),
    Station(
        "core/rules/owners/steer.py",
        "steer",
        "Steering.constraints",
        via="core/rules/owners/owner_rule.py:_steering",
    ),
    Station(
        "core/actions.py",
        "SetServiceConstraints",
        "SetServiceConstraints.constraints",
        via="core/rules/owners/owner_rule.py:_steer_write",
    ),
    Station(
        "core/guards.py",
        "Guards.admit",
        "SetServiceConstraints.constraints",
        via="core/plan.py:plan",
        carries=("wanted",),
    ),
    Station(
        "core/kernel/ledger.py",
        "AvailabilityLedger.refusal",
        "SetServiceConstraints.constraints",
        via="core/guards.py:Guards.admit",
        carries=("action",),
        also=(
            "core/kernel/ledger.py:AvailabilityLedger.spend",
            "core/context.py:PlanContext.budget",
        ),
    ),
    Station(
        "adapters/writes.py",
        "service_spec_with",
        "TaskTemplate.Placement.Constraints",
        via="adapters/writes.py:execute_action",
    ),
)


def _called_name(node: ast.Call) -> str | None:
    func = node.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def _calls(node: ast.AST, *names: str) -> bool:
    return any(isinstance(n, ast.Call) and _called_name(n) in names for n in ast.walk(node))


def _names(node: ast.AST, *names: str) -> bool:
    return any(
        (isinstance(n, ast.Name) and n.id in names)
        or (isinstance(n, ast.Attribute) and n.attr in names)
        for n in ast.walk(node)
    )


def _str_of_constraint(node: ast.AST) -> bool:
    """`str(c) for c in <...constraints...>`: parsed constraints turned back into text."""
    for comp in ast.walk(node):
        if not isinstance(comp, ast.ListComp | ast.GeneratorExp | ast.SetComp):
            continue
        elt = comp.elt
        if (
            isinstance(elt, ast.Call)
            and _called_name(elt) == "str"
            and any("constraint" in ast.unparse(g.iter) for g in comp.generators)
        ):
            return True
    return False


def _own_budget_replay(node: ast.AST) -> bool:
    """A loop over the planned writes that charges each again (`budget.spend(action)`)."""
    return any(
        isinstance(n, ast.For) and "planned" in ast.unparse(n.iter) and _calls(n, "spend")
        for n in ast.walk(node)
    )


def _excluded_label(node: ast.AST) -> bool:
    """The `excluded` label read from the labels (its presence, or its node IDs);
    `operator_texts` reads it to tell the controller's exclusions from the operator's."""
    return _calls(
        node, "excluded_node_set", "excluded_nodes", "recorded_exclusions", "operator_texts"
    ) or any(isinstance(n, ast.Compare) and _names(n, "EXCLUDED_LABEL") for n in ast.walk(node))


@dataclass(frozen=True)
class Form:
    name: str
    matches: Callable[[ast.AST], bool]
    inverse: bool = False  # every site turns the value back into a form it had


FORMS: tuple[Form, ...] = (
    Form(
        "setting name -> settings field",
        lambda n: (
            _names(n, "_FIELD_OF", "_RESOLVED_FIELDS")
            or (_calls(n, "model_validate") and _names(n, "ServiceSettingsSpec"))
        ),
    ),
    Form(
        "operator's constraints split from the controller's",
        lambda n: _calls(
            n, "operator_texts", "operators_of", "without_exclusions", "is_own_constraint"
        ),
    ),
    # `spaced_as_written` splits a constraint at its operator as the parser does.
    Form(
        "constraint text parsed",
        lambda n: _calls(n, "parse_constraint") or _names(n, "spaced_as_written"),
    ),
    Form("parsed constraint back to text", _str_of_constraint, inverse=True),
    Form("excluded label decoded", _excluded_label),
    Form("placement assigned", lambda n: _calls(n, "assign")),
    Form("planned writes charged to a ledger", _own_budget_replay, inverse=True),
)


class Module:
    def __init__(self, path: str) -> None:
        self.path = path
        self.tree = ast.parse((ROOT / path).read_text(), filename=path)
        self.defs: dict[str, ast.AST] = {"<module>": self.tree}
        for node in self.tree.body:
            if isinstance(node, ast.FunctionDef | ast.ClassDef):
                self.defs[node.name] = node
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, ast.FunctionDef):
                        self.defs[f"{node.name}.{item.name}"] = item

    def get(self, name: str) -> ast.AST:
        if name not in self.defs:
            raise SystemExit(f"walk out of date: {self.path} has no {name}")
        return self.defs[name]

    def helpers(self, name: str, carries: tuple[str, ...] | None = None) -> list[str]:
        """`name` and the module's functions it hands the value to, transitively: a
        call is followed when an argument carries the value (see `_carriers`)."""
        seen: list[str] = []
        todo: list[tuple[str, tuple[str, ...] | None]] = [(name, carries)]
        while todo:
            current, held = todo.pop()
            if current in seen:
                continue
            seen.append(current)
            node = self.get(current)
            if isinstance(node, ast.ClassDef) and f"{current}.__post_init__" in self.defs:
                todo.append((f"{current}.__post_init__", None))  # what making one computes
            if not isinstance(node, ast.FunctionDef):
                continue  # a value type: its construction is the station, not its methods
            carriers = _carriers(node, held)
            for call in ast.walk(node):
                if not isinstance(call, ast.Call):
                    continue
                called = self._callee(call)
                if called is None or called in seen:
                    continue
                params = _params(self.defs[called])
                passed = [
                    params[i] if i < len(params) else ""
                    for i, arg in enumerate(call.args)
                    if _carries(arg, carriers)
                ] + [k.arg or "" for k in call.keywords if _carries(k.value, carriers)]
                if passed:
                    todo.append((called, tuple(passed)))
        return seen

    def _callee(self, call: ast.Call) -> str | None:
        called = _called_name(call)
        if called in self.defs and isinstance(self.defs[called], ast.FunctionDef):
            return called
        if isinstance(call.func, ast.Attribute) and isinstance(call.func.value, ast.Name):
            return _method(self, call.func.attr)
        return None


# Read off a holder, these name it; they are not the value.
IDENTIFIERS = frozenset({"id", "service_id", "name", "service_name", "version", "node_id"})


def _params(node: ast.AST) -> list[str]:
    assert isinstance(node, ast.FunctionDef)
    names = [a.arg for a in (*node.args.posonlyargs, *node.args.args)]
    return [n for n in names if n not in ("self", "cls")]


def _carries(expr: ast.AST, carriers: set[str]) -> bool:
    """Whether an expression passes the value on: it reads a carrier, other than only
    an identifier off it (`action.service_id`)."""
    for node in ast.walk(expr):
        if isinstance(node, ast.Name) and node.id in carriers:
            parent = _parent_attr(expr, node)
            if parent is None or parent.attr not in IDENTIFIERS:
                return True
    return False


def _parent_attr(root: ast.AST, child: ast.AST) -> ast.Attribute | None:
    for node in ast.walk(root):
        if isinstance(node, ast.Attribute) and node.value is child:
            return node
    return None


def _carriers(node: ast.FunctionDef, held: tuple[str, ...] | None) -> set[str]:
    """The names holding the value in a function: the parameters it was passed in
    (all of them for a station that declares none), and every name assigned from an
    expression that carries it, in the order of the code."""
    carriers = set(held if held is not None else _params(node))
    for statement in ast.walk(node):
        if isinstance(statement, ast.Assign | ast.AnnAssign | ast.AugAssign):
            value = statement.value
            if value is not None and _carries(value, carriers):
                targets = (
                    statement.targets if isinstance(statement, ast.Assign) else [statement.target]
                )
                for target in targets:
                    carriers.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
        elif isinstance(statement, ast.For | ast.comprehension) and _carries(
            statement.iter, carriers
        ):
            carriers.update(n.id for n in ast.walk(statement.target) if isinstance(n, ast.Name))
    return carriers


def _method(module: Module, attr: str) -> str | None:
    """A method of the module's classes called as `self.x()` (only when unique)."""
    found = [k for k in module.defs if k.endswith(f".{attr}")]
    return found[0] if len(found) == 1 else None


_modules: dict[str, Module] = {}


def module(path: str) -> Module:
    if path not in _modules:
        _modules[path] = Module(path)
    return _modules[path]


def _short(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def check_walk() -> list[tuple[Station, bool]]:
    """Each station with whether it is a hand-off; raises if the code no longer matches."""
    out: list[tuple[Station, bool]] = []
    previous: Station | None = None
    for station in WALK:
        module(station.module).get(station.function)
        if station.via is not None:
            path, giver = station.via.split(":")
            body = module(path).get(giver)
            # A method is named by its own name or its class's (a value made there).
            targets = {_short(station.function), station.function.split(".")[0]}
            targets.discard("__post_init__")
            if not _names(body, *targets):
                raise SystemExit(
                    f"walk out of date: {station.via} does not name {station.function}"
                )
        handoff = (
            previous is not None
            and station.module != previous.module
            and station.holder != previous.holder
        )
        out.append((station, handoff))
        previous = station
    return out


@dataclass(frozen=True)
class Site:
    form: Form
    where: str
    line: int
    text: str


def sites() -> list[Site]:
    functions: list[tuple[str, str]] = []
    for station in WALK:
        for name in module(station.module).helpers(station.function, station.carries):
            functions.append((station.module, name))
        for extra in station.also:
            path, name = extra.split(":")
            functions.extend((path, h) for h in module(path).helpers(name))
    unique = list(dict.fromkeys(functions))
    found: list[Site] = []
    for path, name in unique:
        node = module(path).get(name)
        if isinstance(node, ast.ClassDef):
            continue
        for statement in _statements(node):
            for form in FORMS:
                if form.matches(statement):
                    found.append(
                        Site(
                            form,
                            f"{path}:{name}",
                            statement.lineno,
                            ast.unparse(statement).splitlines()[0][:90],
                        )
                    )
    return found


def _statements(node: ast.AST) -> Iterator[ast.stmt]:
    """The innermost simple statements of a function (a compound one by its header)."""
    assert isinstance(node, ast.FunctionDef)
    for child in ast.walk(node):
        if child is node or not isinstance(child, ast.stmt):
            continue
        if isinstance(child, ast.If | ast.For | ast.While | ast.With | ast.Try | ast.Match):
            header: ast.AST | None = getattr(child, "test", None) or getattr(child, "iter", None)
            if isinstance(child, ast.For) and _own_budget_replay(child):
                yield child  # the replay is the loop itself
            elif header is not None:
                yield ast.Expr(value=header, lineno=child.lineno)  # type: ignore[arg-type]
            continue
        if isinstance(child, ast.FunctionDef | ast.ClassDef):
            continue
        yield child


def doublings(found: list[Site]) -> list[Site]:
    out: list[Site] = []
    for form in FORMS:
        of_form = [s for s in found if s.form is form]
        out.extend(of_form if form.inverse else of_form[1:])
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sites", action="store_true", help="list every site of every form")
    args = parser.parse_args(argv)
    walk = check_walk()
    found = sites()
    back = doublings(found)
    handoffs = sum(1 for _, h in walk if h)
    kinds = len({site.form.name for site in back})
    print(f"placement.preferred-nodes: {handoffs} hand-offs, {len(back)} doublings-back")
    print(f"(the doublings-back are of {kinds} of the {len(FORMS)} forms)")
    print()
    print("walk (* a hand-off):")
    for station, handoff in walk:
        mark = "*" if handoff else " "
        print(f" {mark} {station.module}:{station.function}  [{station.holder}]")
    print()
    print("doublings-back:")
    for site in back:
        print(f"  {site.form.name}: {site.where}:{site.line}  {site.text}")
    if args.sites:
        print()
        print("every site:")
        for form in FORMS:
            for site in (s for s in found if s.form is form):
                print(f"  {form.name}: {site.where}:{site.line}  {site.text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
