"""Every terminal reason tells the user what happened and what to do.

The outcome record keeps its business-status sentence and adds the sentence of the reason
that explains it; each reason has its own short, actionable sentence in both languages.
"""

from __future__ import annotations

import pytest

from curaflow.domain.cells import CellState
from curaflow.domain.models import CellSnapshot
from curaflow.domain.outcome import BusinessStatus, build_outcome_record, business_message, business_status
from curaflow.domain.reasons import NO_CONTENT_REASONS, REASONS, TerminalReason, user_message


def lone_cell(reason: TerminalReason) -> CellSnapshot:
    state = CellState.NO_CANDIDATE if reason in NO_CONTENT_REASONS else CellState.FAILED
    return CellSnapshot(target_id="t", state=state, reason=reason, reason_message=user_message(reason))


def outcome(*cells: CellSnapshot) -> dict[str, object]:
    return build_outcome_record(
        job_id="j",
        job_type="candidate_search",
        schedule_id="s",
        occurrence_at_ms=None,
        occurrence_date=None,
        started_at_ms=None,
        completed_at_ms=None,
        cells=list(cells),
    )


@pytest.mark.parametrize("reason", list(TerminalReason))
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_reason_has_its_own_short_sentence(reason: TerminalReason, lang: str) -> None:
    message = user_message(reason, lang)
    others = {user_message(r, lang) for r in TerminalReason if r != reason}
    assert message and message not in others  # never a catch-all sentence
    assert len(message) <= (200 if lang == "en" else 90)
    assert reason.value not in message  # no internal code


@pytest.mark.parametrize("reason", list(TerminalReason))
def test_the_outcome_message_adds_the_reason_to_the_business_sentence(reason: TerminalReason) -> None:
    record = outcome(lone_cell(reason))
    status = business_status([lone_cell(reason)])
    for lang in ("en", "zh"):
        message = record["user_message"][lang]  # type: ignore[index]
        assert message.startswith(business_message(status, lang))
        if status == BusinessStatus.CANCELLED:  # a stop on purpose: the business sentence says it
            assert message == business_message(status, lang)
        else:
            assert user_message(reason, lang) in message


def test_a_cancelled_job_says_so_once() -> None:
    record = outcome(lone_cell(TerminalReason.CANCELLED_BY_CONSUMER))
    assert record["user_message"] == {
        "zh": business_message(BusinessStatus.CANCELLED, "zh"),
        "en": business_message(BusinessStatus.CANCELLED),
    }


def test_the_reason_of_the_failed_cell_explains_a_mixed_job() -> None:
    cells = [
        CellSnapshot(target_id="a", state=CellState.SUBMITTED),
        CellSnapshot(target_id="b", state=CellState.NO_CANDIDATE, reason="no_candidate"),
        lone_cell(TerminalReason.DELIVERY_REJECTED).model_copy(update={"target_id": "c"}),
    ]
    message = outcome(*cells)["user_message"]["en"]  # type: ignore[index]
    assert user_message(TerminalReason.DELIVERY_REJECTED) in message
    assert user_message(TerminalReason.NO_CANDIDATE) not in message


def test_a_successful_job_keeps_its_one_sentence() -> None:
    record = outcome(CellSnapshot(target_id="t", state=CellState.SUBMITTED))
    assert record["user_message"] == {"zh": business_message("success", "zh"), "en": business_message("success")}


@pytest.mark.parametrize(
    ("reason", "words"),
    [
        (TerminalReason.AUTH_FAILED, ("refresh token",)),
        (TerminalReason.ACCOUNT_RESTRICTED, ("restricted", "paused", "pixiv.net")),
        (TerminalReason.DELIVERY_REJECTED, ("refused", "not offered")),
        (TerminalReason.RATE_LIMITED, ("rate limit",)),
        (TerminalReason.QUEUED_TOO_LONG, ("workers",)),
        (TerminalReason.DELIVERY_UNKNOWN, ("not sent again",)),
    ],
)
def test_the_sentences_say_what_to_do(reason: TerminalReason, words: tuple[str, ...]) -> None:
    message = user_message(reason).lower()
    assert all(word.lower() in message for word in words), message


def test_the_restricted_account_reason_is_not_retryable_and_maps_to_an_existing_code() -> None:
    info = REASONS[TerminalReason.ACCOUNT_RESTRICTED]
    assert info.retryable is False and info.protocol_code == "auth_error"
