"""Real-world source failures and untrusted source data.

Each case was first seen as a public bug report against a Pixiv downloader; here it is a
scripted fake speaking the app-api's wire format (the replay server in fault mode, and a
raw-socket image host for broken HTTP framing). Scan-level cases run the production
client, scan and artifact store over real HTTP without Temporal; job-level cases run real
Temporal, real PostgreSQL and real worker processes.
"""

from __future__ import annotations

import io
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from PIL import Image

from curaflow.artifacts import ArtifactStore
from curaflow.devstack.ports import free_port
from curaflow.domain.messages import TargetFilters, TargetQuery, TargetSpec
from curaflow.domain.models import Artifact
from curaflow.domain.reasons import TerminalReason
from curaflow.ledger.db import DB_NOW_MS
from curaflow.ledger.gates import read_gate
from curaflow.process.httpserver import BackgroundServer
from curaflow.sources.errors import SourceError, WorkUnavailable
from curaflow.sources.gate import MemoryGate
from curaflow.sources.pixiv.client import PixivClient, parse_work
from curaflow.sources.pixiv.replay.app import create_replay_app
from curaflow.sources.pixiv.replay.data import DeepSet, newest_day, recorded_works
from curaflow.sources.pixiv.scan import ScanCheckpoint, scan
from tests.conftest import StackFactory
from tests.fakes.pximg import FakeImageHost
from tests.fakes.replay import Faults
from tests.integration.test_source_jobs import protocol_error, source_stack, task
from tests.jobs_support import ReplayServer, SharedEnv, curaflow, ordered, start_scheduled
from tests.support import ledger_job, short_id
from tests.unit.test_cut_gif_pages import halved_at, images, noise_gif
from tests.unit.test_cut_page_framing import halved_at as carrying_halved_at
from tests.unit.test_cut_page_framing import jpeg_with_thumbnail, png_carrying_a_png

pytestmark = [pytest.mark.integration, pytest.mark.slow]


# ---- helpers ---------------------------------------------------------------------------


class Replay:
    """The replay app on 127.0.0.1 with a client factory (scan-level tests)."""

    def __init__(self, server: BackgroundServer, faults: Faults) -> None:
        self.server = server
        self.faults = faults
        self.http = httpx.AsyncClient(timeout=10)
        self.image_host: str | None = None  # where i.pximg.net is reached (default: the replay)

    def client(self) -> PixivClient:
        return PixivClient(
            self.http,
            refresh_token="replay",
            api_url=self.server.url,
            auth_url=self.server.url,
            image_host=self.image_host or f"{self.server.url}/i",
            gate=MemoryGate(0, base_ms=1000),
        )


@pytest.fixture
async def source() -> AsyncIterator[Replay]:
    faults = Faults()
    server = await BackgroundServer(create_replay_app(faults)).start()
    replay = Replay(server, faults)
    try:
        yield replay
    finally:
        await replay.http.aclose()
        await server.stop()


@pytest.fixture
async def image_host(replay: ReplayServer) -> AsyncIterator[FakeImageHost]:
    """A raw-socket i.pximg.net for a job-level stack (``pixiv.image_url`` points at it)."""
    host = await FakeImageHost(replay.faults).start()
    try:
        yield host
    finally:
        await host.stop()


def spec(**kw: Any) -> TargetSpec:
    query = kw.pop("query", {})
    filters = kw.pop("filters", {})
    return TargetSpec(target_id="t", query=TargetQuery(**query), filters=TargetFilters(**filters), **kw)


async def run_scan(client: PixivClient, target: TargetSpec, **kw: Any) -> tuple[ScanCheckpoint, list[str]]:
    offered: list[str] = []

    async def known(ids: list[str]) -> dict[str, str]:
        offered.extend(ids)
        return {}

    async def on_page(cp: ScanCheckpoint) -> None:
        return None

    kw.setdefault("scan_limit", target.scan_limit)
    return await scan(client, target, known=known, on_page=on_page, **kw), offered


async def listed_work(replay: Replay, work_id: str) -> Any:
    work = next(w for w in recorded_works() if str(w["id"]) == work_id)
    page = await replay.client().search_illust(work["tags"][0]["name"])
    return next(parse_work(i) for i in page["illusts"] if str(i["id"]) == work_id)


def decodes(path: Path) -> bool:
    """A full decode of an image file: Pillow ``verify()``, then a full ``load()``."""
    try:
        with Image.open(path) as image:
            image.verify()
        with Image.open(path) as image:
            image.load()
        return True
    except (OSError, SyntaxError, ValueError):
        return False


def delivered_pages(root: Path, work_id: str) -> list[Path]:
    return sorted(p for p in (root / work_id).iterdir() if p.name != "manifest.json")


def sample(text: str, name: str, **labels: str) -> float:
    total = 0.0
    for line in text.splitlines():
        if (line.startswith(name + "{") or line.startswith(name + " ")) and all(
            f'{k}="{v}"' in line for k, v in labels.items()
        ):
            total += float(line.rsplit(" ", 1)[1])
    return total


# ---- 1. truncated downloads ------------------------------------------------------------


