"""A candidate's ``tags`` (``$defs/MatchedTag``) are its recall basis, no more, no less.

Protocol v1 (``Candidate.tags``): "Why a candidate matched: the producer must expose its
recall basis so the consumer can decide whether to accept it"; with ``expand`` "the
recall basis MUST still be reported in matched_tags". The basis is the seed tags of the
query that ran for the cell (the Task's ``params.query``, or the target as configured),
never the work's other tags. Before 2026-12-06 a Task naming only ``params.target_id``
reported every tag of the work as a matched seed (``星空``, ``クリック推奨`` … for a query
of ``風景``), and a seed the source matched as part of a tag (Pixiv's default partial
match: ``風`` finds ``風景``) reported no basis at all.
"""

from __future__ import annotations

from typing import Any

import pytest

from curaflow.domain.cells import CellState
from curaflow.domain.models import CellSnapshot, JobRecord, Work
from curaflow.protocol.projection import project_job, recall_basis

WORK_TAGS = ["風景", "星空", "背景", "オリジナル", "Landscape"]


def seeds(*tags: str) -> list[dict[str, Any]]:
    return [{"tag": t, "source": "seed", "weight": 1.0} for t in tags]


def succeeded(query: dict[str, Any] | None, params: dict[str, Any] | None = None) -> dict[str, Any]:
    work = Work(work_id="1", title="t", tags=WORK_TAGS)
    cell = CellSnapshot(target_id="demo", state=CellState.SUBMITTED, work_id="1", work=work, updated_at=2)
    record = JobRecord(
        job_id="demo@manual-k",
        plan_id="demo",
        created_at=1,
        updated_at=2,
        completed_at=3,
        params=params,
        queries={"demo": query} if query is not None else {},
        cells=[cell],
    )
    job = project_job(record)
    assert job["status"] == "succeeded"
    tags: list[dict[str, Any]] = job["result"]["candidates"][0]["tags"]
    return {"tags": tags}


def test_a_target_run_as_configured_reports_its_seed_tags_not_every_tag_of_the_work() -> None:
    assert succeeded({"tags": ["風景"]}) == {"tags": seeds("風景")}


def test_a_seed_the_source_matched_inside_a_tag_is_the_basis() -> None:
    assert succeeded({"tags": ["風"]}, params={"query": {"tags": ["風"]}}) == {"tags": seeds("風")}
    assert succeeded({"tags": ["landscape"]}) == {"tags": seeds("landscape")}


def test_every_seed_of_an_and_query_is_the_basis_of_what_it_recalled() -> None:
    assert succeeded({"tags": ["風景", "夜"], "relation": "and"}) == {"tags": seeds("風景", "夜")}


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({"tags": ["風景", "海"], "relation": "or"}, ["風景"]),
        ({"tags": ["風", "星"], "relation": "or"}, ["風", "星"]),
        ({"tags": ["海", "山"], "relation": "or"}, ["海", "山"]),  # matched on a name the work's tags lack
        ({"tags": ["風", "星"], "relation": "or", "search_target": "exact_match_for_tags"}, ["風", "星"]),
        ({"tags": ["風景", "星"], "relation": "or", "search_target": "exact_match_for_tags"}, ["風景"]),
        ({"tags": ["landscape", "海"], "relation": "or", "search_target": "exact_match_for_tags"}, ["landscape"]),
    ],
)
def test_an_or_query_reports_the_seeds_the_work_matches(query: dict[str, Any], expected: list[str]) -> None:
    assert recall_basis(query, WORK_TAGS) == seeds(*expected)


def test_a_ranking_recalls_by_no_tag() -> None:
    assert recall_basis({"mode": "ranking", "tags": []}, WORK_TAGS) == []
    assert recall_basis({"mode": "ranking", "tags": ["風景"]}, WORK_TAGS) == []


def test_a_record_without_its_queries_falls_back_to_the_task_query() -> None:
    assert succeeded(None, params={"query": {"tags": ["風景"]}}) == {"tags": seeds("風景")}
    assert succeeded(None) == {"tags": []}
