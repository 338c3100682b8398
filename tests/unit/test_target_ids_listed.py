"""``TargetIds`` stays under Temporal's limit on one search attribute value
(:func:`curaflow.domain.presentation.listed_target_ids`)."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from curaflow.domain.presentation import TARGET_IDS_MAX_BYTES, listed_target_ids


def size(ids: list[str]) -> int:
    """The value's bytes as the server measures them: its compact JSON."""
    return len(json.dumps(ids, separators=(",", ":"), ensure_ascii=False).encode())


def test_a_few_targets_are_all_listed() -> None:
    assert listed_target_ids(["demo", "nightly-2"]) == ["demo", "nightly-2"]


def test_the_ids_that_fit_are_listed_in_order() -> None:
    ids = [f"{n:02d}-" + "t" * 61 for n in range(40)]
    listed = listed_target_ids(ids)
    assert size(ids) > TARGET_IDS_MAX_BYTES >= size(listed)
    assert listed == ids[: len(listed)] and size(ids[: len(listed) + 1]) > TARGET_IDS_MAX_BYTES


@given(st.lists(st.text(min_size=1, max_size=80), max_size=80), st.integers(min_value=2, max_value=3000))
def test_the_listed_ids_are_the_longest_first_run_that_fits(ids: list[str], limit: int) -> None:
    listed = listed_target_ids(ids, limit)
    assert listed == ids[: len(listed)] and size(listed) <= limit
    assert len(listed) == len(ids) or size(ids[: len(listed) + 1]) > limit
