"""The account's rate gate is curaflow's: a ledger error under it is curaflow's, never the source's.

Every source request passes the account's gate in PostgreSQL
(:class:`curaflow.ledger.gates.LedgerGate`) from inside the source's call, so what the
ledger raises there reaches the activities through the source guard
(:mod:`curaflow.sources.guard`), which makes any exception of the source's own a
retryable ``SourceError`` of the source (``remote_http_error``, ``metadata_failed``,
``download_failed``, ``download_timeout``). A ledger that could not be used — a pool
whose connections are all taken, a statement held past its timeout behind a row lock, a
connection reset, asyncpg's protocol state broken mid-call — is curaflow's (DESIGN.md
"Safe defaults at the edges: the ledger under an activity"): it passes the guard as a
:class:`~curaflow.sources.gate.GateUnavailable` (the ledger's error its cause, which the
ledger's one classification, :func:`curaflow.ledger.db.is_unavailable`, reads as it reads
the error), the activity raises it as it is and Temporal retries; its last attempt is
``internal_error`` (owner ``curaflow``), never the source's. Until
2026-12-05 only ``PostgresError`` and ``InterfaceError`` passed: a pool or statement
timeout (``TimeoutError``), a reset (``OSError``) or an ``InternalClientError`` was the
source's, "Pixiv answered with an error".

The ledger is the suite's real PostgreSQL; the other classes are raised by a pool that
fails as told.
"""

from __future__ import annotations

from typing import Any

import asyncpg
import httpx
import pytest

from curaflow.domain.models import Work
from curaflow.ledger.db import create_pool, is_unavailable
from curaflow.ledger.gates import LedgerGate
from curaflow.sources.base import SourcePolicy
from curaflow.sources.errors import SourceError
from curaflow.sources.gate import GateUnavailable
from curaflow.sources.guard import guarded
from curaflow.sources.pixiv.client import PixivClient

pytestmark = pytest.mark.integration

GATE = "curaflow-test-source-gate-ledger-errors"
TOKEN = {"access_token": "a", "refresh_token": "r", "expires_in": 3600}


class Account:
    """A source of one Pixiv client behind a :class:`LedgerGate` (the worker's shape)."""

    kind = "pixiv"

    def __init__(self, pool: Any) -> None:
        self.name = "gated"
        self.policy = SourcePolicy()
        answers = httpx.MockTransport(lambda request: httpx.Response(200, json=TOKEN))
        self.client = PixivClient(
            httpx.AsyncClient(transport=answers),
            refresh_token="r",
            api_url="http://api.test",
            auth_url="http://api.test",
            gate=LedgerGate(pool, GATE, min_interval_ms=0),
        )

    async def work(self, work_id: str) -> Work:
        return await self.client.illust_detail(work_id)


async def curaflows(pool: Any) -> BaseException:
    """What a work's detail raises through the guard when the gate's ledger fails."""
    source = guarded(Account(pool), download_max_bytes=1 << 20, download_timeout_s=5.0)  # type: ignore[arg-type]
    with pytest.raises(Exception) as raised:  # the type is what is asserted
        await source.work("123")
    err = raised.value
    assert not isinstance(err, SourceError), f"the ledger's {type(err.__cause__).__name__} blamed on the source"
    assert isinstance(err, GateUnavailable)
    return err


async def test_a_pool_with_no_connection_to_give_is_curaflows(database_url: str) -> None:
    pool = await create_pool(database_url, min_size=1, max_size=1, acquire_timeout_s=0.2)
    try:
        async with pool.acquire():  # the only connection taken
            err = await curaflows(pool)
        assert isinstance(err.__cause__, TimeoutError)
        assert is_unavailable(err)  # the ledger's one classification sees through it
    finally:
        await pool.close()


async def test_a_statement_held_past_its_timeout_is_curaflows(database_url: str) -> None:
    pool = await create_pool(database_url, min_size=1, max_size=1, statement_timeout_s=0.3)
    holder = await asyncpg.connect(database_url)
    try:
        async with holder.transaction():
            await holder.execute(
                "INSERT INTO source_gates (gate, updated_at) VALUES ($1, 0) ON CONFLICT (gate) DO NOTHING", GATE
            )
            await holder.execute("SELECT 1 FROM source_gates WHERE gate = $1 FOR UPDATE", GATE)
            err = await curaflows(pool)  # the slot's upsert waits for the row past the statement timeout
            assert is_unavailable(err)
    finally:
        await holder.close()
        await pool.close()


@pytest.mark.parametrize(
    "failure",
    [
        ConnectionResetError(104, "Connection reset by peer"),
        asyncpg.exceptions.InternalClientError("cannot switch to state 12; another operation is in progress"),
        asyncpg.exceptions.SerializationError("could not serialize access"),
        asyncpg.exceptions.DeadlockDetectedError("deadlock detected"),
        asyncpg.exceptions.TooManyConnectionsError("sorry, too many clients already"),
        asyncpg.exceptions.AdminShutdownError("terminating connection due to administrator command"),
        asyncpg.exceptions.DiskFullError("could not extend file: No space left on device"),
        asyncpg.exceptions.ConnectionDoesNotExistError("connection was closed in the middle of operation"),
    ],
    ids=type,
)
async def test_every_ledger_failure_under_the_gate_is_curaflows(failure: Exception) -> None:
    class Failing:
        async def fetchrow(self, *args: Any, **kwargs: Any) -> Any:
            raise failure

        execute = fetchrow

    err = await curaflows(Failing())
    assert err.__cause__ is failure
    # The ledger's one classification (ledger.db.is_unavailable) reads through the gate's
    # wrapping as it reads the error itself: every error here is one it takes for an outage
    # (a serialization failure or a deadlock too, since SQLSTATE class 40 is one).
    assert is_unavailable(err) == is_unavailable(failure)
    assert is_unavailable(err)
