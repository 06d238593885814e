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
# e2df85452cf5bfc702c60cf55bc6e43c6dde0d0d4d39ea677984ee0e2e80362e.
WINDOW_2000 = "3c1d6b147fc87064a8169f450c52a1a78f5a48d525a8a1ab17e7f104f919fcb0"


def test_the_peers_digest_at_window_2000_is_the_committed_one() -> None:
    with peers_digest.fixed_clock_and_ids():
        assert peers_digest.digest(2000) == WINDOW_2000
