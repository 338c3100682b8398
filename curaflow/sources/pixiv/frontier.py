"""Pixiv's scan frontier of a target: what it has already examined, so a job re-reads only what can hold something new.

Without it every job of a long-lived target scans from page 1 and skips what was delivered:
after N deliveries a job reads about ⌈N/30⌉ search pages. The frontier is Pixiv's own
memory of a target (the seam: :attr:`curaflow.sources.base.ScanRequest.frontier`): the
ledger stores it as opaque JSON per target and *fingerprint* (:func:`fingerprint`:
account, work type, query, filters and routes — change any of them and the target starts
afresh; :mod:`curaflow.ledger.frontiers`), and only this module reads it (:func:`read`),
driven by Pixiv's scan (:mod:`curaflow.sources.pixiv.scan`). Its words are the app-api's
paging: 30 works a page (:data:`PAGE`), offsets up to 5000, ``end_date`` / ``start_date``
windows.

**What is remembered** (:class:`Frontier`), as :class:`Mark` s — works the target examined,
with where they sit in the walk:

* ``known``: the end of the *known run*, the stretch of the walk from its start over which
  every work was ruled out for a *lasting* reason (:func:`lasting`): delivered or held on
  a route, refused by a route, unavailable, invalid, or rejected by a filter on what a
  work cannot change (type, AI, R-18, pages, dates; bookmarks only once the work is older
  than the settling age, :data:`SETTLE_DAYS`). A candidate, a work excluded by one task or
  a young work below ``min_bookmarks`` ends the run: the next job reads it again.
* ``head`` (``date_desc`` only): the newest work of the known run. New works appear above
  it, so every job reads the head of the query first, down to ``head``, then jumps.
* ``sweep``: where a scan that reached ``pixiv.max_examined`` without a candidate stopped,
  beyond ``known`` (the run was broken by works that may change): the next job goes on
  from there instead of reading the same stretch again (case 2). A scan from the sweep
  moves it to just before the candidate it finds; a scan that reaches the end of the
  results clears it, so the works it passed over are read again by the next sweep.

* ``tally``: the known run's works by the verdict that ruled each out. A scan that
  passes over the run reports them (:func:`known_tally`, ``CandidateReport.known``), so
  the cell's tally — and the reason it ends with, :mod:`curaflow.domain.tally` — is the
  one a scan reading them again would give: identical state, identical reason.

**How a job walks** (:class:`FrontierWalk`, kept in the scan checkpoint):

* ``date_desc``: from the top (the head) until the first work at or below ``head``; then
  on from ``sweep`` or else ``known``: after it on the same page when it is listed there,
  else a jump — the same query with ``end_date`` = the mark's day, at ``offset`` = the
  mark's place among that day's works. ``date_asc`` jumps at once (nothing new appears
  before the start of an ascending walk). ``popular_desc`` first reads one page of the
  known part again, in turn from the top (``revisit``), then jumps to ``offset`` = the
  mark's place in the whole list (≤ 5000: the app-api pages no further). Offsets are
  exact (the app-api accepts any ``offset``; pixivpy #153).
* **Landing check.** A work deleted (or hidden) above the mark moves the mark up, so the
  landing page could start past works never examined. Date sorts compare by creation
  time: a landing page that starts after the mark steps back 30 places until it starts
  at or before it (deletions cost a page, never a skipped work). Works at or before the
  mark on the landing page are not examined again. ``popular_desc`` has no such key; the
  revisit page covers it: a work that moved up into the known part — a climber, or a
  work shifted by deletions above the mark — is read within ⌈known / 30⌉ jobs.
* Everything else the scan does is unchanged: filters, the ledger's ``known`` hook (every
  work read is judged as before; the frontier only decides which pages are read),
  checkpoints and resume, the 5000-offset window moves.

**Limits, by design.** The frontier only says where to start reading; a work is delivered
only if the ledger says it is new, so a stale frontier can skip works but never
duplicate one. What it may pass over: for ``popular_desc``, a work that moved into the
known part, until the revisit reaches its page; a work inside the known run whose
lasting reason was lifted later: a refusal or an unavailable work cleared by an operator
(clearing them resets every frontier, :mod:`curaflow.ledger.remembered`), an unavailable
work forgotten after ``pixiv.unavailable_ttl_ms``, a work another job held and then
released. Ranking mode
keeps no frontier (a ranking holds at most 500 works and changes daily).

**Stored format.** What the ledger holds is :class:`Frontier`'s JSON
(``model_dump(mode="json")``), the format rows of ``scan_frontiers`` were written in before
the frontier moved behind the source seam: :func:`read` reads them unchanged. A row this
version cannot read, or one of another sort, is a fresh start (pages, never a duplicate).

Pure module (no I/O): the scan and the tests drive it.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from pydantic import BaseModel, Field

from curaflow.domain.messages import TargetSpec
from curaflow.domain.models import Work

#: A work below ``min_bookmarks`` counts as ruled out for good once it is this old (days):
#: a work gathers most of its bookmarks in its first days.
SETTLE_DAYS = 7
#: The app-api's page size.
PAGE = 30
#: Sorts that walk by creation time (a mark is found again by its day and time).
DATE_SORTS = ("date_desc", "date_asc")

#: Rejections that hold whatever happens later (see the module doc).
LASTING_REASONS = frozenset(
    {
        "duplicate",
        "refused",
        "unavailable",
        "unusable",
        "invalid",
        "filtered:work_type",
        "filtered:ai",
        "filtered:r18",
        "filtered:page_count",
        "filtered:date",
    }
)


class Mark(BaseModel):
    """A work the target examined, and where it sits in the walk.

    Attributes:
        work_id: the work's id.
        create_date: its creation time as the source lists it (date sorts order by it).
        index: date sorts: its place (0-based) among its day's works in the walk's order;
            ``popular_desc``: its place in the whole result list.
    """

    work_id: str
    create_date: str | None = None
    index: int = 0

    @property
    def day(self) -> str:
        """The mark's day (``YYYY-MM-DD``)."""
        return (self.create_date or "")[:10]


