"""How a scan walks against its target's frontier: where it starts, what it makes of each page.

See :mod:`curaflow.sources.pixiv.frontier` ("How a job walks").
"""

from __future__ import annotations

from curaflow.domain.models import Work
from curaflow.sources.pixiv.frontier.models import (
    DATE_SORTS,
    MAX_SEAM_STEPS,
    PAGE,
    Frontier,
    FrontierWalk,
    Jump,
    Mark,
    PageStep,
    _key,
)


def _passed(work: Work, mark: Mark, sort: str) -> bool:
    """True when ``work`` comes at or before ``mark`` in the walk's order (date sorts)."""
    here, there = _key(work.create_date, work.work_id), _key(mark.create_date, mark.work_id)
    return here >= there if sort == "date_desc" else here <= there


def _drop_passed(works: list[Work], mark: Mark, sort: str, placed: list[str]) -> list[Work]:
    """``works`` less those at or before ``mark`` in the walk's order (date sorts). A work
    whose date is placed by its neighbours (``placed``: no order is read from it) is at or
    before the mark only when a dated work listed after it is (the list is sorted: it
    comes before that one); else it is kept — examined, never passed unread."""
    keep: list[Work] = []
    later_passed = False
    for work in reversed(works):
        if work.work_id in placed:
            passed = later_passed
        else:
            passed = _passed(work, mark, sort)
            later_passed = later_passed or passed
        if not passed:
            keep.append(work)
    keep.reverse()
    return keep


def _starts_by(works: list[Work], mark: Mark, sort: str, placed: list[str]) -> bool:
    """Whether the page ``works`` starts at or before ``mark`` (date sorts): its first work
    is passed (:func:`_drop_passed`: a placed first work is when a dated work after it is)."""
    if not works:
        return False
    if works[0].work_id not in placed:
        return _passed(works[0], mark, sort)
    return any(_passed(w, mark, sort) for w in works[1:] if w.work_id not in placed)


def _reached(work: Work, mark: Mark) -> bool:
    """True when ``work`` is ``mark`` or comes after it in a ``date_desc`` walk (as old or older).

    The head phase reads every work above the head, new or read before: it stops at the
    first work at or below it, never at a newer one (the converse of :func:`_passed`).
    """
    return _key(work.create_date, work.work_id) <= _key(mark.create_date, mark.work_id)


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
        walk.head_whole = True
        resume = plan.head_sweep
        if (
            resume is not None
            and plan.head is not None
            and _key(resume.create_date, resume.work_id) > _key(plan.head.create_date, plan.head.work_id)
        ):
            # A capped head phase stopped there: go on below it (the works above stay above
            # the head, read again from the top once the head phase is done).
            walk.skip = resume
            walk.head_resumed = True
            walk.landing = True
            walk.pass_start = True
            return walk, _jump_to(resume, sort, max_offset)
        return walk, None
    if sort not in DATE_SORTS:
        revisit = revisit_offset(plan)
        if revisit is not None:
            walk.phase = "revisit"
            walk.revisit_at = revisit
            return walk, Jump(offset=revisit)
    return _land(walk, start, sort, max_offset), _jump_to(start, sort, max_offset)


def revisit_offset(plan: Frontier) -> int | None:
    """The offset of the known page a ``popular_desc`` job reads again (None: none).

    The known run's mark is at place ``k``: a job lands there, and works deleted above it
    since the last job move the works after it up, over the landing, into ``[0, k)``. The
    revisit pages cover ``[0, k)`` whole, one a job in turn: ``plan.revisit`` (0, 30, 60
    …), the cycle's last page starting at ``k − 30`` so that it ends at the mark (before
    2026-12-05c the places from the last multiple of 30 up to ``k`` were never read
    again). A known run shorter than a page is read again by every job on the page at
    offset 0, which holds the mark's place too: the job goes on after the mark on that
    page (:func:`on_page`), no landing page of its own. No known run, or one of a single
    work (``k`` = 0): nothing lies above the landing, no revisit.
    """
    known = plan.known
    if known is None or known.index <= 0:
        return None
    return max(0, min(plan.revisit, known.index - PAGE))


def _land(walk: FrontierWalk, mark: Mark, sort: str, max_offset: int) -> FrontierWalk:
    walk.phase = "segment"
    walk.seam_id, walk.seam = None, None  # a landing page is checked by its mark instead
    walk.skipped_known = True
    walk.segment = "sweep" if walk.plan.sweep is not None else "known"
    walk.skip = mark
    walk.landing = True
    walk.pass_start = True
    return walk


