"""An image host's 404/410 costs a work the week only when the app-api says the work is gone.

The image host (or the mirror / proxy ``pixiv.image_host`` names, or a CDN in a deploy)
answering 404 says only that the file is not there: every work fetched while it lasts
would get the same answer. Until 2026-12-05 the client recognised any image 404/410 as
the work's: each work fetched meanwhile was remembered unavailable for
``pixiv.unavailable_ttl_ms`` (a week) and nothing was counted for the alert. Now the
answer is the work's only when the work's detail (``GET /v1/illust/detail``, through the
account's rate gate) answers the app-api's own 404; a detail answering the work alive, or
one that cannot be asked or is not recognised, leaves it the host's: held back for
``pixiv.unrecognised_hold_ms`` and counted (``curaflow_source_unrecognised_answers_total``).

The ``fetch`` activity runs in the test process (``ActivityEnvironment``) with a worker's
real dependencies: the PostgreSQL ledger, the replay source over real HTTP, the artifact
store on disk.
"""

from __future__ import annotations

from typing import Any

import pytest
from temporalio.exceptions import ApplicationError

from activities.fetch import FetchActivity
from curaflow.domain.messages import FetchInput, TargetSpec
from curaflow.domain.models import CandidateReport
from curaflow.ledger import cells
from curaflow.ledger import remembered as memory
from curaflow.ledger.records import load_cell
from curaflow.sources.pixiv.client import parse_work
from curaflow.sources.pixiv.replay.data import UGOIRA_DELAYS_MS, recorded_works
from tests.deps_support import deps, unrecognised_count
from tests.fakes.replay import ReplayServer
from tests.support import Stack, ledger_job, run_as_job

pytestmark = pytest.mark.integration
__all__ = ["deps"]  # the module's fixture (tests.deps_support)

WEEK_MS = 7 * 86_400_000
HOUR_MS = 3_600_000


async def fetched(opened: Any, raw: dict[str, Any], label: str) -> tuple[str, memory.Unavailable]:
    """Bind the work ``raw`` (the app-api's ``illust``) to a new job's cell, run the fetch
    activity once; (the job, the ledger's memory of the work from it)."""
    target = TargetSpec(target_id="demo", routes=opened.settings.route_refs(opened.settings.targets[0]))
    job_id = await ledger_job(opened.pool, target, label=label)
    work = parse_work(raw)
    async with opened.pool.acquire() as conn, conn.transaction():
        await cells.bind_work(conn, job_id, target, [work], CandidateReport())
    update = await run_as_job(
        FetchActivity(opened).fetch, FetchInput(job_id=job_id, target=target, heartbeat_interval_ms=1000)
    )
    assert update.cell.work_id is None  # skipped: no candidate left
    [row] = [r for r in await memory.list_unavailable(opened.pool) if r.work_id == work.work_id and r.job_id == job_id]
    return job_id, row


def a_work(index: int) -> dict[str, Any]:
    return recorded_works()[index]


async def test_an_image_404_of_a_work_its_detail_says_alive_is_held_briefly_and_counted(
    deps: tuple[Stack, Any], replay: ReplayServer
) -> None:
    """The failing-first case: the image host answers 404 for a work the app-api lists
    alive. It cost the work the week, uncounted; it is the host's: an hour, counted."""
    _, opened = deps
    raw = a_work(0)
    wid = str(raw["id"])
    replay.faults.absent_images = {wid}
    before = unrecognised_count("gone")
    _, row = await fetched(opened, raw, "alive")
    assert row.held, row
    assert row.until - row.seen_at <= HOUR_MS
    assert "image HTTP 404" in (row.why or "")
    assert unrecognised_count("gone") == before + 1
    # the detail was asked once, after the image's 404, and answered the work alive
    kinds = [(e.kind, e.status) for e in replay.faults.log if e.kind in ("image", "detail")]
    assert kinds == [("image", 404), ("detail", 200)]


async def test_an_image_404_of_a_work_its_detail_says_gone_is_remembered_the_week(
    deps: tuple[Stack, Any], replay: ReplayServer
) -> None:
    """Corroborated: the app-api's own 404 for the work's detail. As before: the week,
    not counted as an unrecognised answer."""
    _, opened = deps
    raw = a_work(1)
    wid = str(raw["id"])
    replay.faults.missing_works = {wid}  # its images and its detail answer 404
    before = unrecognised_count("gone")
    _, row = await fetched(opened, raw, "gone")
    assert not row.held, row
    assert row.until - row.seen_at >= WEEK_MS - 60_000
    assert unrecognised_count("gone") == before
    assert [e.kind for e in replay.faults.log if e.kind == "detail"] == ["detail"]


@pytest.mark.parametrize("fault", ["503", "404_html"])
async def test_an_image_404_whose_detail_cannot_be_asked_is_held_briefly(
    deps: tuple[Stack, Any], replay: ReplayServer, fault: str
) -> None:
    """The detail answers a proxy's 503 page, or a 404 not in the app-api's words: nothing
    positive about the work — the host's answer, held briefly and counted."""
    _, opened = deps
    raw = a_work(2)
    wid = str(raw["id"])
    replay.faults.absent_images = {wid}
    replay.faults.detail_faults = {wid: fault}
    before = unrecognised_count("gone")
    _, row = await fetched(opened, raw, f"detail-{fault}")
    assert row.held, row
    assert row.until - row.seen_at <= HOUR_MS
    assert unrecognised_count("gone") == before + 1


