"""The frontier's models: what the ledger stores of a target's walk, what a scan keeps of it.

:class:`Mark` (a work examined and its place), :class:`Frontier` (the stored memory),
:class:`FrontierWalk` (a scan's progress against it, in the scan checkpoint),
:class:`Jump` and :class:`PageStep` (what the walk does next); the app-api's page size
and the walk's order by creation time. See :mod:`curaflow.sources.pixiv.frontier`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

from curaflow.domain.models import Work

#: The app-api's page size.
PAGE = 30
#: Step backs at unchecked seams one scan takes (:attr:`FrontierWalk.seam_steps`) before it
#: goes on past the next one without checking it, recording nothing from there.
MAX_SEAM_STEPS = 8
#: Sorts that walk by creation time (a mark is found again by its day and time).
DATE_SORTS = ("date_desc", "date_asc")


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
        head_sweep: ``date_desc``: where a scan capped in the head phase stopped, above
            ``head``: the next job's head phase goes on from there instead of the top
            (also when the cap ran out as the phase reached ``head``, before any work past
            it: the next job then goes on past the head).
        head_run / head_run_tally: the newest work of the run of lasting verdicts, read
            without a gap, that ends at ``head_sweep`` (None: the stop was not lasting), and
            its works by reason word: the head moves up to it once a later head phase reads
            from ``head_sweep`` down to ``head`` with lasting verdicts only.
        head_sweep_top: the top of the head phase that began from the top and stopped at
            ``head_sweep`` when it, and every phase since that went on from a stop, read
            its pages without a gap (None: not so, or no ``head_sweep``): the phase that
            goes on from ``head_sweep`` down to ``head`` (or down to ``seen``) makes it
            ``seen`` — capped phases between them examined every place from that top down.
        seen: ``date_desc``: the newest work a job examined from which every place down to
            ``head`` was examined by some job (the top of the last head phase that read its
            region whole, or of the fresh walk): a head work at or below it is read again,
            not a new place (:func:`read_again`). None: every head work counts as new (a
            frontier stored before the field existed, until its next whole head phase).
            Phases capped inside the head region that go on from each other's stop
            (``head_sweep``) read it whole together: the last of them sets ``seen`` to the
            top of the first (``head_sweep_top``; before 2026-12-05f only a single phase
            did, so works held back on top at least as many as the cap, a whole multiple of
            it, stayed new places for ever and every job was capped among them).
        tail_sweep / tail_run: a crowded day's second walk (the day read from its far end,
            :func:`tail_pass`) that a job left before it met the first walk's stop: its last
            work examined before any candidate, ``index`` its place from the day's far end
            in that walk's reverse order — every place from the far end to it was read, its
            pages' seams checked, by that job or by the jobs before it that went on from
            each other's ``tail_sweep`` — and those works' verdicts by reason word when
            every one lasted (None: one did not). The next job's second walk over that day
            goes on after it (a landing checked as the first walk's), the run over the day
            carried with ``tail_run``; cleared once a second walk over the day ends, or the
            scan reaches the end of results. None in a frontier stored before the fields:
            the second walk reads from the far end (as before 2026-12-05g, when jobs
            capped there read the same far end again for ever).
        revisit: ``popular_desc``: the offset of the page of the known part the next job
            reads again (in turn from the top; a page past ``known.index − 30`` is read
            there, so the cycle's last page ends at the mark: :func:`revisit_offset`).
        tally: the works of the known run by the reason word that ruled each out
            (``duplicate``, ``refused``, ``filtered:r18`` …): a scan that does not read
            the run again reports them as known (``CandidateReport.known``), so its
            tally — and its cell's reason — is the one a scan reading them would give.
        hidden_apart: True in every frontier written since 2026-12-06, when a work hidden
            from the account (``hidden``: a placeholder of its display settings, of its
            relation to the artist, or one never seen) stopped being a lasting verdict —
            its runs pass no such work. A stored frontier without the field was written
            when such a work was ``unavailable``, lasting: one whose runs counted an
            ``unavailable`` (:func:`counted_unavailable`) may have passed a hidden work for
            good, and is read as a fresh start (:func:`~curaflow.sources.pixiv.frontier.read`).
            False in a frontier left by a walk that began from such a frontier before it was
            read so — a walk an attempt of an earlier release checkpointed, resumed by this
            one (:class:`FrontierWalk`): the frontier it leaves keeps its runs, and is read
            as a fresh start too.
    """

    sort: str
    head: Mark | None = None
    known: Mark | None = None
    sweep: Mark | None = None
    head_sweep: Mark | None = None
    head_run: Mark | None = None
    head_run_tally: dict[str, int] = Field(default_factory=dict)
    head_sweep_top: Mark | None = None
    seen: Mark | None = None
    tail_sweep: Mark | None = None
    tail_run: dict[str, int] | None = None
    revisit: int = 0
    tally: dict[str, int] = Field(default_factory=dict)
    hidden_apart: bool = True


