"""The oracle of a refactor or a speed change: what precis does over the peers bench (every
compaction's stats, stored context, prompt, events and composition samples) hashes to the value
committed here, so a change that means to change nothing shows that it changed nothing.

The suite runs window 2000 alone (it compacts the most; all four windows take minutes):
`bench/peers_digest.py --window 2000` prints the same value. A change that alters behaviour on
purpose updates it here and in bench/README.md, with the full digest over all windows.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import peers_digest

# bench/peers_digest.py --window 2000, and for all four windows (`all:`)
# 9cb30203535f1dee42eeef314a31c26753b8afd2cbbb3668b88dbf7eaee94c32 (after the masking tier,
# its ledger, the 85 %/40 % policy and the newest-first guard, 2026-12-06).
WINDOW_2000 = "b820c66f52cd8044a7ee519d0c0e93f3fe5edff8223949f636da435e8c4cf16e"


def test_the_peers_digest_at_window_2000_is_the_committed_one() -> None:
    with peers_digest.fixed_clock_and_ids():
        assert peers_digest.digest(2000) == WINDOW_2000
