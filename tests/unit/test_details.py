"""The job's *current details* in the Temporal UI.

UI 2.54.1 (the version the embedded dev server ships and ``tests/ui`` drives) renders
user markdown without table support: a table's cells ran together
(``demo submitteddone``); it also joins the lines of a nested list. Each cell of the job
is a line (target, state) followed by a top-level bullet list, one bullet per field.
"""

from __future__ import annotations

import re

from curaflow.domain.messages import JobInput, JobState, TargetSpec
from curaflow.domain.models import CellSnapshot, RouteDelivery, Work
from workflows.details import DETAILS_LIMIT, render_details

INP = JobInput(
    job_id="demo@manual-k",
    plan_id="demo",
    created_at_ms=1_735_700_400_000,
    deadline_at_ms=1_735_702_200_000,
    targets=[TargetSpec(target_id="demo"), TargetSpec(target_id="other")],
)


def state() -> JobState:
    done = CellSnapshot(
        target_id="demo",
        state="submitted",
        stage="done",
        work_id="126839080",
        work=Work(work_id="126839080", title="sky | sea", url="https://www.pixiv.net/artworks/126839080"),
        deliveries=[
            RouteDelivery(route="out", status="delivered", idempotency_key="k1"),
            RouteDelivery(route="hook", status="delivered", idempotency_key="k2"),
        ],
    )
    failed = CellSnapshot(target_id="other", state="no_candidate", stage="done", reason="duplicate_exhausted")
    return JobState(
        job_id="demo@manual-k",
        status="succeeded",
        stage="done",
        business_status="partial_success",
        cells=[done, failed],
    )


def plain_lines(markdown: str) -> list[str]:
    """What a renderer without table support shows: markup stripped, one entry per line."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", markdown)
    text = re.sub(r"[*`|]", "", text)
    return [re.sub(r"^\s*[-]\s*", "", line).strip() for line in text.splitlines() if line.strip()]


def test_each_cell_is_a_line_and_a_bullet_list_with_one_field_per_line() -> None:
    details = render_details(INP, state())

    assert "|---" not in details  # no table: UI 2.54.1 runs table cells together
    lines = plain_lines(details)
    assert "demo: submitted" in lines
    assert "stage: done" in lines
    assert "work: 126839080 sky / sea" in lines
    assert "deliveries: out: delivered, hook: delivered" in lines
    assert "other: no_candidate" in lines
    assert "reason: duplicate_exhausted" in lines
    assert "business status: partial_success" in lines
    # top-level bullets only (the UI joins a nested list's lines), each list after a blank line
    assert re.search(r"^\*\*demo\*\*: submitted\n\n- stage: done\n- work: ", details, re.M)
    assert not re.search(r"^[ \t]+- ", details, re.M)
    assert "\n\n\n" not in details


def test_details_stay_within_the_limit() -> None:
    many = state().model_copy(
        update={"cells": [c.model_copy(update={"target_id": f"t{i}"}) for i in range(400) for c in state().cells[:1]]}
    )
    assert len(render_details(INP, many)) <= DETAILS_LIMIT


def test_an_open_jobs_details_say_where_its_outcome_is_read_if_the_execution_is_closed() -> None:
    """A terminated or timed-out execution runs no code: its details stay as they were, so
    they say where the job's outcome is (the ledger) while the job is open, never after."""
    live = render_details(INP, state().model_copy(update={"business_status": None, "status": "running"}))
    assert f"curaflow status {INP.job_id}" in live and "Terminated or timed out" in live
    final = render_details(INP, state())
    assert "curaflow status" not in final
