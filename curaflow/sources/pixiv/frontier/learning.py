"""What a walk learns: the verdicts it records and the frontier it leaves for the next job.

See :mod:`curaflow.sources.pixiv.frontier` ("What is remembered").
"""

from __future__ import annotations

from curaflow.domain.models import Work
from curaflow.sources.pixiv.frontier.models import DATE_SORTS, PAGE, Frontier, FrontierWalk, Mark, _key
from curaflow.sources.pixiv.frontier.rules import lasting


def observe(walk: FrontierWalk, work: Work, reason: str | None) -> None:
    """Record the scan's verdict on ``work`` (None: a candidate).

    A work whose date is placed by its neighbours (``walk.placed``) is recorded by
    :func:`_observe_placed`: it breaks every run, and is never a mark. An item with no id
    curaflow reads listed just before ``work`` (:func:`unreadable`) breaks them first; one
    listed just after it (``walk.unread_after``) stands before the next work examined."""
    _observe(walk, work, reason)
    if walk.unread_after is not None and work.work_id == walk.unread_after:
        walk.unread_after, walk.unread_next = None, True


def _observe(walk: FrontierWalk, work: Work, reason: str | None) -> None:
    if walk.unread_next or work.work_id in walk.unread_before:
        walk.unread_next = False
        if work.work_id in walk.unread_before:
            walk.unread_before.remove(work.work_id)
        _break_before(walk, work)
    if work.work_id in walk.placed:
        _observe_placed(walk, work, reason)
        return
    mark = Mark(work_id=work.work_id, create_date=work.create_date, index=walk.places.pop(work.work_id, 0))
    held = lasting(reason, work, walk.settled_before)
    if _in_tail(walk, work):
        _observe_in_tail(walk, work, reason, held, mark)
        return
    if walk.work_in_head(work.work_id):
        walk.head_stop = mark
        walk.head_first = walk.head_first or mark
        if not held:
            walk.head_broken = True
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
    if _landed_past(walk, work):
        _observe_landed_past(walk, reason)
        return
    if walk.seam_gap:
        # Past a seam the walk could not check (``FrontierWalk.seam_gap``): a place here may
        # lie past works no page read, so nothing is recorded as examined (nor does a
        # crowded day's tally join a run); a candidate still counts as one.
        walk.candidate_seen = walk.candidate_seen or reason is None
        return
    if walk.tail_tally and walk.tail_stop is None and not walk.tail_left:
        _after_tail(walk, held)
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


def _observe_placed(walk: FrontierWalk, work: Work, reason: str | None) -> None:
    """A verdict on a work a date-sorted search listed without a creation date curaflow
    reads (``FrontierWalk.placed``: its date placed by its neighbours', examined
    ``invalid`` unless the ledger rules it out). Its place in the walk's order is not
    known to the second, so it is taken as a verdict that does not last whatever it is —
    the head, the known run, a fresh walk's run and a crowded day's run stop before it —
    and it is never a mark (no ``first``, ``last``, stop or sweep): every mark stays at a
    dated work before it, and the next job reads it again. Until 2026-12-05 such a work
    failed its whole page, every attempt."""
    walk.places.pop(work.work_id, None)
    in_tail = work.work_id in walk.tail_left or walk.tail_stop is not None
    if work.work_id in walk.tail_left:
        walk.tail_left.remove(work.work_id)
    in_head = walk.work_in_head(work.work_id)
    if reason is None:
        walk.candidate_seen = True  # (never so: a placed work is ``invalid`` or ruled out)
    if walk.seam_gap:
        return
    if in_head:
        walk.head_broken = True
        walk.head_top, walk.head_tally = None, {}
        return
    if in_tail:
        _break_tail(walk)
        return
    _break_runs(walk)


