"""Pushing a job's events to its ``callback_url`` from workflows.

* :class:`EventPusher`: ``JobWorkflow``'s pusher — at start, after every step and after
  ``finish``, one ``push_events`` run at a time; the job's end waits for it a bounded time
  (:meth:`EventPusher.settled_within`), then leaves what is pending to the sweeper;
* ``EventPushWorkflow``: the same ``push_events`` activity for events written while no
  job workflow serves the job (started by the sweeper of :mod:`curaflow.jobs.pushes`,
  workflow id ``push-events:<job_id>``).

Deterministic and sandbox-clean: imports only pure modules.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from activities.push_events import PushActivity
    from curaflow.domain.messages import INVALID_PUSH_INPUT, CallbackPolicy, PushInput, PushReport, read_push_input


#: ``workflow.patched`` id: a push run's start input whose JSON text has no one meaning — a
#: member twice (``{"job_id":"a","job_id":"b"}``), ``NaN`` / ``Infinity``, ``1e400`` — is
#: refused (``invalid_push_input`` naming ``POST /jobs``'s refusal of that text), as the job
#: workflow refuses it (``workflows.job.ONE_MEANING``). Before, the run took the SDK
#: decoder's reading of it and pushed the last ``job_id``'s events. Asked only for such an
#: input: the sweeper's runs record no marker.
PUSH_ONE_MEANING = "push-one-meaning-input"


def push_options(policy: CallbackPolicy, *, summary: str = "push events") -> workflow.ActivityConfig:
    """``execute_activity`` options of ``push_events`` under ``policy`` (with its UI summary).

    Temporal retries the activity with the policy's backoff and no attempt limit of its
    own: the budget is per event (``max_attempts`` sends, counted in the ledger), and
    every failed attempt that sent uses one send of some event. An attempt on a worker
    without ``api.callback_secret`` sends nothing (``configuration_mismatch``, paged by
    ``CuraflowConfigurationMismatch``): if no worker has the secret, retries go on until the
    job stops waiting or the push run's execution timeout, the events pending in the ledger
    for the sweeper's next run. A heartbeat
    after each send detects a dead worker within one request timeout plus 30 s.

    It runs on the policy's task queue, the pushes' own (``CallbackPolicy.task_queue``,
    since 2026-12-07), whose slots no job step shares; a policy without one on the
    workflow's. No patch: the queue is a field of the execution's frozen input, so an
    execution admitted (or a push run started) before has none and replays the commands it
    recorded; a build before it reads such an input without the field (the main queue,
    which every worker still serves ``push_events`` on).
    """
    options = workflow.ActivityConfig(
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
    if policy.task_queue:
        options["task_queue"] = policy.task_queue
    return options


class EventPusher:
    """Pushes one job's new events in the background, one ``push_events`` run at a time.

    A request made while a run is in flight is served by one more run after it; a failed
    run leaves the events pending in the ledger for the sweeper, and so does a run the
    job's end stopped waiting for (:meth:`settled_within`). No-op when the job has no
    callback.

    Args:
        job_id: the job.
        policy: its callback policy, or None when it has no ``callback_url``.
    """

    def __init__(self, job_id: str, policy: CallbackPolicy | None) -> None:
        self._job_id = job_id
        self._policy = policy
        self._wanted = self._done = 0
        self._task: asyncio.Task[None] | None = None
        self._stopped = False  # handed over to the sweeper: no run is scheduled any more

    def request(self) -> None:
        """Ask for the job's pending events to be pushed.

        Raises:
            Exception: the bug the previous push run died of (anything but the
                ``ActivityError`` a failed push raises): it fails the workflow task — a run
                that died so was replaced in silence, and the job's end took it for
                "settled" (until 2026-12-06).
        """
        self._raise_bug()
        if self._policy is None or self._stopped:
            return
        self._wanted += 1
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run(self._policy))

    def _raise_bug(self) -> None:
        """Raise what the push run died of, if it died of anything: a failed push is an
        ``ActivityError`` it catches, so anything else is a bug."""
        task = self._task
        if task is not None and task.done() and not task.cancelled():
            bug = task.exception()
            if bug is not None:
                raise bug

    async def _run(self, policy: CallbackPolicy) -> None:
        while self._done < self._wanted and not self._stopped:
            wanted = self._wanted
            with contextlib.suppress(ActivityError):
                await workflow.execute_activity_method(
                    PushActivity.push_events, PushInput(job_id=self._job_id, policy=policy), **push_options(policy)
                )
            self._done = wanted

    async def settled(self) -> None:
        """Push once more (the terminal event) and wait until every push settled, however
        long the policy's retries last (executions without ``push-bound``,
        :data:`workflows.job.PUSH_BOUND`)."""
        self.request()
        if self._task is not None:
            await self._task

    async def settled_within(self, wait: timedelta) -> bool:
        """Push once more (the terminal event) and wait until every push settled, at most
        ``wait`` (:func:`curaflow.domain.execution.end_push_wait`); then stop: the run in
        flight is cancelled without waiting for it (``TRY_CANCEL``: a send it has out is cut,
        its event stays claimed until the claim lapses) and no run follows. The events not
        yet delivered stay pending in the ledger, where the push sweeper finds them
        (:func:`curaflow.jobs.pushes.sweep_once`, ``push-events:<job_id>``) and sends them
        in order, each within what is left of its ``max_attempts``.

        The wait is one timer (``callback pushes``), started only when a run is still in
        flight and left pending when the pushes settle first (no ``TIMER_CANCELED``).

        Returns:
            True when every push settled within ``wait`` (or the job has no callback),
            False when the rest was handed over to the sweeper.

        Raises:
            Exception: a bug the push run died of (:meth:`request`).
        """
        if self._policy is None:
            return True
        self._raise_bug()
        if wait > timedelta(0):
            self.request()
            task = self._task
            assert task is not None  # a run was just requested
            timer = asyncio.create_task(workflow.sleep(wait, summary="callback pushes"))
            await workflow.wait_condition(lambda: task.done() or timer.done())
            if task.done():
                self._raise_bug()
                return True
        self._stopped = True
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        return False


@workflow.defn(name="EventPushWorkflow")
class EventPushWorkflow:
    """Push one job's pending events to its callback URL, then end."""

    @workflow.run
    async def run(self, *args: Any) -> PushReport:
        """Run ``push_events`` until it settles (returns its report).

        Args:
            args: one :class:`~curaflow.domain.messages.PushInput` (the push sweeper's). Read
                by :func:`~curaflow.domain.messages.read_push_input`, not by the SDK's
                decoder: input that is none (a client starting the workflow by hand) failed
                the workflow task on every attempt until 2026-12-07 — the run open for ever
                under ``push-events:<job id>``, where the sweeper found it "running" and
                pushed none of that job's events again.

        Raises:
            ApplicationError: ``invalid_push_input`` (non-retryable) for input that is no
                ``PushInput``, or whose JSON text has no one meaning (behind
                :data:`PUSH_ONE_MEANING`, asked only for such a text: before, the run pushed
                the last ``job_id`` of ``{"job_id":"a","job_id":"b"}``); nothing is pushed.
                Same commands as before for a ``PushInput``; other input never completed a
                workflow task before the untyped reading, so that refusal has no patch.
        """
        inp = read_push_input(args, one_meaning=lambda: workflow.patched(PUSH_ONE_MEANING))
        if isinstance(inp, str):
            raise ApplicationError(inp, type=INVALID_PUSH_INPUT, non_retryable=True)
        report: PushReport = await workflow.execute_activity_method(
            PushActivity.push_events, inp, **push_options(inp.policy)
        )
        return report