@pytest.mark.parametrize("fault", ["close_half", "short_length"])
@pytest.mark.parametrize("work_id", ["126839103", "126879163"], ids=["png", "jpeg"])
async def test_an_image_cut_short_inside_valid_framing_is_not_fetched(
    source: Replay, tmp_path: Path, fault: str, work_id: str
) -> None:
    # The framing says the body is complete (a close-delimited body, or a Content-Length
    # that is itself too small): only a full decode can tell the page is half an image.
    host = await FakeImageHost(source.faults, script=[fault]).start()
    source.image_host = host.url
    try:
        work = await listed_work(source, work_id)
        store = ArtifactStore(tmp_path)
        with pytest.raises(SourceError) as caught:
            await store.fetch(source.client(), work, "job", "t")
        assert caught.value.reason == TerminalReason.DOWNLOAD_FAILED and caught.value.retryable
        assert list(store.folder("job", "t").iterdir()) == []  # nothing recorded complete
        artifact = await store.fetch(source.client(), work, "job", "t")  # the retry
        assert all(decodes(Path(f.path)) for f in artifact.files)
        assert [r.fault for r in host.of_work(work_id)][:2] == [fault, None]
    finally:
        await host.stop()


#: Where a transfer may cut a GIF (a close-delimited body, half of it): name → the cut.
GIF_CUTS = {
    "inside-a-later-frames-descriptor": lambda gif: images(gif)[1][0] + 5,
    "at-a-frames-end": lambda gif: images(gif)[1][1],
    "on-a-byte-that-reads-as-the-trailer": lambda gif: next(
        at + 1 for at in range(images(gif)[1][0] + 20, len(gif)) if gif[at] == 0x3B
    ),
}


async def fetched_after_a_cut(source: Replay, tmp_path: Path, work_id: str, body: bytes) -> Artifact:
    """Fetch the one page of ``work_id`` from an image host that serves ``body``
    close-delimited and cut in half first, whole after: the cut fetch must fail
    ``download_failed`` (retryable) with nothing recorded complete; returns the retry's
    artifact (the whole page). The work is listed at the size of ``body``'s picture (as
    Pixiv lists its first page's original: a picture of another ratio is no page of the
    work)."""
    with Image.open(io.BytesIO(body)) as picture:
        width, height = picture.size
    source.faults.mutate[work_id] = {"width": width, "height": height}
    host = await FakeImageHost(source.faults, script=["close_half"], bodies={f"{work_id}_p0": body}).start()
    source.image_host = host.url
    store = ArtifactStore(tmp_path)
    try:
        work = await listed_work(source, work_id)
        with pytest.raises(SourceError) as caught:
            await store.fetch(source.client(), work, "job", "t")
        assert caught.value.reason == TerminalReason.DOWNLOAD_FAILED and caught.value.retryable
        assert list(store.folder("job", "t").iterdir()) == []  # nothing recorded complete
        artifact = await store.fetch(source.client(), work, "job", "t")  # the retry: the whole page
        assert [r.fault for r in host.of_work(work_id) if f"{work_id}_p0" in r.path] == ["close_half", None]
        return artifact
    finally:
        await host.stop()


@pytest.mark.parametrize("where", list(GIF_CUTS))
async def test_a_gif_cut_short_is_retried_until_it_comes_whole(source: Replay, tmp_path: Path, where: str) -> None:
    # A GIF page of three frames served close-delimited, half of it: the check judges the
    # page by its own framing. Cut inside its second frame's descriptor, Pillow's
    # struct.error came out of the fetch as curaflow's own error (internal_error); cut at a
    # frame's end, the frames before the cut were verified and delivered; cut on a byte of
    # 0x3B (its last byte was its framing), the work was blamed (undecodable, the week).
    work_id = "126839103"  # one page
    gif = noise_gif()
    body = halved_at(gif, GIF_CUTS[where](gif))
    artifact = await fetched_after_a_cut(source, tmp_path, work_id, body)
    with Image.open(artifact.files[0].path) as image:
        assert image.n_frames == 3


@pytest.mark.parametrize(
    ("fmt", "work_id"), [("jpeg", "126879163"), ("png", "126839103")], ids=["jpeg-thumbnail", "png-carried"]
)
async def test_a_page_cut_right_after_an_image_it_carries_is_retried(
    source: Replay, tmp_path: Path, fmt: str, work_id: str
) -> None:
    # Half of a JPEG holding an EXIF thumbnail, cut right after the thumbnail's EOI (half
    # of a PNG carrying a PNG, right after the carried IEND): its last bytes are an end of
    # image, not the file's. It was "whole by its framing" and, not decoding, the work's
    # (undecodable, the week); it is retried and the whole page delivered.
    data, cut = jpeg_with_thumbnail() if fmt == "jpeg" else png_carrying_a_png()
    body = carrying_halved_at(data, cut, fmt)
    artifact = await fetched_after_a_cut(source, tmp_path, work_id, body)
    assert Path(artifact.files[0].path).read_bytes() == body


async def test_a_page_too_large_to_verify_is_never_stored(source: Replay, tmp_path: Path) -> None:
    # A 15 000 × 15 000 PNG (225 M pixels: over the frame bound, outbound.image_max_pixels,
    # a "decompression bomb") of a few KiB. Its size cannot be verified in bounded memory,
    # so it is refused by its header: the work is unavailable (the cell moves on), and it
    # was never "accepted on its length" and delivered unverified.
    work_id = "126839103"  # one PNG page
    bomb = io.BytesIO()
    Image.new("1", (15_000, 15_000)).save(bomb, format="PNG")
    host = await FakeImageHost(source.faults, bodies={f"{work_id}_p0": bomb.getvalue()}).start()
    source.image_host = host.url
    store = ArtifactStore(tmp_path)
    try:
        work = await listed_work(source, work_id)
        with pytest.raises(WorkUnavailable, match="pixels"):
            await store.fetch(source.client(), work, "job", "t")
    finally:
        await host.stop()
    assert list(store.folder("job", "t").iterdir()) == []  # nothing of it is left