class Frontier(BaseModel):
    """What a target has examined of one query (stored per target and fingerprint).

    Attributes:
        sort: the walk's order (``date_desc`` | ``date_asc`` | ``popular_desc``).
        head: ``date_desc``: the newest work of the known run.
        known: the last work of the known run.
        sweep: where a capped scan stopped beyond ``known``.
        revisit: ``popular_desc``: the offset of the page of the known part the next job
            reads again (in turn from the top).
        tally: the works of the known run by the reason word that ruled each out
            (``duplicate``, ``refused``, ``filtered:r18`` …): a scan that does not read
            the run again reports them as known (``CandidateReport.known``), so its
            tally — and its cell's reason — is the one a scan reading them would give.
    """

    sort: str
    head: Mark | None = None
    known: Mark | None = None
    sweep: Mark | None = None
    revisit: int = 0
    tally: dict[str, int] = Field(default_factory=dict)


class FrontierWalk(BaseModel):
    """A scan's progress against its target's frontier (part of the scan checkpoint).

    Attributes:
        plan: the frontier the scan started from.
        settled_before: see :func:`lasting`.
        phase: ``head`` (``date_desc``: reading new works above ``plan.head``),
            ``revisit`` (``popular_desc``: reading one page of the known part again) or
            ``segment`` (from the jump on, or the whole walk of a fresh frontier).
        revisit_at: the offset of the page the ``revisit`` phase read.
        segment: where the segment started: ``fresh`` (the walk's start: no frontier),
            ``known`` or ``sweep``.
        skip: works at or before this mark are not examined (the landing's own page).
        landing: the next page fetched is the jump's landing page (it is checked).
        stepped_back: landing pages refetched 30 places earlier.
        pass_start: the next page starts a pass (offsets and day places restart).
        day / day_start: the day of the last listed work and the place in the pass of
            its day's first work (None: not seen in this pass).
        places: the place (:attr:`Mark.index`) of each listed work not yet examined.
        head_ids: works of the head still to examine (their verdicts belong to the head).
        head_top / head_entered: the newest head work from which every head work down to
            ``plan.head`` was ruled out for good (the head may move up to it), whether the
            walk reached ``plan.head``.
        run_top / run_end: a fresh ``date_desc`` walk: the run of lasting rejections that
            ends where its first candidate is (or where it stopped); it becomes the head
            and the known run, and what lies above it the head.
        first / known_end / last / before_candidate / candidate_seen / clean: the
            segment's first examined work, the end of its run of lasting rejections (while
            ``clean``), its last examined work, the last one before its first candidate.
        run_tally / clean_tally / head_tally: the reason words of the works of the run
            ``run_top``–``run_end``, of the clean run up to ``known_end``, and of the head
            works from ``head_top`` down to ``plan.head`` (what :func:`advance` adds to
            the frontier's tally).
        revisit_tally: the lasting verdicts of works of the known run read again (the
            ``revisit`` page): not counted twice (:func:`known_tally`).
        skipped_known: the walk passed over the known run without reading it.
    """

    plan: Frontier
    settled_before: str | None = None
    phase: Literal["head", "revisit", "segment"] = "segment"
    segment: Literal["fresh", "known", "sweep"] = "fresh"
    revisit_at: int | None = None
    skip: Mark | None = None
    landing: bool = False
    stepped_back: int = 0
    pass_start: bool = True
    day: str | None = None
    day_start: int | None = None
    places: dict[str, int] = Field(default_factory=dict)
    head_ids: list[str] = Field(default_factory=list)
    head_top: Mark | None = None
    head_entered: bool = False
    run_top: Mark | None = None
    run_end: Mark | None = None
    first: Mark | None = None
    known_end: Mark | None = None
    last: Mark | None = None
    before_candidate: Mark | None = None
    candidate_seen: bool = False
    clean: bool = True
    run_tally: dict[str, int] = Field(default_factory=dict)
    clean_tally: dict[str, int] = Field(default_factory=dict)
    head_tally: dict[str, int] = Field(default_factory=dict)
    revisit_tally: dict[str, int] = Field(default_factory=dict)
    skipped_known: bool = False

    def work_in_head(self, work_id: str) -> bool:
        """Whether the verdict on ``work_id`` belongs to the head (consumed once)."""
        if work_id in self.head_ids:
            self.head_ids.remove(work_id)
            return True
        return self.phase in ("head", "revisit")


