"""Date windows past offset 5000, and a crowded day read from its other end.

See :mod:`curaflow.sources.pixiv.scan` ("Deep paging", "A crowded day").
"""

from __future__ import annotations

from datetime import date, timedelta

from curaflow.domain.models import SkippedDay, Work
from curaflow.sources.base import SkippedDayHook
from curaflow.sources.pixiv import frontier as fr
from curaflow.sources.pixiv.client import MAX_OFFSET, offset_of
from curaflow.sources.pixiv.scan.checkpoint import ScanCheckpoint, TailPass


def last_offset(cp: ScanCheckpoint) -> int:
    """The deepest offset the app-api pages for this scan: :data:`MAX_OFFSET`, or below the
    lowest offset it refused naming ``offset`` alone (``cp.refused_offset``: Pixiv lowered
    its limit, decision 2026-12-07). A page past it is never asked: the walk moves its
    window, reads a crowded day from its other end, or ends its pages there."""
    if cp.refused_offset is None:
        return MAX_OFFSET
    return min(MAX_OFFSET, cp.refused_offset - 1)


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
    cp.stepped_over = None
    cp.listed_before, cp.listed_at = [], None
    cp.taken = []
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


def _start_tail(cp: ScanCheckpoint, last: Work) -> int | None:
    """The whole pass stayed on ``last``'s day up to the cap: read the rest of it from its
    other end, up to ``last`` — or up to the mark the walk landed after, when the frontier
    ends the walk there (:func:`~curaflow.sources.pixiv.frontier.tail_pass`: the mark
    lies past ``last``, the places between examined by the jobs before). Returns the
    offset that walk starts at when the frontier has it go on where the last job's stopped
    (None: its far end, offset 0)."""
    cp.tail = TailPass(
        day=_day(last), stop_date=last.create_date or "", stop_id=int(last.work_id), reached=cp.day_count
    )
    cp.boundary_day, cp.boundary_ids = None, []
    _new_pass(cp)
    if cp.walk is None:
        return None
    at = fr.tail_pass(cp.walk, last, max_offset=last_offset(cp))
    end = cp.walk.tail_stop
    if end is not None and end.work_id != last.work_id:
        cp.tail.stop_date, cp.tail.stop_id = end.create_date or "", int(end.work_id)
    if at is not None:
        cp.tail.reached += at  # read by the jobs before, from the far end
    return at


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
    if cp.walk is not None:
        fr.tail_done(cp.walk, whole=whole, left=[w.work_id for w in cp.pending])
    key = "end_date" if sort == "date_desc" else "start_date"
    cp.window = {**cp.window, key: _shift_day(tail.day, -1 if sort == "date_desc" else 1)}
    cp.window_moves += 1
    cp.tail = None
    _new_pass(cp)


def _tail_page(
    cp: ScanCheckpoint, sort: str, works: list[Work], next_url: str | None, on_skipped_day: SkippedDayHook | None
) -> None:
    """Take the works of a tail page that the first walk did not reach; end the tail where it
    met it (at a dated work: a work whose date was placed by its neighbours, ``cp.placed``,
    may lie on either side of the stop — it is taken, and the dated work after it decides)."""
    tail = cp.tail
    assert tail is not None
    stop = (tail.stop_date, tail.stop_id)
    keep: list[Work] = []
    met = False
    for work in works:
        if work.work_id in cp.placed:
            keep.append(work)
            continue
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
    elif offset_of(next_url) > last_offset(cp):
        _end_tail(cp, sort, whole=False, on_skipped_day=on_skipped_day)
    else:
        cp.next_url, cp.next_from_source = next_url, True