async def test_a_truncated_download_is_retried_until_every_page_decodes(
    make_stack: StackFactory, tmp_path: Path, replay: ReplayServer, image_host: FakeImageHost
) -> None:
    [work_id] = ordered("ゆずソフト")  # one PNG page
    image_host.script = ["close_half", "short_length"]
    stack, _ = source_stack(
        make_stack,
        tmp_path,
        replay,
        pixiv={"image_url": image_host.url},
        target={"query": {"tags": ["ゆずソフト"]}},
    )
    await stack.start_worker()
    record = await stack.wait_terminal(await stack.admit(task(stack, ["ゆずソフト"])))

    cell = record.cells[0]
    assert (cell.state, cell.work_id) == ("submitted", work_id)
    assert [r.fault for r in image_host.of_work(work_id)] == ["close_half", "short_length", None]
    [page] = delivered_pages(tmp_path / "delivered", work_id)
    assert decodes(page)


# ---- 2. the retrieval view holds after the 5000-offset window move ---------------------


async def test_duration_holds_on_every_page_after_the_window_moves(source: Replay) -> None:
    # 800 works a day for 15 days; "within_last_week" holds 8 days = 6400 works (> 5000),
    # none popular. A popular work 13 days old lies outside the duration.
    old = 800 * 13 + 5
    source.faults.deep = DeepSet(
        tag="week-tag", count=12_000, per_day=800, last_day=newest_day(), popular_ranks=frozenset({old})
    )
    target = spec(
        query={"tags": ["week-tag"], "duration": "within_last_week"}, filters={"min_bookmarks": 500}, scan_limit=1
    )
    result, offered = await run_scan(source.client(), target, max_examined=20_000)

    searches = source.faults.of("search")
    assert result.window_moves >= 1
    assert all(e.params.get("duration") == "within_last_week" for e in searches), [e.params for e in searches][-3:]
    assert result.candidates == []  # the 13-day-old work is outside the query
    assert source.faults.deep.work_id(old) not in offered
    assert result.report.fetched == 6400 and len(offered) == len(set(offered))


async def test_every_page_carries_the_whole_retrieval_view(source: Replay) -> None:
    # 200 works a day: "within_last_month" holds 6000 works, so the window moves
    source.faults.deep = DeepSet(tag="view-tag", count=8000, per_day=200)
    target = spec(
        query={"tags": ["view-tag"], "search_target": "exact_match_for_tags", "duration": "within_last_month"},
        filters={"start_date": "2024-12-01", "end_date": "2025-02-03", "min_bookmarks": 500},
        scan_limit=1,
    )
    await run_scan(source.client(), target, max_examined=20_000)
    searches = source.faults.of("search")
    assert len(searches) > 170
    for e in searches:
        assert e.params["word"] == "view-tag" and e.params["search_target"] == "exact_match_for_tags"
        assert e.params["duration"] == "within_last_month"
        assert e.params["start_date"] >= "2024-12-01"  # a window only narrows the target's dates
        assert e.params["end_date"] <= "2025-02-03"


# ---- 3. a day deeper than the offset cap -----------------------------------------------


async def test_a_day_with_more_works_than_the_cap_is_read_from_both_ends(source: Replay) -> None:
    # 5100 works on one day: date_desc reaches the newest 5010; the 90 oldest — with the
    # only eligible work among them — are read in date_asc order up to where the first
    # walk stopped.
    deep = DeepSet(tag="one-day", count=5200, per_day=5100, popular_ranks=frozenset({5050}))
    source.faults.deep = deep
    target = spec(query={"tags": ["one-day"]}, filters={"min_bookmarks": 500}, scan_limit=1)
    result, offered = await run_scan(source.client(), target, max_examined=20_000)

    assert [w.work_id for w in result.candidates] == [deep.work_id(5050)]
    assert len(offered) == len(set(offered))  # nothing offered twice
    # the tail is read oldest first, up to the eligible work
    assert set(offered) >= {deep.work_id(r) for r in range(5050, 5100)}
    assert result.report.fetched == 5010 + 50
    assert result.report.skipped_days == []
    assert all(e.status == 200 and int(e.params.get("offset", 0)) <= 5000 for e in source.faults.of("search"))


async def test_a_crowded_day_is_read_from_both_ends_in_an_ascending_scan_too(source: Replay) -> None:
    # date_asc: the walk reaches the crowded day from its oldest end; the newest 90 works
    # of the day (with the eligible one) are read newest first.
    deep = DeepSet(tag="one-day-asc", count=5200, per_day=5100, popular_ranks=frozenset({50}))
    source.faults.deep = deep
    target = spec(query={"tags": ["one-day-asc"], "sort": "date_asc"}, filters={"min_bookmarks": 500}, scan_limit=1)
    result, offered = await run_scan(source.client(), target, max_examined=20_000)

    assert [w.work_id for w in result.candidates] == [deep.work_id(50)]
    assert len(offered) == len(set(offered))
    assert set(offered) >= {deep.work_id(r) for r in range(0, 51)}
    assert result.report.skipped_days == []
    assert all(e.status == 200 for e in source.faults.of("search"))