class Jump(BaseModel):
    """Where the walk continues: the same query from ``mark``.

    Attributes:
        window: date sorts: the date window (``end_date`` for ``date_desc``,
            ``start_date`` for ``date_asc``: the mark's day); empty otherwise.
        offset: the offset of the landing page (the mark's place, at most 5000).
    """

    window: dict[str, str] = Field(default_factory=dict)
    offset: int = 0


class PageStep(BaseModel):
    """What the frontier makes of a fetched page.

    Attributes:
        works: the page's works to examine (in order).
        refetch: ask again at this offset instead (a landing page that started too late).
        jump: after ``works``, continue there (the head reached the known run).
    """

    works: list[Work]
    refetch: int | None = None
    jump: Jump | None = None


def fingerprint(target: TargetSpec) -> str:
    """The identity of what a target's scan sees: change any part and the frontier starts afresh.

    Covers the account (what it may see, what is unavailable to it), the work type, every
    query field, every filter and the routes (what counts as delivered); not the
    candidate bound, nor a task's own exclusions.

    Returns:
        A hex SHA-256 of the canonical JSON of those fields.
    """
    view = {
        "account": target.account,
        "work_type": target.work_type,
        "query": target.query.model_dump(mode="json"),
        "filters": target.filters.model_dump(mode="json"),
        "routes": sorted(r.name for r in target.routes),
    }
    return hashlib.sha256(json.dumps(view, sort_keys=True, ensure_ascii=True).encode()).hexdigest()


def applies(target: TargetSpec) -> bool:
    """Whether ``target``'s scans keep a frontier: tag searches in a known sort."""
    return target.query.mode == "search" and target.query.sort in (*DATE_SORTS, "popular_desc")


def key(target: TargetSpec) -> str | None:
    """The key ``target``'s frontier is stored under: its :func:`fingerprint`, or None when
    its scans keep no frontier (:func:`applies`: rankings, unknown sorts)."""
    return fingerprint(target) if applies(target) else None


def read(stored: dict[str, Any] | None, sort: str) -> Frontier:
    """The frontier a scan in ``sort`` starts from, read from what the ledger stored.

    Args:
        stored: the stored JSON (:class:`Frontier`'s, as every version wrote it), or None
            / ``{}`` when nothing is stored yet.
        sort: the target's sort.

    Returns:
        The stored frontier; a fresh one (the walk's start) when nothing is stored, the
        stored one is of another sort, or it is not a shape this version reads — a
        frontier is advisory: losing it costs pages, never a duplicate.
    """
    if stored:
        try:
            frontier = Frontier.model_validate(stored)
        except ValueError:
            frontier = None
        if frontier is not None and frontier.sort == sort:
            return frontier
    return Frontier(sort=sort)