def read_again(walk: FrontierWalk, work: Work | None = None) -> bool:
    """Whether the scan reads again what the target examined before, which does not count
    against ``pixiv.max_examined``: ``work``, a work about to be examined (None: the page
    being parsed, for its items that are no work).

    * ``popular_desc``: the works of the revisit page (one known page a job, in turn, so
      that no work moved up into the known run is lost) — the frontier's own upkeep, not
      the search for new works the cap bounds. Counted, a cap below a page left every job
      inside it (no job ever reached the works after the known run) and one below two
      pages every other job capped without a candidate.
    * ``date_desc``: works of the head phase at or below ``plan.seen`` (a place some job
      examined: not a new one), the first :data:`PAGE` of them a job (this call counts
      them, ``walk.reread``). Every job reads the works above the head again, their
      verdicts not lasting; counted, a head region near the cap left the job a place or
      two after it (cap 6, a held work at place 4: one place a job, before 2026-12-05e).
      Works new since the last job (above ``seen``) count; beyond a page the head region
      counts too — it has no bound of its own (the last 7 days of a query with
      ``min_bookmarks``), and the cap is what bounds a job.

    A job so examines at most one page more than the cap, whatever the sort.
    """
    if walk.revisit_at is not None:
        if work is None:
            return walk.phase == "revisit"
        return work.work_id in walk.head_ids
    seen, head = walk.plan.seen, walk.plan.head
    if work is None or walk.plan.sort != "date_desc" or seen is None or head is None or walk.reread >= PAGE:
        return False
    if not (walk.phase == "head" or work.work_id in walk.head_ids) or work.work_id in walk.placed:
        return False  # (a placed date says nothing of ``seen``: counted as new)
    if _key(work.create_date, work.work_id) > _key(seen.create_date, seen.work_id):
        return False  # new since the last whole read of the head region
    walk.reread += 1
    return True


def repeated_on(walk: FrontierWalk, listed: list[str], *, tail: bool = False) -> int:
    """How many of the first items ``listed`` on a page asked one place early (a
    ``date_desc`` head page, a ``segment`` page after one whose seam is checked, or —
    ``tail`` — a page of a crowded day's second walk after one whose seam is checked
    (:func:`on_tail_page`); their ids, in order, works the source should never have sent
    included) the previous page listed already: that page's last item with an id curaflow
    reads and anything before it, and the items of no id it listed after that one (at most
    ``walk.edge_unread``: asked again with it, :func:`_edge`). The scan neither parses nor
    counts them again."""
    if tail:
        edge = walk.seam_id if not walk.pass_start else None
    elif walk.phase == "head" and walk.plan.head is not None:
        edge = walk.head_edge
    elif walk.phase == "segment" and not walk.landing and not walk.pass_start:
        edge = walk.seam_id
    else:
        edge = None
    if edge is None or edge not in listed:
        return 0
    n = listed.index(edge) + 1
    for _ in range(walk.edge_unread):
        if n < len(listed) and listed[n] == "":
            n += 1
    return n


def _unread_before(ids: list[str], works: list[Work], i: int, *, carried: bool) -> bool:
    """Whether an item with no id curaflow reads (``""`` in the page's ``ids``) is listed
    just before ``works[i]``: after ``works[i - 1]`` — or, for the page's first work to
    examine, anywhere before it on the page or after the last work examined on the pages
    before (``carried``: ``FrontierWalk.unread_next``)."""
    at = ids.index(works[i].work_id) if works[i].work_id in ids else len(ids)
    if i == 0:
        return carried or "" in ids[:at]
    after = ids.index(works[i - 1].work_id) + 1 if works[i - 1].work_id in ids else 0
    return "" in ids[after:at]


