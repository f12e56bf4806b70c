"""Replay the stored corpus and compare with the stored results; or store new ones.

    python -m tests.replay.check                  # both sources, exit 1 on a difference
    python -m tests.replay.check --only swarm     # the real-swarm records only
    python -m tests.replay.check --only sim       # the model check's sequences only
    python -m tests.replay.check --import DIR --name NAME   # runs recorded into DIR
    python -m tests.replay.check --expect         # store this code's results as expected
    PYTHONHASHSEED=0 python -m tests.replay.check --expect --draw --only sim
                                                  # draw the model check's sequences anew

The first differing cycle is printed: which record, which cycle, the writes and the
decisions only one side has.
"""

from __future__ import annotations

import argparse
import json
import lzma
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from tests.replay.engine_replay import canonical, read_lines, replay

CORPUS = Path(__file__).parent / "corpus"
RECORDS = CORPUS / "swarm"
EXPECTED = CORPUS / "expected"
SIM_SEQUENCES = CORPUS / "sim" / "sequences.jsonl.xz"
SIM_EXPECTED = EXPECTED / "sim.jsonl.xz"


def write_lines(path: Path, lines: Iterable[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with lzma.open(path, "wt", encoding="utf-8", preset=9) as f:
        for line in lines:
            f.write(canonical(line) + "\n")


def records() -> list[Path]:
    return sorted(RECORDS.glob("*.jsonl.xz"))


def expected_of(record: Path) -> Path:
    return EXPECTED / record.name.replace(".jsonl.xz", ".out.jsonl.xz")


def _diff(label: str, old: list[Any], new: list[Any]) -> list[str]:
    a, b = [canonical(x) for x in old], [canonical(x) for x in new]
    lines = [f"  {label} only before: {x}" for x in a if x not in b]
    lines += [f"  {label} only now:    {x}" for x in b if x not in a]
    if not lines and a != b:
        lines.append(f"  {label}: the same items, counted differently")
    return lines


def first_difference(
    where: str, expected: Iterator[dict[str, Any]], actual: Iterator[dict[str, Any]]
) -> str | None:
    """None when the two runs agree; else the first differing cycle, in words."""
    for index, (old, new) in enumerate(zip_longest(expected, actual)):
        if old == new:
            continue
        if old is None or new is None:
            side = "the stored results end" if old is None else "this run ends"
            return f"{where}: entry {index}: {side} early"
        head = f"{where}: entry {index} ({old.get('t', 'cycle')} {old.get('n', '')}"
        head += f"{old.get('name', '')} at {old.get('now', '')}) differs"
        lines = [head]
        if old.get("in") != new.get("in"):
            lines.append(
                "  the input differs: the sequence went elsewhere"
                " (an earlier output, or the draws, changed)"
            )
            lines.append(f"    before: {canonical(old.get('in'))}")
            lines.append(f"    now:    {canonical(new.get('in'))}")
        lines += _diff("write", old.get("writes") or [], new.get("writes") or [])
        lines += _diff("decision", old.get("decisions") or [], new.get("decisions") or [])
        for key in sorted(set(old) | set(new)):
            if key not in ("in", "writes", "decisions") and old.get(key) != new.get(key):
                lines.append(f"  {key}: before {old.get(key)!r}, now {new.get(key)!r}")
        return "\n".join(lines)
    return None


def zip_longest(
    a: Iterator[dict[str, Any]], b: Iterator[dict[str, Any]]
) -> Iterator[tuple[dict[str, Any] | None, dict[str, Any] | None]]:
    sentinel: dict[str, Any] = {}
    while True:
        x, y = next(a, sentinel), next(b, sentinel)
        if x is sentinel and y is sentinel:
            return
        yield (None if x is sentinel else x), (None if y is sentinel else y)


def check_record(record: Path) -> str | None:
    return first_difference(
        record.name, read_lines(expected_of(record)), replay(read_lines(record))
    )


def check_sim() -> str | None:
    from tests.replay.sim_trace import trace  # noqa: PLC0415

    sequences = list(read_lines(SIM_SEQUENCES))
    return first_difference("model check", read_lines(SIM_EXPECTED), trace(sequences))


def import_records(directory: Path, name: str) -> list[Path]:
    """The run files of DIR (one per controller run) as corpus records NAME-1, NAME-2...;
    a run without a cycle is left out."""
    stored = []
    runs = sorted(directory.glob("*.jsonl"), key=lambda p: p.stat().st_mtime)
    for path in runs:
        lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        if not any(line["t"] == "cycle" for line in lines):
            continue
        target = RECORDS / f"{name}-{len(stored) + 1}.jsonl.xz"
        write_lines(target, lines)
        stored.append(target)
    return stored


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=("swarm", "sim"))
    parser.add_argument("--expect", action="store_true", help="store this code's results")
    parser.add_argument(
        "--draw", action="store_true", help="with --expect: draw the model check's sequences anew"
    )
    parser.add_argument("--import", dest="import_dir", type=Path)
    parser.add_argument("--name")
    args = parser.parse_args(argv)
    if args.import_dir is not None:
        for path in import_records(args.import_dir, args.name or args.import_dir.name):
            print(f"stored {path.relative_to(CORPUS)} ({path.stat().st_size} bytes)")
        return 0
    failed = 0
    if args.only in (None, "swarm"):
        for record in records():
            if args.expect:
                write_lines(expected_of(record), replay(read_lines(record)))
                print(f"expected: {expected_of(record).name}")
                continue
            difference = check_record(record)
            print(difference or f"same: {record.name}")
            failed += difference is not None
    if args.only in (None, "sim"):
        if args.expect:
            from tests.replay.sim_trace import draw_sequences, trace  # noqa: PLC0415

            if args.draw or not SIM_SEQUENCES.exists():
                write_lines(SIM_SEQUENCES, draw_sequences())
                print(f"drawn: {SIM_SEQUENCES.relative_to(CORPUS)}")
            write_lines(SIM_EXPECTED, trace(list(read_lines(SIM_SEQUENCES))))
            print(f"expected: {SIM_EXPECTED.name}")
        else:
            difference = check_sim()
            print(difference or "same: the model check's sequences")
            failed += difference is not None
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
