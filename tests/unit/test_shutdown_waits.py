"""Waits a request holds end when the server stops (:meth:`EventNotifier.release_waiters`).

A cancel waiting for its job to end (``api.cancel_wait_ms``) answers the job as it is
once the server's shutdown begins, as a long poll answers its page
(``tests/integration/test_api_shutdown.py``); a waiter registered after the shutdown
began is woken at once.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from curaflow.jobs import cancellation
from curaflow.ledger.listen import EventNotifier

#: Far longer than the wait may last once the server stops.
WAIT_S = 3600.0


@pytest.fixture
def never_completes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    reads: list[str] = []

    async def completed(_pool: Any, job_id: str) -> bool:
        reads.append(job_id)
        return False

    monkeypatch.setattr(cancellation, "_completed", completed)
    return reads


async def test_a_cancel_waiting_for_its_job_answers_when_the_server_stops(never_completes: list[str]) -> None:
    notifier = EventNotifier("postgresql://unused")  # never started: only its waiters are used
    wait = asyncio.create_task(cancellation._wait_terminal(None, None, "j", WAIT_S, notifier, 0))  # type: ignore[arg-type]
    while not never_completes:  # the wait has read the job once and waits now
        await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert not wait.done()

    notifier.release_waiters()
    await asyncio.wait_for(wait, 5)  # before: it waited on for the rest of WAIT_S
    assert notifier.waiting == 0


async def test_a_waiter_registered_after_the_shutdown_began_is_woken_at_once() -> None:
    notifier = EventNotifier("postgresql://unused")
    notifier.release_waiters()
    with notifier.watch("j") as woken:
        assert woken.is_set()
    assert notifier.closing
