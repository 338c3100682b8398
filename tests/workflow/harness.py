"""One workflow test's fakes, queues and in-process workers (``tests/workflow``).

:class:`Env` starts ``JobWorkflow`` executions the way ``POST /jobs`` does
(:func:`curaflow.temporal.connection.start_job_workflow`: search attributes, summary,
execution timeout) on a task queue of its own, served by :func:`workers` — the real
workflow with the fake activities of :mod:`tests.workflow.fakes`. Everything it waits for
is a condition (:func:`tests.support.eventually`), never a fixed pause.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType, PendingActivityState
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError, WorkflowHandle
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from curaflow.devstack.temporal import temporal_binary
from curaflow.domain.job_failure import state_of
from curaflow.domain.messages import JobInput, JobState
from curaflow.process.worker import sandbox_runner
from curaflow.protocol.task import manual_job_id
from curaflow.temporal.connection import start_job_workflow
from tests.support import closed_status, eventually
from tests.workflow.fakes import Fakes, job_input
from workflows.job import JobWorkflow

WORK_STEPS = ("search", "fetch", "deliver")  # as the fakes record them (acquire = search then fetch)
SOURCE = ("acquire", "search", "fetch")  # the activities of the account's source queue
#: The Temporal activity that runs each recorded step (``acquire`` runs search and fetch).
ACTIVITY_OF = {"search": "acquire", "fetch": "acquire", "deliver": "deliver"}


def temporal_activity(env: Env, verb: str, job_id: str, activity_id: str, *extra: str) -> None:
    """``temporal activity <verb>`` on step ``activity_id`` of job ``job_id``, as an operator
    runs it (``pause``, ``update-options``, ``fail``, ``complete``…; ``extra``: its flags);
    asserts the command succeeded. Blocking: call it through ``asyncio.to_thread``."""
    done = subprocess.run(
        [temporal_binary(), "activity", verb, "--address", env.address, "-w", job_id, "-a", activity_id, *extra],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr


async def pending_step_id(handle: WorkflowHandle[Any, Any], step: str) -> str:
    """The activity id of the job's pending ``step`` (``search``, ``fetch``, ``deliver``:
    :data:`ACTIVITY_OF`); raises StopIteration when none is pending."""
    described = await handle.describe()
    return next(
        p.activity_id for p in described.raw_description.pending_activities if p.activity_type.name == ACTIVITY_OF[step]
    )


class Env:
    """One test's fakes, queues and workers."""

    def __init__(self, client: Client, address: str) -> None:
        self.client = client
        self.address = address
        self.fakes = Fakes()
        self.queue = f"wf-{uuid.uuid4().hex[:8]}"
        self.source_queue = f"{self.queue}-source"

    def job(self, targets: dict[str, list[str]] | None = None, **kwargs: Any) -> JobInput:
        """A ``JobInput`` on this env's queues (:func:`tests.workflow.fakes.job_input`)."""
        job_id = kwargs.pop("job_id", None) or f"job-{uuid.uuid4().hex[:8]}"
        return job_input(job_id, targets or {"t": ["a"]}, source_queue=self.source_queue, **kwargs)

    async def start(self, inp: JobInput) -> WorkflowHandle[Any, JobState]:
        """Start the job's execution as ``POST /jobs`` does; the handle is typed."""
        self.fakes.jobs[inp.job_id] = inp
        await start_job_workflow(self.client, inp, self.queue)
        return self.client.get_workflow_handle_for(JobWorkflow.run, inp.job_id)  # type: ignore[arg-type]

    async def called(self, step: str, timeout_s: float = 10) -> None:
        """Wait until ``step`` was called and its attempt runs: its activity heartbeated
        to the server, so a cancel reaches it."""
        await eventually(
            lambda: step in self.fakes.steps(),
            timeout_s=timeout_s,
            interval_s=0.02,
            what=lambda: f"{step} called: {self.fakes.steps()}",
        )
        job_id = next(c.job_id for c in self.fakes.calls if c.step == step)
        await self.beating(self.client.get_workflow_handle(job_id), ACTIVITY_OF[step], timeout_s=timeout_s)

    async def beating(self, handle: WorkflowHandle[Any, Any], activity_type: str, timeout_s: float = 10) -> None:
        """Wait until a started attempt of ``activity_type`` has heartbeated to the server."""

        async def beat() -> bool:
            pending = (await handle.describe()).raw_description.pending_activities
            return any(
                p.activity_type.name == activity_type
                and p.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED
                and p.HasField("last_heartbeat_time")
                for p in pending
            )

        await eventually(beat, timeout_s=timeout_s, interval_s=0.02, what=f"{activity_type} heartbeating")

    async def terminate_open(self) -> None:
        """Terminate every job this env started that is still running (a test's teardown,
        before its workers stop): a test that failed with its job in flight — a job of
        1 000 cells whose workflow tasks the SDK's deadlock detector kept failing on a busy
        machine — otherwise left the workers' shutdown waiting on it, and the run hung."""
        for job_id in list(self.fakes.jobs):
            with contextlib.suppress(RPCError):  # closed already, or never started
                await self.client.get_workflow_handle(job_id).terminate(reason="the test ended")

    async def closed(self, handle: WorkflowHandle[Any, Any], timeout_s: float = 20) -> WorkflowExecutionStatus:
        status: WorkflowExecutionStatus = await closed_status(self.client, handle.id, timeout_s)
        return status

    async def scheduled(self, handle: WorkflowHandle[Any, Any]) -> list[tuple[int, str]]:
        """``(event id, activity type)`` of every activity, scheduled or local (its marker)."""
        history = await handle.fetch_history()
        found = []
        for e in history.events:
            if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
                found.append((e.event_id, e.activity_task_scheduled_event_attributes.activity_type.name))
            elif e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED:
                attrs = e.marker_recorded_event_attributes
                if attrs.marker_name == "core_local_activity":
                    data = json.loads(attrs.details["data"].payloads[0].data)
                    found.append((e.event_id, data["activity_type"]))
        return found

    async def events(self, handle: WorkflowHandle[Any, Any], kind: int) -> list[int]:
        history = await handle.fetch_history()
        return [e.event_id for e in history.events if e.event_type == kind]

    async def search_attributes(self, handle: WorkflowHandle[Any, Any]) -> dict[str, Any]:
        """The execution's search attributes as the server holds them (name → value)."""
        described = await handle.describe()
        return {pair.key.name: pair.value for pair in described.typed_search_attributes}

    async def details(self, handle: WorkflowHandle[Any, Any]) -> str:
        """The execution's current details (the UI's markdown), as the worker answers them."""
        metadata = await handle.query("__temporal_workflow_metadata")
        return str(metadata.current_details)

    async def status(self, handle: WorkflowHandle[Any, Any]) -> JobState:
        """The ``status`` query's answer."""
        return JobState.model_validate(await handle.query("status"))

    async def status_until(
        self, handle: WorkflowHandle[Any, Any], check: Callable[[JobState], bool], what: str, timeout_s: float = 10
    ) -> JobState:
        """The ``status`` query's answer once ``check`` holds for it."""
        seen: list[JobState] = []

        async def probe() -> JobState | None:
            seen[:] = [await self.status(handle)]
            return seen[0] if check(seen[0]) else None

        return await eventually(probe, timeout_s=timeout_s, interval_s=0.02, what=lambda: f"{what}: {seen}")


