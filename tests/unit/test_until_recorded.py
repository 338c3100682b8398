"""``until_recorded``: what a send's route answered is published (heartbeat details) only
once the send has ended — never while the send goes on waiting for a part's record.

A next attempt trusts a published :class:`~curaflow.ledger.deliveries.Answered` as a send
that has ended (``claim_send(answered=...)``) and sends the rest of the work. A part's
record retried in place while the ledger fails is a send that has *not* ended: the attempt
posts its next part once the record succeeds. Publishing its answer then (until
2026-12-05) let a next attempt — this one frozen past its heartbeat timeout, or cut off
from Temporal — post the rest of an album this attempt posts too once thawed.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import asyncpg
import pytest

from activities.deliver import recording
from activities.deliver.recording import NotRecorded, until_recorded
from curaflow.ledger.deliveries import Answered


class _Beats:
    """A Heartbeater's details as ``until_recorded`` sees them."""

    def __init__(self) -> None:
        self.details: dict[str, Any] = {}
        self.seen: list[dict[str, Any]] = []

    def update(self, **details: Any) -> None:
        self.details.update(details)
        self.seen.append(dict(self.details))

    def drop(self, key: str) -> None:
        self.details.pop(key, None)


@pytest.fixture
def published(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    beats: list[Any] = []
    monkeypatch.setattr(recording, "RECORD_RETRY_S", (0.0, 0.0))
    monkeypatch.setattr(recording.activity, "heartbeat", lambda *details: beats.append(details))
    monkeypatch.setattr(recording.activity, "info", lambda: SimpleNamespace(workflow_id="j", attempt=1))
    return beats


def _failing(times: int) -> Any:
    calls = [0]

    async def record() -> str:
        calls[0] += 1
        if calls[0] <= times:
            raise asyncpg.exceptions.QueryCanceledError("statement timeout")
        return "recorded"

    return record


ANSWER = Answered(attempt=1, key="k", parts=[["m1", "m2"]])


@pytest.mark.parametrize("through_heartbeater", [True, False])
async def test_a_live_sends_part_is_never_published_while_retried(
    published: list[Any], through_heartbeater: bool
) -> None:
    hb = _Beats()
    result = await until_recorded(
        _failing(2),
        ANSWER,
        hb=hb if through_heartbeater else None,
        live=True,  # type: ignore[arg-type]
    )
    assert result == "recorded"
    assert all("answered" not in seen for seen in hb.seen), hb.seen
    assert all(not any("answered" in (d or {}) for d in beat) for beat in published), published


async def test_a_live_sends_part_is_carried_out_when_the_ledger_fails_for_good(published: list[Any]) -> None:
    hb = _Beats()
    with pytest.raises(NotRecorded) as caught:
        await until_recorded(_failing(10), ANSWER, hb=hb, live=True)  # type: ignore[arg-type]
    assert caught.value.answered == ANSWER  # the caller publishes it once the send stopped
    assert "answered" not in hb.details


async def test_an_ended_sends_answer_is_published_while_retried(published: list[Any]) -> None:
    hb = _Beats()
    await until_recorded(_failing(1), ANSWER, hb=hb)  # type: ignore[arg-type]
    assert any(seen.get("answered") == ANSWER.details()["answered"] for seen in hb.seen)
    assert "answered" not in hb.details  # dropped once recorded
