"""One page of a scan: fetched, checked, parsed, handed to the frontier, and where the next
page is.

See :mod:`curaflow.sources.pixiv.scan`.
"""

from __future__ import annotations

import html
import unicodedata
from datetime import UTC, datetime, timedelta
from typing import Any

from curaflow.domain.messages import TargetSpec
from curaflow.domain.models import Work
from curaflow.domain.reasons import TerminalReason
from curaflow.domain.text import clean_text
from curaflow.observability.logs import get_logger
from curaflow.sources.base import SkippedDayHook
from curaflow.sources.errors import SourceError, WorkUnavailable
from curaflow.sources.pixiv import frontier as fr
from curaflow.sources.pixiv.client import (
    MAX_OFFSET,
    MAX_WORK_ID,
    PAGE_SIZE,
    InvalidWork,
    OffsetRefused,
    PixivClient,
    is_work_id,
    iso_create_date,
    offset_of,
    parse_work,
    pixivs_placeholder,
)
from curaflow.sources.pixiv.filters import stated_fields, unstated
from curaflow.sources.pixiv.query_words import DURATION_DAYS
from curaflow.sources.pixiv.scan.checkpoint import UNREAD_FREE, ScanCheckpoint
from curaflow.sources.pixiv.scan.days import (
    _count_days,
    _day,
    _end_tail,
    _move_window,
    _new_pass,
    _start_tail,
    _tail_page,
    last_offset,
)
from curaflow.sources.pixiv.scan.retrieval import _request

log = get_logger("curaflow.source")


#: The most items a page of results may list (a search's or a ranking's): ten of Pixiv's
#: pages. Pixiv lists 30 works a page (:data:`~curaflow.sources.pixiv.client.PAGE_SIZE`,
#: search and ranking alike: reference ``pixiv-and-delivery-apis.md`` §2.3, pixivpy's
#: ``illust_ranking.json``); a page listing more is refused whole before any item is read
#: (:func:`check_page`). The bytes of an answer are bounded (``outbound.page_max_bytes``,
#: 4 MiB) but not its items: 4 MiB hold ~1.4 million ``{}``, each read by ``parse_work``
#: on the worker's event loop (~1.5 s of CPU; a date-sorted page of undated objects was
#: placed in quadratic time) — decision 2026-12-05, DESIGN.md "The source seam".
MAX_PAGE_ITEMS = 10 * PAGE_SIZE


def check_page(page: dict[str, Any], *, promised: bool) -> None:
    """Refuse an answer that cannot be taken for the end of results, or for a page of
    results at all (the source's failure).

    Only the source says where its results end: a page whose ``next_url`` is ``null``
    (the app-api's word for it); a page whose ``next_url`` is neither text nor ``null`` —
    absent, empty, ``false``, a number, an object: a shape never seen — does not say where
    its results go on and is refused (until 2026-12-06 it ended the scan after that page
    as the end of the results: no candidate, the target's frontier settled). An answer
    without an ``illusts`` list is not a page of results, nor is one listing more than
    :data:`MAX_PAGE_ITEMS` items (Pixiv lists 30): it is refused before any item is read,
    so nothing of it is examined, counted or blamed on a work. A page a ``next_url``
    promised that holds no work at all is a struggling backend's answer (Pixiv and its
    replay only send a ``next_url`` when more works follow); so is any page of a ranking
    that lists none (:func:`promised_by_the_query`), and any page that lists none yet
    names a page after it (:func:`empty_going_on`: both cannot hold — until 2026-12-08 a
    first page so was followed, the 30 places it stood for never read). A page whose
    items have no id curaflow reads lists no work: empty for these rules
    (:func:`lists_no_work`, 2026-12-08). Each fails the
    attempt as a retryable ``remote_http_error``; the retry asks the same page again.

    What is the end of results, decision 2026-12-08 (DESIGN.md "Owners of decisions",
    "whether a source answer is the end of results"): a page of works naming no next
    page; an empty page naming none where nothing promised works — the first page of a
    tag search whose target's frontier knows no work there (a tag nobody used), in any
    sort, or a page whose every expected work was found gone (:func:`_corroborate_end`).
    Nothing else.

    Args:
        page: the decoded answer.
        promised: the request followed a ``next_url`` of the previous page, or is the
            first page of results the target's frontier already saw works in, or a page
            of a ranking (:func:`promised_by_the_query`).

    Raises:
        SourceError: ``remote_http_error``, retryable.
    """
    illusts = page.get("illusts")
    if not isinstance(illusts, list):
        raise SourceError(TerminalReason.REMOTE_HTTP_ERROR, "pixiv answered HTTP 200 without an illusts list")
    if len(illusts) > MAX_PAGE_ITEMS:
        raise SourceError(
            TerminalReason.REMOTE_HTTP_ERROR,
            f"pixiv answered a page listing {len(illusts)} items, more than any page of results holds "
            f"(Pixiv lists {PAGE_SIZE} a page; at most {MAX_PAGE_ITEMS} are read): taken for the source's "
            "failure, no item of it read",
        )
    if promised and lists_no_work(page):
        raise SourceError(
            TerminalReason.REMOTE_HTTP_ERROR,
            f"pixiv answered a page listing no work ({_unread_items(illusts)}) where more works were promised "
            "(by the previous page's next_url, by the works this target already examined in these results, or "
            "by a ranking's query: never taken for its end)",
        )
    if empty_going_on(page):
        raise SourceError(
            TerminalReason.REMOTE_HTTP_ERROR,
            "pixiv answered a page listing no work that names a page after it (next_url "
            f"{clean_text(str(page.get('next_url')))[:120]!r}): more works follow, none listed here — taken for "
            "the source's failure, not followed",
        )
    next_url = page.get("next_url", ...)
    if not (next_url is None or (isinstance(next_url, str) and next_url)):
        raise SourceError(
            TerminalReason.REMOTE_HTTP_ERROR,
            "pixiv answered a page whose next_url is neither a URL nor null "
            f"({'absent' if next_url is ... else clean_text(repr(next_url))[:40]}): where its results go on "
            "is not known, so they are not taken for ended",
        )


