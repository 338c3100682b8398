"""A refresh token Pixiv refuses is blamed on the account only when no token curaflow
holds for it is accepted.

The account's refresh token lives in three places: the ledger's row (the token last
rotated by any worker, :mod:`curaflow.sources.tokens`), the worker's memory (the token it
last sent or got) and the configuration. With rotation (RFC 6749 §6: a new refresh token
answered, the one sent revoked) the worker's memory goes stale as soon as another worker of
the account refreshes, and the ledger's row goes stale when the operator's configured token
is the one Pixiv accepts. Until 2026-12-06 the worker read the row once, at its first
refresh, and sent its memory's token ever after: a second worker's rotation made the first
send a revoked token at its next refresh (``invalid_grant``: ``auth_failed``, every job of
the account), and a row Pixiv refused was sent again at every restart although the
configured token worked. The token endpoint is :class:`tests.fakes.pixiv_tokens.RotatingTokenEndpoint`
(Pixiv's wire format), the ledger the session's PostgreSQL.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest
import tomli_w

from activities.deps import source_context
from curaflow.config import Settings, load_settings
from curaflow.domain.reasons import TerminalReason
from curaflow.ledger.source_tokens import LedgerTokenStore
from curaflow.sources.errors import SourceError
from curaflow.sources.pixiv.source import PixivSource
from curaflow.sources.registry import build_source
from tests.fakes.pixiv_tokens import RotatingTokenEndpoint
from tests.support import short_id

pytestmark = pytest.mark.integration


@pytest.fixture
async def endpoint() -> AsyncIterator[RotatingTokenEndpoint]:
    endpoint = await RotatingTokenEndpoint().start()
    try:
        yield endpoint
    finally:
        await endpoint.stop()


def settings_with(tmp_path: Path, url: str, refresh_token: str, account: str) -> Settings:
    path = tmp_path / f"curaflow-{short_id()}.toml"
    pixiv = {
        "refresh_token": refresh_token,
        "api_url": url,
        "auth_url": url,
        "accounts": {account: {"refresh_token": refresh_token, "min_interval_ms": 0}},
    }
    data = {"state_dir": str(tmp_path / "state"), "pixiv": pixiv, "temporal": {"task_queue": f"tq-{account}"}}
    path.write_text(tomli_w.dumps(data))
    return load_settings(path)


async def worker(settings: Settings, pool: asyncpg.Pool, account: str) -> tuple[PixivSource, Any]:
    """The account's source as one worker process builds it, and its context (to close)."""
    context = source_context(settings, pool)
    source = build_source(account, settings.source_configs()[account], context)
    assert isinstance(source, PixivSource)
    return source, context


async def stored(pool: asyncpg.Pool, settings: Settings, account: str) -> str | None:
    key = settings.source_task_queue(account)
    token = await pool.fetchval("SELECT refresh_token FROM source_tokens WHERE account = $1", key)
    return str(token) if token is not None else None


async def test_a_worker_never_sends_a_token_another_worker_of_the_account_rotated_away(
    ledger_pool: asyncpg.Pool, endpoint: RotatingTokenEndpoint, tmp_path: Path
) -> None:
    """The account's source queue moving from one worker process to another and back (its
    lease handed over): each refreshes with the ledger's token, never its own stale one."""
    account = f"acct-{short_id()}"
    settings = settings_with(tmp_path, endpoint.url, "configured-0", account)
    endpoint.valid = {"configured-0"}
    (a, a_context), (b, b_context) = [await worker(settings, ledger_pool, account) for _ in range(2)]
    try:
        await a.client.authenticate()  # configured-0 -> rotated-1, configured-0 revoked
        await b.client.authenticate()  # reads rotated-1 -> rotated-3, rotated-1 revoked
        for _ in range(3):  # each one's access token expires in turn
            await a.client.authenticate(force=True)
            await b.client.authenticate(force=True)
    finally:
        await a_context.aclose()
        await b_context.aclose()
    assert endpoint.sent[:2] == ["configured-0", "rotated-1"]
    assert await stored(ledger_pool, settings, account) in endpoint.valid


async def test_a_stored_token_pixiv_refuses_gives_way_to_the_configured_one(
    ledger_pool: asyncpg.Pool, endpoint: RotatingTokenEndpoint, tmp_path: Path
) -> None:
    """A row Pixiv refuses (a ledger restored from an old backup, a token revoked on
    Pixiv's side) while the configured token works: the configured one is sent, the row
    forgotten — not ``auth_failed`` at every restart for good."""
    account = f"acct-{short_id()}"
    settings = settings_with(tmp_path, endpoint.url, "configured-0", account)
    endpoint.valid, endpoint.rotate = {"configured-0"}, False
    await LedgerTokenStore(ledger_pool, settings.source_task_queue(account)).save("configured-0", "stale-1")
    for _ in range(2):  # the worker, then the worker restarted
        source, context = await worker(settings, ledger_pool, account)
        try:
            await source.client.authenticate()
        finally:
            await context.aclose()
    assert endpoint.sent == ["stale-1", "configured-0", "configured-0"]
    assert await stored(ledger_pool, settings, account) is None


async def test_a_refresh_token_refused_in_every_form_is_the_accounts(
    ledger_pool: asyncpg.Pool, endpoint: RotatingTokenEndpoint, tmp_path: Path
) -> None:
    """Only when the ledger's, the worker's and the configured token are all refused is
    the account blamed (``auth_failed``, not retried), each sent once."""
    account = f"acct-{short_id()}"
    settings = settings_with(tmp_path, endpoint.url, "configured-0", account)
    endpoint.valid = set()
    await LedgerTokenStore(ledger_pool, settings.source_task_queue(account)).save("configured-0", "stale-1")
    source, context = await worker(settings, ledger_pool, account)
    try:
        with pytest.raises(SourceError) as refused:
            await source.client.authenticate()
    finally:
        await context.aclose()
    assert refused.value.reason == TerminalReason.AUTH_FAILED and not refused.value.retryable
    assert endpoint.sent == ["stale-1", "configured-0"]
