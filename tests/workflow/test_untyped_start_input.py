"""The push run's and the schedule's trampoline's start input: a JSON text with one meaning.

``EventPushWorkflow`` and ``ScheduledJobWorkflow`` take their one argument untyped
(:func:`curaflow.domain.workflow_input.read_one_input`); the worker's payload converter
marks a JSON object whose text has no one meaning — a member twice, ``NaN``, ``1e400`` —
as ``POST /jobs`` reads it (:class:`curaflow.protocol.json_text.AmbiguousObject`). Both
workflows refuse it, as the job workflow does (``one-meaning-input``), behind a patch of
their own (:data:`workflows.event_push.PUSH_ONE_MEANING`,
:data:`workflows.scheduled.OCCURRENCE_ONE_MEANING`): before, they took the SDK decoder's
reading — a push run of ``{"job_id":"a","job_id":"b"}`` pushed job ``b``'s events, an
occurrence naming ``schedule_id`` twice admitted the last plan's job. The old branches run
live in ``tests/workflow/test_versions.py``; both shapes' histories replay. A push run
started by hand is also tested against a real worker process
(``tests/integration/test_temporal_clients.py``).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError
from temporalio.exceptions import ApplicationError
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from curaflow.process.worker import sandbox_runner
from curaflow.protocol.json_text import json_text_refusal
from tests.support import short_id
from tests.workflow.harness import Env
from tests.workflow.test_admission import json_payload
from tests.workflow.test_push_bound import record
from tests.workflow.test_start_metadata import callers
from workflows.event_push import EventPushWorkflow

pytestmark = pytest.mark.integration


@contextlib.asynccontextmanager
async def pushers(env: Env, *, sandboxed: bool = True) -> AsyncIterator[str]:
    """A worker of ``EventPushWorkflow`` with the fake ``push_events`` (it records each
    ``PushInput`` in ``env.fakes.pushes``), on a queue of its own (yielded)."""
    [push_events] = [a for a in env.fakes.activities(lambda: env.client) if a.__name__ == "push_events"]
    queue = f"{env.queue}-push"
    async with Worker(
        env.client,
        task_queue=queue,
        workflows=[EventPushWorkflow],
        activities=[push_events],
        workflow_runner=sandbox_runner() if sandboxed else UnsandboxedWorkflowRunner(),
    ):
        yield queue


def occurrence_text(env: Env, schedule_ids: tuple[str, ...]) -> bytes:
    """A plan's JSON text naming ``schedule_id`` once per id given (the last one last)."""
    named = ",".join(f'"schedule_id":"{s}"' for s in schedule_ids)
    return f'{{{named},"cron":["0 3 * * *"],"task_queue":"{env.queue}"}}'.encode()


async def push_by_hand(env: Env, queue: str, text: bytes) -> str:
    """Start a push run with ``text`` as its input (bytes as written); its id once it closed."""
    push_id = f"push-events:hand-{short_id()}"
    await env.client.start_workflow("EventPushWorkflow", json_payload(text), id=push_id, task_queue=queue)
    await env.closed(env.client.get_workflow_handle(push_id), timeout_s=30)
    return push_id


async def occurrence_by_hand(env: Env, queue: str, text: bytes) -> str:
    """Start a trampoline with ``text`` as its input (bytes as written); its id once it closed."""
    trampoline_id = f"occ-{short_id()}"
    await env.client.start_workflow("ScheduledJobWorkflow", json_payload(text), id=trampoline_id, task_queue=queue)
    await env.closed(env.client.get_workflow_handle(trampoline_id), timeout_s=30)
    return trampoline_id


async def failure_of(env: Env, workflow_id: str) -> ApplicationError:
    """The non-retryable failure the run ended with."""
    with pytest.raises(WorkflowFailureError) as failed:
        await env.client.get_workflow_handle(workflow_id).result()
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError) and cause.non_retryable, cause
    return cause


async def activity_types(env: Env, workflow_id: str) -> list[str]:
    """The activities the run scheduled."""
    history = await env.client.get_workflow_handle(workflow_id).fetch_history()
    return [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]


@pytest.mark.parametrize(
    ("extra", "reason"),
    [
        pytest.param(("plan", "other"), "duplicate_member", id="a-member-twice"),
        pytest.param(("plan",), "not_json_number", id="nan"),
    ],
)
async def test_an_occurrence_whose_json_has_no_one_meaning_admits_nothing(
    env: Env, extra: tuple[str, ...], reason: str
) -> None:
    """An operator's hand edit of the schedule's action (or a trampoline started by hand)
    whose JSON text names ``schedule_id`` twice, or holds ``NaN`` where the plan reads
    nothing: the trampoline admitted the last plan's job and ran it. Now it fails at once
    with ``invalid_occurrence_input`` naming ``POST /jobs``'s refusal of that text."""
    job = env.job(job_id=f"other@{short_id()}", schedule_id="other", trigger="schedule")
    env.fakes.jobs[job.job_id] = job
    text = occurrence_text(env, extra)
    if reason == "not_json_number":
        text = text[:-1] + b',"jitter":NaN}'
    refusal = json_text_refusal(text)
    assert refusal is not None and refusal.detail["reason"] == reason
    async with callers(env, job) as queue:
        trampoline_id = await occurrence_by_hand(env, queue, text)
        if reason == "duplicate_member":
            record(env, trampoline_id, "scheduled_occurrence_ambiguous_input")
        cause = await failure_of(env, trampoline_id)

    assert cause.type == "invalid_occurrence_input" and refusal.message in cause.message, cause.message
    assert "curaflow schedules sync" in cause.message
    assert await activity_types(env, trampoline_id) == []  # nothing admitted
    assert env.fakes.steps() == []  # no job ran


async def test_a_push_run_whose_json_has_no_one_meaning_pushes_nothing(env: Env) -> None:
    """A push run started by hand with ``{"job_id":"a","job_id":"b"}`` pushed ``b``'s events;
    now it fails at once with ``invalid_push_input`` naming the refusal. A push run of one
    meaning still pushes (and records no marker: the patch is asked only for such input)."""
    async with pushers(env) as queue:
        twice = await push_by_hand(env, queue, b'{"job_id":"a","job_id":"b"}')
        once = await push_by_hand(env, queue, b'{"job_id":"b"}')
        cause = await failure_of(env, twice)
        kept = await env.client.get_workflow_handle(once).describe()
        markers = await env.events(env.client.get_workflow_handle(once), EventType.EVENT_TYPE_MARKER_RECORDED)

    assert cause.type == "invalid_push_input", cause
    assert "more than once" in cause.message and "'job_id'" in cause.message, cause.message
    assert await activity_types(env, twice) == []
    assert kept.status == WorkflowExecutionStatus.COMPLETED and markers == []
    assert [p.job_id for p in env.fakes.pushes] == ["b"]  # the run of one meaning only