def on_page(
    walk: FrontierWalk,
    works: list[Work],
    *,
    sort: str,
    offset: int,
    window_day: str | None,
    max_offset: int,
    listed: list[str] | None = None,
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
        listed: the ids of every item the source listed on the page, in order, works it
            should never have sent included (None: ``works``'); ``works`` may start after
            those :func:`repeated_on` counted, ``offset`` being the first one's.

    Returns:
        What to examine, and whether to refetch or jump.
    """
    if walk.landing:
        back = _landing_check(walk, works, sort=sort, offset=offset)
        if back is not None:
            walk.stepped_back += 1
            return PageStep(works=[], refetch=back)
    listed_in = works
    if walk.phase == "segment" and walk.seam_id is not None and not walk.pass_start:
        back = _seam_check(walk, works, sort=sort, offset=offset, listed=listed)
        if back is not None:
            walk.seam_back += 1
            return PageStep(works=[], refetch=back)
        if walk.seam is not None and sort in DATE_SORTS:
            works = listed_in = _drop_passed(works, walk.seam, sort, walk.placed)
    walk.seam_id, walk.seam, walk.seam_back = None, None, 0
    if walk.pass_start:
        walk.day, walk.day_start = None, None
    walk.places = {}
    for i, work in enumerate(works):
        if work.work_id not in walk.places:  # a work listed twice keeps its first place (the scan examines it once)
            walk.places[work.work_id] = _place(walk, work, sort=sort, at=offset + i, window_day=window_day)
    walk.pass_start = False
    if walk.landing:
        walk.landing = False
        works = _after_mark(walk, works, sort)
    elif walk.skip is not None and sort in DATE_SORTS:
        works = _drop_passed(works, walk.skip, sort, walk.placed)
    if walk.phase == "revisit":
        start = walk.plan.sweep or walk.plan.known
        walk.head_ids = [w.work_id for w in works]
        walk.head_entered = True
        if start is None:  # cannot happen (a revisit needs a mark): walk on
            walk.phase = "segment"
            return PageStep(works=works)
        ids = listed if listed is not None else [w.work_id for w in works]
        cut = _mark_on_revisit(works, start, offset=offset, listed=ids)
        if cut is None:
            _land(walk, start, sort, max_offset)
            return PageStep(works=works, jump=_jump_to(start, sort, max_offset))
        # The mark's place is on this page (a known run shorter than a page): the works
        # after it are the segment's, as the landing page there would have given them.
        walk.head_ids = walk.head_ids[:cut]
        walk.phase = "segment"
        walk.skipped_known = True
        walk.segment = "sweep" if walk.plan.sweep is not None else "known"
        walk.skip = start
        return PageStep(works=works, overlap=_seam_after(walk, ids, works))
    if walk.phase == "head" and walk.plan.head is not None:
        if walk.head_ids:
            walk.head_whole = False  # works of the last page went unexamined (never expected)
        ids = listed if listed is not None else [w.work_id for w in listed_in]
        if walk.head_edge is not None:
            if walk.head_edge in ids:
                after = set(ids[ids.index(walk.head_edge) + 1 :])
                works = [w for w in works if w.work_id in after]
            else:
                walk.head_whole = False  # the page may start past works never listed
        # The edge is the page's last item with an id curaflow reads (a work never parsed is
        # one too); items of no id after it are asked again with it (:func:`_edge`).
        walk.head_edge, overlap = _edge(ids)
        walk.edge_unread = overlap - 1
        if walk.head_edge is None:
            walk.head_whole = False  # no item of the page can prove the next one starts after it
        works_in = works
        for i, work in enumerate(works):
            if work.work_id not in walk.placed and _reached(work, walk.plan.head):
                # (A work whose date is placed never ends the phase: the first dated work
                # at or below the head does, and a placed one before it is a head work.)
                walk.head_entered = True
                walk.unread_at_head = _unread_before(ids, works, i, carried=walk.unread_next)
                head, works = works[:i], []
                walk.head_ids = [w.work_id for w in head]
                start = walk.plan.sweep or walk.plan.known
                if start is None:  # a head without a run: walk on from here
                    walk.phase, walk.segment = "segment", "known"
                    return PageStep(works=head, overlap=_seam_after(walk, ids, works_in))
                listed = [w.work_id for w in works_in]
                if start.work_id in listed[i:]:
                    # The mark is on this page too: go on after it, no jump needed.
                    walk.phase = "segment"
                    walk.skipped_known = True
                    walk.segment = "sweep" if walk.plan.sweep is not None else "known"
                    walk.skip = start
                    overlap = _seam_after(walk, ids, works_in)
                    return PageStep(works=head + works_in[listed.index(start.work_id) + 1 :], overlap=overlap)
                _land(walk, start, sort, max_offset)
                return PageStep(works=head, jump=_jump_to(start, sort, max_offset))
        walk.head_ids = [w.work_id for w in works]
        return PageStep(works=works, overlap=overlap)
    if walk.phase == "segment":
        ids = listed if listed is not None else [w.work_id for w in listed_in]
        return PageStep(works=works, overlap=_seam_after(walk, ids, listed_in))
    return PageStep(works=works)


def on_tail_page(
    walk: FrontierWalk, works: list[Work], *, sort: str, offset: int, listed: list[str] | None = None
) -> PageStep:
    """Check a page of a crowded day's second walk (the day read from its far end, in the
    reverse order: :func:`~curaflow.sources.pixiv.frontier.learning.tail_pass`) as the
    first walk's ``segment`` pages are checked.

    That walk's lasting verdicts join the runs once it meets the first walk's stop
    (:func:`~curaflow.sources.pixiv.frontier.learning.tail_done`): the day is then taken as
    read whole, so a place between two of its pages must not be passed unread — a work
    deleted (or hidden) above between two requests moves the work first on the next page
    onto the page already read (before 2026-12-05g that walk followed the source's
    ``next_url`` unchecked, and such a work was recorded as examined and lost). So, while
    the walk is in its ``segment`` and has seen no candidate, each page after the first is
    asked one place early and checked by :func:`_seam_check` — the same seam, step backs,
    :data:`MAX_SEAM_STEPS` bound and seam gap (past which nothing further is recorded) as
    the first walk's, in the reverse order. The head phase records nothing there
    (:func:`~curaflow.sources.pixiv.frontier.learning.tail_pass`): its pages are the
    source's own.

    Args:
        walk: the scan's walk (updated in place).
        works: the page's works as listed, after those :func:`repeated_on` counted
            (``tail=True``).
        sort: the target's sort (the page is in the reverse order).
        offset: the offset the page was asked at, in the day's reverse listing (the
            first work's).
        listed: the ids of every item the page listed, in order (None: ``works``').

    Returns:
        The works to examine, ``refetch`` (ask again there: the page may start past works
        no page read), and ``overlap`` (1: ask the next page one place early).
    """
    order = "date_asc" if sort == "date_desc" else "date_desc"
    # Each work's place from the day's far end (a ``Frontier.tail_sweep``'s index; items
    # the source should never have sent may make it early: the landing then reads more).
    at: dict[str, int] = {}
    for i, w in enumerate(works):
        at.setdefault(w.work_id, offset + i)  # a work listed twice keeps its first place
    mark = walk.tail_skip
    if walk.tail_landing and mark is not None:
        # Going on after the last job's stop in this walk (``Frontier.tail_sweep``): the
        # landing page must start at or before it (works deleted on the far end's side
        # move it up), else it is asked a page earlier — an empty one too.
        if offset > 0 and not _starts_by(works, mark, order, walk.placed):
            walk.stepped_back += 1
            return PageStep(works=[], refetch=max(0, offset - PAGE))
        walk.tail_landing = False
        works = _drop_passed(works, mark, order, walk.placed)
    if walk.seam_id is not None and not walk.pass_start:
        back = _seam_check(walk, works, sort=order, offset=offset, listed=listed)
        if back is not None:
            walk.seam_back += 1
            return PageStep(works=[], refetch=back)
        if walk.seam is not None:
            works = _drop_passed(works, walk.seam, order, walk.placed)
    walk.seam_id, walk.seam, walk.seam_back = None, None, 0
    walk.pass_start = False
    walk.places = {w.work_id: at[w.work_id] for w in works}
    if walk.phase != "segment" or walk.seam_gap:
        return PageStep(works=works)
    ids = listed if listed is not None else [w.work_id for w in works]
    return PageStep(works=works, overlap=_seam_after(walk, ids, works))


def _mark_on_revisit(works: list[Work], mark: Mark, *, offset: int, listed: list[str]) -> int | None:
    """How many of a ``popular_desc`` revisit page's ``works`` are the known part's, when
    the page holds the place of ``mark`` (where the walk goes on); None when it does not
    (the walk jumps to the mark).

    Up to the mark when the page lists it (works deleted above moved it up: those after
    it are the segment's; works that climbed above it are the known part's), else up to
    its place (the works from there on are what the landing page at its place would
    list). A revisit page ends at or before the known mark's place unless the known run
    is shorter than a page (the page at offset 0), so this only reads a mark near its
    place: one that climbed far up the ranking is passed by, never followed back into
    the known run.
    """
    place = mark.index - offset
    if not 0 <= place < len(listed):
        return None
    ids = [w.work_id for w in works]
    if mark.work_id in ids:
        return ids.index(mark.work_id) + 1
    before = set(listed[:place])
    return sum(1 for w in works if w.work_id in before)


def _edge(ids: list[str]) -> tuple[str | None, int]:
    """A page's edge — its last listed item with an id curaflow reads (``ids``: the page's
    listing, ``""`` for an item of no such id, :func:`~curaflow.sources.pixiv.frontier.unreadable`)
    — and how many places early the next page is asked so that it lists the edge again:
    one, and one more for each item of no id after the edge (those are asked again with it,
    and passed over unparsed by :func:`repeated_on`). ``(None, 1)`` when no item of the
    page has an id: nothing on it can prove the next page starts after it.

    Such an item is no edge: ``""`` proves nothing (before 2026-12-05 the listing held
    ``"None"`` for it, and another item of no id on the next page passed for it)."""
    for back, item in enumerate(reversed(ids)):
        if item:
            return item, back + 1
    return None, 1


def _seam_after(walk: FrontierWalk, ids: list[str], works: list[Work]) -> int:
    """Whether the page after this ``segment`` page is asked early (returned: the overlap,
    :func:`_edge`), its seam remembered to check it: while the walk has seen no candidate,
    a place it passes may be recorded as examined (the known run, a fresh walk's run, a
    sweep), so the boundary must be read without a gap. After a candidate nothing
    further is recorded: the next page is the source's own. A page of items with no id
    curaflow reads alone has no edge: the walk records nothing past it (``seam_gap``) — nor
    has one whose only item with such an id is its first (the last page's edge, listed again,
    then only items of no id): the next page is asked one place on at the least, so it can
    never list that edge again, and its seam check stepped back and on again
    :data:`MAX_SEAM_STEPS` times each job, two requests and each item counted twice a step
    (until 2026-12-05, night; decision 2026-12-05k)."""
    edge, overlap = _edge(ids)
    if edge is not None and len(ids) > 1 and overlap >= len(ids):
        edge = None
    walk.edge_unread = overlap - 1
    if walk.candidate_seen or not ids:
        walk.seam_id, walk.seam = None, None
        return 0
    if edge is None:
        walk.seam_id, walk.seam = None, None
        walk.seam_gap, walk.clean = True, False
        return 0
    walk.seam_id = edge
    # The seam's work is the last dated one (a placed date is no order: the next page then
    # starts after it, and is asked again earlier unless it lists ``seam_id`` again).
    last = next((w for w in reversed(works) if w.work_id not in walk.placed), None)
    walk.seam = Mark(work_id=last.work_id, create_date=last.create_date) if last is not None else None
    return overlap


def _seam_check(
    walk: FrontierWalk, works: list[Work], *, sort: str, offset: int, listed: list[str] | None
) -> int | None:
    """The offset to ask a ``segment`` page again at, when it may start past works no page
    read (works above deleted or hidden between the two requests moved them up onto the
    page before, after it was read); None: it starts at or before the seam.

    The page was asked early (:func:`_edge`): it lists the previous page's last item with an id again
    (:func:`repeated_on` left it out of ``works``), or — date sorts, that item gone
    too — starts at or before that page's last work by creation time. Otherwise it is
    asked again one place earlier (one work moved up: the usual case, a page more), then
    :data:`PAGE` − 1 places earlier at each further step (up to 29 works moved up a
    step), down to offset 0. ``popular_desc`` has no order key: it stops after two steps
    (the item may have moved in the ranking instead), and the revisit of the known part
    covers what a larger shift moves up. Once the walk has seen a candidate nothing past
    it is recorded: no step back.
    """
    ids = listed if listed is not None else [w.work_id for w in works]
    if walk.seam_id in ids:
        return None
    if walk.seam is not None and sort in DATE_SORTS and _starts_by(works, walk.seam, sort, walk.placed):
        return None
    if walk.candidate_seen or offset <= 0 or (sort not in DATE_SORTS and walk.seam_back >= 2):
        return None
    if walk.seam_steps >= MAX_SEAM_STEPS:
        # The source's pages never meet (it ignores the offset asked, or keeps moving):
        # go on, and record nothing as examined from this unchecked seam on.
        walk.seam_gap, walk.clean = True, False
        return None
    walk.seam_steps += 1
    return max(0, offset - (1 if walk.seam_back == 0 else PAGE - 1))


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
    if not _starts_by(works, mark, sort, walk.placed):
        return max(0, offset - PAGE)
    return None


def _after_mark(walk: FrontierWalk, works: list[Work], sort: str) -> list[Work]:
    """The landing page's works after the mark (those at or before it were examined before)."""
    mark = walk.skip
    if mark is None:
        return works
    if sort in DATE_SORTS:
        return _drop_passed(works, mark, sort, walk.placed)
    ids = [w.work_id for w in works]
    if mark.work_id in ids:
        return works[ids.index(mark.work_id) + 1 :]
    return works


def _place(walk: FrontierWalk, work: Work, *, sort: str, at: int, window_day: str | None) -> int:
    """A listed work's :attr:`Mark.index`: its place in its day (date sorts) or in the list."""
    if sort not in DATE_SORTS:
        return at
    if work.work_id in walk.placed:
        return 0  # never a mark; its placed day moves no day's start
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
