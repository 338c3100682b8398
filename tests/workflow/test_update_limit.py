"""The same Task sent again and again to a running job (``start_job``'s idempotent retry).

Each ``start_job`` of a running job is an ``admission`` update (update-with-start), and
Temporal records every accepted update in the run's history and counts it against the
run's total (``history.maxTotalUpdates``, 2 000 by default). A dev server of its own with a
small total shows what a caller gets once the run reached it: Temporal's ``RPCError`` "The
limit on the total number of distinct updates in this workflow has been reached", not the
job (until 2026-12-07, when every call sent an update of a random id). The same Task now
sends the same update id (:func:`curaflow.jobs.submit.admission_update_id`): Temporal
answers it from the run's first answer and records nothing more.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from curaflow.devstack.temporal import temporal_binary
from curaflow.domain.execution import CUSTOM_SEARCH_ATTRIBUTES
from curaflow.domain.messages import JobState
from curaflow.jobs.submit import start_job
from tests.support import short_id
from tests.workflow.fakes import Act
from tests.workflow.harness import admitting, serving

pytestmark = pytest.mark.integration

#: This test's server's total of updates per run (Temporal's default is 2 000).
TOTAL_UPDATES = 4


async def test_start_job_of_a_running_job_answers_the_job_past_temporals_total_of_updates() -> None:
    server = await WorkflowEnvironment.start_local(
        data_converter=pydantic_data_converter,
        search_attributes=CUSTOM_SEARCH_ATTRIBUTES,
        dev_server_existing_path=temporal_binary(),
        dev_server_log_level="error",
        dev_server_startup_timeout=timedelta(seconds=60),
        dev_server_extra_args=["--dynamic-config-value", f"history.maxTotalUpdates={TOTAL_UPDATES}"],
    )
    try:
        address = server.client.service_client.config.target_host
        async with serving(server.client, address, sandboxed=False) as env:
            body = admitting(env, f"k-{short_id()}")
            env.fakes.on("search", "t", Act("held"))
            handle = await start_job(env.client, body, task_queue=env.queue)
            for _ in range(2 * TOTAL_UPDATES):  # a caller's retries while the job runs
                again = await start_job(env.client, dict(body), task_queue=env.queue)
                assert again.id == handle.id
            env.fakes.release("search")
            assert JobState.model_validate(await handle.result()).status == "succeeded"
            assert env.fakes.steps() == ["search", "fetch", "deliver"]  # one job ran, once
            accepted = [
                e
                async for e in handle.fetch_history_events()
                if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED
            ]
            assert len(accepted) == 1  # the same Task again recorded nothing more
    finally:
        await server.shutdown()
