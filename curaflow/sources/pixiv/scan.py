"""The candidate scan of one cell: page the source, filter, dedupe, checkpoint.

A scan pages the source (tag search or ranking) and keeps every eligible work in rank
order until it holds ``want`` candidates (default ``min(scan_limit, WANT)``; fallback
stage N of a scheduled job keeps ``min(scan_limit × (N+1), WANT × (N+1))``), the source
runs out, or ``max_examined`` works were looked at. Eligible means: passes the target's
filters (:mod:`curaflow.sources.pixiv.filters`), is not excluded by the task, not already
delivered or reserved on the target's routes (``duplicate``) and not already found
unavailable by this cell (``unavailable``). A fetched page's works wait in ``pending``
until examined, and the checkpoint is handed to ``on_page`` (the search activity
persists it and heartbeats) whenever more works follow, so an attempt that dies resumes
where it stopped: no page is fetched twice, no work examined twice.

The retrieval view: every request of a scan — the first page, every
``next_url`` page, every page after a window move — is built by :func:`retrieval_params`
from the target (word, ``search_target``, ``sort``, ``duration``, ``start_date`` /
``end_date``) narrowed by the scan's date window; ``next_url`` only contributes its
``offset``. A window only ever narrows the target's dates, never widens the query.

Deep paging: the app-api refuses ``offset`` beyond 5000 (HTTP 400). When the next page
would pass it on a date-sorted search, the scan restarts at offset 0 with the date window
moved to the day of the last fetched work (``end_date`` for ``date_desc``,
``start_date`` for ``date_asc``; reference §2.2, gallery-dl's approach). Every work of
that boundary day fetched before the move is skipped by id until the scan has left the
day, so nothing is skipped and nothing is counted twice.

A crowded day: when one pass of the walk never left a single day
before reaching the cap, that day holds more works than one walk can page. The rest of
the day is then read from its other end — the same query restricted to that day, in the
reverse date order — up to the work where the first walk stopped, so a day of up to
about 10 000 works is read whole (its older part oldest first). Only when that second
walk reaches the cap too is a middle part of the day out of reach: the day and the number
of its works reached are recorded (``report.skipped_days``, reported through
``on_skipped_day``) and the scan goes on with the next day. Other sorts end at the cap.

The target's frontier (:mod:`curaflow.sources.pixiv.frontier`): a scan given the
target's stored :class:`~curaflow.sources.pixiv.frontier.Frontier` reads only what can
hold something new — the head of a ``date_desc`` query, then the first part not fully
known — and leaves the next frontier's JSON in ``ScanCheckpoint.frontier`` (what the
ledger stores). Its page selection is kept
to three hooks: :func:`_frontier_page` (a fetched page), :func:`_jump` (where the walk
continues) and the verdict of each examined work.

Works whose id or fields are not of the source's shape
(:class:`~curaflow.sources.pixiv.client.InvalidWork`) are counted as rejected with reason
``invalid`` and never used.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import date, timedelta
from typing import Any

from pydantic import BaseModel, Field

from curaflow.domain.fallback import WANT
from curaflow.domain.messages import TargetSpec
from curaflow.domain.models import SkippedDay, Work
from curaflow.domain.reasons import TerminalReason
from curaflow.sources.base import KnownHook, PageHook, ScanState, SkippedDayHook

__all__ = [
    "KnownHook",
    "PageHook",
    "ScanCheckpoint",
    "SkippedDayHook",
    "TailPass",
    "check_page",
    "retrieval_params",
    "scan",
]
from curaflow.sources.errors import SourceError
from curaflow.sources.pixiv import frontier as fr
from curaflow.sources.pixiv.client import MAX_OFFSET, InvalidWork, PixivClient, offset_of, parse_work
from curaflow.sources.pixiv.filters import protocol_reason, reject_reason

FILTERED_CAP = 50


class TailPass(BaseModel):
    """The second walk over a crowded day, from its other end.

    Attributes:
        day: the day (``YYYY-MM-DD``).
        stop_date / stop_id: the last work the first walk fetched on that day; the tail
            takes the works before it in the reversed order, and stops there.
        reached: works of the day fetched so far by both walks.
    """

    day: str
    stop_date: str
    stop_id: int
    reached: int = 0


class ScanCheckpoint(ScanState):
    """Where a Pixiv scan is; persisted after every page.

    The fields every source keeps are :class:`~curaflow.sources.base.ScanState`'s
    (``next_url`` is the app-api's ``next_url``; only its ``offset`` is read). Pixiv's own:

    Attributes:
        window: date window overrides after a 5000-offset restart.
        seen_ids: ids of the previous page (a page that shifted by a new upload repeats
            some of them; they are not examined twice).
        last_day / last_day_ids: the day of the latest examined work and the ids
            examined on it.
        boundary_day / boundary_ids: after a window move, the day the window restarted
            on and the ids of that day fetched before the move (skipped until the scan
            leaves the day).
        window_moves / skipped_days: 5000-offset restarts, and days that alone held more
            than the API can page from both ends (a middle part could not be reached).
        tail: while a crowded day is read from its other end (see the module doc).
        pass_first_day / count_day / day_count: the day of the first work of the current
            pass of the walk, and how many works of the latest day this pass fetched.
        walk: the scan against the target's frontier (None: no frontier kept).
        next_from_source: ``next_url`` is the source's own (the previous page promised
            more works), not a page curaflow chose (a frontier jump or re-read), so an
            empty answer to it is the source's failure (:func:`check_page`).
    """

    window: dict[str, str] = Field(default_factory=dict)
    seen_ids: list[str] = Field(default_factory=list)
    last_day: str | None = None
    last_day_ids: list[str] = Field(default_factory=list)
    boundary_day: str | None = None
    boundary_ids: list[str] = Field(default_factory=list)
    window_moves: int = 0
    skipped_days: list[str] = Field(default_factory=list)
    tail: TailPass | None = None
    pass_first_day: str | None = None
    count_day: str | None = None
    day_count: int = 0
    walk: fr.FrontierWalk | None = None
    next_from_source: bool = True


REVERSED = {"date_desc": "date_asc", "date_asc": "date_desc"}


def search_word(target: TargetSpec) -> str:
    """The app-api ``word`` for a target's tags: AND by spaces, OR with `` OR ``."""
    joiner = " OR " if target.query.relation == "or" and len(target.query.tags) > 1 else " "
    return joiner.join(target.query.tags)