def empty_going_on(page: dict[str, Any]) -> bool:
    """Whether ``page`` lists no item and yet names a page after it (a ``next_url`` of
    text): the app-api sends a ``next_url`` only when more works follow (pixivpy's
    recorded search and ranking pages; its last page's is ``null``), so the answer says
    two things that cannot both hold — an outage's, a cache's. Followed (until
    2026-12-08, for a page nothing promised: the first page of a tag search, of a
    ranking), the scan read on from the next page and the places this one stood for
    were never read. The source's failure (:func:`check_page`)."""
    next_url = page.get("next_url")
    return lists_no_work(page) and isinstance(next_url, str) and bool(next_url)


def lists_no_work(page: dict[str, Any]) -> bool:
    """Whether ``page`` (an answer with an ``illusts`` list) lists no work curaflow reads:
    no item, or none with an id curaflow reads (:func:`_listed`: ``null``, ``{}``, an
    object without a Pixiv id). Pixiv lists every work with its id — a work hidden from
    the account is a placeholder with its id — so such a page is an empty one for every
    rule of the end of results (:func:`check_page`, :func:`empty_going_on`). Until
    2026-12-08 its items were each counted ``invalid`` and the page taken: a ranking
    answering thirty ``null`` and no ``next_url`` ended ``exhausted``, no candidate.
    A page of more than :data:`MAX_PAGE_ITEMS` items is no page (:func:`check_page`
    refuses it so): its items are not read here either."""
    illusts = page.get("illusts")
    return isinstance(illusts, list) and len(illusts) <= MAX_PAGE_ITEMS and not any(_listed(page))


def _unread_items(illusts: list[Any]) -> str:
    """How many items a page listing no work lists, for the message (``no item``, ``3
    items without an id curaflow reads``)."""
    if not illusts:
        return "no item"
    return f"{len(illusts)} item{'s' if len(illusts) != 1 else ''} without an id curaflow reads"


def promised_by_the_query(target: TargetSpec) -> bool:
    """Whether every page of ``target``'s query the scan asks must list works, whatever
    the page before said: a ranking's (``GET /v1/illust/ranking``). Pixiv ranks a
    published day's works — its ranking is never empty (reference
    ``pixiv-and-delivery-apis.md`` §2.7: pixivpy's recorded ``illust_ranking.json``, 30
    works and a ``next_url``) — and a ranking's pages after the first are asked only
    where its ``next_url`` pointed. An empty page of one is an outage, a cache, a proxy's
    answer: the source's failure (:func:`check_page`), one attempt, retried. Until
    2026-12-08 an empty first page was the end of results: the scan ended ``exhausted``
    with no candidate, and the job reported the day's ranking held nothing new. A tag
    search's first page is not promised so (a tag nobody used has no results): only
    what its target's frontier knows stands there promises it (:func:`_expected_on`)."""
    return target.query.mode == "ranking"


def empty_ranking(target: TargetSpec, page: dict[str, Any]) -> str:
    """What the failure of a ranking whose first page lists no work
    (:func:`lists_no_work`) says: the source's failure all the same (a ranking is
    promised: :func:`promised_by_the_query`), but it names what answers a ranking so —
    an outage, a cache; a day Pixiv has not ranked (``ranking_date``: a day's ranking is
    published the next day around noon JST, and asked before it the app-api answers
    ``{"illusts": [], "next_url": null}``: HibiAPI issue #322, coolQPythonBot PR #50; a
    mode has no ranking of a day before it existed); an
    R-18 ranking (a mode with ``r18``) asked by an account whose R-18 setting is off
    (pixiv.net's settings; the app-api answers it empty: pixivpy issues #107, #186) —
    the likeliest cause first, the whole within a cell's terminal message
    (:data:`~curaflow.domain.reasons.MAX_REASON_MESSAGE`, with room for the words
    before it).
    Those two are no outage: every job of the target fails so until the day is ranked or
    the setting changed. Until 2026-12-08 the message said Pixiv never publishes an empty
    ranking, and an operator looked for an outage where the account's setting was off."""
    query = target.query
    mode = clean_text(query.ranking_mode)[:20]
    day = clean_text(query.ranking_date or "")[:10]
    causes = []
    if "r18" in query.ranking_mode:
        causes.append("the account's R-18 setting off (Pixiv then answers R-18 rankings empty)")
    if day:
        causes.append(f"no ranking of {day} in this mode (yet: one is published the next day, ~noon JST)")
    causes.append("an outage")
    listed = _unread_items(page.get("illusts") or [])
    return (
        f"pixiv listed no work ({listed}) and no next page on the first page of ranking {mode!r}"
        f"{f' of {day}' if day else ''}: {'; or '.join(causes)} — the source's failure, not 'nothing new'"
    )


def moves_nowhere(cp: ScanCheckpoint, offset: int, listed: list[str]) -> bool:
    """Whether a page asked at ``offset`` lists what the last page of this pass the scan
    took listed (``cp.listed_before``, asked at ``cp.listed_at``): the same items in the
    same order, one id at least read, asked at a later offset.

    Pixiv's pages stand 30 places apart: a page further on listing the page before's works
    again, every one in its place, moved nowhere — a cache or a proxy keyed without
    ``offset``, a replica stuck on one page. Owner of that decision (2026-12-07): the
    source's failure, one retried attempt (:func:`_fetch_page`) — once the page before,
    asked again, lists them still (:func:`_still_listed`: works pushed down by exactly one
    page of new uploads list the same works there too). Works pushed down by new
    uploads repeat *some* of the page before's (the seam: ``seen_ids``,
    :func:`~curaflow.sources.pixiv.frontier.repeated_on`), and a page curaflow asks again
    at or before the last one taken (a seam's, a landing's, a step back over an empty page)
    is no later page: neither is judged so. Until 2026-12-07 such a page was read as one
    whose works had all shifted, and the scan followed its ``next_url`` on."""
    return cp.listed_at is not None and offset > cp.listed_at and any(listed) and listed == cp.listed_before


