"""``EventPushWorkflow`` and the activity options of ``push_events``.

``JobWorkflow`` pushes its own events (:meth:`workflows.job.JobWorkflow._push`); this
small workflow runs the same ``push_events`` activity for events written while no job
workflow serves the job (started by the sweeper of :mod:`curaflow.callbacks`, workflow
id ``<job_id>/push-events``).

Deterministic and sandbox-clean: imports only pure modules.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from activities.callbacks import PushActivity
    from curaflow.domain.messages import CallbackPolicy, PushInput, PushReport


def push_options(policy: CallbackPolicy, *, summary: str = "push events") -> workflow.ActivityConfig:
    """``execute_activity`` options of ``push_events`` under ``policy`` (with its UI summary).

    Temporal retries the activity with the policy's backoff and no attempt limit of its
    own: the budget is per event (``max_attempts`` sends, counted in the ledger), and
    every failed attempt uses one send of some event, so retries always end. A heartbeat
    after each send detects a dead worker within one request timeout plus 30 s.
    """
    return workflow.ActivityConfig(
        summary=summary,
        start_to_close_timeout=timedelta(hours=1),
        heartbeat_timeout=timedelta(milliseconds=policy.timeout_ms + 30_000),
        retry_policy=RetryPolicy(
            initial_interval=timedelta(milliseconds=policy.initial_interval_ms),
            backoff_coefficient=2.0,
            maximum_interval=timedelta(milliseconds=max(policy.initial_interval_ms, policy.max_interval_ms)),
            maximum_attempts=0,
        ),
    )


@workflow.defn(name="EventPushWorkflow")
class EventPushWorkflow:
    """Push one job's pending events to its callback URL, then end."""

    @workflow.run
    async def run(self, inp: PushInput) -> PushReport:
        """Run ``push_events`` until it settles (returns its report)."""
        report: PushReport = await workflow.execute_activity_method(
            PushActivity.push_events, inp, **push_options(inp.policy)
        )
        return report
