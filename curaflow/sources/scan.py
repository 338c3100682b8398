"""The candidate scan of one cell: page the source, filter, dedupe, checkpoint.

A scan pages the source (tag search or ranking) and keeps every eligible work in rank
order until it holds ``want`` candidates (default ``min(scan_limit, WANT)``; fallback
stage N of a scheduled job keeps ``min(scan_limit × (N+1), WANT × (N+1))``), the source
runs out, or ``max_examined`` works were looked at. Eligible means: passes the target's
filters (:mod:`curaflow.sources.filters`), is not excluded by the task, not already
delivered or reserved on the target's routes (``duplicate``) and not already found
unavailable by this cell (``unavailable``). A fetched page's works wait in ``pending``
until examined, and the checkpoint is handed to ``on_page`` (the search activity
persists it and heartbeats) whenever more works follow, so an attempt that dies resumes
where it stopped: no page is fetched twice, no work examined twice.

Deep paging: the app-api refuses ``offset`` beyond 5000 (HTTP 400). When the next page
would pass it on a date-sorted search, the scan restarts at offset 0 with the date window
moved to the day of the last fetched work (``end_date`` for ``date_desc``,
``start_date`` for ``date_asc``; reference §2.2, gallery-dl's approach). Every work of
that boundary day fetched before the move is skipped by id until the scan has left the
day, so nothing is skipped and nothing is counted twice. A single day with more than
5000 works cannot be paged further by the API: the window then moves one day on and the
day is recorded in ``skipped_days``. Other sorts end at the cap.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import date, timedelta
from typing import Any

from pydantic import BaseModel, Field

from curaflow.domain.messages import TargetSpec
from curaflow.domain.models import CandidateReport, Work
from curaflow.sources.filters import protocol_reason, reject_reason
from curaflow.sources.pixiv import MAX_OFFSET, PixivClient, offset_of, parse_work

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
        seen_ids: ids of the previous page (a page that shifted by a new upload repeats
            some of them; they are not examined twice).
        last_day / last_day_ids: the day of the latest examined work and the ids
            examined on it.
        boundary_day / boundary_ids: after a window move, the day the window restarted
            on and the ids of that day fetched before the move (skipped until the scan
            leaves the day).
        window_moves / skipped_days: 5000-offset restarts, and days that alone held more
            than the API can page (their remainder could not be reached).
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
    boundary_day: str | None = None
    boundary_ids: list[str] = Field(default_factory=list)
    window_moves: int = 0
    skipped_days: list[str] = Field(default_factory=list)
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


def _shift_day(day: str, days: int) -> str:
    return (date.fromisoformat(day) + timedelta(days=days)).isoformat()


def _day(work: Work) -> str:
    return (work.create_date or "")[:10]


def _move_window(cp: ScanCheckpoint, sort: str, works: list[Work]) -> None:
    """Restart at offset 0 with the date window moved to the day of the last fetched work."""
    key = "end_date" if sort == "date_desc" else "start_date"
    day = _day(works[-1]) if works else cp.last_day
    assert day
    if cp.window.get(key) == day:
        # This day alone holds more works than the API pages: step past it.
        cp.skipped_days.append(day)
        day = _shift_day(day, -1 if sort == "date_desc" else 1)
        cp.boundary_day, cp.boundary_ids = None, []
    else:
        # Every work of the boundary day fetched so far: examined on earlier pages, or
        # pending from this one.
        earlier = cp.last_day_ids if cp.last_day == day else []
        if cp.boundary_day == day:
            earlier = [*cp.boundary_ids, *earlier]
        same_day = [w.work_id for w in works if _day(w) == day]
        cp.boundary_day, cp.boundary_ids = day, list(dict.fromkeys([*earlier, *same_day]))
    cp.window = {**cp.window, key: day}
    cp.window_moves += 1
    cp.started = False
    cp.next_url = None
    cp.seen_ids = []


async def _fetch_page(client: PixivClient, target: TargetSpec, cp: ScanCheckpoint) -> None:
    """Fetch the next page into ``cp.pending`` and decide where the page after it is."""
    if not cp.started:
        page = await _first_page(client, target, cp.window)
        cp.started = True
    else:
        assert cp.next_url is not None
        page = await client.follow(cp.next_url)
    cp.pages += 1
    sort = target.query.sort
    works = [parse_work(i) for i in page.get("illusts") or []]
    skip = set(cp.seen_ids) | set(cp.boundary_ids)
    cp.pending = [w for w in works if w.work_id not in skip]
    if cp.boundary_day and any(
        (_day(w) < cp.boundary_day if sort == "date_desc" else _day(w) > cp.boundary_day) for w in works if _day(w)
    ):
        cp.boundary_day, cp.boundary_ids = None, []  # the scan has left the boundary day
    cp.seen_ids = [w.work_id for w in works]
    next_url = page.get("next_url")
    if next_url and offset_of(next_url) > MAX_OFFSET:
        # The API answers HTTP 400 past offset 5000: move the date window instead.
        if target.query.mode == "search" and sort in ("date_desc", "date_asc") and (works or cp.last_day):
            _move_window(cp, sort, works)
        else:
            cp.next_url = None
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
    want: int | None = None,
    unavailable: set[str] | None = None,
) -> ScanCheckpoint:
    """Run (or resume) the scan of ``target``.

    Args:
        client: the source client (its gate spaces the requests).
        scan_limit: most candidates kept (1..100; the stage's bound).
        taken: given work ids, returns those already delivered or reserved on the
            target's routes (duplicates).
        on_page: awaited with the checkpoint after each page that another page follows.
        checkpoint: the resume point of a previous attempt.
        max_examined: most works examined in one scan.
        want: stop once this many candidates are held (default ``min(scan_limit, WANT)``).
        unavailable: works this cell already found unavailable (rejected as such).

    Returns:
        The final checkpoint: ``candidates`` in rank order and the ``report``.

    Raises:
        SourceError: a source call failed (the attempt fails; the checkpoint survives).
    """
    cp = checkpoint or ScanCheckpoint()
    excluded = set(target.exclude_work_ids)
    gone = unavailable or set()
    want = min(scan_limit, want if want is not None else WANT)
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
            if work.work_id in duplicates:
                reason: str | None = "duplicate"
            elif work.work_id in gone:
                reason = "unavailable"
            else:
                reason = reject_reason(work, target, excluded)
            _examine(cp, work, reason)
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
