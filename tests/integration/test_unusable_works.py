"""A work the source cannot deliver is unavailable, and the next work is delivered in the same job.

A property of the work — an image URL that is not a usable URL, an ugoira whose metadata
describes no animation, a page or a frames zip over the decode budget — is the work's
failure, whatever the request it shows in: the work is remembered unavailable for the
account (``unavailable_works``, its kind counted in the cell's candidate report) and the
cell binds the next candidate in the same job. Before, such a work ended the job
``source_error / download_failed`` and was released, so the next job picked it first
again, or it was retried until the job expired, or decoded for minutes.

Real Temporal, PostgreSQL and worker processes; the Pixiv replay in the test process
(scripted) and a raw-socket image host (:mod:`tests.fakes.pximg`) serving the bombs. One
worker process serves every case (:func:`tests.support.shared_stack`), each on a target,
a Pixiv account (its memory of unavailable works) and a route of its own.
"""

from __future__ import annotations

import io
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from bench.chaos import bombs
from curaflow.domain.models import CandidateReport
from curaflow.domain.tally import cell_message
from curaflow.sources.pixiv.replay.data import recorded_works
from tests.fakes.pximg import FakeImageHost
from tests.jobs_support import ReplayServer, ordered
from tests.support import Stack, shared_stack, short_id

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TAG = "VTuber"  # two single-page works


def single_page(url: str) -> dict[str, Any]:
    return {"meta_single_page": {"original_image_url": url}, "image_urls": {"large": url}}


def an_ugoira(replay: ReplayServer, work_id: str, metadata: dict[str, Any] | tuple[int, dict[str, Any]]) -> None:
    replay.faults.mutate[work_id] = {"type": "ugoira"}
    replay.faults.ugoira[work_id] = metadata


def ugoira_zip_on_the_image_host(replay: ReplayServer, host: FakeImageHost, work_id: str) -> None:
    body, frames = bombs.ugoira_zip(3, (13000, 13000))
    host.bodies[f"{work_id}_p0"] = body
    url = f"https://i.pximg.net/img-zip-ugoira/img/2025/02/05/00/00/00/{work_id}_p0.zip"
    an_ugoira(replay, work_id, {"ugoira_metadata": {"zip_urls": {"medium": url}, "frames": frames}})


def placeholder_png() -> bytes:
    """A "not available" thumbnail of 120x60 pixels (2:1, no page of the tag's ratio)."""
    buf = io.BytesIO()
    Image.new("RGB", (120, 60), (200, 200, 200)).save(buf, format="PNG")
    return buf.getvalue()


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


#: Answers of the image host that say nothing positive about the work (case → its kind).
UNRECOGNISED: dict[str, tuple[Case, str]] = {
    "image-host-answering-403": (lambda r, h, w: h.refused.add(f"{w}_p0"), "gone"),
    "html-page-answered-200": (
        lambda r, h, w: h.bodies.__setitem__(f"{w}_p0", b"<!doctype html><title>Maintenance</title>" + b" " * 512),
        "not_an_image",
    ),
    # A valid image that is another picture (a CDN's or a proxy's "not available"
    # thumbnail, 120x60, for a page listed 1573x2298): until 2026-12-07 it was delivered as
    # the work, the work counted delivered for ever.
    "placeholder-picture-answered-200": (
        lambda r, h, w: h.bodies.__setitem__(f"{w}_p0", placeholder_png()),
        "not_an_image",
    ),
    # What the source answered for the work, not the work (2026-12-05: each was remembered
    # unusable for the week — a renamed image field cost every work its jobs examined).
    "listing-without-its-image-field": (
        lambda r, h, w: r.faults.mutate.__setitem__(w, {"meta_single_page": {}, "image_urls": {}, "meta_pages": []}),
        "unusable_url",
    ),
    # The app-api's own 400 to one work's call: it refused what was asked of that work, in
    # words never seen (2026-12-06: the attempt ended unretried, the cell failed
    # remote_http_error at once and nothing was held back).
    "ugoira-metadata-answering-the-app-apis-400": (
        lambda r, h, w: an_ugoira(
            r, w, (400, {"error": {"user_message": "", "message": "Invalid illust_id", "reason": ""}})
        ),
        "gone",
    ),
    "image-url-on-an-internal-host": (
        lambda r, h, w: r.faults.mutate.__setitem__(w, single_page(f"https://169.254.169.254/latest/{w}_p0.png")),
        "unusable_url",
    ),
}

#: How long such an answer holds the work back (``pixiv.unrecognised_hold_ms`` of the module's stack).
HOLD_MS = 90_000

#: Each case's slot: its target, Pixiv account and route (``u<i>``).
SLOTS = {
    case: f"u{i}"
    for i, case in enumerate(
        [
            *CASES,
            *UNRECOGNISED,
            *(f"outage-{c}" for c in UNRECOGNISED),
            *(f"delivered-then-{c}" for c in UNRECOGNISED),
            "one-file-never-whole",
        ]
    )
}


@dataclass
class Env:
    stack: Stack
    replay: ReplayServer
    image_host: FakeImageHost
    root: Path