def unreadable(walk: FrontierWalk, before: list[str], trailing: bool, last: str | None = None) -> None:
    """The page just taken lists items with no id curaflow reads (each counted ``invalid``):
    where they stand among its works to examine.

    No mark can stand for such an item, so it is taken as a verdict that does not last at
    its place — as a held work, or one listed undated (:func:`_observe_placed`): the head,
    the known run, a fresh walk's run and a crowded day's run stop before it
    (:func:`_break_before`, when the work after it is examined), so the next job reads it
    again whatever it is, while the walk's marks — ``last``, a capped scan's ``sweep``, a
    head or second-walk stop — are dated works on either side of it and move on past it as
    past a held work (the end of results clears the sweep: the next sweep reads it again).

    Until 2026-12-05 such an item made the walk record nothing from its page on
    (``seam_gap``): a scan capped there left no sweep past it, and when more than
    ``pixiv.max_examined`` works ruled out followed it every job of the target read the same
    page to the same cap, without a candidate, for as long as Pixiv listed the item so
    (before that morning it was passed as ``invalid``, a lasting verdict).

    Args:
        walk: the scan's walk (updated in place).
        before: ids of the page's works to examine that such an item is listed just before
            (after the work to examine before them, or the page's start).
        trailing: one is listed after the page's last work to examine: it stands before the
            next work examined, whatever page lists it.
        last: the page's last work to examine (None: none) — the item stands after it, so
            it breaks the runs only once that work is examined (``walk.unread_after``): set
            before the page's works are examined, a trailing item broke them before the
            page's first work instead, and the runs went on over it (until 2026-12-05,
            evening: a work unreadable at a page's end, read again once readable by no job).
    """
    walk.unread_before = [*walk.unread_before, *before]
    if trailing and last is not None:
        walk.unread_after = last
    elif trailing:
        walk.unread_next = True


def _break_before(walk: FrontierWalk, work: Work) -> None:
    """An item with no id curaflow reads stood just before ``work`` (:func:`unreadable`):
    every run ``work`` would join stops before it, as before a work listed undated
    (:func:`_observe_placed`) — the head's when ``work`` is a head work, a crowded day's
    second walk's when it is one of its works, else the fresh walk's run and the known run
    (``clean``). Nothing is consumed: ``work`` is then examined as any other."""
    if walk.seam_gap:
        return
    if work.work_id in walk.head_ids or walk.phase in ("head", "revisit"):
        walk.head_broken = True
        walk.head_top, walk.head_tally = None, {}
        return
    placed_in_tail = work.work_id in walk.placed and walk.tail_stop is not None  # (as _observe_placed)
    if work.work_id in walk.tail_left or placed_in_tail or _after_stop(walk, work):
        _break_tail(walk)  # (also the first walk's runs: conservative for a first-walk work)
        return
    _break_runs(walk)


def _break_runs(walk: FrontierWalk) -> None:
    """A verdict that does not last stands here, outside the head and a crowded day's second
    walk: a first walk's run after a crowded day's stop ends (:func:`_after_tail`), and a
    fresh walk's run and the known run (``clean``) stop before it."""
    if walk.tail_tally and walk.tail_stop is None and not walk.tail_left:
        _after_tail(walk, False)
    if walk.segment == "fresh" and not walk.candidate_seen:
        walk.run_top = walk.run_end = None
        walk.run_tally = {}
    walk.clean = False


def _landed_past(walk: FrontierWalk, work: Work) -> bool:
    """Whether ``work`` lies at or before the mark the segment landed after (its walk's
    order, date sorts): the known run's end or the sweep, examined by the jobs before —
    the known run's verdicts already in the frontier's tally.

    The first walk never hands such a work (the landing page and the pages after it leave
    them out: :func:`~curaflow.sources.pixiv.frontier.walk.on_page`), and since 2026-12-05i
    a crowded day's second walk ends at that mark (:func:`tail_pass`); a second walk of a
    checkpoint written before went on up to the first walk's last listed work, over them.
    """
    mark = walk.skip
    if walk.phase != "segment" or walk.segment == "fresh" or mark is None or walk.plan.sort not in DATE_SORTS:
        return False
    here, there = _key(work.create_date, work.work_id), _key(mark.create_date, mark.work_id)
    return here >= there if walk.plan.sort == "date_desc" else here <= there


def _observe_landed_past(walk: FrontierWalk, reason: str | None) -> None:
    """A verdict on a work of the known run or the sweep read again (:func:`_landed_past`):
    nothing is recorded again (counted, its verdict joined the tally twice); a candidate
    still stops the runs after it (the jobs before took it for ruled out)."""
    if reason is None:
        walk.candidate_seen, walk.clean = True, False


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


