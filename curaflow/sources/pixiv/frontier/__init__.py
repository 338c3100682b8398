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
  every work was ruled out for a *lasting* reason (:func:`lasting`): delivered on a route
  (or its delivery's outcome never learnt), refused by a route, unavailable, or rejected by a filter on what a
  work cannot change (type, AI, R-18, pages, dates; bookmarks only once the work is older
  than the settling age, :data:`SETTLE_DAYS`). A candidate, a work excluded by one task or
  a young work below ``min_bookmarks`` ends the run: the next job reads it again; so does
  a work listed in a shape curaflow does not recognise (``invalid``: never lasting) —
  one a date-sorted search lists without a creation date curaflow reads is also never a
  mark, its place in the order unknown (``FrontierWalk.placed``); nor is an item with no
  id curaflow reads, the runs stopping before it (:func:`unreadable`).
* ``head`` (``date_desc`` only): the newest work of the known run. New works appear above
  it, so every job reads the head of the query first, down to ``head``, then jumps. Every
  work above ``head`` is read by every job: new works, and those whose verdict does not
  last (``held``, ``in_flight``, ``unrecognised``, ``released``), which a fresh walk leaves above the run
  it keeps and a head phase never moves ``head`` over. A head phase moves ``head`` up only
  over a head region it examined *whole*: every work listed from its start down to the old
  ``head`` examined (a scan capped partway moves nothing), its pages read without a gap
  (each head page is asked one place early: its first work must be the last of the page
  before; when it is not — works deleted between the two pages — the head stays, and the
  next job reads the region again).
* ``head_sweep`` / ``head_run`` (``date_desc``): where a scan capped in the head phase
  stopped, above ``head``, and the newest work of the lasting run (read without a gap)
  that ends there. The next job's head phase goes on after ``head_sweep`` (a landing
  checked as below) instead of reading the same top again; once a head phase reaches
  ``head``, both are cleared and ``head`` moves up to the lasting run ending at it —
  up to ``head_run`` when the resumed phase met only lasting verdicts. Works above
  ``head_sweep`` stay above ``head``: the jobs after read them again from the top. A
  ``head_sweep`` at or below ``head`` is ignored (the phase starts at the top). A phase
  the cap ends as it reaches ``head``, before any work past it, leaves its last head work
  as ``head_sweep`` all the same: the next job goes on past the head instead of reading the
  same head to the same cap.
* ``sweep``: where a scan that reached ``pixiv.max_examined`` without a candidate stopped,
  beyond ``known`` (the run was broken by works that may change): the next job goes on
  from there instead of reading the same stretch again (case 2). A scan from the sweep
  moves it to just before the candidate it finds; a scan that reaches the end of the
  results clears it, so the works it passed over are read again by the next sweep.

* ``seen`` (``date_desc``): the newest work from which every place down to ``head`` was
  examined by some job (the top of the last head phase that read it whole — alone, or
  with the capped phases it went on from, ``head_sweep_top`` — or of the fresh walk): the
  head works at or below it are read again, not new (:func:`read_again`).

* ``tally``: the known run's works by the verdict that ruled each out. A scan that
  passes over the run reports them (:func:`known_tally`, ``CandidateReport.known``), so
  the cell's tally — and the reason it ends with, :mod:`curaflow.domain.tally` — is the
  one a scan reading them again would give: identical state, identical reason.

**How a job walks** (:class:`FrontierWalk`, kept in the scan checkpoint):

