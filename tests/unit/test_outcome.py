"""Cell classification, business status and the outcome record (reference §7)."""

from __future__ import annotations

import pytest

from curaflow.domain.cells import CellState
from curaflow.domain.models import CellSnapshot
from curaflow.domain.outcome import (
    BusinessStatus,
    CellCategory,
    build_outcome_record,
    business_message,
    business_status,
    cell_counts,
    classify_cell,
    is_alertable,
    ledger_status,
)


def cell(state: str, reason: str | None = None, target: str = "t") -> CellSnapshot:
    return CellSnapshot(target_id=target, state=CellState(state), reason=reason)


@pytest.mark.parametrize(
    ("state", "reason", "category"),
    [
        ("submitted", None, CellCategory.SUBMITTED),
        ("no_candidate", "no_candidate", CellCategory.NO_MATCH),
        ("no_candidate", "duplicate_exhausted", CellCategory.NO_MATCH),
        ("duplicate", "duplicate_exhausted", CellCategory.DUPLICATE),
        ("failed", "cancelled_by_consumer", CellCategory.CANCELLED),
        ("failed", "delivery_rejected", CellCategory.DELIVERY_FAILED),
        ("failed", "delivery_abandoned", CellCategory.DELIVERY_FAILED),
        ("failed", "delivery_unknown", CellCategory.DELIVERY_FAILED),
        ("failed", "telegram_failed", CellCategory.DELIVERY_FAILED),
        ("failed", "auth_failed", CellCategory.EXECUTOR_FAILED),
        ("failed", "stalled_no_heartbeat", CellCategory.EXECUTOR_FAILED),
        ("failed", "queued_too_long", CellCategory.EXECUTOR_FAILED),
        ("failed", None, CellCategory.EXECUTOR_FAILED),
        ("pending", None, CellCategory.OTHER),
        ("delivery_pending", None, CellCategory.OTHER),
    ],
)
def test_classification_precedence(state: str, reason: str | None, category: CellCategory) -> None:
    assert classify_cell(cell(state, reason)) == category


@pytest.mark.parametrize(
    ("cells", "expected"),
    [
        ([], BusinessStatus.SUCCESS),
        ([cell("submitted")], BusinessStatus.SUCCESS),
        ([cell("submitted"), cell("submitted")], BusinessStatus.SUCCESS),
        ([cell("submitted"), cell("failed", "auth_failed")], BusinessStatus.PARTIAL_SUCCESS),
        ([cell("submitted"), cell("failed", "cancelled_by_consumer")], BusinessStatus.PARTIAL_SUCCESS),
        ([cell("failed", "cancelled_by_consumer")], BusinessStatus.CANCELLED),
        ([cell("failed", "cancelled_by_consumer"), cell("no_candidate", "no_candidate")], BusinessStatus.CANCELLED),
        ([cell("failed", "cancelled_by_consumer"), cell("failed", "auth_failed")], BusinessStatus.FAILED),
        ([cell("no_candidate", "no_candidate")], BusinessStatus.NO_CANDIDATE),
        ([cell("no_candidate", "filter_exhausted")], BusinessStatus.NO_CANDIDATE),
        ([cell("duplicate")], BusinessStatus.DUPLICATE_ONLY),
        ([cell("no_candidate", "duplicate_exhausted")], BusinessStatus.DUPLICATE_ONLY),
        (
            [cell("no_candidate", "duplicate_exhausted"), cell("no_candidate", "no_candidate")],
            BusinessStatus.NO_CANDIDATE,
        ),
        ([cell("failed", "delivery_rejected")], BusinessStatus.FAILED),
        ([cell("failed", "stalled_no_heartbeat")], BusinessStatus.FAILED),
    ],
)
def test_business_status_rules(cells: list[CellSnapshot], expected: BusinessStatus) -> None:
    assert business_status(cells) == expected


def test_duplicate_cells_are_counted_once() -> None:
    # The original counts a duplicate cell carrying duplicate_exhausted twice and calls
    # two such cells `no_candidate`; curaflow reports `duplicate_only`.
    cells = [cell("duplicate", "duplicate_exhausted", "a"), cell("duplicate", "duplicate_exhausted", "b")]
    assert business_status(cells) == BusinessStatus.DUPLICATE_ONLY
    counts = cell_counts(cells)
    assert counts["duplicate"] == 2 and counts["all_duplicates"] is True


@pytest.mark.parametrize(
    ("cells", "expected"),
    [
        ([cell("no_candidate", "duplicate_exhausted")], True),  # the original says False
        ([cell("duplicate", target="a"), cell("no_candidate", "duplicate_exhausted", "b")], True),
        ([cell("submitted", target="a"), cell("no_candidate", "duplicate_exhausted", "b")], True),
        ([cell("duplicate", target="a"), cell("no_candidate", "no_candidate", "b")], False),
        ([cell("submitted")], False),
    ],
)
def test_all_duplicates_counts_duplicate_like_cells(cells: list[CellSnapshot], expected: bool) -> None:
    assert cell_counts(cells)["all_duplicates"] is expected
    if not any(c.state == CellState.SUBMITTED for c in cells):
        assert expected == (business_status(cells) == BusinessStatus.DUPLICATE_ONLY)


def test_only_failed_is_alertable() -> None:
    assert [s for s in BusinessStatus if is_alertable(s)] == [BusinessStatus.FAILED]


def test_user_messages_never_name_internal_errors() -> None:
    internal = ("error_code", "exception", "traceback", "internal_error", "auth_failed", "_")
    for status in BusinessStatus:
        for lang in ("en", "zh"):
            message = business_message(status, lang)
            assert message and not any(word in message for word in internal)
    assert business_message("no_candidate") == business_message("duplicate_only")