def tail_pass(walk: FrontierWalk, stop: Work, *, max_offset: int) -> int | None:
    """The scan reads a crowded day from its other end, up to ``stop`` (the last work the
    first walk listed on it); where that second walk starts.

    That second walk reads the day's far end first: until it reaches ``stop`` the places
    between are not read, so its works move no mark (:func:`observe`: a mark there would
    record them as examined — before 2026-12-05e a fresh ``date_desc`` walk whose first
    candidate lay there set ``known`` past them, and a capped scan its sweep); their
    lasting verdicts join the runs once the day is read (:func:`tail_done`). Nor is its
    listing the head's: a head phase that reads one does not move the head. Its pages are
    checked at their seams as the first walk's (:func:`~curaflow.sources.pixiv.frontier.walk.on_tail_page`).

    A job that ended inside such a walk left its last work as ``Frontier.tail_sweep``
    (:func:`advance`): when it lies on ``stop``'s day before ``stop`` (in the walk's
    reverse order), the segment goes on after it — every place from the far end to it was
    read — with the verdicts of those works (``Frontier.tail_run``; None: one did not last,
    so the run cannot go over the day; nor can it for ``date_asc`` unless the day is
    before ``settled_before``: works added to a day not long over land on its far end).
    Before 2026-12-05g each job read the far end again from its first work, and jobs whose
    cap ran out there never got further.

    Where it ends (``walk.tail_stop``, which the scan reads up to): ``stop``, or — the
    segment landed after a mark (the known run's end, the sweep) on the day past ``stop``
    — that mark. Works added at the day's near end since the jobs before (the newest
    ``date_desc`` day still growing; works listed again on a ``date_asc`` day's oldest
    side) move the mark past the landing page (offset ``max_offset`` at most), which then
    lists only works before it: the places from the mark to ``stop`` were examined by the
    jobs before, the known run's verdicts in the frontier's tally. Before 2026-12-05i the
    walk read on to ``stop``, over them, and the tally counted them twice.

    Args:
        walk: the scan's walk (updated in place).
        stop: the first walk's last work listed on the day.
        max_offset: the source's deepest offset.

    Returns:
        The offset in the day's reverse listing to start at (the landing there: checked by
        :func:`~curaflow.sources.pixiv.frontier.walk.on_tail_page`), or None: its far end (0).
    """
    walk.tail_stop = Mark(work_id=stop.work_id, create_date=stop.create_date)
    stop_day = walk.tail_stop.day
    walk.tail_tally = {}
    walk.tail_gapless, walk.tail_broken, walk.tail_last = True, False, None
    walk.tail_skip, walk.tail_landing = None, False
    if walk.phase == "head":
        walk.head_whole = False
        return None
    landed = walk.skip
    if walk.segment != "fresh" and landed is not None and landed.day == stop_day and _before_stop(walk, landed):
        # The segment landed after a mark past the first walk's last listed work (works
        # added at the day's near end since — the newest day still growing, ``date_desc``
        # — moved the mark past the landing page, offset 5000 at most): the places from the
        # mark to ``stop`` are the known run's (or the sweep's), examined by the jobs before.
        # This walk ends at the mark: read on to ``stop``, it counted the known run's
        # verdicts again (before 2026-12-05i).
        walk.tail_stop = Mark(work_id=landed.work_id, create_date=landed.create_date)
    resume = walk.plan.tail_sweep
    if resume is None or resume.day != walk.tail_stop.day or not _before_stop(walk, resume):
        return None
    walk.tail_skip, walk.tail_landing = resume, True
    # ``date_asc``'s far end is the day's newest works: a day not long over may still gain
    # some there, above the stop this walk goes on from and unread — the run must not go
    # over the day then (the sweep still goes on past it; the end of results clears it).
    # ``date_desc``'s far end is the day's oldest: nothing is added there.
    closed = walk.plan.sort == "date_desc" or (walk.settled_before is not None and resume.day < walk.settled_before)
    if walk.plan.tail_run is None or not closed:
        _break_tail(walk)  # a verdict the jobs before read there does not last, or may be missed
    else:
        walk.tail_tally = dict(walk.plan.tail_run)
    return min(resume.index, max_offset) if resume.index > 0 else None


