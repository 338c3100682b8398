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
day, so nothing is skipped and nothing is counted twice. The app-api refusing a page past
offset 0 and below offset 5000 naming ``offset`` alone
(:class:`~curaflow.sources.pixiv.client.OffsetRefused`: Pixiv lowered its limit) is the
walk's last offset all the same (:func:`~curaflow.sources.pixiv.scan.pages._past_last_offset`,
:func:`~curaflow.sources.pixiv.scan.days.last_offset`; 2026-12-07: it ended the job).

A crowded day: when one pass of the walk never left a single day
before reaching the cap, that day holds more works than one walk can page. The rest of
the day is then read from its other end — the same query restricted to that day, in the
reverse date order — up to the work where the first walk stopped, so a day of up to
about 10 000 works is read whole (its older part oldest first). Only when that second
walk reaches the cap too is a middle part of the day out of reach: the day and the number
of its works reached are recorded (``report.skipped_days``, reported through
``on_skipped_day``) and the scan goes on with the next day. Other sorts end at the cap.
With a frontier, that second walk's pages are checked at their seams as the first walk's
(:func:`~curaflow.sources.pixiv.frontier.on_tail_page`: each asked one place early, asked
again earlier when it may start past works no page read), and a job that stops inside it
leaves where it stopped for the next job's second walk over that day to go on from.

The target's frontier (:mod:`curaflow.sources.pixiv.frontier`): a scan given the
target's stored :class:`~curaflow.sources.pixiv.frontier.Frontier` reads only what can
hold something new — the head of a ``date_desc`` query, then the first part not fully
known — and leaves the next frontier's JSON in ``ScanCheckpoint.frontier`` (what the
ledger stores). Its page selection is kept to three hooks:
:func:`~curaflow.sources.pixiv.scan.pages._frontier_page` (a fetched page),
:func:`~curaflow.sources.pixiv.scan.pages._jump` (where the walk continues) and the
verdict of each examined work.

Works whose id or fields are not of the source's shape
(:class:`~curaflow.sources.pixiv.client.InvalidWork`) are counted as rejected with reason
``invalid`` and never used.

One concern per module, every name imported from here:
:mod:`~curaflow.sources.pixiv.scan.checkpoint` (:class:`ScanCheckpoint`, :class:`TailPass`),
:mod:`~curaflow.sources.pixiv.scan.retrieval` (every request's parameters),
:mod:`~curaflow.sources.pixiv.scan.pages` (a page fetched, checked, handed to the frontier),
:mod:`~curaflow.sources.pixiv.scan.days` (date windows past offset 5000, crowded days) and
:mod:`~curaflow.sources.pixiv.scan.loop` (:func:`scan`: examine works until enough, checkpoint).
"""

from __future__ import annotations

from curaflow.sources.base import KnownHook, PageHook, SkippedDayHook
from curaflow.sources.paging import FILTERED_CAP
from curaflow.sources.pixiv.scan.checkpoint import ScanCheckpoint, TailPass
from curaflow.sources.pixiv.scan.loop import scan
from curaflow.sources.pixiv.scan.pages import check_page
from curaflow.sources.pixiv.scan.retrieval import REVERSED, retrieval_params, search_word

__all__ = [
    "FILTERED_CAP",
    "REVERSED",
    "KnownHook",
    "PageHook",
    "ScanCheckpoint",
    "SkippedDayHook",
    "TailPass",
    "check_page",
    "retrieval_params",
    "scan",
    "search_word",
]