async def test_a_window_never_moves_past_the_targets_dates(source: Replay) -> None:
    # The target covers one crowded day: once both ends of it are read, the scan ends
    # instead of asking for an empty date range.
    source.faults.deep = DeepSet(tag="one-day-only", count=5200, per_day=5100)
    target = spec(
        query={"tags": ["one-day-only"]},
        filters={"min_bookmarks": 500, "start_date": "2025-02-04", "end_date": "2025-02-04"},
        scan_limit=1,
    )
    result, offered = await run_scan(source.client(), target, max_examined=20_000)
    assert result.exhausted and result.report.exhausted and result.candidates == []
    assert result.report.fetched == 5100 and len(offered) == len(set(offered))
    assert all(e.params["start_date"] <= e.params["end_date"] for e in source.faults.of("search"))


async def test_a_day_the_source_cannot_page_fully_is_reported(
    make_stack: StackFactory, tmp_path: Path, replay: ReplayServer
) -> None:
    # 10 150 works on one day: 5018 from its newest end are reachable and 5018 from its
    # oldest (both walks' pages asked one place early, 29 new works each, the last at
    # offset 4988 reaches place 5017), 114 in the middle are not. The scan goes on with the
    # day before and says which day it could not finish.
    deep = DeepSet(tag="busy-day", count=10_200, per_day=10_150, popular_ranks=frozenset({10_160}))
    replay.faults.deep = deep
    metrics_port = free_port()
    stack, _ = source_stack(
        make_stack,
        tmp_path,
        replay,
        pixiv={"max_examined": 20_000},
        target={"query": {"tags": ["busy-day"]}, "filters": {"min_bookmarks": 500}, "scan_limit": 1},
        observability={"metrics_port": metrics_port, "metrics_host": "127.0.0.1"},
    )
    await stack.start_worker()
    record = await stack.wait_terminal(await stack.admit(task(stack, ["busy-day"])), timeout_s=180)

    cell = record.cells[0]
    assert (cell.state, cell.work_id) == ("submitted", deep.work_id(10_160))
    report = cell.candidate_report
    assert report is not None
    assert [d.model_dump() for d in report.skipped_days] == [{"day": "2025-02-04", "reached": 10_036}]
    pool = await stack.ledger()
    outcome = await pool.fetchval("SELECT record FROM outcomes WHERE job_id = $1", record.job_id)
    [target] = outcome["cells"]["targets"]
    assert target["candidate_report"]["skipped_days"] == [{"day": "2025-02-04", "reached": 10_036}]
    assert "source.day_not_fully_paged" in stack.worker_log()
    async with httpx.AsyncClient() as plain:
        text = (await plain.get(f"http://127.0.0.1:{metrics_port}/metrics")).text
    assert sample(text, "curaflow_source_days_not_fully_paged_total", account="default") == 1


# ---- job-level tests on the default settings: one worker process -----------------------

#: Each shared test's slot (target, Pixiv account, directory route) → its target's fields.
SLOTS: dict[str, dict[str, Any]] = {
    "exhausted": {"query": {"tags": ["廃墟"]}, "filters": {"exclude_ai": True}},
    "unavailable": {},
    "hostile-ids": {},
    "cooling": {},
}


def slot_out(env: SharedEnv, slot: str) -> Path:
    """Where a slot's directory route delivers (a few folders deep: no escape reaches ``env.root``)."""
    return env.root / slot / "r1" / "r2" / "r3" / "delivered"


def shared_config(env: SharedEnv) -> dict[str, Any]:
    """The job-level tests on the default settings: per slot a target, a Pixiv account (its
    gate and memory of unavailable works) and a directory route (``slot_out``)."""
    return {
        "pixiv": env.replay.config(accounts={slot: {} for slot in SLOTS}),
        "routes": {env.route(slot): {"kind": "directory", "path": str(slot_out(env, slot))} for slot in SLOTS},
        "targets": [
            {"id": slot, "account": slot, "query": {"tags": ["オリジナル"]}, "routes": [env.route(slot)], **target}
            for slot, target in SLOTS.items()
        ],
    }


# ---- 4. fallback stages never rescan an exhausted source -------------------------------


async def test_an_exhausted_source_ends_a_scheduled_cell_at_once(env: SharedEnv) -> None:
    # 廃墟 lists three works and no next page: two get delivered, one is AI (filtered).
    stack, replay = env.stack, env.replay
    works = ordered("廃墟")
    assert len(works) == 3
    replay.faults.mutate = {works[2]: {"illust_ai_type": 2}}
    for _ in range(2):
        done = await env.run("exhausted", ["廃墟"])
        assert done.cells[0].state == "submitted"
    before = len(replay.faults.of("search"))

    record = await stack.wait_terminal(await start_scheduled(stack, stages=3, target_id="exhausted"))

    cell = record.cells[0]
    assert (cell.state, cell.reason, cell.fallback_pass) == ("no_candidate", "filter_exhausted", 0)
    assert len(replay.faults.of("search")) - before == 1  # no stage rescanned the same result
    assert cell.candidate_report is not None and cell.candidate_report.exhausted