def _before_stop(walk: FrontierWalk, mark: Mark) -> bool:
    """Whether ``mark`` comes before the first walk's stop in the second walk's order."""
    stop = walk.tail_stop
    if stop is None:
        return False
    here, there = _key(mark.create_date, mark.work_id), _key(stop.create_date, stop.work_id)
    return here < there if walk.plan.sort == "date_desc" else here > there


def _break_tail(walk: FrontierWalk) -> None:
    """A verdict of the second walk that does not last: the runs cannot go over the day."""
    walk.tail_broken = True
    walk.clean = False
    walk.tail_tally = {}
    if walk.segment == "fresh" and not walk.candidate_seen:
        walk.run_top = walk.run_end = None
        walk.run_tally = {}


def tail_done(walk: FrontierWalk, *, whole: bool, left: list[str]) -> None:
    """The crowded day's second walk ended (``whole``: it reached the first walk's stop, the
    day read entirely; else a middle part no walk reaches was left, reported as a skipped
    day); the walk goes on with the next day once the works of its last page (``left``,
    their ids) are examined.

    Only a ``segment`` walk's end spends the stored ``Frontier.tail_sweep`` of its day
    (``tail_finished``, :func:`advance`): a head phase's second walk records nothing.

    A run of lasting verdicts the second walk did not break goes on over the day once the
    walk examines a lasting work after it: the day's verdicts (``tail_tally``) then join the
    run — a fresh walk's run, and the known run only when the day was read whole (the
    middle of a day out of reach ends it, as it always did). Until then no mark lies past
    the first walk's stop: a scan that ends here leaves the day's far end to be read again.
    """
    if walk.tail_stop is None:
        return
    if not whole:
        walk.clean = False
    sweep = walk.plan.tail_sweep
    if walk.phase == "segment" and (sweep is None or walk.tail_finished != sweep.day):
        # The day of the stored ``Frontier.tail_sweep`` stays once its walk ended: a later
        # crowded day's walk ending in the same scan does not bring the spent mark back
        # (before 2026-12-05h it did, and a stale ``tail_run`` None kept the known run off
        # that day for every job after, each reading the whole day again). A head phase's
        # own second walk (more than a walk's works added above the head on its day) goes
        # on from no mark and records nothing: it spends none (before 2026-12-05i its end
        # cleared the mark of its day, and a job whose segment ended before its own second
        # walk there left the next to read the far end again from its start).
        walk.tail_finished = walk.tail_stop.day
    walk.tail_stop, walk.tail_left = None, list(left)


def _in_tail(walk: FrontierWalk, work: Work) -> bool:
    """Whether ``work`` was listed by a crowded day's second walk (it comes after the
    first walk's stop in the walk's order, or is left from its last page)."""
    if work.work_id in walk.tail_left:
        walk.tail_left.remove(work.work_id)
        return True
    return _after_stop(walk, work)


def _after_stop(walk: FrontierWalk, work: Work) -> bool:
    """Whether ``work`` comes after the first walk's stop (``walk.tail_stop``) in the walk's
    order: a work of a crowded day's second walk under way."""
    stop = walk.tail_stop
    if stop is None:
        return False
    here, there = _key(work.create_date, work.work_id), _key(stop.create_date, stop.work_id)
    return here < there if walk.plan.sort == "date_desc" else here > there