#: A stored frontier's runs: the known run's ``tally``, a capped head phase's
#: ``head_run_tally``, a crowded day's far end's ``tail_run``.
FRONTIER_RUNS = ("tally", "head_run_tally", "tail_run")
#: A walk's runs (:class:`FrontierWalk`): what it counted of the works it met, by reason word.
WALK_RUNS = ("run_tally", "clean_tally", "head_tally", "revisit_tally", "tail_tally")


def counted_unavailable(stored: dict[str, Any]) -> bool:
    """Whether the JSON of a frontier (:data:`FRONTIER_RUNS`) or of a walk's runs
    (:data:`WALK_RUNS`) counts an ``unavailable`` in one of them: before 2026-12-06 a work
    hidden from the account was told so, and such a run may have passed one for good
    (:attr:`Frontier.hidden_apart`). Anything but a mapping of counts counts nothing."""
    for name in (*FRONTIER_RUNS, *WALK_RUNS):
        run = stored.get(name)
        if isinstance(run, dict):
            count = run.get("unavailable")
            if isinstance(count, int) and not isinstance(count, bool) and count > 0:
                return True
    return False


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
        head_whole: every head page was listed without a gap after the one before it (the
            last work of a page is listed again at the start of the next; the first page is
            the top, or the landing page of ``plan.head_sweep``). False in a checkpoint
            written before the field existed: that walk does not move the head.
        head_edge: the last work listed on the previous head page (None: no page yet).
        head_stop: the last head work examined (a capped head phase's ``head_sweep``).
        head_first: the first head work examined (the top, unless the phase resumed):
            ``Frontier.seen`` once the phase read its region whole.
        reread: head works read again that did not count against ``pixiv.max_examined``
            (at most :data:`PAGE` a job: :func:`read_again`).
        head_resumed / head_broken: the head phase started from ``plan.head_sweep``; it
            examined a head work whose verdict does not last.
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
        seam_id / seam / seam_back: ``segment`` pages before the first candidate: the last
            item listed on the previous page (its id; a work the source should never have
            sent included) and its last work, when the next page was asked one place
            early (None: the next page is not checked — the first of a pass, a landing
            page, or after a candidate); the step backs taken at that seam. The next page
            must list the item again (date sorts: or start at or before that work), else
            it is asked again earlier (:func:`on_page`; a crowded day's second walk:
            :func:`on_tail_page`, in its reverse order), so the walk never records a place
            as examined that it did not read. None in a checkpoint written before the
            fields existed: its next page is not checked (as before).
        seam_steps / seam_gap: the step backs the whole scan took (at most
            :data:`MAX_SEAM_STEPS`), and whether it went on past a seam it could not
            check — a source whose pages never list the previous page's last item (one
            that ignores the offset it is asked) would otherwise be asked the same pages
            for ever, each step back landing on a page the seam passes and the next page
            failing it again. From a gap on, the walk records nothing as examined: no
            fresh run, no known run, no sweep past it (:func:`observe`); the next job
            reads from there.
        tail_stop / tail_tally / tail_left: while a crowded day is read from its other end (the
            scan's second walk over it, :func:`tail_pass`), the work where the first walk
            stopped — or the mark the segment landed after, when it lies past that work (the
            places between examined by the jobs before): the scan reads up to it — and the
            lasting verdicts of the works read since (up to its first
            candidate: the works after it are no part of what the next job goes on
            from). That walk reads the
            day's far end first, the places between it and ``tail_stop`` not read yet: its
            works move no mark (no run, known run, sweep or head stop is taken there), their
            verdicts wait in ``tail_tally`` and join the runs only once the day is read to
            ``tail_stop`` (:func:`tail_done`); ``tail_left``: the works of that walk's last
            page still to examine once it ended. None in a checkpoint written before the
            fields existed: its works are taken as before.
        tail_gapless / tail_broken / tail_last / tail_finished: the second walk began
            (:func:`tail_pass`) with its pages' seams checked (False in a checkpoint written
            before the field: it leaves no ``Frontier.tail_sweep``); one of its works — or
            the stored run it went on from (``Frontier.tail_run`` None) — read before any
            candidate had a verdict that does not last (a candidate stops this walk's runs
            through ``clean``, not the run carried to the next job); its last work examined
            before any candidate, with no seam gap (``Frontier.tail_sweep`` when the scan
            ends inside that walk); the day whose second walk ended in this scan — the
            ``Frontier.tail_sweep``'s day once its walk ended, whatever crowded days' walks
            end after it; the segment's walks only, a head phase's recording nothing
            (:func:`tail_done`).
        tail_skip / tail_landing: the ``Frontier.tail_sweep`` the second walk goes on
            after, and whether its next page is the landing there (checked: it must start
            at or before the mark, else it is asked a page earlier).
        placed: ids of the last page's works a date-sorted search listed without a creation
            date curaflow reads (examined ``invalid``): their ``create_date`` is placed by
            their neighbours', so no order is read from it — such a work is passed over at a
            mark only when a dated work listed after it is, never ends a head phase, and is
            never a mark nor part of a run (:func:`~curaflow.sources.pixiv.frontier.observe`):
            the next job reads it again. Empty in a checkpoint written before the field.
        edge_unread: items with no id curaflow reads listed after the previous page's edge
            (``head_edge`` / ``seam_id``: its last item with one), asked again with it on the
            next page and passed over there (:func:`repeated_on`). 0 in a checkpoint written
            before the field (the edge was the last item whatever it was).
        unread_after: the work to examine such an item is listed just after (the last of its
            page's): once it is examined, the item stands before the next one
            (``unread_next``). None in a checkpoint written before the field.
        unread_at_head: a ``date_desc`` head phase reached ``plan.head`` with such an item
            listed between its last head work and the head's mark: no work after it is
            examined in the phase, so nothing breaks the head's run there — the head does
            not move this job (:func:`~curaflow.sources.pixiv.frontier.learning._advance_head`).
            Until 2026-12-05 (evening) the head moved up over the item, and once readable it
            was never read again. False in a checkpoint written before the field.
        unread_before / unread_next: where the items of the pages taken with no id curaflow
            reads stand (:func:`~curaflow.sources.pixiv.frontier.unreadable`): the ids of
            the works to examine that such an item is listed just before, and whether one
            is listed after the last of them (it stands before the next work examined,
            whatever page lists it). Each breaks every run there, as a verdict that does
            not last, when that work is examined (:func:`~curaflow.sources.pixiv.frontier.observe`).
            Empty / False in a checkpoint written before the fields (such a page then set
            ``seam_gap``).
    """

    plan: Frontier
    settled_before: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _plan_of_an_earlier_release(cls, data: Any) -> Any:
        """A walk read from a checkpoint an earlier release saved (its ``plan`` without
        ``hidden_apart``), which told a work hidden from the account ``unavailable``,
        lasting: its plan is the frontier as stored then, never read by
        :func:`~curaflow.sources.pixiv.frontier.read`, and its own runs (:data:`WALK_RUNS`)
        counted what it met before the checkpoint. When either counted an ``unavailable``
        (:func:`counted_unavailable`) the plan is kept ``hidden_apart`` false, and so is
        the frontier the resumed walk leaves (:func:`~curaflow.sources.pixiv.frontier.advance`):
        it is read as a fresh start."""
        if isinstance(data, dict):
            plan = data.get("plan")
            if isinstance(plan, dict) and "hidden_apart" not in plan:
                runs = {name: data.get(name) for name in WALK_RUNS}
                apart = not counted_unavailable(plan) and not counted_unavailable(runs)
                data = {**data, "plan": {**plan, "hidden_apart": apart}}
        return data

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
    head_whole: bool = False
    head_edge: str | None = None
    head_stop: Mark | None = None
    head_first: Mark | None = None
    reread: int = 0
    head_resumed: bool = False
    head_broken: bool = False
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
    seam_id: str | None = None
    seam: Mark | None = None
    seam_back: int = 0
    seam_steps: int = 0
    seam_gap: bool = False
    tail_stop: Mark | None = None
    tail_tally: dict[str, int] = Field(default_factory=dict)
    tail_left: list[str] = Field(default_factory=list)
    tail_gapless: bool = False
    tail_broken: bool = False
    tail_last: Mark | None = None
    tail_finished: str | None = None
    tail_skip: Mark | None = None
    tail_landing: bool = False
    placed: list[str] = Field(default_factory=list)
    edge_unread: int = 0
    unread_before: list[str] = Field(default_factory=list)
    unread_next: bool = False
    unread_at_head: bool = False
    unread_after: str | None = None

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
        overlap: ask the next page this many places before the offset the source gives
            (one: ``date_desc`` head pages, and ``segment`` pages before the first
            candidate; its first item, the last of this page, proves there was no gap).
    """

    works: list[Work]
    refetch: int | None = None
    jump: Jump | None = None
    overlap: int = 0


def _key(create_date: str | None, work_id: str) -> tuple[str, int]:
    return (create_date or "", int(work_id))
