"""Each rule's spec says what its decisions may say: the outcomes and codes its package's
sources decide are exactly those its specs declare."""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

from controller.core.decisions import Code, Outcome
from controller.core.rules import RULES

_USED = re.compile(r"\b(Outcome|Code)\.([A-Z_]+)\b")


def _package_of(module: str) -> str:
    # controller.core.rules.<rule>[.<module>]: a rule is a package or a module of its own.
    return ".".join(module.split(".")[:4])


def _sources(package: str) -> list[Path]:
    root = Path(__file__).parents[2] / Path(*package.split("."))
    return sorted(root.rglob("*.py")) if root.is_dir() else [root.with_suffix(".py")]


def test_names_are_unique() -> None:
    names = [spec.name for spec in RULES]
    assert len(names) == len(set(names))


def test_each_package_decides_only_what_its_specs_declare() -> None:
    declared: dict[str, set[Outcome | Code]] = defaultdict(set)
    for spec in RULES:
        declared[_package_of(spec.plan.__module__)] |= {*spec.outcomes, *spec.codes}
    for package, said in declared.items():
        used: set[Outcome | Code] = set()
        for path in _sources(package):
            for kind, name in _USED.findall(path.read_text()):
                used.add(Outcome[name] if kind == "Outcome" else Code[name])
        assert used == said, (
            f"{package}: used, not declared {used - said}; declared, unused {said - used}"
        )
