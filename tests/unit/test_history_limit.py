"""A job whose run Temporal itself terminated at a history limit is not reported as an
operator's terminate (:func:`curaflow.temporal.job_runs.at_history_limit`,
:func:`curaflow.ledger.reconciler.executions.close_cause`).

A breaker sent 29 junk signals of 1.9 MB each to a running ``JobWorkflow``: its history
passed the dev server's 50 MB limit in seconds, Temporal terminated the run (reason
``Workflow history size exceeds limit.``, identity ``history-service``), and the job ended
``cancelled / execution_terminated``, "An operator terminated…". Here the close event is
built as Temporal writes it, for each limit and for the terminates that are not Temporal's
own (``tests/integration/test_history_limit.py`` has a real server terminate a run).
"""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest
from temporalio.api.history.v1 import History, HistoryEvent, WorkflowExecutionTerminatedEventAttributes
from temporalio.api.workflowservice.v1 import GetWorkflowExecutionHistoryResponse
from temporalio.client import WorkflowExecutionStatus
from temporalio.common import SearchAttributePair, TypedSearchAttributes

from curaflow.domain.cells import CellState
from curaflow.domain.execution import JOB_TYPE
from curaflow.domain.models import CellSnapshot
from curaflow.domain.projection import job_status, stopped_on_purpose
from curaflow.domain.reasons import CANCEL_REASONS, REASONS, Owner, TerminalReason, protocol_code_for
from curaflow.domain.verdicts import FinishCause, cell_verdict
from curaflow.ledger.reconciler.executions import describe_execution
from curaflow.temporal.job_runs import HISTORY_SERVICE_IDENTITY, RESET_IDENTITY

SIZE = "Workflow history size exceeds limit."
COUNT = "Workflow history count exceeds limit."
CLOSED = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)


class Temporal:
    """A client of one terminated job run: its describe, and its close event."""

    def __init__(self, reason: str, identity: str) -> None:
        self.namespace = "default"
        self.history_reads = 0
        terminate = WorkflowExecutionTerminatedEventAttributes(reason=reason, identity=identity)
        self.close = History(
            events=[HistoryEvent(event_id=9, workflow_execution_terminated_event_attributes=terminate)]
        )
        self.workflow_service = SimpleNamespace(get_workflow_execution_history=self._history)

    async def _history(self, request: Any) -> GetWorkflowExecutionHistoryResponse:
        self.history_reads += 1
        assert request.execution.run_id == "run-1"
        return GetWorkflowExecutionHistoryResponse(history=self.close)

    def get_workflow_handle(self, job_id: str, run_id: str | None = None) -> Any:
        async def describe() -> Any:
            return SimpleNamespace(
                status=WorkflowExecutionStatus.TERMINATED,
                close_time=CLOSED,
                run_id="run-1",
                typed_search_attributes=TypedSearchAttributes([SearchAttributePair(JOB_TYPE, "candidate_search")]),
            )

        return SimpleNamespace(describe=describe)


@pytest.mark.parametrize("reason", [SIZE, COUNT, "Workflow mutable state size exceeds limit."])
async def test_temporals_own_terminate_at_a_history_limit_is_told_from_an_operators(reason: str) -> None:
    temporal = Temporal(reason, HISTORY_SERVICE_IDENTITY)
    execution = await describe_execution(temporal, "job-1", 0)  # type: ignore[arg-type]
    assert execution.closed_cause_for(0) == FinishCause.HISTORY_LIMIT
    assert temporal.history_reads == 1  # the close event alone


@pytest.mark.parametrize(
    ("reason", "identity"),
    [
        ("stuck", "operator@host"),  # an operator's terminate
        (SIZE, "operator@host"),  # an operator who wrote Temporal's words: still an operator's
        ("", "temporal-cli:alice@host"),
        ("Workflow history size exceeds limit", HISTORY_SERVICE_IDENTITY),  # not the words Temporal writes
        ("reset", RESET_IDENTITY),
    ],
)
async def test_any_other_terminate_is_read_as_an_operators_as_before(reason: str, identity: str) -> None:
    execution = await describe_execution(Temporal(reason, identity), "job-1", 0)  # type: ignore[arg-type]
    assert execution.closed_cause_for(0) == FinishCause.TERMINATED


def test_a_history_limit_ends_the_job_with_a_reason_naming_it_not_an_operators_stop() -> None:
    reason = cell_verdict(state="fetching", stage="fetch", cause=FinishCause.HISTORY_LIMIT)
    assert reason == TerminalReason.HISTORY_LIMIT_EXCEEDED
    info = REASONS[reason]
    assert "Temporal terminated the execution itself: its history passed Temporal's limit" in info.message_en
    assert "An operator terminated" not in info.message_en
    assert protocol_code_for(reason) == "internal_error"  # the closed enum's code; not a consumer's cancel
    assert reason not in CANCEL_REASONS and info.owner == Owner.OPERATOR
    cell = CellSnapshot(target_id="t", state=CellState.FAILED, reason=reason)
    assert not stopped_on_purpose([cell]) and job_status([cell]) == "failed"  # not "cancelled"
    # A consumer cancel recorded before the close is what stopped the job, as for a timeout.
    cancelled = cell_verdict(state="fetching", stage="fetch", cause=FinishCause.HISTORY_LIMIT, cancel_requested=True)
    assert cancelled == TerminalReason.CANCELLED_BY_CONSUMER