@pytest.fixture(scope="module")
async def module_env(
    tmp_path_factory: pytest.TempPathFactory, temporal_address: str, database_url: str, ledger_pool: Any
) -> AsyncIterator[Env]:
    root = tmp_path_factory.mktemp("unusable")
    replay = await ReplayServer().start()
    image_host = await FakeImageHost(replay.faults).start()
    suffix = short_id()
    slots = list(SLOTS.values())
    config = {
        "pixiv": {
            **replay.config(image_url=image_host.url, accounts={slot: {} for slot in slots}),
            "unrecognised_hold_ms": HOLD_MS,
        },
        "routes": {f"{slot}-{suffix}": {"kind": "directory", "path": str(root / slot / "delivered")} for slot in slots},
        "targets": [
            {"id": slot, "account": slot, "query": {"tags": [TAG]}, "routes": [f"{slot}-{suffix}"]} for slot in slots
        ],
    }
    try:
        async with shared_stack(root, temporal_address, database_url, config) as stack:
            yield Env(stack, replay, image_host, root)
    finally:
        await image_host.stop()
        await replay.stop()


@pytest.fixture
def env(module_env: Env) -> Env:
    """The module's worker; the replay (whose faults the image host reads) and the host reset."""
    module_env.replay.reset()
    host = module_env.image_host
    host.script.clear()
    host.bodies.clear()
    host.refused.clear()
    host.cut.clear()
    host.requests.clear()
    return module_env


async def skipped_then_next_delivered(env: Env, slot: str, make_unusable: Case) -> tuple[str, CandidateReport]:
    """Make the tag's first work unusable by ``make_unusable``, run a job of ``slot`` and
    check its first work was skipped as unavailable and the second delivered in the same
    job; the first work's id and the cell's candidate report."""
    first, second = ordered(TAG)[:2]
    make_unusable(env.replay, env.image_host, first)
    body = env.stack.task(target_id=slot, query={"tags": [TAG]}, deadline_ms=120_000)
    record = await env.stack.wait_terminal(await env.stack.admit(body))
    assert record.business_status == "success", record
    cell = record.cells[0]
    assert (cell.state, cell.work_id) == ("submitted", second)
    report = cell.candidate_report
    assert report is not None and {"work_id": first, "reason": "unavailable"} in report.filtered
    return first, report


@pytest.mark.parametrize("case", list(CASES))
async def test_a_work_the_source_cannot_deliver_is_unavailable_and_the_next_is_delivered_in_the_same_job(
    env: Env, case: str
) -> None:
    make_unusable, kind = CASES[case]
    first, report = await skipped_then_next_delivered(env, SLOTS[case], make_unusable)
    stack, slot = env.stack, SLOTS[case]
    assert report.unavailable == {kind: 1}, report
    # remembered for the account: the next job does not ask for it again
    rows = await (await stack.ledger()).fetch(
        "SELECT work_id, why FROM unavailable_works WHERE gate = $1 AND work_id = $2",
        stack.settings.source_task_queue(slot),
        first,
    )
    assert len(rows) == 1, rows
    assert not (env.root / slot / "delivered" / first).exists()


@pytest.mark.parametrize("case", list(UNRECOGNISED))
async def test_an_answer_not_recognised_as_the_works_holds_it_back_briefly_not_for_the_week(
    env: Env, case: str
) -> None:
    """An image host that answers ``403`` (i.pximg.net's answer to a request it refuses:
    a missing ``Referer``, a changed hotlink rule, a blocked caller) or a page that is no
    image (a proxy's or a maintenance page) says nothing positive about the work: the
    same answer would come for every work while it lasts. Until 2026-12-05 each such work
    was remembered unavailable for the account for ``pixiv.unavailable_ttl_ms`` (7 days):
    an hour of a refusing host cost every work its jobs examined for a week. Now the
    work is skipped in this job (the next is delivered) and held back for
    ``pixiv.unrecognised_hold_ms`` only, then asked again."""
    make_unusable, kind = UNRECOGNISED[case]
    first, report = await skipped_then_next_delivered(env, SLOTS[case], make_unusable)
    stack, slot = env.stack, SLOTS[case]
    assert report.unavailable == {kind: 1} and report.unrecognised == {kind: 1}, report
    [row] = await (await stack.ledger()).fetch(
        "SELECT seen_at, until, held FROM unavailable_works WHERE gate = $1 AND work_id = $2",
        stack.settings.source_task_queue(slot),
        first,
    )
    assert row["until"] - row["seen_at"] == HOLD_MS and row["held"], dict(row)  # not 7 days
    # The next job is told the work is held back on an unrecognised answer (a verdict no
    # scan frontier keeps), not gone.
    again = await stack.wait_terminal(await stack.admit(stack.task(target_id=slot, query={"tags": [TAG]})))
    later = again.cells[0].candidate_report
    assert later is not None and {"work_id": first, "reason": "unavailable"} in later.filtered, later
    assert later.known.get("unrecognised", 0) + later.reasons.get("unrecognised", 0) == 1, later