def workers(
    env: Env, *, sandboxed: bool, source: bool = True, max_cached_workflows: int = 1000
) -> contextlib.AbstractAsyncContextManager[None]:
    """``env``'s workers: the workflow's queue (``JobWorkflow`` and the job-level fakes) and,
    with ``source``, the account's source queue (``acquire``, ``search``, ``fetch``).
    ``max_cached_workflows``: the workflow worker's cache (0: every execution is evicted
    after each activation and replayed at the next — the SDK's default is 1 000)."""

    @contextlib.asynccontextmanager
    async def run() -> AsyncIterator[None]:
        acts = env.fakes.activities(lambda: env.client)
        main = [a for a in acts if a.__name__ not in SOURCE]
        src = [a for a in acts if a.__name__ in SOURCE]
        runner = sandbox_runner() if sandboxed else UnsandboxedWorkflowRunner()
        beat = timedelta(milliseconds=100)
        async with contextlib.AsyncExitStack() as stack:
            await stack.enter_async_context(
                Worker(
                    env.client,
                    task_queue=env.queue,
                    workflows=[JobWorkflow],
                    activities=main,
                    workflow_runner=runner,
                    max_cached_workflows=max_cached_workflows,
                    max_heartbeat_throttle_interval=beat,
                    default_heartbeat_throttle_interval=beat,
                )
            )
            if source:
                await stack.enter_async_context(
                    Worker(
                        env.client,
                        task_queue=env.source_queue,
                        activities=src,
                        max_heartbeat_throttle_interval=beat,
                        default_heartbeat_throttle_interval=beat,
                    )
                )
            yield

    return run()