async def test_a_frames_zip_404_of_an_ugoira_its_detail_says_alive_is_held_briefly(
    deps: tuple[Stack, Any], replay: ReplayServer
) -> None:
    """The same rule for an animated work's frames zip (the same image host)."""
    _, opened = deps
    raw = {**a_work(3), "type": "ugoira"}
    wid = str(raw["id"])
    replay.faults.mutate[wid] = {"type": "ugoira"}
    url = f"https://i.pximg.net/img-zip-ugoira/img/2025/01/01/00/00/00/{wid}_ugoira600x600.zip"
    frames = [{"file": f"{i:06d}.jpg", "delay": d} for i, d in enumerate(UGOIRA_DELAYS_MS)]
    replay.faults.ugoira[wid] = {"ugoira_metadata": {"zip_urls": {"medium": url}, "frames": frames}}
    replay.faults.absent_images = {wid}
    before = unrecognised_count("gone")
    _, row = await fetched(opened, raw, "zip")
    assert row.held, row
    assert row.until - row.seen_at <= HOUR_MS
    assert unrecognised_count("gone") == before + 1
    asked = [(e.kind, e.status, e.path.rsplit(".", 1)[-1]) for e in replay.faults.log if e.kind in ("image", "detail")]
    assert asked == [("image", 404, "zip"), ("detail", 200, "/v1/illust/detail")]


async def test_a_fetch_whose_images_answer_asks_no_detail(deps: tuple[Stack, Any], replay: ReplayServer) -> None:
    """Nothing is added to the success path: no detail request when the images answer."""
    _, opened = deps
    target = TargetSpec(target_id="demo", routes=opened.settings.route_refs(opened.settings.targets[0]))
    job_id = await ledger_job(opened.pool, target, label="ok")
    async with opened.pool.acquire() as conn, conn.transaction():
        await cells.bind_work(conn, job_id, target, [parse_work(a_work(4))], CandidateReport())
    update = await run_as_job(
        FetchActivity(opened).fetch, FetchInput(job_id=job_id, target=target, heartbeat_interval_ms=1000)
    )
    assert update.cell.state == "artifact_ready"
    assert replay.faults.of("detail") == []
    assert replay.faults.of("image")


async def test_a_detail_the_jobs_deadline_cuts_is_no_answer_of_the_host(
    deps: tuple[Stack, Any], replay: ReplayServer
) -> None:
    """The job's deadline passes while the detail is out (it answers in 30 s; the job has
    3 s left). That cut is curaflow's own bound, not the image host's answer: the work
    was held back for the hour and counted for the alert as an answer of the host's, the
    cell moved on to the next candidate. Now the attempt fails as the source's call it
    is (the job's deadline then ends the job), nothing remembered, nothing counted."""
    _, opened = deps
    raw = a_work(5)
    wid = str(raw["id"])
    replay.faults.absent_images = {wid}
    replay.faults.detail_faults = {wid: "slow"}
    replay.faults.detail_delay_s = 30
    before = unrecognised_count("gone")
    target = TargetSpec(target_id="demo", routes=opened.settings.route_refs(opened.settings.targets[0]))
    job_id = await ledger_job(opened.pool, target, label="deadline", deadline_in_ms=3000)
    async with opened.pool.acquire() as conn, conn.transaction():
        await cells.bind_work(conn, job_id, target, [parse_work(raw)], CandidateReport())
    with pytest.raises(ApplicationError) as raised:
        await run_as_job(
            FetchActivity(opened).fetch, FetchInput(job_id=job_id, target=target, heartbeat_interval_ms=1000)
        )
    assert raised.value.type == "network_error", raised.value
    assert [r for r in await memory.list_unavailable(opened.pool) if r.job_id == job_id] == []
    assert unrecognised_count("gone") == before
    async with opened.pool.acquire() as conn:
        cell = await load_cell(conn, job_id, "demo")
    assert cell is not None and cell.work_id == wid  # still bound: not moved on


GONE_WORDS = {
    "error": {
        "user_message": "該当作品は削除されたか、存在しない作品IDです。",
        "message": "",
        "reason": "",
        "user_message_details": {},
    }
}


async def test_an_ugoira_metadata_404_of_a_work_its_detail_says_alive_is_held_briefly(
    deps: tuple[Stack, Any], replay: ReplayServer
) -> None:
    """The ugoira metadata answers the app-api's own 404 for a work the search has just
    listed and its detail lists alive (a work whose animation is not ready yet, a replica
    lagging): two answers of the app-api disagreeing. The metadata's 404 alone cost the
    work the week — and its target's frontier passed it for good (``unavailable`` lasts).
    Now it is corroborated by the detail as a file's 404 is: alive, held briefly, counted."""
    _, opened = deps
    raw = {**a_work(6), "type": "ugoira"}
    wid = str(raw["id"])
    replay.faults.mutate[wid] = {"type": "ugoira"}
    replay.faults.ugoira[wid] = (404, GONE_WORDS)
    before = unrecognised_count("gone")
    _, row = await fetched(opened, raw, "metadata-alive")
    assert row.held, row
    assert row.until - row.seen_at <= HOUR_MS
    assert unrecognised_count("gone") == before + 1
    asked = [(e.kind, e.status) for e in replay.faults.log if e.kind in ("ugoira", "detail")]
    assert asked == [("ugoira", 404), ("detail", 200)]


async def test_an_ugoira_metadata_404_of_a_work_its_detail_says_gone_is_remembered_the_week(
    deps: tuple[Stack, Any], replay: ReplayServer
) -> None:
    _, opened = deps
    raw = {**a_work(7), "type": "ugoira"}
    wid = str(raw["id"])
    replay.faults.mutate[wid] = {"type": "ugoira"}
    replay.faults.ugoira[wid] = (404, GONE_WORDS)
    replay.faults.missing_works = {wid}
    _, row = await fetched(opened, raw, "metadata-gone")
    assert not row.held, row
    assert row.until - row.seen_at >= WEEK_MS - 60_000
