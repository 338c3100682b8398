"""Why a cell whose search bound no work ends, and the state it ends in."""

from __future__ import annotations

from curaflow.domain.cells import CellState
from curaflow.domain.fallback import reached_cap
from curaflow.domain.models import CandidateReport
from curaflow.domain.reasons import NO_CONTENT_REASONS, TerminalReason
from curaflow.domain.tally import Tally

R = TerminalReason


def no_candidate_verdict(report: CandidateReport | None, *, max_examined: int) -> TerminalReason:
    """The reason of a cell whose search bound no work it could use, from its tally.

    The one owner of this decision (reference §5.4 "no_candidate outcome", amended). A
    pure function of the cell's :class:`~curaflow.domain.tally.Tally` — the works this
    scan examined and those earlier scans of the target ruled out for good and this one
    did not read again (the frontier's known run) — so identical ledger state gives the
    identical reason whether or not a frontier let the scan skip works.

    Args:
        report: the candidate report of the scan that ended (None: no scan report).
        max_examined: most works one scan examines (the account's ``max_examined``).

    Returns:
        In this order:

        * ``no_candidate`` when the search found no work at all (the message says so);
        * ``source_unusable`` when every work ruled out was unusable for a reason that
          is the source's (``unusable`` / ``invalid`` / ``unrecognised``: an image URL on
          another host, fields not of the source's shape, an answer not recognised as
          the work's) and none for any other reason — the works tried one after another
          were all unusable, and nothing else was learnt: the source is broken, a
          failure (alertable), never "no new content";
        * ``scan_capped`` when the scan stopped at ``max_examined`` while the source had
          more (``exhausted`` false): what it saw says nothing about the rest, and the
          target's frontier makes the next job go on from there. The works it examined
          anew count, not those a source read again off the cap
          (:func:`~curaflow.domain.fallback.reached_cap`, as
          :func:`~curaflow.domain.fallback.another_pass` decides);
        * ``source_unusable`` also when every *new* work (every work not delivered
          before) was unusable so and at least one of them met an answer not recognised
          as its own (``Tally.unrecognised``: the image host refusing curaflow, a
          proxy's page) — a work delivered before was ruled out without asking the
          source, so it says nothing of the source's answers, and a wider query would
          only find more new works meeting the same refusal. After ``scan_capped``: in a
          capped scan of duplicates, one refused work says little of the works not read
          yet, which the next job reads. Works delivered before and works unusable only
          on answers recognised as the works' own (an image URL off the host) go on to
          the rules below;
        * ``duplicate_exhausted`` when every work found was ruled out as delivered before
          or held by another open job (``Tally.duplicates``: a work another job holds
          counts like a duplicate here; its own words tell it in the message);
        * ``filter_exhausted`` ("relax the target's filters") only when a filter rejected
          something and the filters and duplicates together account for at least half
          of the rejections;
        * otherwise ``no_candidate`` (works refused by a route, unavailable, excluded,
          unusable among others, or among duplicates with none refused by the source):
          relaxing a filter would change nothing.
    """
    if report is None:
        return R.NO_CANDIDATE
    tally = Tally.of(report)
    if tally.found == 0:
        return R.NO_CANDIDATE
    if tally.unusable > 0 and tally.unusable == tally.rejected:
        return R.SOURCE_UNUSABLE
    if not report.exhausted and reached_cap(report, max_examined):
        return R.SCAN_CAPPED
    if tally.unrecognised > 0 and tally.unusable + tally.duplicates == tally.rejected:
        return R.SOURCE_UNUSABLE  # every new work unusable, the source refusing at least one
    total = tally.rejected
    if total == 0:
        return R.NO_CANDIDATE
    if tally.duplicates == total:
        return R.DUPLICATE_EXHAUSTED
    filtered = sum(tally.filtered.values())
    if filtered > 0 and (filtered + tally.duplicates) * 2 >= total:
        return R.FILTER_EXHAUSTED
    return R.NO_CANDIDATE


def no_candidate_state(reason: TerminalReason | str) -> CellState:
    """The state a cell ends in for a reason :func:`no_candidate_verdict` gave:
    ``no_candidate`` for "no new work", ``failed`` for a failure (``source_unusable``:
    counted as a system failure, alertable)."""
    return CellState.NO_CANDIDATE if reason in NO_CONTENT_REASONS else CellState.FAILED