def test_outcome_record_fields() -> None:
    cells = [cell("submitted", target="a"), cell("failed", "cancelled_by_consumer", "b")]
    cells[0].work_id = "123"
    record = build_outcome_record(
        job_id="j",
        job_type="candidate_search",
        schedule_id="s",
        occurrence_at_ms=0,
        occurrence_date="1970-01-01",
        started_at_ms=1000,
        completed_at_ms=500,
        cells=cells,
    )
    assert record["event"] == "schedule.outcome" and record["outcome_version"] == 2
    assert record["slot_id"] == "j" and record["schedule_id"] == "s"
    assert record["job_type"] == "candidate_search"
    assert record["occurrence_at"] == "1970-01-01T00:00:00Z"
    assert record["status"] == "partial" and record["business_status"] == "partial_success"
    assert record["alertable"] is False
    assert record["duration_ms"] == 0
    counts = record["cells"]
    assert (counts["total"], counts["submitted"], counts["cancelled"]) == (2, 1, 1)
    assert [t["target_id"] for t in counts["targets"]] == ["a", "b"]
    assert counts["targets"][1]["terminal_reason_code"] == "cancelled_by_consumer"


def test_ledger_status() -> None:
    assert ledger_status([]) == "pending"
    assert ledger_status([cell("pending")]) == "running"
    assert ledger_status([cell("submitted")]) == "success"
    assert ledger_status([cell("submitted"), cell("no_candidate")]) == "partial"
    assert ledger_status([cell("duplicate")]) == "failed"


# ---- what landed is never hidden (DESIGN.md decision 13) -------------------------------


def partly(reason: str, *routes: tuple[str, str]) -> CellSnapshot:
    """A failed cell whose bound work has intents on ``routes`` (``(route, status)``)."""
    from curaflow.domain.models import RouteDelivery

    return CellSnapshot(
        target_id="p1",
        state=CellState.FAILED,
        reason=reason,
        work_id="w1",
        deliveries=[RouteDelivery(route=r, status=s, idempotency_key=f"k-{r}", work_id="w1") for r, s in routes],
    )


def test_a_cancelled_cell_whose_webhook_got_the_work_is_reported_as_published() -> None:
    from curaflow.domain.projection import job_status

    cells = [partly("cancelled_by_consumer", ("hook", "delivered"), ("dir", "released"))]
    assert job_status(cells) == "cancelled"  # the job was cancelled ...
    assert business_status(cells) == BusinessStatus.PARTIAL_SUCCESS  # ... after content went out
    assert not is_alertable(business_status(cells))
    record = build_outcome_record(
        job_id="p1@manual-k",
        job_type="candidate_search",
        schedule_id="p1",
        occurrence_at_ms=None,
        occurrence_date=None,
        started_at_ms=None,
        completed_at_ms=None,
        cells=cells,
    )
    assert record["cells"]["partially_delivered"] == 1
    assert record["status"] == "partial"
    assert record["deliveries"] == [
        {"target_id": "p1", "route": "hook", "work_id": "w1", "status": "delivered", "remote_id": None},
        {"target_id": "p1", "route": "dir", "work_id": "w1", "status": "released", "remote_id": None},
    ]


@pytest.mark.parametrize(
    ("routes", "expected"),
    [
        ((("dir", "released"),), BusinessStatus.CANCELLED),  # nothing went out
        ((("tg", "unknown"),), BusinessStatus.CANCELLED),  # may have landed: reported, not counted
        ((("hook", "duplicate"),), BusinessStatus.CANCELLED),  # the route already had it: nothing new
        ((("hook", "delivered"),), BusinessStatus.PARTIAL_SUCCESS),
    ],
)
def test_only_a_landed_delivery_counts_as_published(routes: tuple[tuple[str, str], ...], expected: str) -> None:
    assert business_status([partly("cancelled_by_consumer", *routes)]) == expected


def test_an_operators_terminate_is_a_deliberate_stop_not_an_alert() -> None:
    from curaflow.domain.projection import job_status, representative_cell

    cells = [cell("failed", "execution_terminated")]
    assert classify_cell(cells[0]) == CellCategory.CANCELLED
    assert job_status(cells) == "cancelled"
    assert business_status(cells) == BusinessStatus.CANCELLED and not is_alertable(BusinessStatus.CANCELLED)
    assert representative_cell(cells, "cancelled") is cells[0]


def test_an_operators_delete_of_the_execution_is_a_deliberate_stop_not_an_alert() -> None:
    from curaflow.domain.projection import job_status, representative_cell

    cells = [cell("failed", "execution_deleted")]
    assert classify_cell(cells[0]) == CellCategory.CANCELLED
    assert job_status(cells) == "cancelled"
    assert business_status(cells) == BusinessStatus.CANCELLED and not is_alertable(BusinessStatus.CANCELLED)
    assert representative_cell(cells, "cancelled") is cells[0]
    # what landed before (a send out at the deletion) is reported: partial, still no alert
    landed = [partly("execution_deleted", ("hook", "delivered"), ("broken", "released"))]
    assert business_status(landed) == BusinessStatus.PARTIAL_SUCCESS and job_status(landed) == "cancelled"


def test_a_route_refusal_stays_alertable_even_when_another_route_got_the_work() -> None:
    cells = [partly("delivery_rejected", ("hook", "delivered"), ("tg", "failed"))]
    assert business_status(cells) == BusinessStatus.FAILED and is_alertable(BusinessStatus.FAILED)
    assert cell_counts(cells)["partially_delivered"] == 1