def _observe_in_tail(walk: FrontierWalk, work: Work, reason: str | None, held: bool, mark: Mark) -> None:
    """A verdict on a work of a crowded day's second walk: no mark moves (the places
    between it and the first walk's stop are not read yet); a verdict that does not last
    breaks the runs, a lasting one waits in ``tail_tally`` (:func:`tail_done`). The last
    work examined before any candidate, its pages read without a gap, is where the next
    job's second walk goes on (``tail_last``, :func:`advance`)."""
    head = walk.work_in_head(work.work_id)
    if walk.seam_gap:
        walk.candidate_seen = walk.candidate_seen or reason is None
        return
    if head:
        if not held:  # the head cannot move above a work that may change (nor does it, the
            walk.head_broken = True  # listing being the day's other end: tail_pass)
            walk.head_top, walk.head_tally = None, {}
        return
    if _landed_past(walk, work):
        _observe_landed_past(walk, reason)
        return
    if reason is None or walk.candidate_seen:
        # A candidate (or a work after one): this walk's runs stop before it, but what the
        # next job goes on from — ``tail_last``, the last work before it, and the verdicts up
        # to there (``tail_tally``, ``tail_broken``) — is the works before it. Before
        # 2026-12-05h a candidate there broke the carried run: the next job's run could not
        # go over the day, and the job after read its far end again from its start.
        walk.candidate_seen = True
        walk.clean = False
        return
    if walk.tail_gapless and walk.phase == "segment":
        walk.tail_last = mark
    if not held:
        _break_tail(walk)
        return
    assert reason is not None
    _count(walk.tail_tally, reason)


def _after_tail(walk: FrontierWalk, held: bool) -> None:
    """The first work examined after a crowded day's second walk ended (:func:`tail_done`):
    a lasting one carries the runs the day did not break over it, with the day's verdicts."""
    if held:
        if walk.segment == "fresh" and not walk.candidate_seen and walk.run_end is not None:
            walk.run_tally = _merge(walk.run_tally, walk.tail_tally)
        if walk.clean:
            walk.clean_tally = _merge(walk.clean_tally, walk.tail_tally)
    walk.tail_tally = {}


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
        # Apart unless the walk began on a plan that was not (a checkpoint of an earlier release).
        new = Frontier(sort=sort, hidden_apart=plan.hidden_apart)
        if sort == "date_desc":
            new.head, new.known = walk.run_top, walk.run_end
            new.seen = walk.first  # the top: read from there down to the run without a gap
            new.tally = dict(sorted(walk.run_tally.items())) if walk.run_end is not None else {}
        elif walk.known_end is not None:
            new.known = walk.known_end
            new.tally = dict(sorted(walk.clean_tally.items()))
        if capped and walk.last is not None and walk.last != new.known:
            new.sweep = walk.last
            if sort == "date_desc" and new.head is None:
                new.head = walk.first  # nothing lasting above the stop: the head is where this walk began
        if new.head is None:
            new.seen = None
        _advance_tail(walk, new, exhausted=exhausted)
        return new
    new = plan.model_copy(deep=True)
    if walk.revisit_at is not None:
        # The next page of the cycle (walk.revisit_offset keeps its last page ending at
        # the mark), or the top again once this page reached the mark.
        ahead = walk.revisit_at + PAGE
        new.revisit = ahead if plan.known is not None and ahead < plan.known.index else 0
    if sort == "date_desc" and plan.head is not None:
        _advance_head(walk, new, capped=capped, exhausted=exhausted)
    if walk.phase in ("head", "revisit") and not walk.head_entered:
        return new  # the scan ended before the known run: nothing else learnt
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
    _advance_tail(walk, new, exhausted=exhausted)
    if exhausted:
        new.sweep = None
    # A sweep the known run overtook is dropped. ``popular_desc`` compares places, which
    # works deleted above move: only marks of this walk's listing compare (the known run
    # moved here). Else the sweep is this walk's stop, examined after the known mark — a
    # place above the stale mark's once works above were deleted, and dropped before
    # 2026-12-05f: a job capped on a held work there left the next to read it to the same
    # cap again, for ever.
    comparable = sort in DATE_SORTS or new.known != plan.known
    if comparable and new.sweep is not None and new.known is not None and not _later(new.sweep, new.known, sort):
        new.sweep = None
    return new


