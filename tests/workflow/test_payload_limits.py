"""A job whose values are large still ends: what ``JobWorkflow`` carries in its Temporal
payloads stays under the server's blob limit (``limit.blobSize.error``, 2 MB a payload).

The real workflow on the session's dev server with the fakes of :mod:`tests.workflow.fakes`;
``finish`` answers the final state as the ledger's reader builds it
(:func:`curaflow.domain.state.job_state`).
"""

from __future__ import annotations

import json
import uuid

import pytest
from temporalio import activity
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.worker import Worker

from curaflow.domain.models import BRIEF_TITLE_CHARS, Work, WorkPage
from curaflow.domain.occurrence import AdmitOccurrenceInput, OccurrenceAdmission, OccurrenceInput
from curaflow.domain.presentation import TARGET_IDS_MAX_BYTES
from curaflow.domain.state import STATE_MAX_BYTES
from curaflow.process.worker import sandbox_runner
from tests.workflow.harness import SOURCE, Env
from workflows.job import JobWorkflow
from workflows.scheduled import ScheduledJobWorkflow

pytestmark = pytest.mark.integration

#: Pages of a long manga: Pixiv takes 200 images a work.
PAGES = 200


def manga(work_id: str) -> Work:
    """A work of :data:`PAGES` pages, as the app-api lists one."""
    url = "https://i.pximg.net/img-original/img/2026/12/06/10/13/26/{}_p{}.png"
    pages = [WorkPage(index=p, url=url.format(work_id, p), width=1000, height=1400) for p in range(PAGES)]
    return Work(work_id=work_id, title="manga", url=f"https://www.pixiv.net/artworks/{work_id}", pages=pages)


async def test_a_job_of_many_long_works_ends_with_its_final_state(env: Env) -> None:
    """40 targets each delivering a 200-page work: the ledger's final state of the job is
    ~2.8 MB in full (each work's pages, each artifact's files), over the blob limit. Before,
    the ``finish`` local activity's result could not be recorded: every workflow task
    failed (``PayloadsTooLarge``), the job stayed ``running`` in Temporal until its
    execution timed out, and ``result()`` never gave its state."""
    targets = {f"target-{n:02d}": ["a"] for n in range(40)}
    for n, tid in enumerate(targets):
        env.fakes.works[tid] = manga(str(126872000 + n))
    handle = await env.start(env.job(targets, deadline_ms=120_000))

    assert await env.closed(handle, timeout_s=30) == WorkflowExecutionStatus.COMPLETED
    final = await handle.result()
    assert final.status == "succeeded" and final.business_status == "success"
    assert [(c.target_id, c.state, c.work_id) for c in final.cells] == [
        (tid, "submitted", str(126872000 + n)) for n, tid in enumerate(targets)
    ]
    assert len(final.deliveries) == 40
    # the cells come in brief form: the work's id, title and URL, not its 200 pages
    assert len(final.model_dump_json()) <= STATE_MAX_BYTES
    assert {(c.work.title, len(c.work.pages)) for c in final.cells if c.work is not None} == {("manga", 0)}
    attributes = await env.search_attributes(handle)
    assert (attributes["JobStatus"], attributes["BusinessStatus"]) == ("succeeded", "success")


async def test_a_work_whose_title_is_over_the_blob_limit_is_delivered(env: Env) -> None:
    """A work the source describes with a 3 MB title (4 MiB search pages hold one): the
    step's result carries the title cut with a marker. Before, ``acquire``'s result could
    not be uploaded (``PayloadsTooLarge``): every attempt bound, fetched and failed, and the
    cell ended ``internal_error`` — in every job that found the work again."""
    env.fakes.works["t"] = Work(work_id="126872003", title="題" * 1_000_000)
    handle = await env.start(env.job())

    assert await env.closed(handle) == WorkflowExecutionStatus.COMPLETED
    final = await handle.result()
    assert (final.status, [(c.state, c.work_id) for c in final.cells]) == ("succeeded", [("submitted", "126872003")])
    assert [c.step for c in env.fakes.calls] == ["search", "fetch", "deliver"]  # one attempt each
    title = final.cells[0].work.title if final.cells[0].work is not None else ""
    assert title == "題" * (BRIEF_TITLE_CHARS - 1) + "…"


#: Target ids of the longest shape configuration takes (``[A-Za-z0-9_-]{1,64}``).
LONG_IDS = [f"{n:02d}-" + "t" * 61 for n in range(40)]


async def test_a_job_of_many_targets_starts(env: Env) -> None:
    """A job of 40 targets with 64-character ids: ``TargetIds`` in full is 2 681 bytes, over
    the server's limit on one search attribute value (2 048). Before, the start was refused
    (``search attribute TargetIds value size … exceeds size limit``); now it lists the
    targets that fit, in the job's order."""
    handle = await env.start(env.job({tid: ["a"] for tid in LONG_IDS}))

    assert await env.closed(handle) == WorkflowExecutionStatus.COMPLETED
    listed = (await env.search_attributes(handle))["TargetIds"]
    assert listed == LONG_IDS[: len(listed)] and len(json.dumps(listed, separators=(",", ":"))) <= TARGET_IDS_MAX_BYTES
    assert len(listed) >= 30


async def test_a_scheduled_job_of_many_targets_runs(temporal_client: Client, temporal_address: str) -> None:
    """A plan of 40 targets with 64-character ids: the trampoline starts its job as a child
    with the job's search attributes. Before, the server refused the child's ``TargetIds``
    on every workflow task of the trampoline: the occurrence and its admitted job stayed
    stuck."""
    env = Env(temporal_client, temporal_address)
    inp = env.job({tid: ["a"] for tid in LONG_IDS}, job_id=f"plan@{uuid.uuid4().hex[:8]}")
    env.fakes.jobs[inp.job_id] = inp

    @activity.defn(name="admit_occurrence")
    async def admit_occurrence(_: AdmitOccurrenceInput) -> OccurrenceAdmission:
        return OccurrenceAdmission(job_id=inp.job_id, created=True, job_input=inp)

    acts = [*env.fakes.activities(lambda: env.client), admit_occurrence]
    async with (
        Worker(
            env.client,
            task_queue=env.queue,
            workflows=[JobWorkflow, ScheduledJobWorkflow],
            activities=[a for a in acts if a.__name__ not in SOURCE],
            workflow_runner=sandbox_runner(),
        ),
        Worker(env.client, task_queue=env.source_queue, activities=[a for a in acts if a.__name__ in SOURCE]),
    ):
        trampoline = await env.client.start_workflow(
            ScheduledJobWorkflow.run,
            OccurrenceInput(schedule_id="plan", cron=["0 3 * * *"], task_queue=env.queue),
            id=f"occ-{uuid.uuid4().hex[:8]}",
            task_queue=env.queue,
        )
        assert await env.closed(trampoline) == WorkflowExecutionStatus.COMPLETED
        result = await trampoline.result()
    assert (result.job_id, result.status) == (inp.job_id, "succeeded")
