"""Reading the policy file: YAML with line/column positions, into a validated `Policy`.

Every problem is reported at once, one line each, as `FILE:LINE:COL: PATH = VALUE: EXPECTED`.
The policy layer never sees YAML, so this module turns ruamel's tree into plain data while
recording where each path came from, then maps each problem's path back to a position.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.reader import ReaderError

from controller.adapters.errors import TerminalError
from controller.core.rules import declared_settings
from controller.policy import Policy, PolicyProblem, PolicyValidationError, policy_from_data

Loc = tuple[str | int, ...]
Position = tuple[int, int]  # 0-based line and column, as ruamel counts
# Bounds on what a policy file may hold: deeper or larger means a mistake or an alias bomb.
MAX_DEPTH = 32
MAX_NODES = 50_000
MAX_BYTES = 1 << 20
# ruamel's parser slows down quadratically with flow nesting (`[[[[...`): refuse deep
# brackets before parsing. Brackets inside quoted strings count too; no real file nears this.
MAX_FLOW_DEPTH = 64


class PolicyFileError(TerminalError):
    """The file cannot be used; `errors` holds one line per problem, in file order."""

    def __init__(self, errors: list[str]) -> None:
        self.errors = errors
        super().__init__("\n".join(errors))


@dataclass(frozen=True, slots=True)
class FileStamp:
    """What `stat` says about the file: compared first, so an unchanged file is not read."""

    mtime_ns: int
    size: int
    inode: int


@dataclass(frozen=True, slots=True)
class LoadedPolicy:
    path: str
    policy: Policy
    sha256: str
    stamp: FileStamp


class _Tree:
    """ruamel's round-trip tree as plain dicts/lists/scalars, with positions by path."""

    def __init__(self) -> None:
        self.values: dict[Loc, Position] = {}
        self.keys: dict[Loc, Position] = {}
        self.problems: list[tuple[Position, str]] = []
        self.nodes = 0

    def plain(self, node: Any, loc: Loc, depth: int) -> object:
        self.nodes += 1
        if depth > MAX_DEPTH or self.nodes > MAX_NODES:
            raise _TooLargeError(self.values.get(loc, (0, 0)))
        if isinstance(node, bool) or node is None:
            return node
        if isinstance(node, str):
            return str(node)
        if isinstance(node, int):
            # ruamel's ScalarBoolean (an anchored `true`) is an int subclass: keep it a bool.
            return bool(node) if type(node).__name__ == "ScalarBoolean" else int(node)
        if isinstance(node, float):
            return float(node)
        if isinstance(node, Mapping):
            return self._mapping(node, loc, depth)
        if isinstance(node, list | tuple | set | frozenset):
            items = list(node)
            result = []
            for index, item in enumerate(items):
                self.values[(*loc, index)] = _item_position(node, index, self.values[loc])
                result.append(self.plain(item, (*loc, index), depth + 1))
            return result
        return node  # dates, bytes, tagged scalars: validation rejects them with a message

    def _mapping(self, node: Mapping[Any, Any], loc: Loc, depth: int) -> dict[str, object]:
        result: dict[str, object] = {}
        for key, value in node.items():
            name = _key_text(key)
            key_pos, value_pos = _key_positions(node, key, self.values[loc])
            if value is None:
                value_pos = key_pos  # ruamel places an empty value at the next token
            if name in result:
                self.problems.append((key_pos, f"{_path(loc, name)}: duplicate key {name!r}"))
            self.keys[(*loc, name)] = key_pos
            self.values[(*loc, name)] = value_pos
            result[name] = self.plain(value, (*loc, name), depth + 1)
        return result

    def position(self, problem: PolicyProblem) -> Position:
        if problem.at_key and problem.loc in self.keys:
            return self.keys[problem.loc]
        loc = problem.loc
        while loc not in self.values and loc:
            loc = loc[:-1]  # a missing field: point at the mapping that lacks it
        return self.values.get(loc, (0, 0))


class _TooLargeError(Exception):
    def __init__(self, position: Position) -> None:
        self.position = position


def _key_text(key: object) -> str:
    if isinstance(key, bool):
        return "true" if key else "false"
    if key is None:
        return "null"
    return str(key)


def _path(loc: Loc, name: str) -> str:
    return PolicyProblem((*loc, name), "").path


def _key_positions(node: Any, key: object, parent: Position) -> tuple[Position, Position]:
    try:
        return tuple(node.lc.key(key)), tuple(node.lc.value(key))
    except (AttributeError, KeyError, TypeError, IndexError):
        return parent, parent  # keys from a `<<` merge have no position of their own