async def _still_listed(client: PixivClient, target: TargetSpec, cp: ScanCheckpoint) -> bool:
    """Whether the page the scan took last (asked at ``cp.listed_at``), asked again now,
    lists what it listed then (``cp.listed_before``) — asked when the page after it lists
    those works again (:func:`moves_nowhere`), one request more.

    A source stuck on one page lists it again; works pushed down by exactly one page of new
    uploads between the two requests (30 of them) list the same works on the page after as
    well, but that page asked again lists others — the new works, or those pushed onto it
    (decision 2026-12-07: until then that scan failed every attempt while no more works
    came). An answer that lists no page of works is not the page either: the same failure."""
    again = await _request(
        client, target, cp.model_copy(update={"next_url": _offset_url(cp.listed_at or 0), "started": True})
    )
    return not isinstance(again.get("illusts"), list) or _listed(again) == cp.listed_before


def _listed(page: dict[str, Any]) -> list[str]:
    """The ids of every item of the page, in order; ``""`` for an item with no id curaflow
    reads (:func:`~curaflow.sources.pixiv.client.is_work_id`; one that is no object), as
    :func:`~curaflow.sources.pixiv.client.parse_work` reads it: such an item proves no
    page seam (before 2026-12-05 its listing was ``"None"`` or its type's name, and another
    such item passed for it)."""
    ids = []
    for item in page.get("illusts") or []:
        raw = item.get("id") if isinstance(item, dict) else None
        if type(raw) is int and 0 < raw <= MAX_WORK_ID:
            ids.append(str(raw))  # Pixiv's own: no pattern to match
            continue
        wid = str(raw) if isinstance(raw, int | str) and not isinstance(raw, bool) else ""
        ids.append(wid if is_work_id(wid) else "")
    return ids


def _unread_places(listed: list[str], skip: int, pending: list[Work]) -> tuple[list[str], bool]:
    """Where a page's items with no id curaflow reads (``""`` in ``listed``, after its first
    ``skip``) stand among the works it hands to examine (``pending``): the ids of those
    such an item is listed before (after the work to examine before them, or the page's
    start — works not to examine between them change nothing), and whether one is listed
    after the last of them (:func:`~curaflow.sources.pixiv.frontier.unreadable`)."""
    to_examine = {w.work_id for w in pending}
    before: list[str] = []
    gap = False
    for item in listed[skip:]:
        if item == "":
            gap = True
        elif gap and item in to_examine:
            before.append(item)
            gap = False
    return before, gap


def _placed_dates(illusts: list[Any], now: datetime | None = None) -> dict[int, str]:
    """Where a date-sorted page's items without a ``create_date`` curaflow reads stand:
    for each such object's position on the page, the creation date of the nearest item
    before it that has one (else the nearest after it). The page is sorted by creation
    date, so the item's own date lies between its neighbours'; the date placed is only
    its day's bookkeeping (days counted, a date window moved), never an order the
    frontier compares (:attr:`~curaflow.sources.pixiv.frontier.FrontierWalk.placed`).
    Empty when no item of the page is dated (:func:`_fetch_page` refuses such a page).
    ``now``: when the page is read (None: the clock's), for
    :func:`~curaflow.sources.pixiv.client.iso_create_date`."""
    dates = [iso_create_date(i.get("create_date"), now=now) if isinstance(i, dict) else None for i in illusts]
    placed: dict[int, str] = {}
    before: str | None = None
    for i, item in enumerate(illusts):
        if dates[i] is not None:
            before = dates[i]
        elif isinstance(item, dict):
            after = next((d for d in dates[i + 1 :] if d is not None), None)
            if before is not None or after is not None:
                placed[i] = before or after or ""
    return placed