def retrieval_params(
    target: TargetSpec, window: dict[str, str] | None = None, *, sort: str | None = None
) -> dict[str, Any]:
    """The search parameters of every page of a scan of ``target`` (its retrieval view).

    Args:
        target: the effective target: every query field and date filter is sent.
        window: the scan's date window (``start_date`` / ``end_date``, ``YYYY-MM-DD``);
            it narrows the target's dates and never widens them (the later start and
            the earlier end win).
        sort: the walk's order when it differs from the target's (the second walk over a
            crowded day runs in reverse).

    Returns:
        Keyword arguments of :meth:`PixivClient.search_illust` (without ``offset``):
        ``word``, ``search_target``, ``sort``, and ``duration`` / ``start_date`` /
        ``end_date`` when set.
    """
    q = target.query
    window = window or {}
    starts = [d for d in (target.filters.start_date, window.get("start_date")) if d]
    ends = [d for d in (target.filters.end_date, window.get("end_date")) if d]
    params: dict[str, Any] = {"word": search_word(target), "search_target": q.search_target, "sort": sort or q.sort}
    if q.duration:
        params["duration"] = q.duration
    if starts:
        params["start_date"] = max(starts)
    if ends:
        params["end_date"] = min(ends)
    return params


async def _request(client: PixivClient, target: TargetSpec, cp: ScanCheckpoint) -> dict[str, Any]:
    """The next page: always the full retrieval view; ``next_url`` only gives the offset."""
    q = target.query
    offset = offset_of(cp.next_url) if cp.started else 0
    if q.mode == "ranking":
        return await client.ranking(q.ranking_mode, q.ranking_date, offset=offset)
    if cp.tail is not None:
        day = {"start_date": cp.tail.day, "end_date": cp.tail.day}
        params = retrieval_params(target, {**cp.window, **day}, sort=REVERSED[q.sort])
    else:
        params = retrieval_params(target, cp.window)
    return await client.search_illust(**params, offset=offset)


def _empty_window(target: TargetSpec, cp: ScanCheckpoint) -> bool:
    """True when the next pass's dates are an empty range (never asked: the API may refuse it)."""
    if target.query.mode != "search" or cp.tail is not None:
        return False
    params = retrieval_params(target, cp.window)
    return bool(params.get("start_date") and params.get("end_date") and params["start_date"] > params["end_date"])