def _advance_tail(walk: FrontierWalk, new: Frontier, *, exhausted: bool) -> None:
    """Where the next job's second walk over a crowded day goes on (``Frontier.tail_sweep``).

    A scan that ended inside that walk (before it met the first walk's stop, or with works
    of its last page unexamined) leaves its last work examined there before any candidate,
    its pages read without a gap (``walk.tail_last``), and those works' verdicts while every
    one lasted (``tail_run``, the stored run it went on from included). A second walk over
    the day that ended, or a scan that read the source to its end, clears it; so does a
    known run or sweep past it (the next job does not read that day's far end).
    """
    inside = walk.tail_stop is not None or bool(walk.tail_left)
    if inside and walk.tail_last is not None:
        new.tail_sweep = walk.tail_last
        new.tail_run = None if walk.tail_broken else dict(sorted(walk.tail_tally.items()))
    elif exhausted or (new.tail_sweep is not None and walk.tail_finished == new.tail_sweep.day):
        new.tail_sweep, new.tail_run = None, None
    sort = new.sort
    for mark in (new.known, new.sweep):
        if new.tail_sweep is not None and mark is not None and _later(mark, new.tail_sweep, sort):
            new.tail_sweep, new.tail_run = None, None


def _advance_head(walk: FrontierWalk, new: Frontier, *, capped: bool, exhausted: bool) -> None:
    """What a ``date_desc`` head phase leaves: the head, and where a capped one stopped.

    The head moves up only over a head region examined whole: every work listed from the
    phase's start (the top, or ``plan.head_sweep``) down to ``plan.head`` examined, its
    pages read without a gap, to the newest work of the lasting run that ends at
    ``plan.head`` — carried over from the capped jobs before (``plan.head_run``) when this
    one resumed below their stop and met only lasting verdicts. A head phase the cap
    stopped leaves where it stopped (``head_sweep``) and the lasting run ending there
    (``head_run``): the next job reads on from there, not the same top again. A phase that
    read from the top without a gap down to the head, or down to ``plan.seen``, moves
    ``seen`` up to the top (:func:`~curaflow.sources.pixiv.frontier.walk.read_again`).
    """
    plan = walk.plan
    run: Mark | None = None
    run_tally: dict[str, int] = {}
    if walk.head_whole and not walk.unread_at_head:
        if walk.head_resumed and not walk.head_broken and plan.head_run is not None:
            run, run_tally = plan.head_run, _merge(plan.head_run_tally, walk.head_tally)
        elif walk.head_top is not None:
            run, run_tally = walk.head_top, dict(sorted(walk.head_tally.items()))
    done = walk.head_entered and not walk.head_ids  # every head work down to plan.head examined
    # The top from which this phase, with the capped phases it went on from, read the head
    # region without a gap (None: a gap, or a phase that went on from a stop no such chain
    # left — a frontier stored before ``head_sweep_top``).
    top = None
    if walk.head_whole:
        top = plan.head_sweep_top if walk.head_resumed else walk.head_first
    if done or exhausted:
        new.head_sweep, new.head_run, new.head_run_tally, new.head_sweep_top = None, None, {}, None
        if done and run is not None:
            new.head = run
            new.tally = _merge(new.tally, run_tally)
        stop, head = walk.head_stop, new.head
        if (
            done
            and capped
            and walk.first is None
            and stop is not None
            and head is not None
            and _key(stop.create_date, stop.work_id) > _key(head.create_date, head.work_id)
        ):
            # The cap ran out as the head phase ended, before any work past the head: the
            # next job goes on from its last head work (the region above it is read again
            # by the job after), or it would read the same region to the same cap again
            # — for ever, when the region is a page plus the cap (before 2026-12-05f).
            new.head_sweep, new.head_sweep_top = stop, top
    elif capped and walk.head_stop is not None:
        new.head_sweep, new.head_run = walk.head_stop, run
        new.head_run_tally = run_tally if run is not None else {}
        new.head_sweep_top = top
    if top is not None:
        # Read from the top without a gap down to the head, or down to ``plan.seen``
        # (examined before down to the head): every place from the top down was examined
        # — by this phase, or by the phases capped inside the region it went on from.
        stop, seen = walk.head_stop, plan.seen
        reached_seen = (
            stop is not None
            and seen is not None
            and _key(stop.create_date, stop.work_id) <= _key(seen.create_date, seen.work_id)
        )
        if (done or reached_seen) and (
            seen is None or _key(top.create_date, top.work_id) >= _key(seen.create_date, seen.work_id)
        ):
            new.seen = top