def _parse_page(
    page: dict[str, Any],
    skip: int = 0,
    *,
    dated: bool = False,
    stated: tuple[str, ...] = (),
    now: datetime | None = None,
) -> tuple[list[Work], int, list[str], list[str]]:
    """The page's works after its first ``skip`` items (listed by the page before:
    :func:`~curaflow.sources.pixiv.frontier.repeated_on`), how many items of it have no id
    curaflow reads, the ids of the works whose fields it does not recognise, and (``dated``:
    a date-sorted search) the ids of those listed without a creation date it reads.
    ``page`` is an app-api answer, read with its strings cleaned (``PixivClient._get``).

    A work whose fields do not parse (:class:`~curaflow.sources.pixiv.client.InvalidWork`
    with a Pixiv id: ``tags`` as text, an ``x_restrict`` never seen …) stays in the listing
    as a work of its id and creation date alone, at its place: the scan examines it as
    ``invalid`` — a verdict that does not last (:data:`~curaflow.sources.pixiv.frontier.LASTING_REASONS`),
    so the target's frontier never records the place as settled and the next job reads the
    work again, as a held one (until 2026-12-05 ``invalid`` lasted: once the shape was read,
    no later job of the target read the work). An item with no id curaflow reads is counted
    ``invalid`` by :func:`_count_invalid` once the page is taken (never for a page asked
    again), and the walk is told where it stands (:func:`_unread_places`,
    :func:`~curaflow.sources.pixiv.frontier.unreadable`: the runs stop before it, the
    marks go on past it as past a held work).

    ``dated``: a work without a ``create_date`` curaflow reads (another format, a number,
    none, a day no work has: before Pixiv opened or past ``now`` — None: the clock's —,
    :func:`~curaflow.sources.pixiv.client.iso_create_date`) is examined ``invalid`` as
    well, its date placed by its neighbours (:func:`_placed_dates`); its id is in the
    fourth list, which the walk is told (``FrontierWalk.placed``). Until 2026-12-05 such
    a work failed the whole page, every attempt: one of them failed every date-sorted job
    of its target for as long as Pixiv listed it so.

    ``stated``: fields the target's filters read
    (:func:`~curaflow.sources.pixiv.filters.stated_fields`); a work listed without one of
    them (:func:`~curaflow.sources.pixiv.filters.unstated`) is examined ``invalid`` too,
    its fields not recognised for this target (until 2026-12-06 a missing
    ``total_bookmarks`` was read as 0: a lasting ``filtered:min_bookmarks``; a missing
    ``x_restrict`` as all ages, ``illust_ai_type`` as not AI, ``page_count`` as one page
    and ``create_date`` as inside the target's dates: the work was a candidate of a target
    that refused it; until 2026-12-07 a missing ``visible`` as visible).

    A work the page lists more than once in listings that disagree
    (:func:`_listed_in_disagreement`: one copy R-18 and one all ages, a placeholder beside
    the work whole, a copy of a shape never seen — a cache or a proxy that merged two
    answers) is examined ``invalid`` too, every copy: which is the work is not known. Until
    2026-12-07 each copy was examined as if it were the only one, and the copy that passed
    the target's filters was its candidate whatever the other said (a work listed R-18
    delivered to a target refusing R-18). Copies differing only in their bookmark count
    are one work read twice, examined by the lesser count (:func:`_at_least_reading`)."""
    works: list[Work] = []
    invalid = 0
    unread: list[str] = []
    undated: list[str] = []
    illusts = page.get("illusts") or []
    placed = _placed_dates(illusts, now) if dated else {}
    for at, illust in enumerate(illusts):
        if at < skip:
            continue
        try:
            work = parse_work(illust, cleaned=True, now=now)
        except InvalidWork as err:
            if err.work_id is None:
                invalid += 1
                continue
            work = Work(work_id=err.work_id, create_date=iso_create_date(illust.get("create_date"), now=now))
            unread.append(err.work_id)
        else:
            if stated and unstated(illust, work, stated):
                unread.append(work.work_id)
        if at in placed:
            work = work.model_copy(update={"create_date": placed[at]})
            undated.append(work.work_id)
            if work.work_id not in unread:
                unread.append(work.work_id)
        works.append(work)
    works = _at_least_reading(works)
    for work_id in _listed_in_disagreement(works):
        if work_id not in unread:
            unread.append(work_id)
    return works, invalid, unread, undated


#: Fields of a listing that are a reading of a moment, not the work's: a count that moves
#: between two readings (``total_bookmarks``). Two copies of one work on a page that differ
#: only in them are one work read twice (:func:`_at_least_reading`), never a disagreement.
MOMENT_READINGS = ("total_bookmarks",)


def _at_least_reading(works: list[Work]) -> list[Work]:
    """``works`` (a page's, in order), every copy of a work listed more than once given the
    least of its copies' :data:`MOMENT_READINGS` — a reading Pixiv gave, so a filter reading
    it (``min_bookmarks``) passes the work only when every reading does — whatever else
    they say (:func:`_listed_in_disagreement` then compares the rest). Until 2026-12-07 two
    readings of one work's bookmarks (a replica lagging by seconds) made it ``invalid``:
    a page listing every work so was one where a target found nothing, whatever its filters."""
    least: dict[str, dict[str, Any]] = {}
    counts: dict[str, int] = {}
    for work in works:
        counts[work.work_id] = counts.get(work.work_id, 0) + 1
        low = least.setdefault(work.work_id, {})
        for field in MOMENT_READINGS:
            value = getattr(work, field)
            low[field] = value if field not in low else min(low[field], value)
    return [work.model_copy(update=least[work.work_id]) if counts[work.work_id] > 1 else work for work in works]


def _listed_in_disagreement(works: list[Work]) -> list[str]:
    """The ids a page lists more than once in listings that disagree (``works``: the page's
    works as read, in order, a moment's readings already made alike by
    :func:`_at_least_reading`; two copies differing in any field read — ``x_restrict``,
    ``visible``, a page, the title, a shape one copy did not parse in). Which copy is the
    work is not known: each is examined ``invalid`` (:func:`_parse_page`). A work listed
    twice alike is none of them (its second copy is left out as a work listed again:
    ``scan.loop.scan``). Only repeated ids are compared: ~3 µs a page of 30 distinct works."""
    first: dict[str, Work] = {}
    disagree: list[str] = []
    for work in works:
        seen = first.setdefault(work.work_id, work)
        if seen is not work and seen != work and work.work_id not in disagree:
            disagree.append(work.work_id)
    return disagree


def _count_invalid(cp: ScanCheckpoint, invalid: int, *, again: bool, listed: list[str], skip: int) -> None:
    """Count ``invalid`` items of a page the scan took, items with no id curaflow reads, as
    examined rejections (``again``: the ``popular_desc`` revisit page, not counted against
    ``pixiv.max_examined``), and tell the walk where they stand among ``cp.pending``
    (``listed``: the page's listing, its first ``skip`` items the page before's;
    :func:`_unread_places`, :func:`~curaflow.sources.pixiv.frontier.unreadable`: no mark
    can stand for them, every run stops before them). Call once ``cp.pending`` is set."""
    if not invalid:
        return
    cp.examined += invalid
    cp.uncapped += invalid if again else 0
    if cp.walk is not None and not again:
        # Not counted against the cap, up to a page of them a scan: no mark can stand for
        # such an item, so a cap they spent left no sweep past them (decision 2026-12-05k).
        cp.unread_free += min(invalid, max(0, UNREAD_FREE - cp.unread_free))
    cp.all_duplicates = False
    cp.report.rejected += invalid
    cp.report.reasons["invalid"] = cp.report.reasons.get("invalid", 0) + invalid
    if cp.walk is not None:
        before, trailing = _unread_places(listed, skip, cp.pending)
        fr.unreadable(cp.walk, before, trailing, cp.pending[-1].work_id if cp.pending else None)


def _offset_url(offset: int) -> str:
    """A ``next_url`` that carries only ``offset`` (the rest of a request is the retrieval view)."""
    return f"https://app-api.pixiv.net/v1/search/illust?offset={offset}"


