"""A send's claim whose ``COMMIT`` was not acknowledged is no send that may have landed.

The ``deliver`` attempt claims its send (the intent ``sending``, its attempt named, its
send lease from the database's clock) in one transaction and sends only once it
committed. The connection dies as it commits — PostgreSQL restarted or failed over, a
proxy cut it after ``COMMIT`` — and the attempt fails with the driver's error: the
commit's fate is unknown to it, and it never sent. Until 2026-12-06 the next attempt
found the intent ``sending``, waited for the dead attempt's send lease, then took it for a
send that may have landed: an at-most-once route's cell ended ``delivery_unknown`` — owner
the route, "check the route's receiver" — for a work that was never sent, because the
ledger failed. Now the attempt's last heartbeat says its send never left
(:class:`~curaflow.ledger.deliveries.Answered` with no part and no receipt), and the next
attempt's claim resolves the commit by reading the intent: ``sending`` from that very
send (``attempts`` equal) is a send that ended with nothing posted.

The lost acknowledgement is the driver's call: the real ``COMMIT`` runs on the session's
real PostgreSQL, then the connection is closed and asyncpg's own class raised. The
``deliver`` activity runs in the test process with a worker's real dependencies (a
directory route on disk, declared at most once here — as a Telegram or Discord route is
under ``on_ambiguous = "fail"``, the default: a re-send after an unknown outcome is not
safe). On a route that tolerates a re-send the retry sent it, marked ``maybe_delivered``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from temporalio.testing import ActivityEnvironment

from activities.deliver import DeliverActivity
from activities.deps import ActivityDeps
from curaflow.domain.cells import CellState
from curaflow.domain.messages import DeliverInput
from curaflow.ledger.db import LedgerConnection
from curaflow.routes.directory import DirectoryRoute
from tests.deps_support import deps
from tests.integration.test_send_lease import _bound, _directory_step, _intent
from tests.support import Stack, job_env

pytestmark = pytest.mark.integration

__all__ = ["deps"]  # the module's fixture (tests.deps_support)


class _CommitAckLost:
    """``LedgerConnection.execute`` patched: the first ``COMMIT`` of a transaction that
    claimed a send (``status = 'sending'``) runs on the server, then the connection is
    closed and the call raises as a dead connection does — the claim committed, its
    acknowledgement lost."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.lost = 0
        self._armed: set[int] = set()
        real = LedgerConnection.execute
        lost = self

        async def execute(conn: LedgerConnection, *args: Any, **kwargs: Any) -> Any:
            query = str(args[0]) if args else ""
            result = await real(conn, *args, **kwargs)
            if "SET status = 'sending'" in query and lost.lost == 0:
                lost._armed.add(id(conn))
            elif query.strip().upper().startswith("COMMIT") and id(conn) in lost._armed:
                lost._armed.discard(id(conn))
                lost.lost += 1
                conn.terminate()
                raise asyncpg.exceptions.ConnectionDoesNotExistError("connection was closed in the middle of operation")
            return result

        monkeypatch.setattr(LedgerConnection, "execute", execute)


@pytest.fixture(autouse=True)
def _at_most_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(DirectoryRoute, "resend_safe", False)


def _env(job_id: str, attempt: int, details: list[Any], beats: list[tuple[Any, ...]]) -> ActivityEnvironment:
    env = job_env(job_id)
    env.info = dataclasses.replace(env.info, attempt=attempt, heartbeat_details=details)
    env.on_heartbeat = lambda *d: beats.append(d)
    return env


@pytest.mark.parametrize("lapsed", [False, True], ids=["retried-at-once", "retried-after-the-lease"])
async def test_a_claim_whose_commit_was_not_acknowledged_is_sent_once_not_unknown(
    deps: tuple[Stack, ActivityDeps], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lapsed: bool
) -> None:
    stack, opened = deps
    target, route = _directory_step(stack)
    job_id = await _bound(opened.pool, route)
    inp = DeliverInput(job_id=job_id, target=target, route=route, heartbeat_interval_ms=1000)
    fault = _CommitAckLost(monkeypatch)
    beats: list[tuple[Any, ...]] = []

    with pytest.raises(asyncpg.exceptions.ConnectionDoesNotExistError):
        await _env(job_id, 1, [], beats).run(DeliverActivity(opened).deliver, inp)

    assert fault.lost == 1
    claimed = await _intent(opened.pool, job_id)
    assert (claimed["status"], claimed["attempts"]) == ("sending", 1), claimed  # the claim committed
    assert not list((tmp_path / "delivered").rglob("manifest.json"))  # nothing was sent
    if lapsed:  # Temporal's retry came after the dead attempt's send lease
        await opened.pool.execute(
            "UPDATE delivery_intents SET send_until = send_until - 600000 WHERE job_id = $1", job_id
        )

    # Temporal's next attempt, with the failed attempt's last heartbeat details.
    details = list(beats[-1]) if beats else []
    update = await _env(job_id, 2, details, []).run(DeliverActivity(opened).deliver, inp)

    assert update.cell.state == CellState.SUBMITTED, update
    assert update.delivery is not None and update.delivery.status == "delivered", update
    intent = await _intent(opened.pool, job_id)
    assert (intent["status"], intent["attempts"], intent["maybe_delivered"]) == ("delivered", 2, False), intent
    assert len(list((tmp_path / "delivered").rglob("manifest.json"))) == 1  # sent once


async def test_a_claim_whose_commit_was_lost_is_not_taken_for_a_send(
    deps: tuple[Stack, ActivityDeps], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The same failure, the commit rolled back this time (the server never got it): the
    # heartbeat's "never sent" names a send number no claim wrote, and is ignored.
    stack, opened = deps
    target, route = _directory_step(stack)
    job_id = await _bound(opened.pool, route)
    inp = DeliverInput(job_id=job_id, target=target, route=route, heartbeat_interval_ms=1000)
    real = LedgerConnection.execute
    lost: list[int] = []

    async def execute(conn: LedgerConnection, *args: Any, **kwargs: Any) -> Any:
        query = str(args[0]) if args else ""
        if query.strip().upper().startswith("COMMIT") and conn.is_in_transaction() and not lost:
            lost.append(1)
            await real(conn, "ROLLBACK")
            conn.terminate()
            raise asyncpg.exceptions.ConnectionDoesNotExistError("connection was closed in the middle of operation")
        return await real(conn, *args, **kwargs)

    monkeypatch.setattr(LedgerConnection, "execute", execute)
    beats: list[tuple[Any, ...]] = []
    with pytest.raises(asyncpg.exceptions.ConnectionDoesNotExistError):
        await _env(job_id, 1, [], beats).run(DeliverActivity(opened).deliver, inp)
    assert (await _intent(opened.pool, job_id))["status"] == "reserved"

    update = await _env(job_id, 2, list(beats[-1]) if beats else [], []).run(DeliverActivity(opened).deliver, inp)

    assert update.cell.state == CellState.SUBMITTED, update
    intent = await _intent(opened.pool, job_id)
    assert (intent["status"], intent["attempts"], intent["maybe_delivered"]) == ("delivered", 1, False), intent
    assert len(list((tmp_path / "delivered").rglob("manifest.json"))) == 1
