"""Reason codes and protocol codes agree with the vendored wire contract."""

from __future__ import annotations

import json
from importlib import resources

from curaflow.domain.reasons import REASONS, TerminalReason, protocol_code_for, user_message
from curaflow.protocol.errors import PROTOCOL_CODES

SCHEMA = resources.files("curaflow.protocol") / "schema"


def test_protocol_codes_match_schema_enum_and_mapping_file() -> None:
    schema = json.loads((SCHEMA / "protocol.schema.json").read_text())
    mapping = json.loads((SCHEMA / "error-mapping.json").read_text())
    assert set(PROTOCOL_CODES) == set(schema["$defs"]["Error"]["properties"]["code"]["enum"])
    for code, info in mapping["protocol_codes"].items():
        assert PROTOCOL_CODES[code] == info["retryable"], code


def test_every_reason_maps_like_the_mapping_file() -> None:
    mapping = json.loads((SCHEMA / "error-mapping.json").read_text())["producer_internal"]
    for code, protocol in mapping.items():
        if code.startswith("$"):
            continue
        assert protocol_code_for(code) == protocol, code
    for reason, info in REASONS.items():
        assert info.protocol_code in PROTOCOL_CODES, reason
        # the file is the consumers' table: every reason a cell can end with is in it
        assert mapping.get(reason) == info.protocol_code, reason
    assert protocol_code_for("cancelled_by_consumer") == "cancelled_by_consumer"


def test_unknown_or_missing_reason_is_internal_error() -> None:
    assert protocol_code_for(None) == "internal_error"
    assert protocol_code_for("something-new") == "internal_error"


def test_messages_exist_in_both_languages() -> None:
    for reason in TerminalReason:
        assert user_message(reason, "en") and user_message(reason, "zh")
        assert reason.value not in user_message(reason, "en")


def test_no_message_of_a_failure_a_retry_cannot_fix_tells_to_retry_later() -> None:
    from curaflow.domain.cells import CellState
    from curaflow.domain.models import CellSnapshot
    from curaflow.domain.outcome import build_outcome_record

    for reason, info in REASONS.items():
        if info.retryable:
            continue
        cell = CellSnapshot(target_id="t", state=CellState.FAILED, reason=reason)
        record = build_outcome_record(
            job_id="j",
            job_type="candidate_search",
            schedule_id=None,
            occurrence_at_ms=None,
            occurrence_date=None,
            started_at_ms=None,
            completed_at_ms=None,
            cells=[cell],
        )
        for lang, text in record["user_message"].items():
            assert "retry later" not in text.lower() and "稍后重试" not in text, (reason, lang, text)


def test_a_terminate_s_sentence_claims_no_more_than_that_no_step_started() -> None:
    """An operator's terminate stops the workflow, not a step already running: its send
    runs on until it answers or its own timeout cuts it (measured: the send of a job
    terminated while delivering heartbeat 19 s after the terminate and ended ``unknown``).
    Until 2026-12-06 the English sentence said "nothing ran after that"; the Chinese one
    always said no step ran after it."""
    from curaflow.domain.reasons import REASONS, TerminalReason

    info = REASONS[TerminalReason.EXECUTION_TERMINATED]
    assert "nothing ran" not in info.message_en
    assert info.message_en == "An operator terminated the job's execution in Temporal; no step started after that."
