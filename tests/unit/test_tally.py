"""A cell's search tally: the reason it gives and the message it writes never claim what did not happen."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from curaflow.domain.cells import CellState
from curaflow.domain.models import CandidateReport, CellSnapshot
from curaflow.domain.outcome import build_outcome_record, business_status
from curaflow.domain.reasons import NO_CONTENT_REASONS, TerminalReason, user_message
from curaflow.domain.tally import SOURCE_ANSWER_KINDS, Tally, cell_message, describe
from curaflow.domain.verdicts import no_candidate_state, no_candidate_verdict
from curaflow.protocol.models import Job
from curaflow.protocol.projection import project_job
from curaflow.sources.filters import protocol_reason

R = TerminalReason


def report(examined: int, reasons: dict[str, int] | None = None, **kw: object) -> CandidateReport:
    return CandidateReport.model_validate({"fetched": examined, "reasons": reasons or {}, **kw})


VERDICT_TABLE = [
    # (report, reason)
    (None, R.NO_CANDIDATE),
    (report(0), R.NO_CANDIDATE),  # the search found nothing at all
    (report(30, {"duplicate": 30}), R.DUPLICATE_EXHAUSTED),
    (report(0, known={"duplicate": 96}), R.DUPLICATE_EXHAUSTED),  # every work known from earlier scans
    (report(2, {"duplicate": 2}, known={"duplicate": 94}), R.DUPLICATE_EXHAUSTED),
    (report(30, {"duplicate": 15, "filtered:r18": 15}), R.FILTER_EXHAUSTED),
    (report(30, {"filtered:min_bookmarks": 30}), R.FILTER_EXHAUSTED),
    (report(0, known={"filtered:ai": 10, "duplicate": 10}), R.FILTER_EXHAUSTED),
    (report(30, {"unavailable": 20, "filtered:ai": 10}), R.NO_CANDIDATE),
    (report(3, {"refused": 3}), R.NO_CANDIDATE),
    (report(3, {"duplicate": 2, "refused": 1}), R.NO_CANDIDATE),
    (report(3, {"duplicate": 2, "unavailable": 1}), R.NO_CANDIDATE),
    (report(3, {"excluded": 3}), R.NO_CANDIDATE),
    (report(3, {"duplicate": 1, "filtered:ai": 1, "refused": 1}), R.FILTER_EXHAUSTED),
    # every work found unusable for a reason that is the source's: a source failure
    (report(5, {"unusable": 5}), R.SOURCE_UNUSABLE),
    (report(3, {"invalid": 3}), R.SOURCE_UNUSABLE),
    (report(4, {"invalid": 1, "unusable": 3}), R.SOURCE_UNUSABLE),
    (report(0, known={"unusable": 5}), R.SOURCE_UNUSABLE),
    (report(1000, {"invalid": 1000}), R.SOURCE_UNUSABLE),  # capped, but every answer unusable
    (report(30, {"unusable": 11}), R.SOURCE_UNUSABLE),  # 11 tried, all unusable; 19 left untried
    # works fetched and found unusable as the source sent them (their unavailable kind)
    (report(5, {"unavailable": 5}, unavailable={"unusable_url": 5}), R.SOURCE_UNUSABLE),
    (
        report(4, {"unavailable": 4}, unavailable={"unusable_url": 2, "not_an_image": 1, "no_file": 1}),
        R.SOURCE_UNUSABLE,
    ),
    (report(5, {"unavailable": 5}, unavailable={"unusable_url": 4, "gone": 1}), R.NO_CANDIDATE),
    (report(5, {"unavailable": 5}, unavailable={"too_large": 3, "undecodable": 2}), R.NO_CANDIDATE),  # the works'
    (report(5, {"unavailable": 5}, unavailable={"over_budget": 5}), R.NO_CANDIDATE),
    # ... but not when one work was anything else (the source is not shown broken)
    (report(5, {"unusable": 4, "unavailable": 1}), R.NO_CANDIDATE),
    (report(5, {"unusable": 4, "duplicate": 1}), R.NO_CANDIDATE),
    (report(1, {"unusable": 1}, known={"duplicate": 30}), R.NO_CANDIDATE),
    (report(3, {"held": 3}), R.NO_CANDIDATE),  # held back by a route: the route's, for now
    # every new work (not delivered before) refused by the source: the source's failure,
    # never "widen the query" — a delivered work was ruled out without asking the source
    (report(2, {"duplicate": 1, "unrecognised": 1}), R.SOURCE_UNUSABLE),
    (report(1, {"unrecognised": 1}, known={"duplicate": 30}), R.SOURCE_UNUSABLE),
    (
        report(3, {"duplicate": 2, "unavailable": 1}, unavailable={"gone": 1}, unrecognised={"gone": 1}),
        R.SOURCE_UNUSABLE,
    ),
    (
        report(
            4, {"duplicate": 2, "unavailable": 2}, unavailable={"not_an_image": 2}, unrecognised={"not_an_image": 2}
        ),
        R.SOURCE_UNUSABLE,
    ),
    (report(3, {"duplicate": 1, "unrecognised": 1, "unusable": 1}), R.SOURCE_UNUSABLE),  # every new one the source's
    # capped among duplicates: one refused work says little of the works not read yet
    (report(1000, {"duplicate": 999, "unrecognised": 1}), R.SCAN_CAPPED),
    # ... but not the works' own answers among duplicates, nor anything else among them
    (report(3, {"duplicate": 2, "unavailable": 1}, unavailable={"gone": 1}), R.NO_CANDIDATE),  # a 404: the work's
    (report(3, {"duplicate": 2, "unavailable": 1}, unavailable={"unusable_url": 1}), R.NO_CANDIDATE),  # recognised
    (report(2, {"duplicate": 1, "released": 1}), R.NO_CANDIDATE),  # released on a recognised answer
    (report(3, {"duplicate": 1, "unrecognised": 1, "unavailable": 1}), R.NO_CANDIDATE),
    (report(3, {"duplicate": 1, "unrecognised": 1, "refused": 1}), R.NO_CANDIDATE),
    (report(3, {"duplicate": 1, "unrecognised": 1, "held": 1}), R.NO_CANDIDATE),
    (report(3, {"duplicate": 1, "unrecognised": 1, "excluded": 1}), R.NO_CANDIDATE),
    (report(3, {"duplicate": 1, "unrecognised": 1, "filtered:ai": 1}), R.FILTER_EXHAUSTED),
    (report(3, {"something_new": 3}), R.NO_CANDIDATE),  # a word not known here: never the source's
    # the scan cap
    (report(1000, {"duplicate": 1000}), R.SCAN_CAPPED),
    (report(1000, {"duplicate": 1000}, exhausted=True), R.DUPLICATE_EXHAUSTED),
]


@pytest.mark.parametrize(("found", "expected"), VERDICT_TABLE)
def test_the_reason_is_a_function_of_the_tally(found: CandidateReport | None, expected: TerminalReason) -> None:
    assert no_candidate_verdict(found, max_examined=1000) == expected


def test_the_source_answer_kinds_are_kinds_of_unavailable_work() -> None:
    from curaflow.sources.errors import UnavailableKind

    assert {str(k) for k in UnavailableKind} >= SOURCE_ANSWER_KINDS
    tally = Tally.of(report(6, {"unavailable": 6}, unavailable={"unusable_url": 2, "gone": 4}))
    assert (tally.unusable, tally.unavailable) == (2, 4)


def test_the_tally_counts_the_answers_not_recognised_as_the_works_among_the_unusable() -> None:
    tally = Tally.of(
        report(
            6,
            {"unavailable": 3, "unrecognised": 1, "duplicate": 2},
            unavailable={"not_an_image": 2, "unusable_url": 1},
            unrecognised={"not_an_image": 2},
        )
    )
    assert (tally.unusable, tally.unrecognised, tally.delivered, tally.unavailable) == (4, 3, 2, 0)
    assert tally.rejected == 6  # a part of ``unusable``, never counted twice


def test_works_delivered_before_and_the_rest_refused_by_the_source_is_the_sources_failure() -> None:
    """Two works found: one delivered before, the other met an answer not recognised as
    its own (the image host's 403). It ended ``no_candidate`` with "widen the query": a
    wider query finds more new works that meet the same answer."""
    found = report(2, {"duplicate": 1, "unavailable": 1}, unavailable={"gone": 1}, unrecognised={"gone": 1})
    reason = no_candidate_verdict(found, max_examined=1000)
    assert (reason, no_candidate_state(reason)) == (R.SOURCE_UNUSABLE, CellState.FAILED)
    message = cell_message(CellState.FAILED, reason, found) or ""
    assert "1 already delivered" in message and "1 unusable" in message and "widen" not in message, message
    assert "new work" in message, message  # not "every work …": one was delivered


def test_a_source_whose_every_answer_was_unusable_is_a_failure_not_no_new_content() -> None:
    unusable = report(5, {"unusable": 5}, exhausted=True)
    reason = no_candidate_verdict(unusable, max_examined=1000)
    state = no_candidate_state(reason)
    assert state == CellState.FAILED
    cell = CellSnapshot(
        target_id="t",
        state=state,
        reason=reason,
        reason_message=cell_message(state, reason, unusable),
        candidate_report=unusable,
    )
    assert business_status([cell]) == "failed"  # alertable: an operator is told
    record = build_outcome_record(
        job_id="j",
        job_type="candidate_search",
        schedule_id="s",
        occurrence_at_ms=None,
        occurrence_date=None,
        started_at_ms=None,
        completed_at_ms=None,
        cells=[cell],
    )
    assert record["alertable"] is True
    assert "5 unusable" in record["user_message"]["en"] and "source" in record["user_message"]["en"]
    from curaflow.domain.models import JobRecord

    job = project_job(JobRecord(job_id="j", plan_id="p", created_at=1, updated_at=1, completed_at=2, cells=[cell]))
    Job.model_validate(job)
    assert (job["status"], job["error"]["code"], job["error"]["detail"]["owner"]) == (
        "failed",
        "source_error",
        "source",
    )
    assert job["error"]["detail"]["internal_code"] == "source_unusable"
    assert all(no_candidate_state(r) == CellState.NO_CANDIDATE for r in NO_CONTENT_REASONS)


def test_a_search_that_found_nothing_never_says_works_were_found() -> None:
    # Seen from outside: a tag matching nothing got "the works found were already
    # delivered, refused by a route or unavailable" although 0 works were found.
    empty = report(0, exhausted=True)
    reason = no_candidate_verdict(empty, max_examined=1000)
    for lang in ("en", "zh"):
        message = cell_message(CellState.NO_CANDIDATE, reason, empty, lang)
        assert message is not None
        assert message.startswith(describe(Tally(), lang))
    en = cell_message(CellState.NO_CANDIDATE, reason, empty) or ""
    assert "found no work" in en
    assert not re.search(r"already delivered|refused by a route|unavailable|works found", en), en


def test_the_message_counts_what_happened_to_each_work() -> None:
    mixed = report(12, {"duplicate": 5, "refused": 2, "unavailable": 1, "filtered:r18": 4}, known={"duplicate": 30})
    message = cell_message(CellState.NO_CANDIDATE, no_candidate_verdict(mixed, max_examined=1000), mixed) or ""
    assert message.startswith("The search found 42 works: 35 already delivered, 2 refused by a route, ")
    assert "1 unavailable" in message and "4 filtered out (r18)" in message
    assert "30 of them ruled out by earlier jobs" in message


def test_a_duplicate_found_at_delivery_keeps_its_reason_sentence() -> None:
    # A cell ``duplicate`` (its bound work was already at every route) did bind a work:
    # its search tally is not why it ended.
    bound = report(1, {}, selected="7")
    assert cell_message(CellState.DUPLICATE, R.DUPLICATE_EXHAUSTED, bound) == user_message(R.DUPLICATE_EXHAUSTED)
    assert cell_message(CellState.FAILED, R.AUTH_FAILED, bound) == user_message(R.AUTH_FAILED)


def test_a_work_another_job_holds_is_told_as_such_and_counts_like_a_duplicate() -> None:
    # Until 2026-12-05 a work only reserved by another open job was told "already delivered".
    held = report(3, {"duplicate": 2, "in_flight": 1}, exhausted=True)
    reason = no_candidate_verdict(held, max_examined=1000)
    assert reason == R.DUPLICATE_EXHAUSTED
    tally = Tally.of(held)
    assert (tally.delivered, tally.in_flight, tally.rejected) == (2, 1, 3)
    en = cell_message(CellState.NO_CANDIDATE, reason, held) or ""
    assert en.startswith("The search found 3 works: 2 already delivered, 1 being delivered by another job."), en
    zh = cell_message(CellState.NO_CANDIDATE, reason, held, "zh") or ""
    assert "2 件已投递过，1 件正由另一个任务投递" in zh, zh
    only = report(1, {"in_flight": 1}, exhausted=True)
    assert no_candidate_verdict(only, max_examined=1000) == R.DUPLICATE_EXHAUSTED
    assert "already delivered" not in (cell_message(CellState.NO_CANDIDATE, R.DUPLICATE_EXHAUSTED, only) or "")
    filtered = report(4, {"in_flight": 1, "filtered:r18": 1, "refused": 2}, exhausted=True)
    assert no_candidate_verdict(filtered, max_examined=1000) == R.FILTER_EXHAUSTED
    assert protocol_reason("in_flight") == "duplicate"


def test_a_work_hidden_from_the_source_account_is_told_as_such() -> None:
    # A placeholder the account's settings decide (``hidden``, 2026-12-06): not "unavailable"
    # (the work's), told as the account's; the protocol's word stays ``unavailable``.
    hidden = report(3, {"duplicate": 2, "hidden": 1}, exhausted=True)
    reason = no_candidate_verdict(hidden, max_examined=1000)
    assert reason == R.NO_CANDIDATE  # not every work delivered: one may be had later
    tally = Tally.of(hidden)
    assert (tally.delivered, tally.hidden, tally.unavailable, tally.other, tally.rejected) == (2, 1, 0, 0, 3)
    en = cell_message(CellState.NO_CANDIDATE, reason, hidden) or ""
    assert en.startswith("The search found 3 works: 2 already delivered, 1 hidden from the source account."), en
    zh = cell_message(CellState.NO_CANDIDATE, reason, hidden, "zh") or ""
    assert "1 件对来源账号不可见" in zh, zh
    assert protocol_reason("hidden") == "unavailable"
    # The remedy of a hidden work is the account's settings, not a wider query: said beside
    # the reason's sentence whenever the search met one.
    assert "account's settings at the source" in en and en.index("account's settings") < en.index("widen"), en
    assert "账号" in zh.split("。")[1], zh
    clean = report(3, {"duplicate": 3}, exhausted=True)
    assert "account's settings" not in (cell_message(CellState.NO_CANDIDATE, R.NO_CANDIDATE, clean) or "")


WORDS = [
    "duplicate",
    "in_flight",
    "refused",
    "held",
    "unavailable",
    "hidden",
    "unusable",
    "invalid",
    "excluded",
    "filtered:r18",
    "filtered:ai",
    "something_new",
]
CLAIMS = {
    "already delivered": "delivered",
    "being delivered by another job": "in_flight",
    "refused by a route": "refused",
    "held back by a route": "held",
    "for another reason": "other",
    "unavailable": "unavailable",
    "hidden from the source account": "hidden",
    "unusable": "unusable",
    "excluded by the task": "excluded",
    "filtered out": "filtered",
}


@given(
    reasons=st.dictionaries(st.sampled_from(WORDS), st.integers(0, 50)),
    known=st.dictionaries(st.sampled_from(WORDS), st.integers(0, 50)),
    extra=st.integers(0, 5),
)
def test_the_message_never_claims_what_did_not_happen(
    reasons: dict[str, int], known: dict[str, int], extra: int
) -> None:
    rep = report(sum(reasons.values()) + extra, reasons, known=known, exhausted=True)
    tally = Tally.of(rep)
    reason = no_candidate_verdict(rep, max_examined=1000)
    message = cell_message(no_candidate_state(reason), reason, rep) or ""
    for claim, field in CLAIMS.items():
        count = sum(tally.filtered.values()) if field == "filtered" else getattr(tally, field)
        if claim in message.split(". ", 1)[0]:  # the tally's sentence
            assert count > 0, (claim, message)
    if tally.found == 0:
        assert reason == R.NO_CANDIDATE and "found no work" in message
    else:
        assert f"found {tally.found} work" in message
    # the "every work was already delivered" sentence only when every rejection was one
    if reason == R.DUPLICATE_EXHAUSTED:
        assert tally.delivered + tally.in_flight == tally.rejected > 0