# ---- 6. "Your access is currently restricted." -----------------------------------------


async def test_a_restricted_account_is_its_own_reason_and_pauses_the_account(
    make_stack: StackFactory, tmp_path: Path, replay: ReplayServer
) -> None:
    replay.faults.search = ["restricted"] * 20  # 403 {"error": {"user_message": "Your access is …"}}
    stack, _ = source_stack(make_stack, tmp_path, replay, pixiv={"restriction_pause_ms": 600_000})
    await stack.start_worker()
    record = await stack.wait_terminal(await stack.admit(task(stack)))

    cell = record.cells[0]
    assert (cell.state, cell.reason) == ("failed", "account_restricted")
    assert len(replay.faults.of("search")) == 1  # not retried: a retry cannot lift it
    error = protocol_error(record)
    assert error["code"] == "auth_error" and error["retryable"] is False
    assert error["detail"]["internal_code"] == "account_restricted"
    assert "restricted" in error["message"] and "paused" in error["message"]
    pool = await stack.ledger()
    outcome = await pool.fetchrow("SELECT alertable, record FROM outcomes WHERE job_id = $1", record.job_id)
    assert outcome["alertable"] is True
    assert "restricted" in outcome["record"]["user_message"]["en"]
    gate = await read_gate(pool, stack.settings.source_task_queue("default"))
    assert gate is not None and gate.paused_until - gate.now > 500_000

    # the account is paused: the next job of the account does not ask Pixiv again
    again = await stack.wait_terminal(await stack.admit(task(stack)))
    assert (again.cells[0].state, again.cells[0].reason) == ("failed", "account_restricted")
    assert len(replay.faults.of("search")) == 1
    assert "source.account_restricted" in stack.worker_log()

    # the operator checked the account and lifts the pause: jobs search again
    listed = await curaflow("accounts", "list", "--json", stack=stack)
    assert listed.returncode == 0, listed.stderr
    [account] = json.loads(listed.stdout)
    assert account["account"] == "default" and account["pause_reason"] == "restricted"
    resumed = await curaflow("accounts", "resume", "default", stack=stack)
    assert resumed.returncode == 0, resumed.stderr
    replay.faults.search = []
    after = await stack.wait_terminal(await stack.admit(task(stack)))
    assert after.cells[0].state == "submitted"


async def test_a_job_its_account_held_past_the_deadline_names_the_account(env: SharedEnv) -> None:
    # The slot's account cools down for 10 min (under the ladder's cap: as a rate limit
    # leaves it); a job of 10 s meets it at its first request and Temporal retries the step
    # after the cooldown, past the deadline. The job read only "ran past its deadline …
    # a narrower query": the finish did not know the account's gate.
    stack, account = env.stack, "cooling"  # the slot's own account
    pool = await stack.ledger()
    gate = stack.settings.source_task_queue(account)
    await pool.execute(
        f"""INSERT INTO source_gates (gate, cooldown_until, last_rate_limit_at, next_at, updated_at)
            SELECT $1, now + 600000, now, now + 600000, now FROM (SELECT {DB_NOW_MS} AS now) clock
            ON CONFLICT (gate) DO UPDATE SET cooldown_until = EXCLUDED.cooldown_until,
                last_rate_limit_at = EXCLUDED.last_rate_limit_at, next_at = EXCLUDED.next_at""",
        gate,
    )
    try:
        record = await stack.wait_terminal(await stack.admit({**env.task("cooling"), "deadline_ms": 10_000}))
    finally:
        await pool.execute("UPDATE source_gates SET cooldown_until = 0, next_at = 0 WHERE gate = $1", gate)
    assert env.replay.faults.of("search") == []  # the gate let no request leave

    error = protocol_error(record)
    assert (error["code"], error["detail"]["internal_code"]) == ("deadline_exceeded", "execution_timeout")
    held = error["detail"]["held_by"]
    assert (held["owner"], held["name"], held["kind"]) == ("account", account, "cooling")
    assert record.deadline_at is not None and held["until"] > record.deadline_at
    assert account in error["message"] and "narrower query" not in error["message"]
    outcome = await pool.fetchval("SELECT record FROM outcomes WHERE job_id = $1", record.job_id)
    outcome = json.loads(outcome) if isinstance(outcome, str) else outcome
    assert outcome["cells"]["targets"][0]["held_by"] == held
    assert account in outcome["user_message"]["en"] and account in outcome["user_message"]["zh"]


# ---- 8. unavailable works are remembered -----------------------------------------------


async def test_an_unavailable_work_is_not_fetched_again_by_later_jobs(env: SharedEnv) -> None:
    stack, replay, account = env.stack, env.replay, "unavailable"  # the slot's own account
    w1, w2, w3 = ordered("オリジナル")[:3]
    replay.faults.missing_works = {w1}  # its image answers 404
    first = await env.run("unavailable")
    second = await env.run("unavailable")

    assert (first.cells[0].state, first.cells[0].work_id) == ("submitted", w2)
    assert (second.cells[0].state, second.cells[0].work_id) == ("submitted", w3)
    w1_images = [e for e in replay.faults.of("image") if f"/{w1}_p" in e.path]
    assert len(w1_images) == 1  # the second job knew it was gone
    report = second.cells[0].candidate_report
    assert report is not None and {"work_id": w1, "reason": "unavailable"} in report.filtered

    # an operator can make curaflow try it again at once
    listed = json.loads((await curaflow("unavailable", "list", "--json", stack=stack)).stdout)
    # (other tests' stacks, on the same database, list under their own queue names)
    assert [(r["account"], r["work_id"]) for r in listed if r["work_id"] == w1 and r["account"] == account] == [
        (account, w1)
    ]
    assert (await curaflow("unavailable", "clear", w1, "--account", account, stack=stack)).returncode == 0
    replay.faults.missing_works = set()
    third = await env.run("unavailable")
    assert (third.cells[0].state, third.cells[0].work_id) == ("submitted", w1)