def _examine(cp: ScanCheckpoint, work: Work, reason: str | None) -> None:
    """Count one examined work as a candidate or a rejection."""
    cp.examined += 1
    day = (work.create_date or "")[:10]
    if day != cp.last_day:
        cp.last_day, cp.last_day_ids = day, []
    cp.last_day_ids.append(work.work_id)
    if cp.walk is not None:
        fr.observe(cp.walk, work, reason)
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
        # This day alone holds more works than the API pages (a checkpoint of an older
        # version, which had no second walk): step past it and say so.
        cp.skipped_days.append(day)
        cp.report.skipped_days.append(SkippedDay(day=day, reached=cp.day_count))
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
    _new_pass(cp)


def _new_pass(cp: ScanCheckpoint) -> None:
    """Restart the walk at offset 0 (the window or the tail changed)."""
    cp.started = False
    cp.next_url = None
    cp.seen_ids = []
    cp.pass_first_day, cp.count_day, cp.day_count = None, None, 0
    if cp.walk is not None:
        cp.walk.pass_start = True


def _count_days(cp: ScanCheckpoint, works: list[Work]) -> None:
    for work in works:
        day = _day(work)
        if cp.pass_first_day is None:
            cp.pass_first_day = day
        if day == cp.count_day:
            cp.day_count += 1
        else:
            cp.count_day, cp.day_count = day, 1


def _key(work: Work) -> tuple[str, int]:
    return (work.create_date or "", int(work.work_id))


def _start_tail(cp: ScanCheckpoint, last: Work) -> None:
    """The whole pass stayed on ``last``'s day up to the cap: read the rest of it from its other end."""
    cp.tail = TailPass(
        day=_day(last), stop_date=last.create_date or "", stop_id=int(last.work_id), reached=cp.day_count
    )
    cp.boundary_day, cp.boundary_ids = None, []
    _new_pass(cp)
    if cp.walk is not None:
        fr.tail_pass(cp.walk)


def _end_tail(cp: ScanCheckpoint, sort: str, *, whole: bool, on_skipped_day: SkippedDayHook | None) -> None:
    """The crowded day is done (``whole``: read entirely); go on with the next day."""
    tail = cp.tail
    assert tail is not None
    if not whole:
        skipped = SkippedDay(day=tail.day, reached=tail.reached)
        cp.skipped_days.append(tail.day)
        cp.report.skipped_days.append(skipped)
        if on_skipped_day is not None:
            on_skipped_day(skipped)
    key = "end_date" if sort == "date_desc" else "start_date"
    cp.window = {**cp.window, key: _shift_day(tail.day, -1 if sort == "date_desc" else 1)}
    cp.window_moves += 1
    cp.tail = None
    _new_pass(cp)


def _tail_page(
    cp: ScanCheckpoint, sort: str, works: list[Work], next_url: str | None, on_skipped_day: SkippedDayHook | None
) -> None:
    """Take the works of a tail page that the first walk did not reach; end the tail where it met it."""
    tail = cp.tail
    assert tail is not None
    stop = (tail.stop_date, tail.stop_id)
    keep: list[Work] = []
    met = False
    for work in works:
        if (_key(work) >= stop) if sort == "date_desc" else (_key(work) <= stop):
            met = True
            break
        keep.append(work)
    skip = set(cp.seen_ids)
    cp.pending = [w for w in keep if w.work_id not in skip]
    cp.seen_ids = [w.work_id for w in works]
    tail.reached += len(cp.pending)
    if met or not next_url:
        _end_tail(cp, sort, whole=True, on_skipped_day=on_skipped_day)
    elif offset_of(next_url) > MAX_OFFSET:
        _end_tail(cp, sort, whole=False, on_skipped_day=on_skipped_day)
    else:
        cp.next_url, cp.next_from_source = next_url, True