def describe(stored: dict[str, Any]) -> str | None:
    """One line for operators (``curaflow frontiers list``): the sort, the head, the end of
    the known run, a capped scan's stop; None when ``stored`` is not a frontier of this
    module's shape."""
    try:
        frontier = Frontier.model_validate(stored)
    except ValueError:
        return None

    def mark(m: Mark | None) -> str:
        return f"{m.work_id} ({m.day or m.index})" if m is not None else "-"

    return (
        f"{frontier.sort}: head {mark(frontier.head)}, known up to {mark(frontier.known)}, "
        f"capped scan stopped at {mark(frontier.sweep)}"
    )


def settled_before(now: datetime) -> str:
    """The day (``YYYY-MM-DD``, UTC) before which a work has settled its bookmarks at ``now``
    (:data:`SETTLE_DAYS` earlier; :func:`lasting`)."""
    return (now.astimezone(UTC) - timedelta(days=SETTLE_DAYS)).date().isoformat()


def lasting(reason: str | None, work: Work, settled_before: str | None) -> bool:
    """Whether a verdict on ``work`` holds for later jobs of the same fingerprint.

    Args:
        reason: the scan's rejection word, None for a candidate (never lasting).
        settled_before: works created before this day (``YYYY-MM-DD``, UTC) have settled
            bookmark counts: a ``min_bookmarks`` rejection of one is lasting. None: never.
    """
    if reason is None:
        return False
    if reason in LASTING_REASONS:
        return True
    if reason == "filtered:min_bookmarks" and settled_before:
        day = (work.create_date or "")[:10]
        return bool(day) and day < settled_before
    return False


def _key(create_date: str | None, work_id: str) -> tuple[str, int]:
    return (create_date or "", int(work_id))


def _passed(work: Work, mark: Mark, sort: str) -> bool:
    """True when ``work`` comes at or before ``mark`` in the walk's order (date sorts)."""
    here, there = _key(work.create_date, work.work_id), _key(mark.create_date, mark.work_id)
    return here >= there if sort == "date_desc" else here <= there


def _jump_to(mark: Mark, sort: str, max_offset: int) -> Jump:
    if sort in DATE_SORTS:
        key = "end_date" if sort == "date_desc" else "start_date"
        return Jump(window={key: mark.day}, offset=min(mark.index, max_offset))
    return Jump(offset=min(mark.index, max_offset))


def begin(
    frontier: Frontier | None, sort: str, *, max_offset: int, settled_before: str | None = None
) -> tuple[FrontierWalk, Jump | None]:
    """Start a scan's walk from ``frontier``.

    Args:
        frontier: the target's stored frontier (None, or another sort's: afresh).
        sort: the target's sort.
        max_offset: the source's deepest offset (5000).
        settled_before: see :func:`lasting`.

    Returns:
        The walk, and where to jump before the first page (None: start at the top).
    """
    plan = frontier if frontier is not None and frontier.sort == sort else Frontier(sort=sort)
    walk = FrontierWalk(plan=plan, settled_before=settled_before)
    start = plan.sweep or plan.known
    if start is None or (sort == "date_desc" and plan.head is None):
        return walk, None
    if sort == "date_desc":
        walk.phase = "head"
        return walk, None
    if sort not in DATE_SORTS and start.index >= PAGE:
        walk.phase = "revisit"
        walk.revisit_at = plan.revisit if plan.revisit + PAGE <= start.index else 0
        return walk, Jump(offset=walk.revisit_at)
    return _land(walk, start, sort, max_offset), _jump_to(start, sort, max_offset)


def _land(walk: FrontierWalk, mark: Mark, sort: str, max_offset: int) -> FrontierWalk:
    walk.phase = "segment"
    walk.skipped_known = True
    walk.segment = "sweep" if walk.plan.sweep is not None else "known"
    walk.skip = mark
    walk.landing = True
    walk.pass_start = True
    return walk


