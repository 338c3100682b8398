"""Job status from cells: the rule both status readers share (reference §1.4)."""

from __future__ import annotations

import pytest

from curaflow.domain.cells import CellState
from curaflow.domain.models import CellSnapshot, JobRecord
from curaflow.domain.projection import job_stage, job_status
from curaflow.protocol.projection import project_job


def cell(state: str, reason: str | None = None, stage: str = "queued") -> CellSnapshot:
    return CellSnapshot(target_id=f"t-{state}-{reason}", state=CellState(state), reason=reason, stage=stage)


@pytest.mark.parametrize(
    ("cells", "status"),
    [
        ([cell("pending")], "queued"),
        ([cell("pending", stage="searching")], "queued"),
        ([cell("selected")], "running"),
        ([cell("artifact_ready")], "running"),
        ([cell("delivery_pending")], "running"),
        ([cell("submitted")], "succeeded"),
        ([cell("no_candidate", "no_candidate")], "failed"),
        ([cell("duplicate", "duplicate_exhausted")], "failed"),
        ([cell("failed", "cancelled_by_consumer")], "cancelled"),
        ([cell("failed", "queued_too_long")], "expired"),
        ([cell("failed", "stalled_no_heartbeat")], "expired"),
        ([cell("failed", "execution_timeout")], "expired"),
        ([cell("failed", "delivery_rejected")], "failed"),
        ([cell("submitted"), cell("pending")], "running"),
        ([cell("submitted"), cell("failed", "auth_failed")], "succeeded"),
        ([cell("failed", "execution_timeout"), cell("no_candidate", "no_candidate")], "expired"),
        ([cell("failed", "execution_timeout"), cell("failed", "auth_failed")], "failed"),
    ],
)
def test_job_status(cells: list[CellSnapshot], status: str) -> None:
    assert job_status(cells) == status


def test_stage_is_least_advanced_open_cell() -> None:
    cells = [cell("selected", stage="fetching"), cell("pending", stage="searching")]
    assert job_stage(cells) == "searching"
    assert job_stage([cell("submitted")]) == "done"
    assert job_stage([cell("failed", "cancelled_by_consumer")]) == "cancelled"


def test_protocol_job_error_and_nullable_fields() -> None:
    record = JobRecord(
        job_id="demo@manual-k",
        plan_id="demo",
        idempotency_key="k",
        created_at=1,
        updated_at=2,
        completed_at=3,
        cells=[cell("failed", "cancelled_by_consumer")],
    )
    record.cells[0].reason_message = "The job was cancelled."
    job = project_job(record)
    assert job["status"] == "cancelled"
    assert job["error"] == {
        "code": "cancelled_by_consumer",
        "message": "The job was cancelled.",
        "retryable": False,
        "detail": {"internal_code": "cancelled_by_consumer", "deliveries": []},
    }
    for key in ("started_at", "heartbeat_at", "deadline_at", "lease_expires_at", "attempt"):
        assert key in job
    assert "correlation_id" not in job and "result" not in job
    assert job["progress"]["stage"] == "cancelled"
    assert job["events_url"] == "/jobs/demo@manual-k/events"


@pytest.mark.parametrize(
    "cells",
    [[cell("submitted")], [cell("failed", "cancelled_by_consumer")], [cell("no_candidate", "no_candidate")]],
)
def test_terminal_status_waits_for_the_finish_commit(cells: list[CellSnapshot]) -> None:
    """Every cell has its verdict but the finish (outcome + terminal event) has not
    committed: the job is still running, so a terminal status always comes with its event."""
    record = JobRecord(job_id="demo@manual-f", plan_id="demo", created_at=1, updated_at=2, cells=cells)
    job = project_job(record)
    assert job["status"] == "running" and job["progress"]["stage"] == "finishing"
    assert "result" not in job and "error" not in job

    done = project_job(record.model_copy(update={"completed_at": 3}))
    assert done["status"] == job_status(cells) and done["progress"]["stage"] != "finishing"


@pytest.mark.parametrize(
    ("reason", "owner"),
    [
        ("route_refused", "route"),
        ("delivery_rejected", "work"),
        ("remote_http_error", "source"),
        ("no_candidate", None),
    ],
)
def test_a_failed_jobs_error_names_who_caused_it(reason: str, owner: str | None) -> None:
    state = "no_candidate" if reason == "no_candidate" else "failed"
    record = JobRecord(
        job_id="demo@manual-k",
        plan_id="demo",
        idempotency_key="k",
        created_at=1,
        updated_at=2,
        completed_at=3,
        cells=[cell(state, reason)],
    )
    detail = project_job(record)["error"]["detail"]
    assert detail.get("owner") == owner
