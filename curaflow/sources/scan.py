"""The candidate scan of one cell: page the source, filter, dedupe, checkpoint.

A scan pages the source (tag search or ranking) and keeps every eligible work in rank
order until it holds ``min(scan_limit, WANT)`` candidates, the source runs out, or
``max_examined`` works were looked at. After every page it hands a checkpoint to
``on_page`` (the search activity persists it and heartbeats), so an attempt that dies
resumes with the next page: no page is fetched twice.

Deep paging: the app-api refuses ``offset`` beyond 5000. When the next page would pass
it on a date-sorted search, the scan restarts at offset 0 with the date window moved to
the last seen work's day (``end_date`` for ``date_desc``, ``start_date`` for
``date_asc``); works of that boundary day seen before are skipped by id, so nothing is
skipped and nothing is counted twice (reference §2.2, gallery-dl's approach).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import BaseModel, Field

from curaflow.domain.messages import TargetSpec
from curaflow.domain.models import CandidateReport, Work
from curaflow.sources.filters import protocol_reason, reject_reason
from curaflow.sources.pixiv import MAX_OFFSET, PAGE_SIZE, PixivClient, offset_of, parse_work

WANT = 5
FILTERED_CAP = 50


class ScanCheckpoint(BaseModel):
    """Where a scan is; persisted after every page.

    Attributes:
        next_url: the next page to fetch (None before the first page and after the last).
        pages_done: the source has no page left to fetch.
        pending: works of the last fetched page not examined yet (a scan that stopped
            mid-page continues with them before fetching more).
        exhausted: nothing is left: no page to fetch and nothing pending.
        window: date window overrides after a 5000-offset restart.
        seen_ids: ids to skip on the next page (the previous page, or after a window
            move, every work already examined on the boundary day).
        last_day / last_day_ids: the day of the latest examined work and the ids
            examined on it.
    """

    started: bool = False
    pages_done: bool = False
    exhausted: bool = False
    pending: list[Work] = Field(default_factory=list)
    next_url: str | None = None
    window: dict[str, str] = Field(default_factory=dict)
    examined: int = 0
    pages: int = 0
    candidates: list[Work] = Field(default_factory=list)
    report: CandidateReport = Field(default_factory=CandidateReport)
    seen_ids: list[str] = Field(default_factory=list)
    last_day: str | None = None
    last_day_ids: list[str] = Field(default_factory=list)
    all_duplicates: bool = True


TakenHook = Callable[[list[str]], Awaitable[set[str]]]
PageHook = Callable[[ScanCheckpoint], Awaitable[None]]


def search_word(target: TargetSpec) -> str:
    """The app-api ``word`` for a target's tags: AND by spaces, OR with `` OR ``."""
    joiner = " OR " if target.query.relation == "or" and len(target.query.tags) > 1 else " "
    return joiner.join(target.query.tags)


async def _first_page(client: PixivClient, target: TargetSpec, window: dict[str, str]) -> dict[str, Any]:
    q = target.query
    if q.mode == "ranking":
        return await client.ranking(q.ranking_mode, q.ranking_date)
    return await client.search_illust(
        search_word(target),
        search_target=q.search_target,
        sort=q.sort,
        duration=q.duration if not window else None,
        start_date=window.get("start_date") or target.filters.start_date,
        end_date=window.get("end_date") or target.filters.end_date,
    )


def _examine(cp: ScanCheckpoint, work: Work, reason: str | None) -> None:
    """Count one examined work as a candidate or a rejection."""
    cp.examined += 1
    day = (work.create_date or "")[:10]
    if day != cp.last_day:
        cp.last_day, cp.last_day_ids = day, []
    cp.last_day_ids.append(work.work_id)
    if reason is None:
        cp.candidates.append(work)
        cp.all_duplicates = False
        return
    if reason != "duplicate":
        cp.all_duplicates = False
    cp.report.rejected += 1
    cp.report.reasons[reason] = cp.report.reasons.get(reason, 0) + 1
    if len(cp.report.filtered) < FILTERED_CAP:
        cp.report.filtered.append({"work_id": work.work_id, "reason": protocol_reason(reason)})