def _item_position(node: Any, index: int, parent: Position) -> Position:
    try:
        return tuple(node.lc.item(index))
    except (AttributeError, KeyError, TypeError, IndexError):
        return parent


def _at(source: str, position: Position) -> str:
    line, column = position
    return f"{source}:{line + 1}:{column + 1}"


def _line_col(text: str, offset: int) -> Position:
    before = text[:offset]
    return before.count("\n"), offset - (before.rfind("\n") + 1)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _check_flow_depth(text: str, source: str) -> None:
    depth = 0
    for offset, char in enumerate(text):
        if char in "[{":
            depth += 1
            if depth > MAX_FLOW_DEPTH:
                where = _at(source, _line_col(text, offset))
                raise PolicyFileError([f"{where}: too deep or too large for a policy file"])
        elif char in "]}" and depth:
            depth -= 1


def _parse_yaml(text: str, source: str) -> Any:
    if len(text) > MAX_BYTES:
        raise PolicyFileError([f"{source}: larger than {MAX_BYTES} bytes: not a policy file"])
    _check_flow_depth(text, source)
    try:
        return YAML(typ="rt").load(text)
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = _at(source, (mark.line, mark.column)) if mark else source
        what = _one_line(": ".join(part for part in (exc.context, exc.problem) if part))
        raise PolicyFileError([f"{where}: YAML syntax error: {what}"]) from None
    except ReaderError as exc:
        where = _at(source, _line_col(text, exc.position))
        raise PolicyFileError([f"{where}: not readable as YAML: {_one_line(exc.reason)}"]) from None
    except (YAMLError, ValueError, RecursionError) as exc:
        # ruamel raises plain errors for some inputs (an integer of 5000 digits, say).
        raise PolicyFileError([f"{source}: not readable as YAML: {_one_line(str(exc))}"]) from None


def load_policy_text(data: str | bytes, *, source: str = "<policy>") -> Policy:
    """Parse and validate policy YAML; raise `PolicyFileError` listing every problem."""
    if isinstance(data, bytes):
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            line = data[: exc.start].count(b"\n") + 1
            raise PolicyFileError([f"{source}:{line}:1: not UTF-8 text: {exc.reason}"]) from None
    else:
        text = data
    document = _parse_yaml(text, source)
    if document is None:
        raise PolicyFileError(
            [f"{source}:1:1: the file is empty; expected a mapping with apiVersion: placement/v1"]
        )
    tree = _Tree()
    lc = getattr(document, "lc", None)
    tree.values[()] = (lc.line or 0, lc.col or 0) if lc is not None else (0, 0)
    try:
        plain = tree.plain(document, (), 0)
    except _TooLargeError as exc:
        raise PolicyFileError(
            [f"{_at(source, exc.position)}: too deep or too large for a policy file"]
        ) from None
    located = [(position, f"{_at(source, position)}: {text}") for position, text in tree.problems]
    try:
        policy = policy_from_data(plain, declared_settings())
    except PolicyValidationError as exc:
        for problem in exc.problems:
            position = tree.position(problem)
            located.append((position, f"{_at(source, position)}: {problem.describe()}"))
    if located:
        raise PolicyFileError([text for _, text in sorted(located, key=lambda item: item[0])])
    return policy


def stamp_of(path: str | os.PathLike[str]) -> FileStamp:
    status = os.stat(path)
    return FileStamp(mtime_ns=status.st_mtime_ns, size=status.st_size, inode=status.st_ino)


def load_policy_file(path: str | os.PathLike[str]) -> LoadedPolicy:
    """Read, parse and validate a policy file; raise `PolicyFileError` on any problem."""
    source = str(path)
    try:
        stamp = stamp_of(path)
        data = Path(path).read_bytes()
    except OSError as exc:
        raise PolicyFileError([f"{source}: cannot read: {exc.strerror or exc}"]) from None
    policy = load_policy_text(data, source=source)
    return LoadedPolicy(source, policy, hashlib.sha256(data).hexdigest(), stamp)


def policy_file_changed(loaded: LoadedPolicy) -> bool:
    """Cheap change check for polling: `stat` first, and hash only when that moved.

    A file that cannot be read counts as changed, so the reload reports why.
    """
    try:
        if stamp_of(loaded.path) == loaded.stamp:
            return False
        return hashlib.sha256(Path(loaded.path).read_bytes()).hexdigest() != loaded.sha256
    except OSError:
        return True