def _frontier_page(
    cp: ScanCheckpoint, target: TargetSpec, works: list[Work], offset: int, listed: list[str] | None = None
) -> fr.PageStep | None:
    """The frontier's view of a fetched page (None: the scan keeps no frontier)."""
    if cp.walk is None:
        return None
    sort = target.query.sort
    key = "end_date" if sort == "date_desc" else "start_date"
    window_day = cp.window.get(key) if sort in fr.DATE_SORTS else None
    return fr.on_page(
        cp.walk, works, sort=sort, offset=offset, window_day=window_day, max_offset=last_offset(cp), listed=listed
    )


def _jump(cp: ScanCheckpoint, jump: fr.Jump) -> None:
    """Continue the walk at the frontier's mark: its day's window, at its offset."""
    cp.window = dict(jump.window)
    cp.boundary_day, cp.boundary_ids = None, []
    _new_pass(cp)
    cp.started = True
    cp.next_url, cp.next_from_source = _offset_url(jump.offset), False
    cp.pages_done = False


def _ask_again(cp: ScanCheckpoint, offset: int, *, promised: bool) -> None:
    """Ask a page again at ``offset`` instead of going on (nothing of the page just
    fetched is examined; its items are counted on the answer taken). ``promised``: it
    stands before a page the source promised, so its empty answer is the source's failure
    (:func:`check_page`), not the end of results."""
    cp.pending = []
    cp.next_url = _offset_url(offset)
    cp.next_from_source = promised


def _step_back_over_empty(cp: ScanCheckpoint, offset: int) -> int | None:
    """Where to ask again when a page after the first of its pass, which the page before
    promised (its ``next_url``; one place early at a seam of the frontier's walk), came
    back empty; None: nowhere — the empty answer is the source's failure (:func:`check_page`).

    Offsets are live: works deleted (or hidden) above the scan's place between two
    requests move the later works up, and when the results now end before the place
    asked, that page is empty although the page before promised it (31 works, places
    0–29 read, two deleted above place 30: the page at 30 — at 29 one place early — lists
    none). Taken for the source's failure, every retry asked the same empty page until
    the job's deadline. The page a whole page (30 places) earlier is asked instead, as an
    empty landing page steps back (``frontier.walk._landing_check``): it starts at or
    before the previous page's last work's new place and lists the works that moved up;
    what the previous page listed is neither examined nor counted again (the walk's seam
    check and :func:`~curaflow.sources.pixiv.frontier.repeated_on`, else ``seen_ids``),
    and its own ``next_url`` says whether more follow. That page stands before the one the
    source promised: its empty answer is the source's failure.

    Once per place (``cp.stepped_over``): an empty page asked at or before the place
    already stepped back over is the source's failure — the page before, asked again,
    promised the same page again (a backend answering empty pages, a hostile party),
    so the scan fails the attempt (retried) after one step back instead of asking the two
    pages for ever. A seam's page the walk already asks again (``seam_back``) is not
    stepped back over either: it stands before the promised page. The first page of a
    pass (offset 0, promised only by the frontier) has no page before it.
    """
    if offset <= 0 or (cp.stepped_over is not None and offset <= cp.stepped_over):
        return None
    if cp.walk is not None and cp.walk.seam_back > 0:
        return None
    cp.stepped_over = offset
    return max(0, offset - PAGE_SIZE)


def outside_duration(mark: fr.Mark, duration: str | None, now: datetime) -> bool:
    """True when ``mark``'s work lies, for certain, before the reach of the target's
    ``duration`` at ``now`` (created more than its days and one more ago: the app-api
    reckons the span in its own time zone and day): a search of the target lists it no
    more. False whenever that is not known (no duration, a word not known, no readable
    creation time)."""
    days = DURATION_DAYS.get(duration or "")
    if days is None or not mark.create_date:
        return False
    try:
        created = datetime.fromisoformat(mark.create_date)
    except ValueError:
        return False
    if created.tzinfo is None:
        return False
    return created < now.astimezone(UTC) - timedelta(days=days + 1)


def _expected_on(cp: ScanCheckpoint, offset: int) -> list[fr.Mark]:
    """The works the page just asked must list unless the results ended — the empty
    answer is the end only once each of them is found gone (:func:`_corroborate_end`);
    none: an empty answer there may be the end of results as the source says.

    * The first page of a query the frontier has examined works of (``date_desc``'s head
      phase from the top; a walk without a head from the top): its head and its known
      run's end, the two ends of the run it examined (2026-12-07: the head alone was
      asked, and the newest work's going — its artist deleting it, hiding it — ended the
      results during an outage answering empty, whatever the works below it), else the
      known run's end.
    * A landing page at offset 0 (the landing stepped back to the start of its window, or
      the mark is its day's first): the mark it lands after (the known run's end, the
      sweep, a capped head phase's stop; a crowded day's far-end mark).
    * The first page of a crowded day's second walk from its far end: the first walk's
      last work of that day, read in this scan.
    * The first page of a date window moved past offset 5000 to the day of the last work
      fetched: that work.
    """
    walk = cp.walk
    if cp.tail is not None:
        if walk is not None and walk.tail_landing and offset == 0:
            return [walk.tail_skip] if walk.tail_skip is not None else []
        if not cp.started:
            return [fr.Mark(work_id=str(cp.tail.stop_id), create_date=cp.tail.stop_date or None)]
        return []
    if walk is not None and walk.landing and cp.started and offset == 0:
        return [walk.skip] if walk.skip is not None else []
    if not cp.started and not cp.window and walk is not None:
        ends = [m for m in (walk.plan.head, walk.plan.known) if m is not None]
        return [m for i, m in enumerate(ends) if all(m.work_id != e.work_id for e in ends[:i])]
    if not cp.started and cp.boundary_day and cp.boundary_ids:
        return [fr.Mark(work_id=cp.boundary_ids[-1])]
    return []