def check_page(page: dict[str, Any], *, promised: bool) -> None:
    """Refuse an answer that cannot be taken for the end of results (the source's failure).

    Only the source says where its results end: a page without ``next_url``. An answer
    without an ``illusts`` list is not a page of results, and a page a ``next_url``
    promised that holds no work at all is a struggling backend's answer (Pixiv and its
    replay only send a ``next_url`` when more works follow). Either fails the attempt as
    a retryable ``remote_http_error``; the retry asks the same page again.

    Args:
        page: the decoded answer.
        promised: the request followed a ``next_url`` of the previous page, or is the
            first page of results the target's frontier already saw works in.

    Raises:
        SourceError: ``remote_http_error``, retryable.
    """
    illusts = page.get("illusts")
    if not isinstance(illusts, list):
        raise SourceError(TerminalReason.REMOTE_HTTP_ERROR, "pixiv answered HTTP 200 without an illusts list")
    if promised and not illusts:
        raise SourceError(
            TerminalReason.REMOTE_HTTP_ERROR,
            "pixiv answered an empty page where more works were promised (by the previous page's next_url, "
            "or by the works this target already examined in these results)",
        )


def _parse_page(cp: ScanCheckpoint, page: dict[str, Any]) -> list[Work]:
    """The page's works; those the source should never have sent are counted ``invalid``."""
    works: list[Work] = []
    for illust in page.get("illusts") or []:
        try:
            works.append(parse_work(illust))
        except InvalidWork:
            cp.examined += 1
            cp.all_duplicates = False
            cp.report.rejected += 1
            cp.report.reasons["invalid"] = cp.report.reasons.get("invalid", 0) + 1
    return works


def _offset_url(offset: int) -> str:
    """A ``next_url`` that carries only ``offset`` (the rest of a request is the retrieval view)."""
    return f"https://app-api.pixiv.net/v1/search/illust?offset={offset}"


def _frontier_page(cp: ScanCheckpoint, target: TargetSpec, works: list[Work], offset: int) -> fr.PageStep | None:
    """The frontier's view of a fetched page (None: the scan keeps no frontier)."""
    if cp.walk is None:
        return None
    sort = target.query.sort
    key = "end_date" if sort == "date_desc" else "start_date"
    window_day = cp.window.get(key) if sort in fr.DATE_SORTS else None
    return fr.on_page(cp.walk, works, sort=sort, offset=offset, window_day=window_day, max_offset=MAX_OFFSET)


def _jump(cp: ScanCheckpoint, jump: fr.Jump) -> None:
    """Continue the walk at the frontier's mark: its day's window, at its offset."""
    cp.window = dict(jump.window)
    cp.boundary_day, cp.boundary_ids = None, []
    _new_pass(cp)
    cp.started = True
    cp.next_url, cp.next_from_source = _offset_url(jump.offset), False
    cp.pages_done = False


async def _fetch_page(
    client: PixivClient, target: TargetSpec, cp: ScanCheckpoint, on_skipped_day: SkippedDayHook | None = None
) -> None:
    """Fetch the next page into ``cp.pending`` and decide where the page after it is.

    Raises:
        SourceError: the answer is not a page of results, or a page a ``next_url``
            promised came back empty (:func:`check_page`).
    """
    promised = cp.started and cp.next_url is not None and cp.next_from_source
    if not cp.started and not cp.window and cp.walk is not None and (cp.walk.plan.head or cp.walk.plan.known):
        # The first page of results the target's frontier has already seen works in.
        promised = True
    offset = offset_of(cp.next_url) if cp.started else 0
    page = await _request(client, target, cp)
    check_page(page, promised=promised)
    cp.started = True
    cp.pages += 1
    sort = target.query.sort
    works = _parse_page(cp, page)
    next_url = page.get("next_url")
    if cp.tail is not None:
        _tail_page(cp, sort, works, next_url, on_skipped_day)
        return
    step = _frontier_page(cp, target, works, offset)
    if step is not None and step.refetch is not None:
        cp.pending = []
        cp.next_url, cp.next_from_source = _offset_url(step.refetch), False
        return
    skip = set(cp.seen_ids) | set(cp.boundary_ids)
    cp.pending = [w for w in (step.works if step is not None else works) if w.work_id not in skip]
    if cp.boundary_day and any(
        (_day(w) < cp.boundary_day if sort == "date_desc" else _day(w) > cp.boundary_day) for w in works if _day(w)
    ):
        cp.boundary_day, cp.boundary_ids = None, []  # the scan has left the boundary day
    cp.seen_ids = [w.work_id for w in works]
    _count_days(cp, works)
    if step is not None and step.jump is not None:
        _jump(cp, step.jump)
        return
    if next_url and offset_of(next_url) > MAX_OFFSET:
        # The API answers HTTP 400 past offset 5000: move the date window instead.
        if target.query.mode == "search" and sort in ("date_desc", "date_asc") and (works or cp.last_day):
            if works and cp.pass_first_day == _day(works[-1]) and _day(works[-1]):
                _start_tail(cp, works[-1])  # this whole pass was one day: read its other end
            else:
                _move_window(cp, sort, works)
        else:
            cp.next_url = None
            cp.pages_done = True
    else:
        cp.next_url, cp.next_from_source = next_url, True
        cp.pages_done = not next_url


