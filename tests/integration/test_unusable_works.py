"""A work the source cannot deliver is unavailable, and the next work is delivered in the same job.

A property of the work — an image URL that is not a usable URL, an ugoira whose metadata
describes no animation, a page or a frames zip over the decode budget — is the work's
failure, whatever the request it shows in: the work is remembered unavailable for the
account (``unavailable_works``, its kind counted in the cell's candidate report) and the
cell binds the next candidate in the same job. Before, such a work ended the job
``source_error / download_failed`` and was released, so the next job picked it first
again, or it was retried until the job expired, or decoded for minutes.

Real Temporal, PostgreSQL and worker processes; the Pixiv replay in the test process
(scripted) and a raw-socket image host (:mod:`tests.fakes.pximg`) serving the bombs.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from bench.chaos import bombs
from curaflow.sources.pixiv.replay.data import recorded_works
from tests.conftest import StackFactory
from tests.fakes.pximg import FakeImageHost
from tests.integration.test_source_jobs import source_stack, task
from tests.jobs_support import ReplayServer, ordered

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TAG = "VTuber"  # two single-page works


@pytest.fixture
async def image_host(replay: ReplayServer) -> AsyncIterator[FakeImageHost]:
    host = await FakeImageHost(replay.faults).start()
    try:
        yield host
    finally:
        await host.stop()


def single_page(url: str) -> dict[str, Any]:
    return {"meta_single_page": {"original_image_url": url}, "image_urls": {"large": url}}


def an_ugoira(replay: ReplayServer, work_id: str, metadata: dict[str, Any]) -> None:
    replay.faults.mutate[work_id] = {"type": "ugoira"}
    replay.faults.ugoira[work_id] = metadata


def ugoira_zip_on_the_image_host(replay: ReplayServer, host: FakeImageHost, work_id: str) -> None:
    body, frames = bombs.ugoira_zip(3, (13000, 13000))
    host.bodies[f"{work_id}_p0"] = body
    url = f"https://i.pximg.net/img-zip-ugoira/img/2025/02/05/00/00/00/{work_id}_p0.zip"
    an_ugoira(replay, work_id, {"ugoira_metadata": {"zip_urls": {"medium": url}, "frames": frames}})


def original_url(work_id: str) -> str:
    work = next(w for w in recorded_works() if str(w["id"]) == work_id)
    return str(work["meta_single_page"]["original_image_url"])


Case = Callable[[ReplayServer, FakeImageHost, str], None]

CASES: dict[str, tuple[Case, str]] = {
    "ugoira-zip-url-not-a-url": (
        lambda r, h, w: an_ugoira(
            r,
            w,
            {
                "ugoira_metadata": {
                    "zip_urls": {"medium": "ftp://i.pximg.net/x.zip"},
                    "frames": [{"file": "a.jpg", "delay": 9}],
                }
            },
        ),
        "unusable_animation",
    ),
    "ugoira-without-frames": (
        lambda r, h, w: an_ugoira(
            r, w, {"ugoira_metadata": {"zip_urls": {"medium": "https://i.pximg.net/x.zip"}, "frames": []}}
        ),
        "unusable_animation",
    ),
    "ugoira-frame-without-delay": (
        lambda r, h, w: an_ugoira(
            r,
            w,
            {"ugoira_metadata": {"zip_urls": {"medium": "https://i.pximg.net/x.zip"}, "frames": [{"file": "a.jpg"}]}},
        ),
        "unusable_animation",
    ),
    "ugoira-zip-url-climbing-out-of-the-prefix": (
        lambda r, h, w: an_ugoira(
            r,
            w,
            {
                "ugoira_metadata": {
                    "zip_urls": {"medium": "https://i.pximg.net/img-zip-ugoira/%2e%2e/x.zip"},
                    "frames": [{"file": "a.jpg", "delay": 9}],
                }
            },
        ),
        "unusable_animation",
    ),
    "image-url-of-100000-characters": (
        lambda r, h, w: r.faults.mutate.__setitem__(
            w, single_page("https://i.pximg.net/img-original/" + "a" * 100_000 + f"/{w}_p0.png")
        ),
        "unusable_url",
    ),
    "image-path-climbing-out-of-the-prefix": (
        lambda r, h, w: r.faults.mutate.__setitem__(
            w, single_page(f"https://i.pximg.net/img-original/../../{w}_p0.png")
        ),
        "unusable_url",
    ),
    "gif-of-thousands-of-frames": (
        lambda r, h, w: h.bodies.__setitem__(f"{w}_p0", bombs.many_frame_gif(20_000, (4000, 4000))),
        "over_budget",
    ),
    "ugoira-whose-later-frame-is-13000-square": (ugoira_zip_on_the_image_host, "over_budget"),
}


@pytest.mark.parametrize("case", list(CASES))
async def test_a_work_the_source_cannot_deliver_is_unavailable_and_the_next_is_delivered_in_the_same_job(
    make_stack: StackFactory, tmp_path: Path, replay: ReplayServer, image_host: FakeImageHost, case: str
) -> None:
    first, second = ordered(TAG)[:2]
    make_unusable, kind = CASES[case]
    make_unusable(replay, image_host, first)
    stack, _ = source_stack(
        make_stack,
        tmp_path,
        replay,
        pixiv={"image_url": image_host.url},
        target={"query": {"tags": [TAG]}},
    )
    await stack.start_worker()
    record = await stack.wait_terminal(await stack.admit(task(stack, [TAG], deadline_ms=120_000)))

    assert record.business_status == "success", record
    cell = record.cells[0]
    assert (cell.state, cell.work_id) == ("submitted", second)
    report = cell.candidate_report
    assert report is not None and {"work_id": first, "reason": "unavailable"} in report.filtered
    assert report.unavailable == {kind: 1}, report
    # remembered for the account: the next job does not ask for it again
    rows = await (await stack.ledger()).fetch(
        "SELECT work_id, why FROM unavailable_works WHERE gate = $1 AND work_id = $2",
        stack.settings.source_task_queue("default"),
        first,
    )
    assert len(rows) == 1, rows
    assert not (tmp_path / "delivered" / first).exists()