async def _fetch_page(client: PixivClient, target: TargetSpec, cp: ScanCheckpoint) -> None:
    """Fetch the next page into ``cp.pending`` and decide where the page after it is."""
    if not cp.started:
        page = await _first_page(client, target, cp.window)
        cp.started = True
    else:
        assert cp.next_url is not None
        page = await client.follow(cp.next_url)
    cp.pages += 1
    works = [parse_work(i) for i in page.get("illusts") or []]
    skip = set(cp.seen_ids)
    cp.pending = [w for w in works if w.work_id not in skip]
    cp.seen_ids = [w.work_id for w in works]
    next_url = page.get("next_url")
    if next_url and offset_of(next_url) + PAGE_SIZE > MAX_OFFSET and target.query.mode == "search":
        # Move the date window instead of paging past the 5000-offset cap. The works of
        # the boundary day seen so far (this page's included) are skipped next time.
        last_day = (works[-1].create_date or "")[:10] if works else cp.last_day
        if last_day and target.query.sort in ("date_desc", "date_asc"):
            key = "end_date" if target.query.sort == "date_desc" else "start_date"
            cp.window = {**cp.window, key: last_day}
            cp.started = False
            cp.next_url = None
            same_day = [w.work_id for w in works if (w.create_date or "")[:10] == last_day]
            earlier = cp.last_day_ids if cp.last_day == last_day else []
            cp.seen_ids = list(dict.fromkeys(earlier + same_day))
        else:
            cp.pages_done = True
    else:
        cp.next_url = next_url
        cp.pages_done = not next_url


async def scan(
    client: PixivClient,
    target: TargetSpec,
    *,
    scan_limit: int,
    taken: TakenHook,
    on_page: PageHook,
    checkpoint: ScanCheckpoint | None = None,
    max_examined: int = 1000,
) -> ScanCheckpoint:
    """Run (or resume) the scan of ``target``.

    Args:
        client: the source client (its gate spaces the requests).
        scan_limit: most candidates kept (1..100).
        taken: given work ids, returns those already delivered or reserved on the
            target's routes (duplicates).
        on_page: awaited with the checkpoint after each page that another page follows.
        checkpoint: the resume point of a previous attempt.
        max_examined: most works examined in one scan.

    Returns:
        The final checkpoint: ``candidates`` in rank order and the ``report``.

    Raises:
        SourceError: a source call failed (the attempt fails; the checkpoint survives).
    """
    cp = checkpoint or ScanCheckpoint()
    excluded = set(target.exclude_work_ids)
    want = min(scan_limit, WANT)
    while len(cp.candidates) < want and cp.examined < max_examined:
        if not cp.pending:
            if cp.pages_done:
                cp.exhausted = True
                break
            await _fetch_page(client, target, cp)
            continue
        batch, cp.pending = cp.pending, []
        duplicates = await taken([w.work_id for w in batch])
        for i, work in enumerate(batch):
            if cp.examined >= max_examined or len(cp.candidates) >= scan_limit:
                cp.pending = batch[i:]
                break
            _examine(cp, work, "duplicate" if work.work_id in duplicates else reject_reason(work, target, excluded))
        cp.report.fetched = cp.examined
        cp.report.pages = cp.pages
        cp.exhausted = cp.pages_done and not cp.pending
        if not cp.exhausted and len(cp.candidates) < want and cp.examined < max_examined:
            # More works follow: checkpoint so a retried attempt resumes there. A scan
            # that ends here is bound right away; nothing to resume.
            await on_page(cp)
    cp.report.fetched = cp.examined
    cp.candidates = cp.candidates[:scan_limit]
    return cp