def _folded(text: str) -> str:
    """``text`` as a search compares it, loosely: NFKC (full-width and half-width forms
    alike), case-folded, with no format characters (zero-width spaces and joiners,
    Unicode category Cf)."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return "".join(c for c in folded if unicodedata.category(c) != "Cf")


def _marks(c: str) -> bool:
    """True for a punctuation or symbol character (Unicode categories P* and S*): brackets,
    quotes, ``#`` and such, which a query's word may carry as syntax."""
    return unicodedata.category(c)[0] in "PS"


def _query_words(target: TargetSpec) -> list[str] | None:
    """The words of ``target``'s query as :func:`no_longer_matches` compares them: each tag
    :func:`_folded` first (so a full-width bracket, ``ＯＲ`` or minus is its ASCII form), split
    on whitespace (an ideographic space too), ``or`` left out and the punctuation and
    symbols at a word's ends read off (``(``, ``（``, ``【``, quotes, ``#``: a word kept
    shorter only matches more); a word of marks alone is left out. None when a word
    excludes (it begins with a dash of any kind, ``-``, ``－``, ``−``): such a query is
    never judged."""
    words: list[str] = []
    for tag in target.query.tags:
        for word in _folded(tag).split():
            if word == "or":
                continue
            if unicodedata.category(word[0]) == "Pd" or word[0] == "\u2212":
                return None
            start, end = 0, len(word)
            while start < end and _marks(word[start]):
                start += 1
            while end > start and _marks(word[end - 1]):
                end -= 1
            if start < end:
                words.append(word[start:end])
    return words


#: What a character curaflow could not read becomes (U+FFFD REPLACEMENT CHARACTER): a byte
#: of an answer that was no UTF-8, a lone surrogate (:func:`~curaflow.domain.text.clean_text`).
DAMAGED = "\ufffd"


def no_longer_matches(target: TargetSpec, texts: list[str] | None) -> bool:
    """True when a work whose detail shows ``texts`` (its tags' names and translations,
    title and caption: :func:`~curaflow.sources.pixiv.client.search_texts`) can match no
    search of ``target``, for certain; False whenever that is not known.

    Conservative, whatever the target's ``search_target`` (exact tags, partial tags, title
    and caption — the loosest of them is assumed, and every text is read for each): the
    work no longer matches only when none of the query's words (:func:`_query_words`: its
    tags NFKC and case-folded, split on spaces, ``OR`` left out, the brackets, quotes and
    other marks at a word's ends read off) is part of any of those texts (each compared
    :func:`_folded`, as given and with its HTML character references read — a caption is
    HTML). A word still there, in any text, in any width or case, leaves it unknown (Pixiv
    may match by it); so does a text holding U+FFFD (:data:`DAMAGED`: not read whole — a
    byte that was no UTF-8, a broken emoji's lone surrogate —, the word may be what was
    lost; until 2026-12-07 such a tag read as one without the word); so does a query
    with an excluded word (``-word``, in any width: a
    work that gained it no longer matches, which these texts cannot tell apart from
    Pixiv's own matching), no positive word, texts not read (None), or a ranking. Until
    2026-12-05 the words were split before they were folded: a query in full-width
    brackets (``（東方 OR 艦これ）``) or with a full-width minus took a work still tagged
    ``東方`` for gone, the end of results."""
    if target.query.mode != "search" or texts is None:
        return False
    if any(DAMAGED in t for t in texts):
        # A text not read whole (a byte that was no UTF-8, a broken emoji's lone
        # surrogate: both U+FFFD once cleaned) may have held the word (2026-12-07).
        return False
    words = _query_words(target)
    if not words:
        return False
    folded = [_folded(t) for t in texts] + [_folded(html.unescape(t)) for t in texts]
    return not any(w in t for w in words for t in folded)


async def _corroborate_end(client: PixivClient, target: TargetSpec, expected: fr.Mark, now: datetime) -> str:
    """Whether an empty answer to a page that must list ``expected`` (:func:`_expected_on`)
    is the end of results: returns why (the work is gone, hidden or out of the target's
    ``duration``), else raises.

    Only something positive about the work says so: it lies outside the target's
    ``duration`` (:func:`outside_duration`, no request), or its detail is the app-api's own
    404 (:class:`~curaflow.sources.errors.WorkUnavailable` ``recognised``), a placeholder
    by Pixiv's own word (a hidden work is listed by no search:
    :func:`~curaflow.sources.pixiv.client.pixivs_placeholder` — until 2026-12-07 any
    ``limit_`` in an image URL's file part, a query's, another host's, was one), or a
    work alive whose tags, title and caption
    hold none of the query's words (:func:`no_longer_matches`: its tags edited — until
    2026-12-05 every job of such a target failed until an operator reset its frontier). A
    detail listing the work whole that could still match, or any answer not recognised,
    leaves the empty answer the source's (a backend in an outage answers ``illusts: []``):
    the attempt fails and is retried; the frontier, stored only with a scan's report, is
    kept. One request, asked only on such an empty answer.

    Raises:
        SourceError: ``remote_http_error``, retryable — the empty answer is the source's
            failure; or the detail request's own failure.
    """
    if outside_duration(expected, target.query.duration, now):
        return "out_of_duration"
    try:
        work, texts = await client.illust_detail_texts(expected.work_id)
    except WorkUnavailable as gone:
        if gone.recognised:
            return "gone"
        raise SourceError(
            TerminalReason.REMOTE_HTTP_ERROR,
            f"pixiv answered no works where work {expected.work_id} stood, and its detail said nothing "
            f"curaflow recognises ({clean_text(gone.why)[:120]!r}): taken for the source's failure",
        ) from gone
    if pixivs_placeholder(work):
        return "hidden"
    if no_longer_matches(target, texts):
        return "no_longer_matches"
    raise SourceError(
        TerminalReason.REMOTE_HTTP_ERROR,
        f"pixiv answered no works where work {expected.work_id} stands (its detail lists it whole): "
        "the search failed, not the end of results",
    )


