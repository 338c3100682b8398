"""A text cut to a bound says so, within the bound (curaflow.domain.text.clipped_within).

Until 2026-12-07 the ledger stored a receiver's answer cut at 2 000 characters and a
source's why or a route's pause reason at 500 with no mark: a report said less than what
happened and nothing said so.
"""

from __future__ import annotations

import pytest

from curaflow.cli.common import clipped
from curaflow.domain.text import clipped_within, cut_mark


def test_a_text_within_its_bound_is_kept_whole() -> None:
    assert clipped_within("x" * 500, 500) == "x" * 500
    assert clipped_within("", 20) == ""


@pytest.mark.parametrize("length", [501, 502, 517, 518, 600, 1_009, 1_010, 2_500, 100_000])
def test_a_cut_ends_with_how_much_it_left_out_and_fits_its_bound(length: int) -> None:
    text = "".join(chr(ord("a") + i % 26) for i in range(length))
    cut = clipped_within(text, 500)
    kept = cut.split("…", 1)[0]
    assert len(cut) <= 500
    assert cut == kept + cut_mark(length - len(kept))
    assert text.startswith(kept)
    # as much of the text as fits: one character more would not
    assert len(kept) + 1 + len(cut_mark(length - len(kept) - 1)) > 500


def test_the_mark_is_the_one_the_cli_shows() -> None:
    assert cut_mark(1_920) == "… (+1920 characters)"
    assert clipped("a" * 100, 80) == "a" * 80 + cut_mark(20)


def test_a_bound_too_small_for_the_mark_is_refused() -> None:
    with pytest.raises(ValueError):
        clipped_within("x" * 100, 10)
