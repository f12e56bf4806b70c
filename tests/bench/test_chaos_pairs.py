"""The protocol's runner takes each triple once, whole, on one pinned code."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import chaos_pairs
import chaos_protocol as protocol


def test_the_runner_takes_the_first_triple_with_no_result_and_no_other_runner(
    tmp_path: Path,
) -> None:
    triples = protocol.registered()
    first, second, third = triples[:3]
    (tmp_path / f"{first.id}.json").write_text("{}")
    with chaos_pairs.claimed(tmp_path, triples, set()) as triple:
        assert triple == second
        with chaos_pairs.claimed(tmp_path, triples, set()) as other:
            assert other == third  # the second is locked by the first runner
    with chaos_pairs.claimed(tmp_path, triples, {second.id}) as triple:
        assert triple == third  # failed in this runner: the next one takes it up
    with chaos_pairs.claimed(tmp_path, [], set()) as triple:
        assert triple is None


def test_results_of_other_code_or_uncommitted_code_are_not_added_to(tmp_path: Path) -> None:
    now = {"commit": "c0ffee", "controller": "tree", "bench": "files", "changed": []}
    assert chaos_pairs.same_code(tmp_path, now) is None
    (tmp_path / "t-201.json").write_text(json.dumps({"code": now}))
    assert chaos_pairs.same_code(tmp_path, now) is None  # the same code adds up
    (tmp_path / "t-202.failed-1.json").write_text(json.dumps({"code": {"commit": "x"}}))
    assert chaos_pairs.same_code(tmp_path, now) is None  # a failed attempt holds no figures
    other = {**now, "controller": "other tree", "commit": "abcdef1234567"}
    (tmp_path / "t-203.json").write_text(json.dumps({"code": other}))
    assert (
        chaos_pairs.same_code(tmp_path, now) == "t-203.json ran on other code (commit abcdef1234)"
    )
    (tmp_path / "t-203.json").unlink()
    dirty = {**now, "changed": [" M controller/core/plan.py"]}
    assert chaos_pairs.same_code(tmp_path, dirty) == (
        "uncommitted changes:  M controller/core/plan.py"
    )


def test_the_pinned_worktree_holds_the_commit_and_is_removed_after() -> None:
    def git(*args: str, cwd: Path = chaos_pairs.ROOT) -> str:
        return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True,
                              check=True).stdout.strip()  # fmt: skip

    head = git("rev-parse", "HEAD")
    with chaos_pairs.pinned_worktree(head) as tree:
        assert git("rev-parse", "HEAD", cwd=tree) == head
        assert git("status", "--porcelain", cwd=tree) == ""
        assert (tree / "controller" / "__init__.py").exists()
        assert str(tree) in git("worktree", "list")
    assert not tree.exists() and not tree.parent.exists()
    assert str(tree) not in git("worktree", "list")


def test_the_pinned_runner_gets_every_argument_but_the_commit(tmp_path: Path) -> None:
    args = chaos_pairs.argparse.Namespace(
        minutes=2.0, all=True, only=None, seed=[901, 902], dry_run=True,
        logs=tmp_path / "logs", other_code=False, commit="abc",
    )  # fmt: skip
    assert chaos_pairs._passed_on(args) == [
        "--minutes", "2.0", "--all", "--seed=901", "--seed=902", "--dry-run",
        "--logs", str(tmp_path / "logs")]  # fmt: skip


def test_a_runner_s_sandboxes_are_named_from_its_pid() -> None:
    names = chaos_pairs.sandbox_names(1234567, protocol.ARMS)
    assert names == ["c2-34567-f", "c2-34567-c", "c2-34567-s"]
    assert all(len(n) <= 20 for n in names)
