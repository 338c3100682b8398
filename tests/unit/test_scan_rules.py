"""Pure rules of the candidate scan: the retrieval view and the fallback decision."""

from __future__ import annotations

import itertools

import pytest

from curaflow.domain.fallback import another_pass, pass_bounds
from curaflow.domain.messages import TargetFilters, TargetQuery, TargetSpec
from curaflow.domain.models import CandidateReport
from curaflow.sources.pixiv.scan import retrieval_params

DAYS = [None, "2024-12-01", "2025-01-15", "2025-02-04"]


def target(duration: str | None, start: str | None, end: str | None, sort: str = "date_desc") -> TargetSpec:
    return TargetSpec(
        target_id="t",
        query=TargetQuery(tags=["a", "b"], sort=sort, duration=duration, search_target="exact_match_for_tags"),
        filters=TargetFilters(start_date=start, end_date=end),
    )


@pytest.mark.parametrize("duration", [None, "within_last_week"])
def test_a_continuation_window_never_widens_the_query(duration: str | None) -> None:
    for start, end, w_start, w_end in itertools.product(DAYS, DAYS, DAYS, DAYS):
        window = {k: v for k, v in (("start_date", w_start), ("end_date", w_end)) if v}
        params = retrieval_params(target(duration, start, end), window)
        assert params["word"] == "a b" and params["search_target"] == "exact_match_for_tags"
        assert params.get("duration") == duration  # every filter of the target, on every page
        if start:
            assert params["start_date"] >= start
        if end:
            assert params["end_date"] <= end
        if w_start:
            assert params["start_date"] >= w_start
        if w_end:
            assert params["end_date"] <= w_end


def test_the_window_may_reverse_the_walk_but_keeps_everything_else() -> None:
    params = retrieval_params(
        target("within_last_month", None, None), {"start_date": "2025-01-20", "end_date": "2025-01-20"}, sort="date_asc"
    )
    assert params["sort"] == "date_asc" and params["duration"] == "within_last_month"
    assert params["start_date"] == params["end_date"] == "2025-01-20"


def test_pass_bounds_widen_up_to_the_cap() -> None:
    assert pass_bounds(30, 0) == (30, 5) and pass_bounds(30, 1) == (60, 10) and pass_bounds(30, 4) == (100, 25)
    assert pass_bounds(1, 0) == (1, 1) and pass_bounds(1, 2) == (3, 3)
    assert pass_bounds(100, 3) == (100, 20) and pass_bounds(100, 19) == pass_bounds(100, 20) == (100, 100)


def report(*, exhausted: bool, fetched: int = 3) -> CandidateReport:
    return CandidateReport(fetched=fetched, exhausted=exhausted)


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        # the source had nothing more: no later pass can find anything new
        ({"report": report(exhausted=True)}, False),
        # the pass looked at as many works as any pass may
        ({"report": report(exhausted=False, fetched=1000)}, False),
        # the pass stopped because it held its candidate bound: the next one keeps more
        ({"report": report(exhausted=False)}, True),
        # no pass left
        ({"report": report(exhausted=False), "fallback_pass": 2}, False),
        # a pass whose bound is not wider than this one's (both bounds at the cap)
        ({"report": report(exhausted=False), "scan_limit": 100, "fallback_pass": 19, "max_passes": 25}, False),
        # a protocol job has one pass
        ({"report": report(exhausted=False), "max_passes": 1}, False),
    ],
)
def test_another_pass_runs_only_when_it_is_wider_than_an_unexhausted_one(
    kwargs: dict[str, object], expected: bool
) -> None:
    args: dict[str, object] = {"fallback_pass": 0, "max_passes": 3, "scan_limit": 1, "max_examined": 1000}
    args.update(kwargs)
    assert another_pass(**args) is expected  # type: ignore[arg-type]