async def scan(
    client: PixivClient,
    target: TargetSpec,
    *,
    scan_limit: int,
    known: KnownHook,
    on_page: Callable[[ScanCheckpoint], Awaitable[None]],
    checkpoint: ScanCheckpoint | None = None,
    max_examined: int = 1000,
    want: int | None = None,
    unavailable: set[str] | None = None,
    on_skipped_day: SkippedDayHook | None = None,
    frontier: fr.Frontier | None = None,
    settled_before: str | None = None,
) -> ScanCheckpoint:
    """Run (or resume) the scan of ``target``.

    Args:
        client: the source client (its gate spaces the requests).
        scan_limit: most candidates kept (1..100; the stage's bound).
        known: given work ids, returns those the ledger rules out for this target
            with the reason word (one ledger query per page,
            :func:`~curaflow.ledger.remembered.known_works`): ``duplicate`` (already
            delivered or reserved on one of its routes), ``refused`` (a route refused
            it for good) or ``unavailable`` (found gone by an earlier job).
        on_page: awaited with the checkpoint after each page that another page follows.
        checkpoint: the resume point of a previous attempt.
        max_examined: most works examined in one scan.
        want: stop once this many candidates are held (default ``min(scan_limit, WANT)``).
        unavailable: works this cell already found unavailable (rejected as such).
        on_skipped_day: called once for each day the source cannot page fully.
        frontier: the target's frontier for this fingerprint (an empty
            :class:`~curaflow.sources.pixiv.frontier.Frontier` when none is stored yet;
            None: keep none). Used when the scan starts (a resumed checkpoint keeps its walk).
        settled_before: the day (``YYYY-MM-DD``, UTC) before which a ``min_bookmarks``
            rejection is lasting (:func:`curaflow.sources.pixiv.frontier.lasting`).

    Returns:
        The final checkpoint: ``candidates`` in rank order, the ``report`` and, with a
        frontier, the ``frontier`` it leaves for the next job (its JSON, as stored).

    Raises:
        SourceError: a source call failed (the attempt fails; the checkpoint survives).
    """
    cp = checkpoint or ScanCheckpoint()
    if checkpoint is None and frontier is not None and fr.applies(target):
        cp.walk, jump = fr.begin(frontier, target.query.sort, max_offset=MAX_OFFSET, settled_before=settled_before)
        if jump is not None:
            _jump(cp, jump)
    excluded = set(target.exclude_work_ids)
    gone = unavailable or set()
    want = min(scan_limit, want if want is not None else WANT)
    while len(cp.candidates) < want and cp.examined < max_examined:
        if not cp.pending:
            if not cp.pages_done and not cp.started and _empty_window(target, cp):
                cp.pages_done = True  # the window moved past the target's dates: nothing left
            if cp.pages_done:
                cp.exhausted = True
                break
            await _fetch_page(client, target, cp, on_skipped_day)
            continue
        batch, cp.pending = cp.pending, []
        ids = [w.work_id for w in batch]
        ruled_out = await known(ids)
        for i, work in enumerate(batch):
            if cp.examined >= max_examined or len(cp.candidates) >= scan_limit:
                cp.pending = batch[i:]
                break
            if work.work_id in ruled_out:
                reason: str | None = ruled_out[work.work_id]
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
    cp.report.pages = cp.pages
    cp.report.exhausted = cp.exhausted
    cp.candidates = cp.candidates[:scan_limit]
    if cp.walk is not None:
        capped = not cp.exhausted and not cp.candidates and cp.examined >= max_examined
        cp.frontier = fr.advance(cp.walk, capped=capped, exhausted=cp.exhausted).model_dump(mode="json")
        cp.report.known = fr.known_tally(cp.walk)
    return cp