# ---- 12.4 untrusted data from the source ------------------------------------------------


async def test_hostile_work_ids_never_leave_their_roots(env: SharedEnv) -> None:
    first, second, third = ordered("オリジナル")[:3]
    tmp_path = env.root / "hostile-ids"  # the slot's own folder: its route delivers under it
    absolute = str(tmp_path / "abs-escaped-2")
    env.replay.faults.mutate = {first: {"id": "../../../escaped-1"}, second: {"id": absolute}}
    root = slot_out(env, "hostile-ids")
    record = await env.run("hostile-ids")

    cell = record.cells[0]
    assert (cell.state, cell.work_id) == ("submitted", third)
    assert cell.candidate_report is not None and cell.candidate_report.reasons.get("invalid") == 2
    assert [p for p in env.root.rglob("*") if "escaped" in p.name] == []
    assert sorted(p.name for p in root.iterdir()) == [third]


async def test_broken_text_from_the_source_is_cleaned_before_storage(
    make_stack: StackFactory, tmp_path: Path, replay: ReplayServer
) -> None:
    [work_id] = ordered("ゆずソフト")
    recorded = next(w for w in recorded_works() if str(w["id"]) == work_id)
    replay.faults.mutate = {
        work_id: {
            "title": "broken \ud83d emoji\x00 and a \x07bell",
            "tags": [*recorded["tags"], {"name": "tag\udc00\x1b[31m", "translated_name": None}],
            "user": {**recorded["user"], "name": "artist\x00\ud800"},
        }
    }
    stack, _ = source_stack(
        make_stack, tmp_path, replay, target={"query": {"tags": ["ゆずソフト"]}}, delivery={"source_max_attempts": 3}
    )
    await stack.start_worker()
    # every job of the target used to fail while this work was among its candidates
    for _ in range(2):
        record = await stack.wait_terminal(await stack.admit(task(stack, ["ゆずソフト"])))
        if record.cells[0].state == "submitted":
            break
    cell = record.cells[0]
    assert (cell.state, cell.work_id) == ("submitted", work_id), cell
    assert cell.work is not None
    assert cell.work.title == "broken \ufffd emoji and a bell"
    assert cell.work.author == "artist\ufffd"
    assert "tag\ufffd[31m" in cell.work.tags
    manifest = (tmp_path / "delivered" / work_id / "manifest.json").read_text(encoding="utf-8")
    assert "broken \ufffd emoji and a bell" in manifest


async def test_a_work_held_on_an_unrecognised_answer_is_answered_held_a_verdict_that_does_not_last(
    ledger_pool: Any,
) -> None:
    """A work skipped on an answer not recognised as its own (the image host's 403, a page
    that is no image) is held back for the account, and later scans are told ``unrecognised``:
    a verdict the scan frontier does not keep, so a tag search's frontier never moves past
    the work for good while it is held. Told ``unavailable`` (a lasting verdict), a work
    held for an hour was skipped by the frontier for ever (2026-12-05)."""
    from curaflow.domain.models import Work
    from curaflow.ledger import remembered as memory
    from curaflow.ledger.db import now_ms
    from curaflow.sources.pixiv.frontier import lasting

    gate = f"q-{short_id()}-source-default"
    async with ledger_pool.acquire() as conn:
        for work_id, held in (("21", True), ("22", False)):
            await memory.remember_unavailable(
                conn,
                gate=gate,
                work_type="illustration",
                work_id=work_id,
                why="x",
                job_id="j",
                ttl_ms=60_000,
                held=held,
            )
    known = await memory.known_works(
        ledger_pool, routes=[], gate=gate, work_type="illustration", work_ids=["21", "22"], now=now_ms()
    )
    assert known == {"21": "unrecognised", "22": "unavailable"}
    listed = {r.work_id: r.held for r in await memory.list_unavailable(ledger_pool) if r.gate == gate}
    assert listed == {"21": True, "22": False}  # what `curaflow unavailable list` shows
    assert not lasting(known["21"], Work(work_id="21"), None) and lasting(known["22"], Work(work_id="22"), None)
    async with ledger_pool.acquire() as conn:  # a later answer about the work itself outlasts the hold
        await memory.remember_unavailable(
            conn, gate=gate, work_type="illustration", work_id="21", why="404", job_id="j", ttl_ms=600_000
        )
        await memory.remember_unavailable(  # and a hold never shortens or softens what is known
            conn, gate=gate, work_type="illustration", work_id="22", why="403", job_id="j", ttl_ms=1_000, held=True
        )
    again = await memory.known_works(
        ledger_pool, routes=[], gate=gate, work_type="illustration", work_ids=["21", "22"], now=now_ms()
    )
    assert again == {"21": "unavailable", "22": "unavailable"}


