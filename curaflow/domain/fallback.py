"""Fallback passes of a scheduled job's cell: when another, wider pass may run.

Reference §5.5 calls them "fallback stages"; curaflow says *pass* (a cell's ``stage`` is
what it is doing now: :class:`curaflow.domain.cells.CellStage`). A scheduled job's cell
runs up to ``max_fallback_passes`` passes over the source. Pass N
(0-based) keeps ``keep = min(100, scan_limit × (N+1))`` candidates and stops paging once
it holds ``want = min(keep, 5 × (N+1))`` (:func:`pass_bounds`); every pass examines at
most of its account's ``max_examined`` works. A pass hands over to the next one when it bound
nothing, or when every candidate it bound turned out unavailable at fetch time.

The next pass is *wider* than the last one only if the last one stopped at a bound the
next raises — its candidate bound. It is not wider when the last pass read everything the
source had for the query (``report.exhausted``: no page left) or examined as many works
as any pass may: a later pass would see the same works again (the useless rescans of the
issue: 3 passes, 292 s, for a result of three works). "As many works" counts what the
pass examined anew (:func:`reached_cap`): a source's works read again that do not count
against its cap (Pixiv's ``popular_desc`` revisit page) do not end the passes either —
before 2026-12-05e they did, so a pass that read its revisit page and a few works after
it got no wider pass at a cap below about a page. :func:`another_pass` is that
decision, made by the ``search`` and ``fetch`` activities; the workflow only follows
their ``CellUpdate.retry_stage``. When it says no, the cell ends at once with the reason its tally
gives (:func:`~curaflow.domain.verdicts.no_candidate_verdict`).

Pure module: imported by workflows through the sandbox pass-through.
"""

from __future__ import annotations

from typing import NamedTuple

from curaflow.domain.models import CandidateReport

#: Candidates a first pass prefetches; pass N prefetches ``WANT × (N+1)``.
WANT = 5
#: Most candidates any pass keeps.
KEEP_CAP = 100


class PassBounds(NamedTuple):
    """The candidate bound of one pass.

    Attributes:
        keep: most eligible candidates the pass keeps (1..100).
        want: the pass stops paging once it holds this many.
    """

    keep: int
    want: int


def pass_bounds(scan_limit: int, fallback_pass: int) -> PassBounds:
    """The bound of pass ``fallback_pass`` (0-based) of a target with ``scan_limit`` (1..100)."""
    keep = min(KEEP_CAP, max(1, scan_limit) * (fallback_pass + 1))
    return PassBounds(keep=keep, want=min(keep, WANT * (fallback_pass + 1)))


def reached_cap(report: CandidateReport, max_examined: int) -> bool:
    """Whether the pass of ``report`` examined ``max_examined`` works anew: ``fetched`` less
    ``read_again`` (the works a source read again without counting them against the cap,
    as its scan's :meth:`~curaflow.sources.base.ScanState.capped` does). The one measure of
    the cap after a scan: :func:`another_pass` and the ``scan_capped`` verdict
    (:func:`~curaflow.domain.verdicts.no_candidate_verdict`). ``max_examined`` ≤ 0: never."""
    return max_examined > 0 and report.fetched - report.read_again >= max_examined


def another_pass(
    *, fallback_pass: int, max_passes: int, scan_limit: int, report: CandidateReport, max_examined: int
) -> bool:
    """Whether pass ``fallback_pass + 1`` may run after pass ``fallback_pass`` found nothing usable.

    Args:
        fallback_pass: the pass that just ended (0-based).
        max_passes: passes allowed for the cell (1 for protocol jobs).
        scan_limit: the target's candidate bound.
        report: the candidate report of the pass that ended (``exhausted``, ``fetched``,
            ``read_again``).
        max_examined: most works one pass examines (the account's ``max_examined``).

    Returns:
        True only when a pass is left, the last pass did not exhaust the source nor
        examine ``max_examined`` works anew (:func:`reached_cap`), and the next pass's
        bound is wider.
    """
    if fallback_pass + 1 >= max_passes:
        return False
    if report.exhausted or reached_cap(report, max_examined):
        return False
    this, nxt = pass_bounds(scan_limit, fallback_pass), pass_bounds(scan_limit, fallback_pass + 1)
    return nxt.keep > this.keep or nxt.want > this.want
