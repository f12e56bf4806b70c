"""Every module of the core sits in a layer of the import contracts, so lint-imports
checks it too: a new module must be placed, not left outside every rule."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _layered() -> set[str]:
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (core,) = [
        c
        for c in contracts["contracts"]
        if c["type"] == "layers" and c["layers"][0].startswith("controller.core.")
    ]
    return {m.strip() for layer in core["layers"] for m in layer.replace(":", "|").split("|")}


def _core_modules() -> set[str]:
    core = ROOT / "controller" / "core"
    names = {p.stem for p in core.glob("*.py") if p.stem != "__init__"}
    names |= {p.parent.name for p in core.glob("*/__init__.py")}
    return {f"controller.core.{n}" for n in names}


def test_every_core_module_is_in_a_layer() -> None:
    assert _core_modules() - _layered() == set()


def test_the_layers_name_no_module_that_is_gone() -> None:
    assert _layered() - _core_modules() == set()
