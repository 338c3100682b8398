"""The ledger fails between a route's answer and its record: the report names curaflow,
never the route, and what the route answered is recorded.

A Telegram send is answered; the statement that records the answer fails (a statement
timeout, a backend ended under the connection — a PostgreSQL restart). Until 2026-12-05
the intent stayed ``sending``, the next attempt took it for a send that may have landed,
and the cell ended ``delivery_unknown`` — "check the route's receiver" — though the route
had answered; for an album whose first part was posted it did so at once (the failure of
``on_part`` was taken for the route's own). Now the recording is tried again in the
attempt (:data:`activities.deliver.recording.RECORD_RETRY_S`), and when the ledger fails
longer the answer is the attempt's last heartbeat, which the next attempt records
(:func:`curaflow.ledger.deliveries.claim_send`'s ``answered``): the work is posted once and
reported as it is.

The failure is injected in the suite's real PostgreSQL: a trigger on ``delivery_intents``
for this module's route only, failing the recording statement a set number of times (a
sequence counts them: it is not rolled back with the statement). Real worker processes,
the Temporal dev server, the Pixiv replay and the fake Telegram Bot API.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from activities.deliver.recording import RECORD_RETRY_S
from tests.conftest import StackFactory
from tests.fakes.replay import ReplayServer, ordered
from tests.fakes.telegram import FakeTelegram, TgReply
from tests.jobs_support import intents, telegram_route
from tests.support import Stack, eventually, short_id

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TAGS = ["オリジナル"]
ALBUM_TAG = "描き方"
#: Fails every try of one attempt: the next attempt has to record the answer.
LONGER = len(RECORD_RETRY_S) + 1

#: The recording statements, as conditions on the intent's row (OLD → NEW).
RECEIPT = "OLD.status = 'sending' AND NEW.status = 'delivered'"
PART = "OLD.status = 'sending' AND NEW.status = 'sending' AND NEW.remote_ids IS DISTINCT FROM OLD.remote_ids"
FAILURE = "OLD.status = 'sending' AND NEW.status = 'reserved'"


@contextlib.asynccontextmanager
async def ledger_fails(
    pool: asyncpg.Pool, route: str, when: str, *, times: int, terminate: bool = False
) -> AsyncIterator[Callable[[], Awaitable[int]]]:
    """The UPDATE of ``route``'s delivery intents matching ``when`` fails its first ``times``
    runs: a statement timeout, or (``terminate``) the backend ended under the connection.
    Yields ``tried()``: how many such UPDATEs ran so far (failed or not)."""
    name = f"ledger_fault_{uuid.uuid4().hex[:10]}"
    fail = (
        "PERFORM pg_terminate_backend(pg_backend_pid()); PERFORM pg_sleep(5);"
        if terminate
        else "RAISE EXCEPTION 'canceling statement due to statement timeout' USING ERRCODE = 'query_canceled';"
    )
    await pool.execute(f"CREATE SEQUENCE {name}")
    await pool.execute(
        f"""CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                IF nextval('{name}') <= {times} THEN {fail} END IF;
                RETURN NEW;
            END $$"""
    )
    await pool.execute(
        f"""CREATE TRIGGER {name} BEFORE UPDATE ON delivery_intents FOR EACH ROW
            WHEN (NEW.route = '{route}' AND {when}) EXECUTE FUNCTION {name}()"""
    )

    async def tried() -> int:
        return int(await pool.fetchval(f"SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM {name}"))

    try:
        yield tried
    finally:
        await pool.execute(f"DROP TRIGGER {name} ON delivery_intents")
        await pool.execute(f"DROP FUNCTION {name}()")
        await pool.execute(f"DROP SEQUENCE {name}")


def tg_stack(make_stack: StackFactory, replay: ReplayServer, telegram: FakeTelegram, tg: str, **route: Any) -> Stack:
    return make_stack(
        {
            "pixiv": replay.config(),
            "routes": {tg: telegram_route(telegram, **route)},
            "targets": [
                {"id": "demo", "query": {"tags": TAGS}, "routes": [tg]},
                {"id": "album", "query": {"tags": [ALBUM_TAG]}, "routes": [tg]},
                {"id": "cache", "query": {"tags": TAGS}, "routes": [tg], "storage_mode": "cache"},
            ],
        }
    )


def posts(telegram: FakeTelegram) -> int:
    """How many times something was posted (an album is one post of several messages)."""
    return len({m.get("media_group_id", m["message_id"]) for m in telegram.messages})


def sends(telegram: FakeTelegram) -> list[str]:
    return [r.method for r in telegram.requests if r.method.startswith("send")]


async def run(stack: Stack, target: str, tags: list[str]) -> Any:
    await stack.start_worker()
    job_id = await stack.admit(stack.task(target_id=target, query={"tags": tags}))
    return await stack.wait_terminal(job_id, timeout_s=90)


@pytest.mark.parametrize(("times", "terminate"), [(1, True), (LONGER, False)], ids=["once-terminated", "longer"])
async def test_a_receipt_the_ledger_failed_to_record_is_recorded(
    make_stack: StackFactory, replay: ReplayServer, telegram: FakeTelegram, times: int, terminate: bool
) -> None:
    tg = f"tg-{short_id()}"
    stack = tg_stack(make_stack, replay, telegram, tg)
    async with ledger_fails(await stack.ledger(), tg, RECEIPT, times=times, terminate=terminate):
        record = await run(stack, "demo", TAGS)

    cell = record.cells[0]
    assert (cell.state, cell.reason, record.business_status) == ("submitted", None, "success"), cell
    intent = (await intents(await stack.ledger(), record.job_id))[tg]
    assert (intent["status"], intent["attempts"]) == ("delivered", 1), dict(intent)  # sent once
    assert intent["remote_id"] is not None
    assert len(sends(telegram)) == 1 and posts(telegram) == 1, sends(telegram)


async def test_a_receipt_the_next_attempt_recorded_deletes_the_cached_artifact(
    make_stack: StackFactory, replay: ReplayServer, telegram: FakeTelegram
) -> None:
    # storage_mode = "cache": the worker's files go once every route confirmed. The receipt
    # is recorded by the next attempt (from the heartbeat's `answered`): until 2026-12-05
    # that path skipped the deletion, and the files stayed on the worker's disk for good.
    tg = f"tg-{short_id()}"
    stack = tg_stack(make_stack, replay, telegram, tg)
    async with ledger_fails(await stack.ledger(), tg, RECEIPT, times=LONGER):
        record = await run(stack, "cache", TAGS)

    cell = record.cells[0]
    assert (cell.state, cell.reason) == ("submitted", None), cell
    assert cell.artifact is not None and cell.artifact.files
    assert [f.path for f in cell.artifact.files if Path(f.path).exists()] == []
    assert len(sends(telegram)) == 1, sends(telegram)


@pytest.mark.parametrize("times", [1, LONGER], ids=["once", "longer"])
async def test_an_album_part_the_ledger_failed_to_record_is_recorded_and_the_rest_sent_once(
    make_stack: StackFactory, replay: ReplayServer, telegram: FakeTelegram, times: int
) -> None:
    # Three pages of 89, 94 and 127 KB under a limit of 250 KB per request: two parts (an
    # album of two, then a photo). Recording the first part fails.
    [work_id] = ordered(ALBUM_TAG)
    replay.faults.image_sizes = {work_id: (2000, 2000)}
    telegram.max_request_bytes = 250_000
    tg = f"tg-{short_id()}"
    stack = tg_stack(make_stack, replay, telegram, tg, max_request_bytes=250_000)
    async with ledger_fails(await stack.ledger(), tg, PART, times=times):
        record = await run(stack, "album", [ALBUM_TAG])

    cell = record.cells[0]
    assert (cell.state, cell.reason, record.business_status) == ("submitted", None, "success"), cell
    assert sends(telegram) == ["sendMediaGroup", "sendPhoto"]  # each part posted once
    assert len(telegram.messages) == 3
    intent = (await intents(await stack.ledger(), record.job_id))[tg]
    assert intent["status"] == "delivered", dict(intent)
    assert [len(part) for part in intent["remote_ids"]] == [2, 1]


async def test_a_refusal_the_ledger_failed_to_record_is_sent_again_not_unknown(
    make_stack: StackFactory, replay: ReplayServer, telegram: FakeTelegram
) -> None:
    # Telegram answers 429 (nothing posted); the record of that answer fails for longer
    # than the attempt tries. The answer proves nothing landed: the next attempt sends
    # the work (it found the intent `sending` and ended it `delivery_unknown`).
    telegram.script["*"] = [TgReply("429", retry_after=1), TgReply("ok")]
    tg = f"tg-{short_id()}"
    stack = tg_stack(make_stack, replay, telegram, tg)
    async with ledger_fails(await stack.ledger(), tg, FAILURE, times=LONGER):
        record = await run(stack, "demo", TAGS)

    cell = record.cells[0]
    assert (cell.state, cell.reason, record.business_status) == ("submitted", None, "success"), cell
    assert len(sends(telegram)) == 2 and posts(telegram) == 1, sends(telegram)
    assert (await intents(await stack.ledger(), record.job_id))[tg]["status"] == "delivered"


async def test_a_part_whose_record_a_cancel_cut_is_kept_and_never_posted_again(
    make_stack: StackFactory, replay: ReplayServer, telegram: FakeTelegram
) -> None:
    # The first part of an album is posted; recording it fails for longer than the
    # attempt tries; the job is cancelled (POST /jobs/{id}/cancel) meanwhile. The part is
    # at Telegram: the intent must say so (never `released`, which offers the work again),
    # and the next job of the target must not post it again.
    [work_id] = ordered(ALBUM_TAG)
    replay.faults.image_sizes = {work_id: (2000, 2000)}
    telegram.max_request_bytes = 250_000
    tg = f"tg-{short_id()}"
    stack = tg_stack(make_stack, replay, telegram, tg, max_request_bytes=250_000)
    http = await stack.start_api()
    pool = await stack.ledger()
    async with ledger_fails(pool, tg, PART, times=LONGER):
        await stack.start_worker()
        job_id = await stack.admit(stack.task(target_id="album", query={"tags": [ALBUM_TAG]}))
        await eventually(lambda: "sendMediaGroup" in sends(telegram), what="the first part posted")
        assert (await http.post(f"/jobs/{job_id}/cancel")).status_code in (200, 202)
        await stack.wait_terminal(job_id, timeout_s=90)

    rows = await pool.fetch("SELECT status, remote_ids FROM delivery_intents WHERE job_id = $1", job_id)
    assert [r["status"] for r in rows] == ["unknown"], [dict(r) for r in rows]
    assert [len(part) for part in rows[0]["remote_ids"]] == [2], [dict(r) for r in rows]

    again = await stack.admit(stack.task(target_id="album", query={"tags": [ALBUM_TAG]}))
    await stack.wait_terminal(again, timeout_s=90)
    assert sends(telegram) == ["sendMediaGroup"], sends(telegram)  # never posted again