async def _fetch_page(
    client: PixivClient,
    target: TargetSpec,
    cp: ScanCheckpoint,
    on_skipped_day: SkippedDayHook | None = None,
    now: datetime | None = None,
) -> None:
    """Fetch the next page into ``cp.pending`` and decide where the page after it is.

    ``now``: when the scan runs (None: the clock's), for :func:`outside_duration`.

    Raises:
        SourceError: the answer is not a page of results, a page a ``next_url``
            promised came back empty (:func:`check_page`), or a page that must list a work
            the scan knows of came back empty and nothing says the work went
            (:func:`_corroborate_end`).
    """
    now = now or datetime.now(UTC)
    promised = cp.started and cp.next_url is not None and cp.next_from_source
    if not cp.started and not cp.window and cp.walk is not None and (cp.walk.plan.head or cp.walk.plan.known):
        # The first page of results the target's frontier has already seen works in.
        promised = True
    if promised_by_the_query(target):
        promised = True  # a ranking is never empty
    offset = offset_of(cp.next_url) if cp.started else 0
    try:
        page = await _request(client, target, cp)
    except OffsetRefused as refused:
        _past_last_offset(cp, target, refused, on_skipped_day)
        return
    if promised and page.get("illusts") == []:
        back = _step_back_over_empty(cp, offset)
        if back is not None:
            cp.pages += 1
            _ask_again(cp, back, promised=True)
            return
    # An empty page naming a next one is the source's failure whatever stood there
    # (check_page): no work's detail is asked for it.
    expected = _expected_on(cp, offset) if page.get("illusts") == [] and not empty_going_on(page) else []
    if expected:
        # An empty answer where works curaflow knows of stand: the end of results only once
        # each is corroborated gone (owner _corroborate_end; the next asked only once the
        # one before is), else the source's failure.
        whys = [await _corroborate_end(client, target, mark, now) for mark in expected]
        log.info(
            "pixiv.empty_answer_taken_for_the_end",
            work_id=expected[0].work_id,
            why=whys[0],
            also=[f"{m.work_id}: {w}" for m, w in zip(expected[1:], whys[1:], strict=True)],
            offset=offset,
        )
        promised = False
    first = offset == 0 and cp.listed_at is None
    if promised_by_the_query(target) and first and lists_no_work(page) and page.get("next_url", ...) is None:
        # The ranking's first page lists nothing: say what may be wrong (the report's words).
        raise SourceError(TerminalReason.REMOTE_HTTP_ERROR, empty_ranking(target, page))
    check_page(page, promised=promised)
    dated = target.query.mode == "search" and target.query.sort in fr.DATE_SORTS
    objects = [i for i in page["illusts"] if isinstance(i, dict)]
    if dated and objects and not any(iso_create_date(i.get("create_date"), now=now) is not None for i in objects):
        # A date-sorted walk pages, windows and remembers by the works' days: a page with no
        # date curaflow reads is no page of that walk (the source's failure, retried). A
        # work undated among dated ones is placed by them (_parse_page).
        raise SourceError(
            TerminalReason.REMOTE_HTTP_ERROR,
            f"pixiv listed a page of a date-sorted search without one creation date curaflow reads (e.g. "
            f"{clean_text(str(objects[0].get('create_date')))[:40]!r})",
        )
    next_url = page.get("next_url")
    if next_url and offset_of(next_url) <= offset:
        # A next page that is not past this one (a cursor where Pixiv sends an offset, no
        # URL, no offset): followed, the same page came back for ever. An answer not
        # understood costs this attempt (the retry reads the page again).
        raise SourceError(
            TerminalReason.REMOTE_HTTP_ERROR,
            f"pixiv's next_url does not move past offset {offset}: {clean_text(str(next_url))[:200]!r}",
        )
    if next_url and offset_of(next_url) > offset + max(PAGE_SIZE, len(page["illusts"])):
        # A next page past the works this one listed (Pixiv's is this page's offset plus
        # its 30 places): followed, the places between were never read, and an offset
        # past the app-api's last ended the scan as if its results had ended (exhausted,
        # "no new works"). Not understood: this attempt's, retried.
        raise SourceError(
            TerminalReason.REMOTE_HTTP_ERROR,
            f"pixiv's next_url leaps from offset {offset} past the page's "
            f"{len(page['illusts'])} works: {clean_text(str(next_url))[:200]!r}",
        )
    listed = _listed(page)
    if moves_nowhere(cp, offset, listed) and await _still_listed(client, target, cp):
        # A cache or a proxy keyed without ``offset`` (a replica stuck on one page) answers
        # every offset alike: followed, its next_url led through the same works to the
        # app-api's last offset (a popular_desc or ranking scan then ended its results
        # there, exhausted; a date-sorted one moved its window and read them again, pass
        # after pass, until max_examined — thousands of requests through the account's
        # gate). Not understood: this attempt's, retried from the checkpoint.
        raise SourceError(
            TerminalReason.REMOTE_HTTP_ERROR,
            f"pixiv answered at offset {offset} the very {len(listed)} works it listed at offset "
            f"{cp.listed_at}, in their order: a page that does not move on (a cache answering every offset "
            "alike), taken for the source's failure",
        )
    cp.listed_before, cp.listed_at = listed, offset
    cp.started = True
    cp.pages += 1
    sort = target.query.sort
    repeated = fr.repeated_on(cp.walk, listed, tail=cp.tail is not None) if cp.walk is not None else 0
    works, invalid, cp.unread, cp.placed = _parse_page(
        page, repeated, dated=dated, stated=stated_fields(target), now=now
    )
    if cp.walk is not None:
        cp.walk.placed = list(cp.placed)
    if cp.tail is not None:
        overlap = 0
        if cp.walk is not None:
            # The second walk's pages are checked at their seams as the first walk's are
            # (fr.on_tail_page): a page asked again stands before the one the source promised.
            tail_step = fr.on_tail_page(cp.walk, works, sort=sort, offset=offset + repeated, listed=listed)
            if tail_step.refetch is not None:
                # A landing page where the last job's second walk stopped is curaflow's
                # choice (an empty one steps back); a seam's page stands before a promised one.
                _ask_again(cp, tail_step.refetch, promised=not cp.walk.tail_landing)
                return
            works, overlap = tail_step.works, tail_step.overlap
        _tail_page(cp, sort, works, next_url, on_skipped_day)
        _count_invalid(cp, invalid, again=False, listed=listed, skip=repeated)
        if overlap and cp.tail is not None and cp.next_url:
            # Ask the next page one place early: its first item, this page's last, proves
            # that no work moved up between the two pages unread.
            cp.next_url = _offset_url(max(offset + 1, offset_of(cp.next_url) - overlap))
        return
    again = cp.walk is not None and fr.read_again(cp.walk)
    step = _frontier_page(cp, target, works, offset + repeated, listed)
    if step is not None and step.refetch is not None:
        # The page is asked again (its items are counted then, once). A seam's page asked
        # earlier stands before a page the source promised: its empty answer is the
        # source's failure, never the end of results. A landing page's is not (the
        # landing steps back over an empty page: works above the mark went away).
        _ask_again(cp, step.refetch, promised=cp.walk is not None and not cp.walk.landing)
        return
    skip = set(cp.seen_ids) | set(cp.boundary_ids)
    cp.pending = [w for w in (step.works if step is not None else works) if w.work_id not in skip]
    _count_invalid(cp, invalid, again=again, listed=listed, skip=repeated)
    if cp.boundary_day and any(
        (_day(w) < cp.boundary_day if sort == "date_desc" else _day(w) > cp.boundary_day) for w in works if _day(w)
    ):
        cp.boundary_day, cp.boundary_ids = None, []  # the scan has left the boundary day
    cp.seen_ids = [w.work_id for w in works]
    _count_days(cp, works)  # the items the page before listed were never parsed
    if step is not None and step.jump is not None:
        _jump(cp, step.jump)
        return
    cp.taken = [fr.Mark(work_id=w.work_id, create_date=w.create_date) for w in works]
    if next_url and offset_of(next_url) > last_offset(cp):
        # The API answers HTTP 400 past offset 5000 (or the lower limit it refused at).
        _at_last_offset(cp, target, works)
    else:
        if next_url and step is not None and step.overlap:
            # Ask the next page one place early: its first work, the last of this page,
            # proves that no work moved up between the two pages unread.
            next_url = _offset_url(max(offset + 1, offset_of(next_url) - step.overlap))
        cp.next_url, cp.next_from_source = next_url, True
        cp.pages_done = not next_url