def task_for(key: str, **params: Any) -> dict[str, Any]:
    """The protocol Task (``POST /jobs``'s body, protocol 1) of a ``candidate_search`` job
    for target ``t`` under idempotency key ``key``; ``params`` join its ``params``."""
    return {
        "protocol_version": "1",
        "job_type": "candidate_search",
        "idempotency_key": key,
        "params": {"target_id": "t", **params},
    }


def admitting(env: Env, key: str, **kwargs: Any) -> dict[str, Any]:
    """:func:`task_for` ``key``, whose admission creates ``env``'s job under the Task's job id
    (``manual_job_id``); ``kwargs`` go to :meth:`tests.workflow.fakes.Fakes.admit_as`
    (``final``: the job already ended; ``own_run``: this run is the job's own)."""
    env.fakes.admit_as(env.job(job_id=manual_job_id("t", key), trigger="temporal"), **kwargs)
    return task_for(key)


async def ends_as_the_job_did(handle: WorkflowHandle[Any, Any], ended: JobState, failure: str | None) -> None:
    """The run ended as its ended job did (docs/DESIGN.md, decision 15): with ``failure``
    ``None`` it completed with the job's state ``ended``; otherwise it failed with an
    ``ApplicationError`` of type ``failure`` (``job_failed``, ``job_expired``) carrying
    ``ended`` (:func:`curaflow.domain.job_failure.state_of`)."""
    if failure is None:
        assert JobState.model_validate(await handle.result()) == ended
        return
    with pytest.raises(WorkflowFailureError) as failed:
        await handle.result()
    assert isinstance(failed.value.cause, ApplicationError) and failed.value.cause.type == failure
    assert state_of(failed.value) == ended


@contextlib.asynccontextmanager
async def serving(client: Client, address: str, *, sandboxed: bool) -> AsyncIterator[Env]:
    """A fresh :class:`Env` served by its :func:`workers`; on exit every job it started that
    is still open is terminated (:meth:`Env.terminate_open`) before the workers stop."""
    env = Env(client, address)
    async with workers(env, sandboxed=sandboxed):
        try:
            yield env
        finally:
            await env.terminate_open()


async def result_of(handle: WorkflowHandle[Any, Any]) -> JobState:
    return JobState.model_validate(await handle.query("status"))


async def cancel_by(env: Env, path: str, handle: WorkflowHandle[Any, Any]) -> None:
    """Cancel the job through ``path``: ``signal`` (the ``temporal`` CLI's ``cancel``
    signal, no argument) or ``temporal`` (a Temporal cancel request); ``ledger`` does
    nothing here (the activity finds the cancel)."""
    if path == "signal":
        await asyncio.to_thread(
            subprocess.run,
            [temporal_binary(), "workflow", "signal", "--address", env.address, "-w", handle.id, "--name", "cancel"],
            check=True,
            capture_output=True,
            timeout=30,
        )
    elif path == "temporal":
        await handle.cancel()
