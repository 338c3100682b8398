"""The scan's loop: examine fetched works until enough candidates are held, checkpoint
after each page, leave the frontier for the next job.

See :mod:`curaflow.sources.pixiv.scan`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime

from curaflow.domain.fallback import WANT
from curaflow.domain.messages import TargetSpec
from curaflow.domain.models import Work
from curaflow.sources.base import KnownHook, SkippedDayHook
from curaflow.sources.paging import count_examined
from curaflow.sources.pixiv import frontier as fr
from curaflow.sources.pixiv.client import MAX_OFFSET, PixivClient
from curaflow.sources.pixiv.filters import reject_reason
from curaflow.sources.pixiv.scan.checkpoint import ScanCheckpoint
from curaflow.sources.pixiv.scan.pages import _fetch_page, _jump
from curaflow.sources.pixiv.scan.retrieval import _empty_window


def _examine(cp: ScanCheckpoint, work: Work, reason: str | None) -> None:
    """Count one examined work (:func:`~curaflow.sources.paging.count_examined`) after
    noting its day and telling the frontier walk."""
    day = (work.create_date or "")[:10]
    if day != cp.last_day:
        cp.last_day, cp.last_day_ids = day, []
    cp.last_day_ids.append(work.work_id)
    if cp.walk is not None:
        if fr.read_again(cp.walk, work):
            cp.uncapped += 1  # read again (a known page, the head): not counted against max_examined
        fr.observe(cp.walk, work, reason)
    count_examined(cp, work, reason)


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
    now: datetime | None = None,
) -> ScanCheckpoint:
    """Run (or resume) the scan of ``target``.

    Args:
        client: the source client (its gate spaces the requests).
        scan_limit: most candidates kept (1..100; the stage's bound).
        known: given work ids, returns those the ledger rules out for this target
            with the reason word (one ledger query per page,
            :func:`~curaflow.ledger.remembered.known_works`): ``duplicate`` (already
            delivered on one of its routes), ``in_flight`` (held there by another open
            job), ``refused`` (a route refused
            it for good) or ``unavailable`` (found gone by an earlier job).
        on_page: awaited with the checkpoint after each page that another page follows.
        checkpoint: the resume point of a previous attempt.
        max_examined: most works examined in one scan (those the frontier reads again —
            ``popular_desc``'s revisit page, up to a page of a ``date_desc`` head examined
            before — are not counted: ``cp.uncapped``, :func:`~curaflow.sources.pixiv.frontier.read_again`).
        want: stop once this many candidates are held (default ``min(scan_limit, WANT)``).
        unavailable: works this cell already found unavailable (rejected as such).
        on_skipped_day: called once for each day the source cannot page fully.
        frontier: the target's frontier for this fingerprint (an empty
            :class:`~curaflow.sources.pixiv.frontier.Frontier` when none is stored yet;
            None: keep none). Used when the scan starts (a resumed checkpoint keeps its walk).
        settled_before: the day (``YYYY-MM-DD``, UTC) before which a ``min_bookmarks``
            rejection is lasting (:func:`curaflow.sources.pixiv.frontier.lasting`).
        now: when the scan runs (None: the clock's): a target's ``duration`` reaches back
            from it (:func:`~curaflow.sources.pixiv.scan.pages.outside_duration`).

    Returns:
        The final checkpoint: ``candidates`` in rank order, the ``report`` and, with a
        frontier, the ``frontier`` it leaves for the next job (its JSON, as stored).

    Raises:
        SourceError: a source call failed, or an empty answer came where the scan knows a
            work stands and nothing says it went (the attempt fails; the checkpoint
            survives).
    """
    cp = checkpoint or ScanCheckpoint()
    if checkpoint is None and frontier is not None and fr.applies(target):
        cp.walk, jump = fr.begin(frontier, target.query.sort, max_offset=MAX_OFFSET, settled_before=settled_before)
        if jump is not None:
            _jump(cp, jump)
    excluded = set(target.exclude_work_ids)
    gone = unavailable or set()
    want = min(scan_limit, want if want is not None else WANT)
    while len(cp.candidates) < want and not cp.capped(max_examined):
        if not cp.pending:
            if not cp.pages_done and not cp.started and _empty_window(target, cp):
                cp.pages_done = True  # the window moved past the target's dates: nothing left
            if cp.pages_done:
                cp.exhausted = True
                break
            await _fetch_page(client, target, cp, on_skipped_day, now)
            continue
        batch, cp.pending = cp.pending, []
        ids = [w.work_id for w in batch]
        ruled_out = await known(ids)
        held = {w.work_id for w in cp.candidates}
        for i, work in enumerate(batch):
            if cp.capped(max_examined) or len(cp.candidates) >= scan_limit:
                cp.pending = batch[i:]
                break
            if work.work_id in held:
                # Listed again (in this page, or pages after its first listing): examined
                # once, left out as the previous page's items are (_fetch_page); a second
                # candidate of it was bound again once its fetch released it (2026-12-07).
                continue
            if work.work_id in ruled_out:
                reason: str | None = ruled_out[work.work_id]
            elif work.work_id in gone:
                reason = "released"  # this cell released it; what lasts is the account's memory, read first
            elif work.work_id in cp.unread:
                reason = "invalid"  # fields not recognised (pages._parse_page): this job's, not lasting
            else:
                reason = reject_reason(work, target, excluded)
            _examine(cp, work, reason)
            if reason is None:
                held.add(work.work_id)
        cp.report.fetched, cp.report.read_again = cp.examined, cp.uncapped
        cp.report.pages = cp.pages
        cp.exhausted = cp.pages_done and not cp.pending
        if not cp.exhausted and len(cp.candidates) < want and not cp.capped(max_examined):
            # More works follow: checkpoint so a retried attempt resumes there. A scan
            # that ends here is bound right away; nothing to resume.
            await on_page(cp)
    cp.report.fetched, cp.report.read_again = cp.examined, cp.uncapped
    cp.report.pages = cp.pages
    cp.report.exhausted = cp.exhausted
    cp.candidates = cp.candidates[:scan_limit]
    if cp.walk is not None:
        capped = not cp.exhausted and not cp.candidates and cp.capped(max_examined)
        cp.frontier = fr.advance(cp.walk, capped=capped, exhausted=cp.exhausted).model_dump(mode="json")
        cp.report.known = fr.known_tally(cp.walk)
    return cp