* ``date_desc``: from the top (or after ``head_sweep``) until the first work at or below
  ``head`` (as old or older, never a newer one), each head page one place before the
  offset the source gives (see ``head``); then on from ``sweep`` or else ``known``: after it on the same page
  when it is listed there, else a jump — the same query with ``end_date`` = the mark's
  day, at ``offset`` = the mark's place among that day's works. ``date_asc`` jumps at
  once (nothing new appears before the start of an ascending walk). ``popular_desc`` first
  reads one page of the known part again, in turn from the top (``revisit``; the cycle's
  last page ends at the mark, so it covers the known part whole), then jumps to
  ``offset`` = the mark's place in the whole list (≤ 5000: the app-api pages no further);
  a known run shorter than a page is read again by every job on the page at offset 0,
  which holds the mark's place too: the walk goes on after the mark there. Offsets are
  exact (the app-api accepts any ``offset``; pixivpy #153).
* **Seams.** The offsets are live: a work deleted (or hidden) above the current place
  between two page requests moves the work first on the next page onto the page already
  read. The head phase checks its pages (``head``); the ``segment`` — the fresh walk,
  the walk after the jump, a sweep's continuation — asks each page after the first one
  place early while it has seen no candidate (a place it passes may become part of
  ``known``, a fresh walk's run or the ``sweep``): the page must list the previous
  page's last item again, or (date sorts, that work gone too) start at or before it by
  creation time; else it is asked again one place earlier, then 29 places earlier at each
  further step (date sorts down to offset 0; ``popular_desc`` two steps, its revisit
  covering a larger shift). So the frontier never records as examined a place no page
  read. After a candidate nothing further is recorded, and pages are the source's own.
* **Landing check.** A work deleted (or hidden) above the mark moves the mark up, so the
  landing page could start past works never examined. Date sorts compare by creation
  time: a landing page that starts after the mark steps back 30 places until it starts
  at or before it (deletions cost a page, never a skipped work). Works at or before the
  mark on the landing page are not examined again. ``popular_desc`` has no such key; the
  revisit page covers it: a work that moved up into the known part — a climber, or a
  work shifted by deletions above the mark over the landing — is read within ⌈known / 30⌉
  jobs (every job when the known run is shorter than a page).
* **Cost.** ``date_asc`` and ``popular_desc`` read at most 2 pages a job (plus a page per
  landing step back, and a page per seam step back: a work deleted above the current
  place between two of the job's pages). A walk's pages after its first before a
  candidate hold 29 new works, not 30 (a fresh walk over N works: about ⌈(N − 30) / 29⌉ +
  1 pages). ``date_desc`` reads the works above ``head`` — ⌈above / 29⌉ pages,
  then the landing page — and ``head`` cannot rise above the oldest work whose verdict
  does not last: new works since the last job, and everything newer than a young work
  below ``min_bookmarks`` (the last :data:`SETTLE_DAYS` days of the query), a work held,
  in flight in another job, unrecognised, released, excluded by a task or a candidate not delivered, are read by
  every job. ``pixiv.max_examined`` bounds a job; the next goes on from ``head_sweep``.
  The works of the ``popular_desc`` revisit page are not counted against it
  (:func:`read_again`): a job examines ``max_examined`` works after the known run, any
  cap, and at most one page more. Nor is up to a page of a ``date_desc`` head's works some
  job examined before (at or below ``seen``, :attr:`Frontier.seen`): works new since
  count, and the head beyond that page does (it has no bound of its own).
* **Crowded days.** The scan's second walk over a day deeper than offset 5000 reads it
  from its far end: its works move no mark until it meets the first walk's stop (the
  places between are unread); their lasting verdicts join the runs once the walk goes on
  past the day (:func:`tail_pass`, :func:`tail_done`). Its pages are checked at their
  seams as the segment's are (:func:`on_tail_page`): the day it reads to the first walk's
  stop is taken as read whole. A job that ends inside it leaves its stop there
  (``tail_sweep``, with the run it read, ``tail_run``): the next job's second walk over
  that day goes on from it (:func:`tail_pass`), not from the far end again. It ends at
  the mark the segment landed after when that mark lies past the first walk's last listed
  work (works added at the day's near end since): the places between are the known run's.
* Everything else the scan does is unchanged: filters, the ledger's ``known`` hook (every
  work read is judged as before; the frontier only decides which pages are read),
  checkpoints and resume, the 5000-offset window moves.

**Limits, by design.** The frontier only says where to start reading; a work is delivered
only if the ledger says it is new, so a stale frontier can skip works but never
duplicate one. What it may pass over: for ``popular_desc``, a work that moved into the
known part, until the revisit reaches its page; a work inside the known run whose
lasting reason was lifted later: a refusal or an unavailable work cleared by an operator
(clearing them resets every frontier, :mod:`curaflow.ledger.remembered`), an unavailable
work forgotten after ``pixiv.unavailable_ttl_ms``. Never a work another open job holds
(reserved or being sent on one of the target's routes, not delivered): it is told
``in_flight``, a verdict that does not last, so when that job releases it (its send
failed, its deadline passed, it was cancelled) a later job reads it again — until
2026-12-05 it was told ``duplicate`` and the frontier passed it for good when two jobs of
a target ran at once. (A work the account only *holds* back — skipped on an answer not recognised as
its own, ``pixiv.unrecognised_hold_ms`` — is told ``unrecognised``, and a work its own
cell released is ``released`` in the cell's next pass (``unrecognised`` when released on
such an answer, however long the hold): neither lasts, so the
frontier never moves past it for good.) Ranking mode
keeps no frontier (a ranking holds at most 500 works and changes daily).

**Stored format.** What the ledger holds is :class:`Frontier`'s JSON
(``model_dump(mode="json")``), the format rows of ``scan_frontiers`` were written in before
the frontier moved behind the source seam: :func:`read` reads them unchanged. A row this
version cannot read, or one of another sort, is a fresh start (pages, never a duplicate);
so is one a mark of which is dated on a day no work has (written before 2026-12-07, when
a listing's lying date was read: :func:`~curaflow.sources.pixiv.frontier.stored.marked_where_no_work_is`).

Pure package (no I/O): the scan and the tests drive it. One concern per module, every
name imported from here: :mod:`~curaflow.sources.pixiv.frontier.models` (the stored
frontier, a scan's walk, the walk's order), :mod:`~curaflow.sources.pixiv.frontier.stored`
(the fingerprint, the key, reading and describing the stored JSON),
:mod:`~curaflow.sources.pixiv.frontier.rules` (which verdicts last),
:mod:`~curaflow.sources.pixiv.frontier.walk` (where a scan starts, what it makes of a
page) and :mod:`~curaflow.sources.pixiv.frontier.learning` (the verdicts a walk records,
the frontier it leaves).
"""

from __future__ import annotations

from curaflow.sources.pixiv.frontier.learning import advance, known_tally, observe, tail_done, tail_pass, unreadable
from curaflow.sources.pixiv.frontier.models import DATE_SORTS, PAGE, Frontier, FrontierWalk, Jump, Mark, PageStep
from curaflow.sources.pixiv.frontier.rules import LASTING_REASONS, SETTLE_DAYS, lasting, settled_before
from curaflow.sources.pixiv.frontier.stored import applies, describe, fingerprint, key, read
from curaflow.sources.pixiv.frontier.walk import begin, on_page, on_tail_page, read_again, repeated_on, revisit_offset

__all__ = [
    "DATE_SORTS",
    "LASTING_REASONS",
    "PAGE",
    "SETTLE_DAYS",
    "Frontier",
    "FrontierWalk",
    "Jump",
    "Mark",
    "PageStep",
    "advance",
    "applies",
    "begin",
    "describe",
    "fingerprint",
    "key",
    "known_tally",
    "lasting",
    "observe",
    "on_page",
    "on_tail_page",
    "read",
    "read_again",
    "repeated_on",
    "revisit_offset",
    "settled_before",
    "tail_done",
    "tail_pass",
    "unreadable",
]
