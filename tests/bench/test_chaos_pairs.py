"""The protocol's runner takes each pair once, whole."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import chaos_pairs
import chaos_protocol as protocol


def test_the_runner_takes_the_first_pair_with_no_result_and_no_other_runner(
    tmp_path: Path,
) -> None:
    first, second, third = protocol.registered()[:3]
    (tmp_path / f"{first.id}.json").write_text("{}")
    with chaos_pairs.claimed(tmp_path, None, set()) as pair:
        assert pair == second
        with chaos_pairs.claimed(tmp_path, None, set()) as other:
            assert other == third  # the second is locked by the first runner
    with chaos_pairs.claimed(tmp_path, None, {second.id}) as pair:
        assert pair == third  # failed in this runner: the next one takes it up
    with chaos_pairs.claimed(tmp_path, "no-such-pair", set()) as pair:
        assert pair is None
