"""No function a reader must scroll and no module too long to hold in mind: a function of
logic is at most 60 lines (from `def` to its last line, docstring included) and a module at
most 400, over all of `controller/`.

Two lists say where the limits do not hold yet, by name, so that each entry is a decision
someone can see: functions that only declare (argparse options: long, but read as a table,
with no branch to follow), and what is still to be split. An entry that no longer exceeds
its limit fails the test too, so the lists only shrink.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LONGEST_FUNCTION = 60
LONGEST_MODULE = 400

# Functions that only declare: command-line options (a list of add_argument calls) and
# the metrics.
DECLARATIONS = {
    ("controller/cli/run_cmd.py", "register"),
    ("controller/cli/agent_cmd.py", "register"),
    ("controller/cli/health_opts.py", "add_health_arguments"),
    # The metrics the controller exports, one constructor call each, with their help texts.
    ("controller/runtime/metrics.py", "__init__"),
}

# Still to be split: remove an entry when its function or module is.
LONG_FUNCTIONS: set[tuple[str, str]] = set()
LONG_MODULES = {
    "controller/adapters/engine.py",
    "controller/core/kernel/ledger.py",
    "controller/core/model.py",
    "controller/runtime/loop.py",
}


def _modules() -> Iterator[tuple[str, str]]:
    for path in sorted((ROOT / "controller").rglob("*.py")):
        yield path.relative_to(ROOT).as_posix(), path.read_text()


def _function_lengths() -> dict[tuple[str, str], int]:
    """The longest function of each name in each module (nested ones count on their own)."""
    out: dict[tuple[str, str], int] = {}
    for name, text in _modules():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                assert node.end_lineno is not None
                key = (name, node.name)
                out[key] = max(out.get(key, 0), node.end_lineno - node.lineno + 1)
    return out


def _module_lengths() -> dict[str, int]:
    return {name: len(text.splitlines()) for name, text in _modules()}


def test_no_function_is_too_long() -> None:
    allowed = DECLARATIONS | LONG_FUNCTIONS
    too_long = {
        f"{path}:{name} ({lines} lines)"
        for (path, name), lines in _function_lengths().items()
        if lines > LONGEST_FUNCTION and (path, name) not in allowed
    }
    assert too_long == set()


def test_no_module_is_too_long() -> None:
    too_long = {
        f"{path} ({lines} lines)"
        for path, lines in _module_lengths().items()
        if lines > LONGEST_MODULE and path not in LONG_MODULES
    }
    assert too_long == set()


def test_the_lists_name_only_what_is_still_too_long() -> None:
    functions = _function_lengths()
    modules = _module_lengths()
    stale = {
        f"{path}:{name}"
        for path, name in DECLARATIONS | LONG_FUNCTIONS
        if functions.get((path, name), 0) <= LONGEST_FUNCTION
    } | {path for path in LONG_MODULES if modules.get(path, 0) <= LONGEST_MODULE}
    assert stale == set()
