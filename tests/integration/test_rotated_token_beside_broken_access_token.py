"""A refresh token Pixiv rotates beside an access token curaflow cannot use is kept, as a
candidate, never in place of a token that works.

An answer to a refresh whose ``access_token`` is missing, null, a number or empty is no
access token (a retried attempt), but its ``refresh_token`` may be the only one Pixiv still
accepts: RFC 6749 §6 lets it revoke the token sent once it answered a new one. Until
2026-12-07 the whole answer was dropped, so the next refresh sent the revoked token —
``invalid_grant`` to every form of it, the account ``auth_failed`` until an operator
logged in again: one glitch of the token endpoint cost the account. The candidate is tried
first at the next refresh and the kept tokens after it, so one the endpoint refuses costs
one request, never the token that works. The token endpoint is
:class:`tests.fakes.pixiv_tokens.RotatingTokenEndpoint` (Pixiv's wire format), the ledger
the session's PostgreSQL, a "restart" a second source over the same ledger.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from curaflow.domain.reasons import TerminalReason
from curaflow.ledger.source_tokens import LedgerTokenStore
from curaflow.sources.errors import SourceError
from tests.fakes.pixiv_tokens import MISSING, RotatingTokenEndpoint
from tests.integration.test_refused_refresh_token import settings_with, worker
from tests.support import short_id

pytestmark = pytest.mark.integration


@pytest.fixture
async def endpoint() -> AsyncIterator[RotatingTokenEndpoint]:
    endpoint = await RotatingTokenEndpoint().start()
    try:
        yield endpoint
    finally:
        await endpoint.stop()


async def row(pool: asyncpg.Pool, key: str) -> tuple[Any, Any]:
    found = await pool.fetchrow("SELECT refresh_token, candidate_token FROM source_tokens WHERE account = $1", key)
    return (found["refresh_token"], found["candidate_token"]) if found else (None, None)


@pytest.mark.parametrize("access_token", [MISSING, None, 7, ""], ids=["missing", "null", "number", "empty"])
async def test_a_rotated_refresh_token_beside_an_unusable_access_token_survives_a_restart(
    ledger_pool: asyncpg.Pool, endpoint: RotatingTokenEndpoint, tmp_path: Path, access_token: Any
) -> None:
    account = f"acct-{short_id()}"
    settings = settings_with(tmp_path, endpoint.url, "configured-0", account)
    endpoint.valid, endpoint.broken = {"configured-0"}, [access_token]  # rotated-1 answered, configured-0 revoked
    source, context = await worker(settings, ledger_pool, account)
    try:
        with pytest.raises(SourceError) as glitch:
            await source.client.authenticate()
    finally:
        await context.aclose()
    assert glitch.value.retryable and glitch.value.reason != TerminalReason.AUTH_FAILED
    source, context = await worker(settings, ledger_pool, account)  # the worker restarted
    try:
        assert await source.client.authenticate()
    finally:
        await context.aclose()
    assert endpoint.sent[:2] == ["configured-0", "rotated-1"]
    assert await row(ledger_pool, settings.source_task_queue(account)) == ("rotated-3", None)


async def test_a_candidate_the_endpoint_refuses_gives_way_to_the_kept_token(
    ledger_pool: asyncpg.Pool, endpoint: RotatingTokenEndpoint, tmp_path: Path
) -> None:
    """A rotated token answered beside a broken access token that the endpoint then
    refuses costs one request: the kept token is sent next and stays, the candidate goes."""
    account = f"acct-{short_id()}"
    settings = settings_with(tmp_path, endpoint.url, "configured-0", account)
    key = settings.source_task_queue(account)
    await LedgerTokenStore(ledger_pool, key).save("configured-0", "kept-1")
    endpoint.valid, endpoint.broken = {"kept-1"}, [None]
    endpoint.accept_rotated = endpoint.revoke = False  # rotated-1 answered, never accepted
    source, context = await worker(settings, ledger_pool, account)
    try:
        with pytest.raises(SourceError):
            await source.client.authenticate()
        endpoint.rotate = False
        assert await source.client.authenticate()
    finally:
        await context.aclose()
    assert endpoint.sent == ["kept-1", "rotated-1", "kept-1"]
    assert await row(ledger_pool, key) == ("kept-1", None)