def on_page(
    walk: FrontierWalk, works: list[Work], *, sort: str, offset: int, window_day: str | None, max_offset: int
) -> PageStep:
    """Apply the frontier to a fetched page (before the scan's own skipping).

    Args:
        walk: the scan's walk (updated in place).
        works: the page's works as listed.
        sort: the target's sort.
        offset: the offset the page was asked at.
        window_day: the day the pass's date window starts on (``end_date`` for
            ``date_desc``, ``start_date`` for ``date_asc``), None without one.
        max_offset: the source's deepest offset.

    Returns:
        What to examine, and whether to refetch or jump.
    """
    if walk.landing:
        back = _landing_check(walk, works, sort=sort, offset=offset)
        if back is not None:
            walk.stepped_back += 1
            return PageStep(works=[], refetch=back)
    if walk.pass_start:
        walk.day, walk.day_start = None, None
    walk.places = {}
    for i, work in enumerate(works):
        walk.places[work.work_id] = _place(walk, work, sort=sort, at=offset + i, window_day=window_day)
    walk.pass_start = False
    if walk.landing:
        walk.landing = False
        works = _after_mark(walk, works, sort)
    elif walk.skip is not None and sort in DATE_SORTS:
        works = [w for w in works if not _passed(w, walk.skip, sort)]
    if walk.phase == "revisit":
        start = walk.plan.sweep or walk.plan.known
        walk.head_ids = [w.work_id for w in works]
        walk.head_entered = True
        if start is None:  # cannot happen (a revisit needs a mark): walk on
            walk.phase = "segment"
            return PageStep(works=works)
        _land(walk, start, sort, max_offset)
        return PageStep(works=works, jump=_jump_to(start, sort, max_offset))
    if walk.phase == "head" and walk.plan.head is not None:
        works_in = works
        for i, work in enumerate(works):
            if _passed(work, walk.plan.head, sort):
                walk.head_entered = True
                head, works = works[:i], []
                walk.head_ids = [w.work_id for w in head]
                start = walk.plan.sweep or walk.plan.known
                if start is None:  # a head without a run: walk on from here
                    walk.phase, walk.segment = "segment", "known"
                    return PageStep(works=head)
                listed = [w.work_id for w in works_in]
                if start.work_id in listed[i:]:
                    # The mark is on this page too: go on after it, no jump needed.
                    walk.phase = "segment"
                    walk.skipped_known = True
                    walk.segment = "sweep" if walk.plan.sweep is not None else "known"
                    walk.skip = start
                    return PageStep(works=head + works_in[listed.index(start.work_id) + 1 :])
                _land(walk, start, sort, max_offset)
                return PageStep(works=head, jump=_jump_to(start, sort, max_offset))
        walk.head_ids = [w.work_id for w in works]
    return PageStep(works=works)


def _landing_check(walk: FrontierWalk, works: list[Work], *, sort: str, offset: int) -> int | None:
    """The offset to ask again at when the landing page may have started past unexamined works.

    An empty landing page steps back whatever the sort: the frontier knows works stood
    there, so either enough of them went away (the page before holds the rest) or the
    source answered an empty page it should not have (a struggling backend's answer is
    never taken for the end of results; the page before leads on with the source's own
    ``next_url``, whose empty answer is then the source's failure).
    """
    mark = walk.skip
    if mark is not None and offset > 0 and not works:
        return max(0, offset - PAGE)
    if mark is None or offset <= 0 or sort not in DATE_SORTS:
        return None  # popular_desc: no key to compare; the revisit pages cover shifts
    if not works or not _passed(works[0], mark, sort):
        return max(0, offset - PAGE)
    return None


def _after_mark(walk: FrontierWalk, works: list[Work], sort: str) -> list[Work]:
    """The landing page's works after the mark (those at or before it were examined before)."""
    mark = walk.skip
    if mark is None:
        return works
    if sort in DATE_SORTS:
        return [w for w in works if not _passed(w, mark, sort)]
    ids = [w.work_id for w in works]
    if mark.work_id in ids:
        return works[ids.index(mark.work_id) + 1 :]
    return works


def _place(walk: FrontierWalk, work: Work, *, sort: str, at: int, window_day: str | None) -> int:
    """A listed work's :attr:`Mark.index`: its place in its day (date sorts) or in the list."""
    if sort not in DATE_SORTS:
        return at
    day = (work.create_date or "")[:10]
    if day != walk.day:
        first_of_pass = walk.day is None
        walk.day = day
        if first_of_pass:
            # A pass lists from the start of its first day, unless it landed on a day
            # other than its window's (works of that day were deleted): place unknown.
            walk.day_start = 0 if (window_day is None or window_day == day) else None
        else:
            walk.day_start = at
    if walk.day_start is None:
        return 0  # unknown: landing at the day's start is slower, never wrong
    return at - walk.day_start


