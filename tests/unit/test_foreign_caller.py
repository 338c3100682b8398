"""Which execution may run a job's activities (:func:`activities.caller.foreign_caller`).

Every legitimate caller is the job's ``JobWorkflow`` under the job id — HTTP, a Temporal
client's Task, a child job, the Nexus operation, a schedule's occurrence, the reconciler,
a reset or reporting run all start it so — plus, for ``push_events`` only, the sweeper's
``EventPushWorkflow`` under a push id of the job. Anything else is named in the refusal.
The integration side (a real worker, foreign workflows and standalone activities):
``tests/integration/test_foreign_caller.py``.

The job's own execution runs only the job's steps (:func:`activities.caller.foreign_input`):
what a step acts on must be what the job's input stored at admission holds; and only the
run of that input ends the job (:func:`activities.caller.foreign_run_input`,
:func:`activities.caller.finish_own_job`). The integration side:
``tests/integration/test_forged_job_input.py``.
"""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from temporalio.api.failure.v1 import ActivityFailureInfo, ApplicationFailureInfo, Failure
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.caller import (
    FOREIGN_CALLER,
    claim_of,
    finish_own_job,
    foreign_caller,
    foreign_input,
    foreign_run_input,
    legacy_push_workflow_id,
    refused_step,
    require_own_finish,
    require_own_job,
)
from curaflow.domain.execution import JOB_WORKFLOW, PUSH_WORKFLOW, SCHEDULED_WORKFLOW
from curaflow.domain.messages import (
    DeliverInput,
    JobInput,
    RouteRef,
    SearchInput,
    TargetFilters,
    TargetQuery,
    TargetSpec,
)
from curaflow.domain.verdicts import FailureKind, StepFailure
from curaflow.jobs.pushes import push_workflow_id
from curaflow.ledger.cells import StepClaim
from curaflow.ledger.finish import RunInputDiffers
from curaflow.temporal.job_runs import refused_as_not_the_jobs
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


# ---- the job's own execution runs only the job's steps (2026-12-07) ----------------------


def _admitted() -> JobInput:
    """A job's input as admission stores it: target ``demo`` on route A."""
    target = TargetSpec(
        target_id="demo", query=TargetQuery(tags=["sky"]), routes=[RouteRef(name="route-a", kind="directory")]
    )
    return JobInput(job_id=JOB, plan_id="demo", created_at_ms=1, deadline_at_ms=2, targets=[target])


def _stored(job: JobInput) -> dict[str, object]:
    return job.model_dump(mode="json")


def test_a_step_of_the_admitted_input_is_the_jobs() -> None:
    job = _admitted()
    target = job.targets[0]
    assert foreign_input(_stored(job), StepClaim(target, max_fallback_stages=1)) == []
    claim = StepClaim(target, route=target.routes[0], delivery_max_attempts=job.budgets.delivery_max_attempts)
    assert foreign_input(_stored(job), claim) == []


def test_a_stored_input_older_than_a_field_is_judged_with_its_defaults() -> None:
    # A job admitted before `scan_limit`, `storage_mode`, `source_heartbeat_timeout_ms`
    # existed: its run reads the defaults, so does the judgement.
    job = _admitted()
    stored = _stored(job)
    stored["targets"][0].pop("scan_limit")  # type: ignore[index]
    stored["targets"][0].pop("storage_mode")  # type: ignore[index]
    stored["budgets"].pop("source_heartbeat_timeout_ms")  # type: ignore[attr-defined]
    assert foreign_input(stored, StepClaim(job.targets[0], max_fallback_stages=1)) == []


@pytest.mark.parametrize(
    ("edit", "fields"),
    [
        ({"routes": [RouteRef(name="route-b", kind="directory")]}, ["target", "route"]),
        ({"query": TargetQuery(tags=["sea"])}, ["target"]),
        ({"filters": TargetFilters(r18=True)}, ["target"]),
        ({"limit": 5}, ["target"]),
        ({"exclude_work_ids": ["1"]}, ["target"]),
        ({"storage_mode": "cache"}, ["target"]),
        ({"target_id": "other"}, ["target", "route"]),
    ],
)
def test_a_step_asking_for_another_target_spec_is_not_the_jobs(edit: dict[str, object], fields: list[str]) -> None:
    job = _admitted()
    target = job.targets[0].model_copy(update=edit)
    claim = StepClaim(target, route=target.routes[0], delivery_max_attempts=job.budgets.delivery_max_attempts)
    assert foreign_input(_stored(job), claim) == fields


def test_a_step_asking_for_other_budgets_is_not_the_jobs() -> None:
    job = _admitted()
    target = job.targets[0]
    assert foreign_input(_stored(job), StepClaim(target, max_fallback_stages=3)) == ["max_fallback_stages"]
    claim = StepClaim(target, route=target.routes[0], delivery_max_attempts=99)
    assert foreign_input(_stored(job), claim) == ["budgets.delivery_max_attempts"]
    assert foreign_input({"not": "an input"}, StepClaim(target)) == ["workflow_input"]


def test_an_input_that_contradicts_itself_is_refused_before_any_read() -> None:
    job = _admitted()
    target = job.targets[0]

    async def claims(inp: SearchInput | DeliverInput) -> StepClaim:
        return claim_of(inp)

    elsewhere = DeliverInput(job_id=JOB, target=target, route=RouteRef(name="route-b", kind="directory"))
    beyond = SearchInput(job_id=JOB, target=target, fallback_stage=1, max_fallback_stages=1)
    for inp in (elsewhere, beyond):
        with pytest.raises(ApplicationError) as refused:
            asyncio.run(job_env(JOB).run(claims, inp))
        assert refused.value.type == FOREIGN_CALLER and refused.value.non_retryable
        assert refused.value.details[0]["fields"] in (["route"], ["fallback_stage"])
    assert asyncio.run(job_env(JOB).run(claims, SearchInput(job_id=JOB, target=target))).target == target