async def _remember(pool: Any, gate: str, work_id: str, why: str, ttl_ms: int, **flags: bool) -> None:
    from curaflow.ledger import remembered as memory

    async with pool.acquire() as conn:
        await memory.remember_unavailable(
            conn, gate=gate, work_type="illustration", work_id=work_id, why=why, job_id="j", ttl_ms=ttl_ms, **flags
        )


async def test_a_hold_never_replaces_a_live_verdict_about_the_work(ledger_pool: Any) -> None:
    """Two jobs of one account meet the same work: one with an answer about the work (a
    404, a URL off the image host), the other with one that is not (a page that is no
    image, a 403). The hold is dropped: until 2026-12-05 it rewrote the row's other columns
    (a week's ``unavailable`` read ``unusable`` — a cell could end ``source_unusable`` —
    or the reverse), and with a hold as long as the memory it softened the 404 into a hold
    a frontier does not keep (found by a break-it pass)."""
    from curaflow.ledger import remembered as memory
    from curaflow.ledger.db import now_ms

    gate = f"q-{short_id()}-source-default"
    week, hour = 7 * 86_400_000, 3_600_000
    await _remember(ledger_pool, gate, "31", "image HTTP 404", week)
    await _remember(ledger_pool, gate, "31", "page 1: not an image", hour, unusable=True, held=True)
    await _remember(ledger_pool, gate, "32", "page URL refused", week, unusable=True)
    await _remember(ledger_pool, gate, "32", "image HTTP 403", hour, held=True)
    await _remember(ledger_pool, gate, "33", "image HTTP 404", 600_000)
    await _remember(ledger_pool, gate, "33", "image HTTP 403", 600_000, held=True)  # a hold as long as the memory
    await _remember(ledger_pool, gate, "34", "image HTTP 403", hour, held=True)
    await _remember(ledger_pool, gate, "34", "image HTTP 404", week)  # an answer about the work replaces a hold
    known = await memory.known_works(
        ledger_pool, routes=[], gate=gate, work_type="illustration", work_ids=["31", "32", "33", "34"], now=now_ms()
    )
    assert known == {"31": "unavailable", "32": "unusable", "33": "unavailable", "34": "unavailable"}
    rows = {r.work_id: r for r in await memory.list_unavailable(ledger_pool) if r.gate == gate}
    assert {w: (r.why, r.held) for w, r in rows.items()} == {
        "31": ("image HTTP 404", False),
        "32": ("page URL refused", False),
        "33": ("image HTTP 404", False),
        "34": ("image HTTP 404", False),
    }


async def test_clearing_held_works_keeps_the_scan_frontiers(ledger_pool: Any) -> None:
    """After fixing the way to the image host an operator clears the holds
    (``curaflow unavailable clear --held``): a held work never let a frontier pass it, so
    no target's frontier is forgotten — until 2026-12-05 every target rescanned from the
    top. Clearing a lasting verdict still resets them."""
    from curaflow.ledger import frontiers
    from curaflow.ledger import remembered as memory

    gate, target = f"q-{short_id()}-source-default", f"t-{short_id()}"
    async with ledger_pool.acquire() as conn:
        await frontiers.save_frontier(conn, target, "fp", {"sort": "date_desc"}, job_id="j")
    await _remember(ledger_pool, gate, "41", "image HTTP 403", 3_600_000, held=True)
    await _remember(ledger_pool, gate, "42", "image HTTP 404", 3_600_000)
    assert await memory.clear_unavailable(ledger_pool, gate=gate, held_only=True) == 1
    assert await frontiers.load_frontier(ledger_pool, target, "fp") is not None
    assert [r.work_id for r in await memory.list_unavailable(ledger_pool) if r.gate == gate] == ["42"]
    assert await memory.clear_unavailable(ledger_pool, gate=gate) == 1
    assert await frontiers.load_frontier(ledger_pool, target, "fp") is None


async def test_a_work_this_cell_released_is_not_a_lasting_verdict_in_its_next_pass() -> None:
    """A later pass of a cell skips the works the cell released, and the account's memory
    says what lasts. A released work with no memory of it (a hold over, or
    ``unrecognised_hold_ms = 0``) was told ``unavailable`` — lasting — so the frontier
    passed it for good (found by a break-it pass, 2026-12-05); it is ``released`` now,
    counted unavailable, and the frontier stops before it."""
    from curaflow.sources.pixiv.frontier import Frontier

    faults = Faults(deep=DeepSet(tag="t", count=60, per_day=100))
    deep = faults.deep
    assert deep is not None
    server = await BackgroundServer(create_replay_app(faults)).start()
    spec = TargetSpec(target_id="t", query=TargetQuery(tags=["t"]), scan_limit=1)
    delivered = {deep.work_id(r) for r in range(5)}
    released = deep.work_id(5)

    async def known(ids: list[str]) -> dict[str, str]:
        return {i: "duplicate" for i in ids if i in delivered}

    async def on_page(cp: ScanCheckpoint) -> None:
        return None

    try:
        async with httpx.AsyncClient(timeout=10) as http:
            client = PixivClient(http, refresh_token="r", api_url=server.url, auth_url=server.url)
            result = await scan(
                client,
                spec,
                scan_limit=1,
                known=known,
                on_page=on_page,
                max_examined=100,
                frontier=Frontier(sort="date_desc"),
                unavailable={released},
            )
    finally:
        await server.stop()
    assert [w.work_id for w in result.candidates] == [deep.work_id(6)]
    assert result.report.reasons.get("released") == 1
    assert {"work_id": released, "reason": "unavailable"} in result.report.filtered
    frontier = Frontier.model_validate(result.frontier)
    assert frontier.known is None or frontier.known.work_id != released, frontier  # never past it