def observe(walk: FrontierWalk, work: Work, reason: str | None) -> None:
    """Record the scan's verdict on ``work`` (None: a candidate)."""
    mark = Mark(work_id=work.work_id, create_date=work.create_date, index=walk.places.pop(work.work_id, 0))
    held = lasting(reason, work, walk.settled_before)
    if walk.work_in_head(work.work_id):
        if not held:
            walk.head_top = None  # the head cannot move above a work that may change
            walk.head_tally = {}
        else:
            assert reason is not None
            if walk.head_top is None:
                walk.head_top, walk.head_tally = mark, {}
            _count(walk.head_tally, reason)
            if walk.revisit_at is not None:  # a work of the known run, read again
                _count(walk.revisit_tally, reason)
        return
    if walk.segment == "fresh" and not walk.candidate_seen and reason is not None:
        if held:
            if walk.run_top is None:
                walk.run_tally = {}
            walk.run_top = walk.run_top or mark
            walk.run_end = mark
            _count(walk.run_tally, reason)
        else:
            walk.run_top = walk.run_end = None
            walk.run_tally = {}
    if walk.first is None:
        walk.first = mark
    walk.last = mark
    if reason is None:
        walk.candidate_seen = True
    elif not walk.candidate_seen:
        walk.before_candidate = mark
    if walk.clean and held:
        assert reason is not None
        walk.known_end = mark
        _count(walk.clean_tally, reason)
    elif not held:
        walk.clean = False


def _count(tally: dict[str, int], reason: str, n: int = 1) -> None:
    tally[reason] = tally.get(reason, 0) + n


def _merge(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
    merged = dict(a)
    for reason, n in b.items():
        _count(merged, reason, n)
    return dict(sorted(merged.items()))


def known_tally(walk: FrontierWalk) -> dict[str, int]:
    """The works of the known run the walk passed over without reading, by reason word.

    The frontier's tally of its known run, less the verdicts of the run's works the walk
    read again (the ``revisit`` page); empty when the walk did not pass over the run.
    """
    if not walk.skipped_known:
        return {}
    left = {reason: n - walk.revisit_tally.get(reason, 0) for reason, n in walk.plan.tally.items()}
    return {reason: n for reason, n in sorted(left.items()) if n > 0}


def tail_pass(walk: FrontierWalk) -> None:
    """The scan reads a crowded day from its other end: places there are not the walk's."""
    walk.clean = False


def _later(a: Mark, b: Mark, sort: str) -> bool:
    """True when ``a`` comes after ``b`` in the walk's order."""
    if sort in DATE_SORTS:
        ka, kb = _key(a.create_date, a.work_id), _key(b.create_date, b.work_id)
        return ka < kb if sort == "date_desc" else ka > kb
    return a.index > b.index


def advance(walk: FrontierWalk, *, capped: bool, exhausted: bool) -> Frontier:
    """The frontier a finished scan leaves for the target's next job.

    Args:
        walk: the scan's walk.
        capped: the scan stopped at ``pixiv.max_examined`` without a candidate.
        exhausted: the scan read the source to its end.

    Returns:
        The new frontier (see the module doc for the rules).
    """
    plan = walk.plan
    sort = plan.sort
    if walk.segment == "fresh" and walk.phase == "segment":
        new = Frontier(sort=sort)
        if sort == "date_desc":
            new.head, new.known = walk.run_top, walk.run_end
            new.tally = dict(sorted(walk.run_tally.items())) if walk.run_end is not None else {}
        elif walk.known_end is not None:
            new.known = walk.known_end
            new.tally = dict(sorted(walk.clean_tally.items()))
        if capped and walk.last is not None and walk.last != new.known:
            new.sweep = walk.last
            if sort == "date_desc" and new.head is None:
                new.head = walk.first  # nothing lasting above the stop: the head is where this walk began
        return new
    new = plan.model_copy(deep=True)
    if walk.revisit_at is not None:
        ahead = walk.revisit_at + PAGE
        new.revisit = ahead if plan.known is not None and ahead + PAGE <= plan.known.index else 0
    if walk.phase in ("head", "revisit") and not walk.head_entered:
        return new  # the scan ended before the known run: nothing else learnt
    if sort == "date_desc" and walk.head_entered and walk.head_top is not None:
        new.head = walk.head_top
        new.tally = _merge(new.tally, walk.head_tally)
    if walk.segment == "known":
        if walk.known_end is not None:
            new.known = walk.known_end
            new.tally = _merge(new.tally, walk.clean_tally)
        if capped and walk.last is not None and not walk.clean:
            new.sweep = walk.last
    elif walk.segment == "sweep":
        if capped and walk.last is not None:
            new.sweep = walk.last
        elif walk.candidate_seen and walk.before_candidate is not None:
            new.sweep = walk.before_candidate
    if exhausted:
        new.sweep = None
    if new.sweep is not None and new.known is not None and not _later(new.sweep, new.known, sort):
        new.sweep = None
    return new
