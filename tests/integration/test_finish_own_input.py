"""Only the run of the job's stored input ends the job — and every run that holds it does.

``finish`` compares the ``JobInput`` the finishing run holds with the job's input stored at
admission (``jobs.workflow_input``) in the job's read, as ``jsonb`` (6464aa8,
``activities.caller.finish_own_job``); a stored input that differs at a glance is judged in
Python with its defaults filled, and the job finished by a second call. These run
``finish`` as the workflow sends it, on the real ledger, for the inputs a legitimate run
holds: the one admission answered (a Task's run, ``POST /jobs``), the one the reconciler
reads back (``workflow_input``), and one stored by an earlier version, without the fields
added since — its run, started then, holds it as its own payload read with the defaults
(the second call's path).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from temporalio.exceptions import ApplicationError

from activities import caller
from activities.deps import ActivityDeps, close_deps, open_deps
from activities.finish import FinishActivity
from curaflow.domain.execution import FOREIGN_CALLER
from curaflow.domain.messages import FinishInput, JobInput
from curaflow.jobs.admission import Admitter
from curaflow.ledger.jobs import workflow_input
from tests.conftest import StackFactory
from tests.support import Stack, run_as_job, short_id

pytestmark = pytest.mark.integration


@pytest.fixture
async def deps(make_stack: StackFactory, tmp_path: Path) -> AsyncIterator[tuple[Stack, ActivityDeps]]:
    out = f"out-{short_id()}"
    stack = make_stack(
        {
            "routes": {out: {"kind": "directory", "path": str(tmp_path / "delivered")}},
            "targets": [{"id": "demo", "query": {"mode": "ranking"}, "routes": [out]}],
        }
    )
    opened = await open_deps(stack.settings, None)
    try:
        yield stack, opened
    finally:
        await close_deps(opened)


async def admitted(stack: Stack, deps: ActivityDeps) -> JobInput:
    """A job admitted as ``POST /jobs`` admits it (not started): the input its run holds."""
    task = {
        "protocol_version": "1",
        "job_type": "candidate_search",
        "idempotency_key": f"own-input-{short_id()}",
        "params": {"target_id": "demo", "query": {"tags": ["風景", 'a "quoted" \\ tag']}},
    }
    admission = await Admitter(stack.settings, deps.pool, None).admit(task, start=False)
    assert admission.job_input is not None
    return admission.job_input


async def finished(deps: ActivityDeps, run_input: JobInput) -> Any:
    """``finish`` as the workflow sends it (its run's input with the facts); the job row after."""
    final = await run_as_job(FinishActivity(deps).finish, FinishInput(job_id=run_input.job_id, job_input=run_input))
    row = await deps.pool.fetchrow("SELECT completed_at FROM jobs WHERE job_id = $1", run_input.job_id)
    return final, row


async def test_the_run_of_the_input_admission_answered_ends_the_job(deps: tuple[Stack, ActivityDeps]) -> None:
    stack, opened = deps
    inp = await admitted(stack, opened)
    final, row = await finished(opened, inp)
    assert row["completed_at"] is not None and final.status == "failed", (final, dict(row))  # its cell never stepped


async def test_the_run_the_reconciler_starts_from_the_stored_input_ends_the_job(
    deps: tuple[Stack, ActivityDeps],
) -> None:
    stack, opened = deps
    inp = await admitted(stack, opened)
    async with opened.pool.acquire() as conn:
        stored = await workflow_input(conn, inp.job_id)
    assert stored is not None
    final, row = await finished(opened, stored)
    assert row["completed_at"] is not None and final.status == "failed", (final, dict(row))  # its cell never stepped


#: Fields added to the stored input after a version that admitted jobs still open at an
#: upgrade: each is absent from what that version stored and from its run's payload.
LATER_FIELDS = (
    "#- '{budgets,source_heartbeat_timeout_ms}' #- '{callback_policy}' #- '{identity}' "
    "#- '{targets,0,scan_limit}' #- '{targets,0,storage_mode}' #- '{targets,0,routes,0,task_queue}'"
)


async def test_the_run_of_an_input_stored_before_a_field_existed_ends_the_job(
    deps: tuple[Stack, ActivityDeps], ledger_pool: asyncpg.Pool, monkeypatch: pytest.MonkeyPatch
) -> None:
    stack, opened = deps
    judged: list[list[str]] = []
    real = caller.foreign_run_input

    def judging(stored: Any, run_input: JobInput) -> list[str]:
        judged.append(real(stored, run_input))
        return judged[-1]

    monkeypatch.setattr(caller, "foreign_run_input", judging)
    inp = await admitted(stack, opened)
    old = await ledger_pool.fetchval(
        f"UPDATE jobs SET workflow_input = workflow_input {LATER_FIELDS} WHERE job_id = $1 RETURNING workflow_input",
        inp.job_id,
    )
    assert "identity" not in old and "source_heartbeat_timeout_ms" not in old["budgets"], old
    # The run started then holds its own payload — the stored input — read with today's defaults.
    run_input = JobInput.model_validate(old)
    final, row = await finished(opened, run_input)
    assert row["completed_at"] is not None and final.status == "failed", (final, dict(row))  # its cell never stepped
    assert judged == [[]], "differs at a glance (the fields it predates), the run's once its defaults are filled"


async def test_a_run_whose_input_is_not_the_stored_one_ends_nothing(
    deps: tuple[Stack, ActivityDeps], ledger_pool: asyncpg.Pool
) -> None:
    stack, opened = deps
    inp = await admitted(stack, opened)
    await ledger_pool.execute(
        f"UPDATE jobs SET workflow_input = workflow_input {LATER_FIELDS} WHERE job_id = $1", inp.job_id
    )
    forged = JobInput.model_validate(
        await ledger_pool.fetchval("SELECT workflow_input FROM jobs WHERE job_id = $1", inp.job_id)
    ).model_copy(update={"deadline_at_ms": inp.deadline_at_ms - 60_000})
    with pytest.raises(ApplicationError) as refused:
        await finished(opened, forged)
    assert refused.value.type == FOREIGN_CALLER, refused.value
    assert refused.value.details[0]["fields"] == ["deadline_at_ms"], refused.value.details
    assert await ledger_pool.fetchval("SELECT completed_at FROM jobs WHERE job_id = $1", inp.job_id) is None
