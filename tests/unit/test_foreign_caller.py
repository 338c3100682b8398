"""Which execution may run a job's activities (:func:`activities.caller.foreign_caller`).

Every legitimate caller is the job's ``JobWorkflow`` under the job id — HTTP, a Temporal
client's Task, a child job, the Nexus operation, a schedule's occurrence, the reconciler,
a reset or reporting run all start it so — plus, for ``push_events`` only, the sweeper's
``EventPushWorkflow`` under a push id of the job. Anything else is named in the refusal.
The integration side (a real worker, foreign workflows and standalone activities):
``tests/integration/test_foreign_caller.py``.
"""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.caller import FOREIGN_CALLER, foreign_caller, legacy_push_workflow_id, require_own_job
from curaflow.domain.execution import JOB_WORKFLOW, PUSH_WORKFLOW, SCHEDULED_WORKFLOW
from curaflow.jobs.pushes import push_workflow_id
from tests.support import job_env

JOB = "demo@manual-key-1"
OTHER = "demo@manual-key-2"


def test_the_jobs_own_execution_may_run_its_activities() -> None:
    assert foreign_caller(JOB, JOB, JOB_WORKFLOW) is None
    assert foreign_caller(JOB, JOB, JOB_WORKFLOW, pushes=True) is None


@pytest.mark.parametrize(
    ("workflow_id", "workflow_type"),
    [
        (OTHER, JOB_WORKFLOW),  # a JobWorkflow of another job (or a copy under a fresh id)
        (JOB, "RogueSteps"),  # another type under the job's id (its run closed, or none yet)
        ("rogue-1", "RogueSteps"),
        (JOB, SCHEDULED_WORKFLOW),  # the trampoline only admits; the job runs as its child
        (push_workflow_id(JOB), PUSH_WORKFLOW),  # the push run pushes, it runs no step
        (None, None),  # a standalone activity: no workflow at all
        (JOB.upper(), JOB_WORKFLOW),  # ids compare exactly
    ],
)
def test_any_other_caller_is_refused_naming_both(workflow_id: str | None, workflow_type: str | None) -> None:
    why = foreign_caller(JOB, workflow_id, workflow_type)
    assert why is not None
    assert repr(JOB) in why
    assert (repr(workflow_id) if workflow_id else "standalone activity") in why


def test_the_sweepers_push_run_may_push_its_jobs_events_only() -> None:
    for push_id in (push_workflow_id(JOB), legacy_push_workflow_id(JOB)):
        assert foreign_caller(JOB, push_id, PUSH_WORKFLOW, pushes=True) is None
        assert foreign_caller(OTHER, push_id, PUSH_WORKFLOW, pushes=True) is not None
        assert foreign_caller(JOB, push_id, "RogueSteps", pushes=True) is not None
    assert foreign_caller(JOB, JOB, PUSH_WORKFLOW, pushes=True) is not None


def test_a_refusal_is_non_retryable_and_typed() -> None:
    async def step() -> None:
        require_own_job(JOB)

    with pytest.raises(ApplicationError) as refused:
        asyncio.run(ActivityEnvironment().run(step))  # the SDK's default: workflow "test" of type "test"
    assert refused.value.type == FOREIGN_CALLER
    assert refused.value.non_retryable
    assert refused.value.details == (
        {"job_id": JOB, "workflow_id": "test", "workflow_type": "test", "activity_type": "unknown"},
    )
    asyncio.run(job_env(JOB).run(step))  # the job's own execution: nothing raised


def test_request_cancel_run_outside_any_workflow_says_so_naming_no_job() -> None:
    # request_cancel takes its job from the calling execution's id; a standalone activity
    # (`temporal activity start`) has none, and the refusal named the job as ''.
    from types import SimpleNamespace
    from typing import Any, cast

    from activities.finish import FinishActivity
    from curaflow.domain.messages import CancelRequest

    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, workflow_id=None, workflow_type=None, workflow_run_id=None)
    step = FinishActivity(cast(Any, SimpleNamespace())).request_cancel  # refused before any dependency is used
    with pytest.raises(ApplicationError) as refused:
        asyncio.run(env.run(step, CancelRequest()))
    assert refused.value.type == FOREIGN_CALLER and refused.value.non_retryable
    message = str(refused.value)
    assert "outside any workflow" in message
    assert "''" not in message and "job ''" not in message
    assert refused.value.details[0]["job_id"] is None
    assert foreign_caller(None, None, None) is not None