@pytest.mark.parametrize("case", list(UNRECOGNISED))
async def test_an_image_host_refusing_every_work_fails_the_cell_as_the_sources_not_no_new_content(
    env: Env, case: str
) -> None:
    """Every work of the search meets the same unrecognised answer (an image host refusing
    curaflow, a proxy's page): the cell ends ``source_unusable`` — a failure, whose message
    says the source's answers changed, not the works — not ``no_candidate`` with "N
    unavailable … widen the query" (found by a break-it pass, 2026-12-05). The next job,
    while the works are held, says the same."""
    works = ordered(TAG)
    make_unusable, _ = UNRECOGNISED[case]
    for work in works:
        make_unusable(env.replay, env.image_host, work)
    stack, slot = env.stack, SLOTS[f"outage-{case}"]
    for _ in range(2):
        record = await stack.wait_terminal(await stack.admit(stack.task(target_id=slot, query={"tags": [TAG]})))
        cell = record.cells[0]
        assert (cell.state, cell.reason) == ("failed", "source_unusable"), (cell, cell.candidate_report)
        message = cell_message(cell.state, cell.reason, cell.candidate_report) or ""
        assert "unusable" in message and "widen" not in message, message


@pytest.mark.parametrize("case", list(UNRECOGNISED))
async def test_works_delivered_before_and_the_rest_refused_by_the_source_fail_the_cell_as_the_sources(
    env: Env, case: str
) -> None:
    """The tag's first work was delivered by an earlier job; then the image host refuses
    curaflow (or a proxy answers its page) for every work. The next job's search finds the
    first delivered before and the other meets the answer: the cell ended ``no_candidate``
    with "… widen the query" — a wider query only finds more new works meeting the same
    answer. Every new work met the source's refusal: it ends ``source_unusable``, in the
    job that met the answer and in the next, while the work is held."""
    stack, slot = env.stack, SLOTS[f"delivered-then-{case}"]
    first, second = ordered(TAG)[:2]
    delivered = await stack.wait_terminal(await stack.admit(stack.task(target_id=slot, query={"tags": [TAG]})))
    assert (delivered.business_status, delivered.cells[0].work_id) == ("success", first), delivered
    make_unusable, _ = UNRECOGNISED[case]
    for work in (first, second):
        make_unusable(env.replay, env.image_host, work)
    for _ in range(2):
        record = await stack.wait_terminal(await stack.admit(stack.task(target_id=slot, query={"tags": [TAG]})))
        cell = record.cells[0]
        assert (cell.state, cell.reason) == ("failed", "source_unusable"), (cell, cell.candidate_report)
        message = cell_message(cell.state, cell.reason, cell.candidate_report) or ""
        assert "1 already delivered" in message and "1 unusable" in message, message
        assert "widen" not in message, message


async def test_a_work_whose_file_never_arrives_whole_is_held_back_briefly_and_the_next_job_binds_the_next(
    env: Env,
) -> None:
    """The image host cuts one work's file short on every request (a transient failure each
    time, retried): the cell's fetch attempts run out and it ends ``download_failed``. Until
    2026-12-07 the work's intent was then released and nothing else remembered, so the
    target's next job bound the same work first again — every job of the target failed on
    it, for ever, the other candidates waiting. Now the cell's last attempt holds the work
    back for ``pixiv.unrecognised_hold_ms`` (a hold, not a verdict; counted as an answer not
    recognised), the next job delivers the next candidate, and once the hold is over the
    work is asked again."""
    stack, slot = env.stack, SLOTS["one-file-never-whole"]
    first, second = ordered(TAG)[:2]
    gate = stack.settings.source_task_queue(slot)
    env.image_host.cut.add(f"{first}_p0")

    def job() -> dict[str, Any]:
        return stack.task(target_id=slot, query={"tags": [TAG]}, deadline_ms=120_000)

    failed = await stack.wait_terminal(await stack.admit(job()))
    cell = failed.cells[0]
    assert (cell.state, cell.reason, cell.work_id) == ("failed", "download_failed", first), cell
    asked = len(env.image_host.of_work(first))
    assert asked == stack.settings.delivery.source_max_attempts, asked  # every attempt of the cell, then held
    pool = await stack.ledger()
    [row] = await pool.fetch(
        "SELECT seen_at, until, held FROM unavailable_works WHERE gate = $1 AND work_id = $2", gate, first
    )
    assert row["held"] and row["until"] - row["seen_at"] == HOLD_MS, dict(row)  # a hold, not the week

    delivered = await stack.wait_terminal(await stack.admit(job()))
    cell = delivered.cells[0]
    assert (delivered.business_status, cell.work_id) == ("success", second), cell
    assert len(env.image_host.of_work(first)) == asked  # not asked while held
    report = cell.candidate_report
    assert report is not None and report.known.get("unrecognised", 0) + report.reasons.get("unrecognised", 0) == 1

    # The hold is over (as an hour later) and the host delivers the file whole again.
    await pool.execute("UPDATE unavailable_works SET until = seen_at WHERE gate = $1 AND work_id = $2", gate, first)
    env.image_host.cut.clear()
    again = await stack.wait_terminal(await stack.admit(job()))
    assert (again.business_status, again.cells[0].work_id) == ("success", first), again.cells[0]
