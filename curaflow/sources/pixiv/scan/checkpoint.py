"""Where a Pixiv scan is: :class:`ScanCheckpoint` (persisted after every page) and
:class:`TailPass` (the second walk over a crowded day).

See :mod:`curaflow.sources.pixiv.scan`.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from curaflow.sources.base import ScanState
from curaflow.sources.pixiv import frontier as fr
from curaflow.sources.pixiv.client.constants import PAGE_SIZE


class TailPass(BaseModel):
    """The second walk over a crowded day, from its other end.

    Attributes:
        day: the day (``YYYY-MM-DD``).
        stop_date / stop_id: the last work the first walk fetched on that day — or the
            mark the frontier's walk landed after, when it lies past that work
            (:func:`~curaflow.sources.pixiv.frontier.tail_pass`); the tail takes the works
            before it in the reversed order, and stops there.
        reached: works of the day fetched so far by both walks.
    """

    day: str
    stop_date: str
    stop_id: int
    reached: int = 0


#: Most items with no id curaflow reads one scan with a frontier examines without counting
#: them against ``pixiv.max_examined`` (a page of them): so the works after them are
#: examined and the sweep moves past them, while a job still reads at most about one page
#: more than its cap allows (decision 2026-12-05k).
UNREAD_FREE = PAGE_SIZE


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
            more works) or a seam's page asked again earlier (it stands before such a
            page), not a page curaflow chose (a frontier jump or a landing page asked
            again), so an empty answer to it is the source's failure (:func:`check_page`).
        stepped_over: the offset of the last page of this pass that came back empty where
            the page before promised it, and that the scan stepped back over (the results
            shrank: :func:`~curaflow.sources.pixiv.scan.pages._step_back_over_empty`); an
            empty page at or before it is the source's failure. None: none this pass.
        unread: ids of the fetched page's works whose fields curaflow does not recognise
            (:class:`~curaflow.sources.pixiv.client.InvalidWork` with a Pixiv id): each is
            in ``pending`` as a work of its id and creation date alone, examined
            ``invalid`` — a verdict that does not last (:func:`_parse_page`).
        placed: ids of the fetched page's works a date-sorted search listed without a
            creation date curaflow reads (also in ``unread``): their date is placed by
            their neighbours', for the day's bookkeeping only — they never meet a crowded
            day's stop (:func:`~curaflow.sources.pixiv.scan.days._tail_page`), and the walk
            is told (``FrontierWalk.placed``).
        listed_before / listed_at: the listing of the last page of this pass the scan took
            (every item's id, ``""`` for one curaflow does not read) and the offset it was
            asked at; a page asked past it listing the same works in the same order is the
            source's failure (:func:`~curaflow.sources.pixiv.scan.pages.moves_nowhere`).
            None: no page taken this pass (or a checkpoint written before the fields).
        taken: the works of the last page of this pass the first walk took (their ids and
            creation dates, a placed one's as placed), for the walk's last offset found only
            on the next page's refusal (:func:`~curaflow.sources.pixiv.scan.pages._past_last_offset`).
        refused_offset: the lowest offset of a page the app-api refused naming ``offset``
            alone in this scan (:class:`~curaflow.sources.pixiv.client.OffsetRefused`): the
            limit of its pages lies before it, below
            :data:`~curaflow.sources.pixiv.client.MAX_OFFSET` (Pixiv lowered it); no later
            pass asks it or past it (:func:`~curaflow.sources.pixiv.scan.days.last_offset`).
            None: none refused.
        unread_free: items with no id curaflow reads this scan examined ``invalid`` without
            counting them against ``pixiv.max_examined`` — the first
            :data:`UNREAD_FREE` of them, with a frontier walk (:meth:`capped`;
            ``scan.pages._count_invalid``). 0 in a checkpoint written before the field.
    """

    window: dict[str, str] = Field(default_factory=dict)
    seen_ids: list[str] = Field(default_factory=list)
    unread: list[str] = Field(default_factory=list)
    placed: list[str] = Field(default_factory=list)
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
    stepped_over: int | None = None
    listed_before: list[str] = Field(default_factory=list)
    listed_at: int | None = None
    taken: list[fr.Mark] = Field(default_factory=list)
    refused_offset: int | None = None
    unread_free: int = 0

    def capped(self, max_examined: int) -> bool:
        """Whether the scan has examined ``max_examined`` works that count against the
        cap: ``examined`` less ``uncapped`` (read again) and less ``unread_free`` (items
        with no id curaflow reads, up to :data:`UNREAD_FREE` a scan — decision 2026-12-05k:
        such an item can be no sweep mark, so a job whose cap they spent recorded no
        progress and the next read the same items to the same cap, for ever)."""
        return self.examined - self.uncapped - self.unread_free >= max_examined