def _at_last_offset(cp: ScanCheckpoint, target: TargetSpec, works: list[Work]) -> None:
    """The page after the one that listed ``works`` lies past the app-api's last offset
    (:func:`~curaflow.sources.pixiv.scan.days.last_offset`): a date-sorted search moves
    its date window to the day of the last work (reference §2.2, gallery-dl's approach), or
    reads that day from its other end when the whole pass stayed on it (a crowded day);
    any other sort ends its pages there."""
    sort = target.query.sort
    if target.query.mode == "search" and sort in ("date_desc", "date_asc") and (works or cp.last_day):
        if works and cp.pass_first_day == _day(works[-1]) and _day(works[-1]):
            # This whole pass was one day: read its other end, up to its last dated work (a
            # placed one has no place the second walk could stop at).
            at = _start_tail(cp, next((w for w in reversed(works) if w.work_id not in cp.placed), works[-1]))
            if at is not None:
                # Where the last job's second walk over the day stopped (its landing checked).
                cp.started = True
                cp.next_url, cp.next_from_source = _offset_url(at), False
        else:
            _move_window(cp, sort, works)
    else:
        cp.next_url = None
        cp.pages_done = True


def _past_last_offset(
    cp: ScanCheckpoint, target: TargetSpec, refused: OffsetRefused, on_skipped_day: SkippedDayHook | None
) -> None:
    """The app-api refused a page the scan asked past offset 0 (``refused.offset``) naming
    ``offset`` alone (:class:`~curaflow.sources.pixiv.client.OffsetRefused`): the limit of
    its pages lies before it — Pixiv lowered it below
    :data:`~curaflow.sources.pixiv.client.MAX_OFFSET`. The walk does what it does at that
    offset (:func:`_at_last_offset` with the last page's works, ``cp.taken``; a crowded
    day's second walk ends there, its day recorded as skipped), the page asked is neither
    counted nor examined, and no later pass of this scan asks that offset or past it
    (``cp.refused_offset``). Told once a scan (the first offset refused named), so an
    operator sees the limit changed. Owner of that decision (2026-12-07): until then the
    refusal ended the job unretried, and every later job of a target that deep ended at
    the same page.

    A page no page of its pass was taken before — one curaflow chose: a jump to the
    frontier's mark, a crowded day's second walk's landing, placed by an earlier job under
    a deeper limit — has no works to move a window by: the walk lands at half that offset
    instead (an earlier landing the frontier's walk reads on from, as it does when it steps
    back: ``frontier.walk._landing_check``), and pages on to the limit. Offset 0 is never
    refused so (:class:`~curaflow.sources.pixiv.client.OffsetRefused` is past offset 0): a
    jump lands within 13 refusals (log2 of 5000)."""
    if cp.refused_offset is None:
        log.warning(
            "pixiv.offset_refused",
            offset=refused.offset,
            max_offset=MAX_OFFSET,
            answer=str(refused)[:200],
            hint="the app-api pages less deep than curaflow's MAX_OFFSET: the walk moves its window there",
        )
    cp.refused_offset = min(refused.offset, cp.refused_offset or refused.offset)
    cp.pending = []
    if cp.listed_at is None:
        cp.next_url = _offset_url(refused.offset // 2)
        return
    sort = target.query.sort
    if cp.tail is not None:
        _end_tail(cp, sort, whole=False, on_skipped_day=on_skipped_day)
        return
    works = [Work(work_id=m.work_id, create_date=m.create_date) for m in cp.taken]
    _at_last_offset(cp, target, works)
