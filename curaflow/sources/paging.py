"""The generic candidate scan: for a source whose results are a plain list of pages.

A source that answers "page N of the results of this query, and where the next page
is" implements only that request (a :data:`PageFetch`) and gets the whole scan of a
cell from :func:`scan_pages`: works examined in rank order until ``want`` candidates
are held, the source runs out, or ``max_examined`` works were looked at; each work is
judged by the ledger (``known``: duplicate, refused, unavailable), by the cell's own
unavailable works and by the target's filters (:mod:`curaflow.sources.filters`); the
state is handed to ``on_page`` whenever more works follow, so a retried attempt resumes
with the next page (no page fetched twice, no work examined twice).

The rules of the end of results are the same as Pixiv's
(:func:`curaflow.sources.pixiv.scan.check_page`): only a page without a next cursor
ends the results, and an empty page that a cursor promised is the source's failure
(``remote_http_error``, retried).

A source's own errors inside a page are counted ``invalid`` and never become candidates:
a work whose id cannot name a file (:data:`WORK_ID`: no ``/``, no leading dot, at most
128 characters) and a work the source listed already (overlapping pages). Each still
counts as examined, so a source that repeats its pages for ever stops at ``max_examined``.

No frontier, no date windows: those are a source's own paging tricks (Pixiv's scan,
:mod:`curaflow.sources.pixiv.scan`).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from curaflow.domain.fallback import WANT
from curaflow.domain.messages import TargetSpec
from curaflow.domain.models import Work
from curaflow.domain.reasons import TerminalReason
from curaflow.domain.tally import DUPLICATE_WORDS
from curaflow.sources.base import ScanRequest, ScanState
from curaflow.sources.errors import SourceError
from curaflow.sources.filters import protocol_reason, reject_reason

#: At most this many rejected works are listed in ``report.filtered``.
FILTERED_CAP = 50

#: A work id the artifact store and the routes can use as a file and folder name; a work
#: with any other id is the source's error, counted ``invalid`` and never a candidate.
WORK_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")


@dataclass
class SourcePage:
    """One page of results as a source answered it.

    Attributes:
        works: the page's works, in rank order (already parsed and cleaned).
        next_url: the cursor of the next page (None: this is the last page).
        invalid: items of the page that were not usable works (counted ``invalid``).
    """

    works: list[Work] = field(default_factory=list)
    next_url: str | None = None
    invalid: int = 0


#: ``fetch(target, cursor)``: the page at ``cursor`` (None: the first page) of the
#: target's results. Raises :class:`~curaflow.sources.errors.SourceError`.
PageFetch = Callable[[TargetSpec, str | None], Awaitable[SourcePage]]
#: The source's eligibility rule: ``reject(work, target, excluded)`` → a reason word or None.
RejectRule = Callable[[Work, TargetSpec, set[str]], str | None]


def count_examined(cp: ScanState, work: Work, reason: str | None) -> None:
    """Count one examined work in ``cp``: a candidate (``reason`` None) or a rejection.

    The one tally of a scan, for every source: ``examined`` +1; a candidate joins
    ``candidates``; a rejection counts in ``report.rejected`` and ``report.reasons`` and,
    up to :data:`FILTERED_CAP`, is listed in ``report.filtered`` with its protocol word;
    any reason but ``duplicate`` or ``in_flight`` (a work another open job holds, counted
    like a duplicate) — and any candidate — clears ``all_duplicates``.
    """
    cp.examined += 1
    if reason is None:
        cp.candidates.append(work)
        cp.all_duplicates = False
        return
    if reason not in DUPLICATE_WORDS:
        cp.all_duplicates = False
    cp.report.rejected += 1
    cp.report.reasons[reason] = cp.report.reasons.get(reason, 0) + 1
    if len(cp.report.filtered) < FILTERED_CAP:
        cp.report.filtered.append({"work_id": work.work_id, "reason": protocol_reason(reason)})


async def _fetch(fetch: PageFetch, target: TargetSpec, cp: ScanState) -> None:
    promised = cp.started and cp.next_url is not None
    page = await fetch(target, cp.next_url if cp.started else None)
    if promised and not page.works and not page.invalid:
        raise SourceError(
            TerminalReason.REMOTE_HTTP_ERROR, "the source answered an empty page where its cursor promised more works"
        )
    cp.started = True
    cp.pages += 1
    if page.invalid:
        cp.examined += page.invalid
        cp.all_duplicates = False
        cp.report.rejected += page.invalid
        cp.report.reasons["invalid"] = cp.report.reasons.get("invalid", 0) + page.invalid
    cp.pending = list(page.works)
    cp.next_url = page.next_url
    cp.pages_done = page.next_url is None


async def scan_pages(
    fetch: PageFetch,
    target: TargetSpec,
    request: ScanRequest,
    checkpoint: ScanState | None = None,
    *,
    reject: RejectRule = reject_reason,
) -> ScanState:
    """Run (or resume) the scan of ``target`` over the pages ``fetch`` returns.

    Args:
        fetch: the source's page request.
        target: the effective target.
        request: bounds and ledger hooks (:class:`~curaflow.sources.base.ScanRequest`;
            ``frontier`` and ``on_skipped_day`` are not used).
        checkpoint: the state a previous attempt saved.
        reject: the source's eligibility rule (default: the generic filters).

    Returns:
        The final state: ``candidates`` in rank order (at most ``scan_limit``) and the
        ``report``.

    Raises:
        SourceError: a page request failed, or a promised page came back empty.
    """
    cp = checkpoint or ScanState()
    excluded = set(target.exclude_work_ids)
    gone = request.unavailable or set()
    want = min(request.scan_limit, request.want if request.want is not None else WANT)
    while len(cp.candidates) < want and not cp.capped(request.max_examined):
        if not cp.pending:
            if cp.pages_done:
                cp.exhausted = True
                break
            await _fetch(fetch, target, cp)
            continue
        batch, cp.pending = cp.pending, []
        held = {w.work_id for w in cp.candidates}
        ruled_out = await request.known([w.work_id for w in batch if WORK_ID.fullmatch(w.work_id)])
        for i, work in enumerate(batch):
            if cp.capped(request.max_examined) or len(cp.candidates) >= request.scan_limit:
                cp.pending = batch[i:]
                break
            if not WORK_ID.fullmatch(work.work_id) or work.work_id in held:
                # An id no file can be named after, or a work the source already listed
                # (its pages overlap): the source's error, still counted as examined so
                # a source repeating itself for ever stops at ``max_examined``.
                reason: str | None = "invalid"
            elif work.work_id in ruled_out:
                reason = ruled_out[work.work_id]
            elif work.work_id in gone:
                reason = "unavailable"
            else:
                reason = reject(work, target, excluded)
            count_examined(cp, work, reason)
            if reason is None:
                held.add(work.work_id)
        cp.report.fetched = cp.examined
        cp.report.pages = cp.pages
        cp.exhausted = cp.pages_done and not cp.pending
        if not cp.exhausted and len(cp.candidates) < want and not cp.capped(request.max_examined):
            await request.on_page(cp)
    cp.report.fetched = cp.examined
    cp.report.pages = cp.pages
    cp.report.exhausted = cp.exhausted
    cp.candidates = cp.candidates[: request.scan_limit]
    return cp