async def test_a_release_remembers_whether_the_answer_was_the_works(ledger_pool: Any) -> None:
    """The cell's next pass is told a work it released on an answer not recognised as the
    work's ``unrecognised`` — the source's answer — whether or not the account still holds
    it back (here it does not: nothing is remembered for the account); a work released on
    a recognised answer, or by a release written before migration 0045, is only
    ``released`` (skipped, counted unavailable), as before."""
    from curaflow.domain.messages import RouteRef
    from curaflow.domain.models import CandidateReport, Work
    from curaflow.ledger import cells
    from curaflow.ledger import remembered as memory

    target = TargetSpec(target_id="t", routes=[RouteRef(name=f"r-{short_id()}", kind="directory")])
    gate = f"q-{short_id()}-source-default"
    job_id = await ledger_job(ledger_pool, target, label="release")
    works = [Work(work_id=w) for w in ("51", "52", "53", "54")]
    async with ledger_pool.acquire() as conn, conn.transaction():
        bound = await cells.bind_search(conn, job_id, target, works, CandidateReport(fetched=4))
        assert bound.cell is not None and bound.cell.work_id == "51"
        nxt = await cells.rebind_next(conn, job_id, target, "51", "image HTTP 403", "gone", False)
        assert nxt is not None and nxt.work_id == "52"
        nxt = await cells.rebind_next(conn, job_id, target, "52", "image HTTP 404", "gone", True)
        assert nxt is not None and nxt.work_id == "53"
        # A release as the version before 0045 wrote it (no word on the answer).
        await conn.execute(
            """UPDATE delivery_intents SET status = 'released', last_error = 'image HTTP 403'
               WHERE job_id = $1 AND work_id = '53'""",
            job_id,
        )
    resume = await cells.search_resume(ledger_pool, job_id, "t")
    assert (resume.released, resume.unrecognised) == ({"51", "52", "53"}, {"51"})
    known = await memory.known_works(
        ledger_pool,
        routes=[r.name for r in target.routes],
        gate=gate,
        work_type="illustration",
        work_ids=["51", "52", "53", "54"],
        released_unrecognised=resume.unrecognised,
    )
    assert known == {"51": "unrecognised"}  # 52 and 53: the scan's `released`


async def test_what_the_ledger_remembers_and_for_how_long(ledger_pool: Any) -> None:
    from curaflow.domain.messages import RouteRef
    from curaflow.domain.models import CandidateReport, Work
    from curaflow.ledger import cells
    from curaflow.ledger import remembered as memory
    from curaflow.ledger.db import now_ms

    gate, route, other = f"q-{short_id()}-source-default", f"r-{short_id()}", f"r-{short_id()}"

    async def refuse(conn: Any, error: str) -> None:  # `route` refuses work 11 for good
        await memory.remember_refusal(
            conn,
            route=route,
            work_type="illustration",
            work_id="11",
            reason="delivery_rejected",
            error=error,
            job_id="j",
            target_id="t",
        )

    async with ledger_pool.acquire() as conn:
        await memory.remember_unavailable(
            conn, gate=gate, work_type="illustration", work_id="11", why="image HTTP 404", job_id="j", ttl_ms=1000
        )
        await memory.remember_unavailable(
            conn, gate=gate, work_type="illustration", work_id="12", why="gone", job_id="j", ttl_ms=0
        )
        await refuse(conn, "webhook answered HTTP 400 \x00\ud83d")
    now = now_ms()

    async def known(routes: list[str], at: int) -> dict[str, str]:
        return await memory.known_works(
            ledger_pool, routes=routes, gate=gate, work_type="illustration", work_ids=["11", "12", "13"], now=at
        )

    assert await known([route], now) == {"11": "refused"}  # a refusal wins
    assert await known([other], now) == {"11": "unavailable"}  # another route: only the source's verdict
    assert await known([other], now + 5000) == {}  # forgotten after pixiv.unavailable_ttl_ms
    [refusal] = await memory.list_refusals(ledger_pool, route)
    assert refusal.error == "webhook answered HTTP 400 \ufffd"
    assert await memory.clear_refusals(ledger_pool, route=route, work_id="11") == 1
    assert await known([route], now) == {"11": "unavailable"}
    held = TargetSpec(target_id="t", routes=[RouteRef(name=route, kind="directory")])
    job_id = await ledger_job(ledger_pool, held, label="known")
    async with ledger_pool.acquire() as conn, conn.transaction():  # the job holds work 11 on `route`
        await cells.bind_work(conn, job_id, held, [Work(work_id="11")], CandidateReport())
    async with ledger_pool.acquire() as conn:  # refused again as well: the live intent still comes first
        await refuse(conn, "again")
    # held on a route of the target by an open job: first of all, told ``in_flight`` (not
    # delivered: the job may release it; a verdict that does not last)
    assert await known([route], now) == {"11": "in_flight"}
    assert await known([other], now) == {"11": "unavailable"}