def test_finish_of_a_run_whose_step_was_refused_is_refused() -> None:
    refused_fact = StepFailure(step="acquire", kind=FailureKind.APPLICATION, error_type=FOREIGN_CALLER)
    other_fact = StepFailure(step="acquire", kind=FailureKind.APPLICATION, error_type="network_error")
    assert refused_step({"demo": other_fact}) is None
    assert refused_step({"a": other_fact, "demo": refused_fact}) == "demo"

    async def finish(failures: dict[str, StepFailure]) -> None:
        require_own_finish(JOB, failures)

    asyncio.run(job_env(JOB).run(finish, {"demo": other_fact}))
    with pytest.raises(ApplicationError) as refused:
        asyncio.run(job_env(JOB).run(finish, {"demo": refused_fact}))
    assert refused.value.type == FOREIGN_CALLER and refused.value.non_retryable
    assert "'demo'" in str(refused.value)


def test_a_run_failed_by_a_refusal_is_told_by_its_failures_causes() -> None:
    refusal = Failure(message="x", application_failure_info=ApplicationFailureInfo(type=FOREIGN_CALLER))
    wrapped = Failure(message="activity failed", activity_failure_info=ActivityFailureInfo(), cause=refusal)
    other = Failure(message="y", application_failure_info=ApplicationFailureInfo(type="internal_error"))
    assert refused_as_not_the_jobs(refusal) and refused_as_not_the_jobs(wrapped)
    assert not refused_as_not_the_jobs(other) and not refused_as_not_the_jobs(Failure())
    assert not refused_as_not_the_jobs(None)


# ---- only the run of the job's stored input ends the job (2026-12-07) ---------------------


def test_the_run_of_the_stored_input_is_the_jobs_run() -> None:
    job = _admitted()
    assert foreign_run_input(_stored(job), job) == []
    assert foreign_run_input(_stored(job), JobInput.model_validate(_stored(job))) == []


def test_a_stored_input_older_than_a_field_is_the_runs_once_its_defaults_are_filled() -> None:
    job = _admitted()
    stored = _stored(job)
    stored["targets"][0].pop("scan_limit")  # type: ignore[index]
    stored["budgets"].pop("source_heartbeat_timeout_ms")  # type: ignore[attr-defined]
    stored.pop("callback_policy")
    stored.pop("identity")
    assert foreign_run_input(stored, job) == []


@pytest.mark.parametrize(
    ("edit", "fields"),
    [
        ({"deadline_at_ms": 1}, ["deadline_at_ms"]),  # an earlier deadline: the workflow's timer
        ({"targets": []}, ["targets"]),  # a target left out: never stepped, judged open
        ({"source_task_queues": {"default": "nowhere"}}, ["source_task_queues"]),
        ({"max_fallback_stages": 3}, ["max_fallback_stages"]),
        ({"job_type": "other"}, ["job_type"]),
        ({"callback": True}, ["callback"]),
    ],
)
def test_a_run_whose_input_differs_anywhere_is_not_the_jobs_run(edit: dict[str, object], fields: list[str]) -> None:
    job = _admitted()
    assert foreign_run_input(_stored(job), job.model_copy(update=edit)) == fields


def test_a_run_with_other_budgets_names_each_of_them() -> None:
    job = _admitted()
    budgets = job.budgets.model_copy(update={"queued_timeout_ms": 3_000, "source_max_attempts": 1})
    assert foreign_run_input(_stored(job), job.model_copy(update={"budgets": budgets})) == [
        "budgets.queued_timeout_ms",
        "budgets.source_max_attempts",
    ]
    assert foreign_run_input({"not": "an input"}, job) == ["workflow_input"]


def test_finish_is_refused_for_a_run_of_another_input_and_done_again_for_an_older_stored_one() -> None:
    job = _admitted()
    older = _stored(job)
    older.pop("callback_policy")
    calls: list[JobInput | None] = []

    def ledger(stored: dict[str, object]) -> object:
        async def finish(run_input: JobInput | None) -> str:
            calls.append(run_input)
            if run_input is not None and stored != _stored(run_input):  # the read's jsonb equality
                raise RunInputDiffers(JOB, stored)
            return "finished"

        return finish

    async def finished(stored: dict[str, object], run_input: JobInput | None) -> str:
        return await finish_own_job(JOB, run_input, ledger(stored))  # type: ignore[arg-type]

    assert asyncio.run(job_env(JOB).run(finished, _stored(job), job)) == "finished"
    assert calls == [job]  # the same input: one read
    calls.clear()
    assert asyncio.run(job_env(JOB).run(finished, older, job)) == "finished"
    assert calls == [job, None]  # judged with its defaults, then finished without the comparison
    calls.clear()
    assert asyncio.run(job_env(JOB).run(finished, older, None)) == "finished"
    assert calls == [None]  # a run that names no input is not judged
    calls.clear()
    earlier = job.model_copy(update={"deadline_at_ms": 1})
    with pytest.raises(ApplicationError) as refused:
        asyncio.run(job_env(JOB).run(finished, older, earlier))
    assert calls == [earlier]  # nothing finished
    assert refused.value.type == FOREIGN_CALLER and refused.value.non_retryable
    assert refused.value.details[0]["fields"] == ["deadline_at_ms"]
    assert "deadline_at_ms" in str(refused.value)
