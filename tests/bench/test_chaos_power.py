"""The power figures come from the verdict's own rule: a clear gain passes, a harm never."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from chaos_power import power
from chaos_verdict import NAMES


def test_a_clear_gain_passes_and_a_harm_or_too_few_pairs_never_does() -> None:
    quiet = dict.fromkeys(NAMES, 0.05)
    assert set(power(quiet, 10, 0.5, draws=20).values()) == {1.0}
    assert set(power(quiet, 10, 1.3, draws=20).values()) == {0.0}
    # Six pairs: the smallest p-value is 1/64, above 0.05 / 6, whatever the gain.
    assert set(power(quiet, 6, 0.5, draws=20).values()) == {0.0}
    # Noise takes power away: the same gain, ten times the spread.
    noisy = dict.fromkeys(NAMES, 0.5)
    assert max(power(noisy, 10, 0.9, draws=50).values()) < 0.5
