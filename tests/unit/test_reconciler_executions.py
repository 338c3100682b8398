"""Which closed run is a verdict on a job (:mod:`curaflow.ledger.reconciler.executions`)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from temporalio.common import SearchAttributePair, TypedSearchAttributes

from curaflow.domain.execution import JOB_STATUS, JOB_TYPE
from curaflow.domain.verdicts import FinishCause
from curaflow.ledger.reconciler import Execution, run_held_a_job


def described(*pairs: SearchAttributePair[Any]) -> Any:
    return SimpleNamespace(typed_search_attributes=TypedSearchAttributes(list(pairs)))


@pytest.mark.parametrize(
    ("pairs", "held"),
    [
        ((), False),  # a Task run that refused its Task, or stopped before admitting it
        ((SearchAttributePair(JOB_TYPE, "candidate_search"),), True),  # started with, or admitted, a job
        ((SearchAttributePair(JOB_STATUS, "running"),), True),  # a job's own run started without attributes
    ],
)
def test_a_run_held_a_job_when_it_carries_the_jobs_type_or_status(pairs: tuple[Any, ...], held: bool) -> None:
    assert run_held_a_job(described(*pairs)) is held


def test_a_run_that_closed_after_the_job_without_holding_it_is_told_apart() -> None:
    refused = Execution(exists=True, close_cause=FinishCause.WORKFLOW_FAILED, closed_at_ms=2_000, held_job=False)
    assert refused.closed_without_job(1_000)
    assert not refused.closed_without_job(3_000)  # an earlier run under the id: not the job's at all
    assert refused.closed_cause_for(1_000) == FinishCause.WORKFLOW_FAILED  # the cause, asked second
    held = Execution(exists=True, close_cause=FinishCause.TERMINATED, closed_at_ms=2_000)
    assert not held.closed_without_job(1_000)
    assert held.closed_cause_for(1_000) == FinishCause.TERMINATED
    assert not Execution(exists=True).closed_without_job(0)  # running
    assert not Execution(exists=False).closed_without_job(0)


def test_a_run_refused_as_not_the_jobs_is_no_verdict_whatever_steps_it_ran() -> None:
    # A Task run that never admitted its Task ran nothing: no verdict on a job it did not start.
    unadmitted = Execution(exists=True, close_cause=FinishCause.WORKFLOW_FAILED, closed_at_ms=2_000, held_job=False)
    assert unadmitted.no_verdict(1_000, started=False)
    assert not unadmitted.no_verdict(1_000, started=True)  # another run started the job
    # A run refused as not the job's (its input was not the stored one) may have run the
    # job's own steps first: its failure is still no verdict (2026-12-07; it ended the job
    # internal_error before).
    refused = Execution(
        exists=True, close_cause=FinishCause.WORKFLOW_FAILED, closed_at_ms=2_000, held_job=False, refused=True
    )
    assert refused.no_verdict(1_000, started=False) and refused.no_verdict(1_000, started=True)
    assert not refused.no_verdict(3_000, started=True)  # an earlier run under the id
    held = Execution(exists=True, close_cause=FinishCause.TERMINATED, closed_at_ms=2_000)
    assert not held.no_verdict(1_000, started=False) and not held.no_verdict(1_000, started=True)
