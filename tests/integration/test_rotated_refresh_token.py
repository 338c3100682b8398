"""A refresh token Pixiv rotates survives a restart of the worker.

OAuth 2 lets the token endpoint answer a refresh with a new refresh token and revoke the
one sent (RFC 6749 §6); the reference says to keep whatever comes back (§2.1). Until
2026-12-06 the worker kept it in memory only: after a restart it sent the configured token
again — revoked, had Pixiv rotated — and every job of the account ended ``auth_failed``
until an operator logged in again. The account is built here as the worker builds it
(:func:`activities.deps.source_context` over the session's ledger, then the registered
Pixiv factory), Pixiv's token endpoint played by a party answering on a socket; a
"restart" is a second context and source over the same ledger.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import asyncpg
import pytest
import tomli_w

from activities.deps import source_context
from curaflow.config import Settings, load_settings
from curaflow.sources.pixiv.source import PixivSource
from curaflow.sources.registry import build_source
from tests.fakes.hostile import Behaviour, HostileParty
from tests.support import short_id

pytestmark = pytest.mark.integration


def answer(refresh_token: str) -> Behaviour:
    body = {"access_token": f"a-{short_id()}", "refresh_token": refresh_token, "expires_in": 3600}
    return Behaviour(body=json.dumps(body).encode())


@pytest.fixture
async def party() -> AsyncIterator[HostileParty]:
    party = await HostileParty().start()
    try:
        yield party
    finally:
        await party.stop()


def settings_with(tmp_path: Path, party: HostileParty, refresh_token: str, account: str) -> Settings:
    """Pixiv for real (a token configured) at the party; ``account`` is the test's own, so
    is its task queue (the ledger's row of the account is the session's)."""
    path = tmp_path / "curaflow.toml"
    pixiv = {
        "refresh_token": refresh_token,
        "api_url": party.url,
        "auth_url": party.url,
        "accounts": {account: {"refresh_token": refresh_token}},
    }
    data = {"state_dir": str(tmp_path / "state"), "pixiv": pixiv, "temporal": {"task_queue": f"tq-{account}"}}
    path.write_text(tomli_w.dumps(data))
    return load_settings(path)


async def started(settings: Settings, pool: asyncpg.Pool, account: str) -> tuple[PixivSource, Any]:
    """The account's source as a worker process builds it, and its context (to close)."""
    context = source_context(settings, pool)
    source = build_source(account, settings.source_configs()[account], context)
    assert isinstance(source, PixivSource)
    return source, context


def sent(party: HostileParty) -> list[str]:
    return [parse_qs(c.body.decode())["refresh_token"][0] for c in party.requests("/auth/token")]


async def test_a_rotated_refresh_token_is_the_one_sent_after_a_restart(
    ledger_pool: asyncpg.Pool, party: HostileParty, tmp_path: Path
) -> None:
    account = f"acct-{short_id()}"
    settings = settings_with(tmp_path, party, "configured-0", account)
    party.paths = {"/auth/token": answer("rotated-1")}
    source, context = await started(settings, ledger_pool, account)
    try:
        await source.client.authenticate()
    finally:
        await context.aclose()

    party.paths = {"/auth/token": answer("rotated-1")}  # Pixiv answers the same token back from now on
    source, context = await started(settings, ledger_pool, account)  # the worker restarted
    try:
        await source.client.authenticate()
        await source.client.authenticate(force=True)
    finally:
        await context.aclose()
    assert sent(party) == ["configured-0", "rotated-1", "rotated-1"]


async def test_a_token_the_operator_configures_anew_wins_over_one_rotated_from_the_old(
    ledger_pool: asyncpg.Pool, party: HostileParty, tmp_path: Path
) -> None:
    """After ``curaflow pixiv login`` the operator's new token is sent, not a token rotated
    from the one it replaced (tied to its origin, the configured token's SHA-256)."""
    account = f"acct-{short_id()}"
    party.paths = {"/auth/token": answer("rotated-1")}
    source, context = await started(settings_with(tmp_path, party, "configured-0", account), ledger_pool, account)
    try:
        await source.client.authenticate()
    finally:
        await context.aclose()
    source, context = await started(settings_with(tmp_path, party, "logged-in-2", account), ledger_pool, account)
    try:
        await source.client.authenticate()
    finally:
        await context.aclose()
    assert sent(party) == ["configured-0", "logged-in-2"]
    stored = await ledger_pool.fetchval("SELECT count(*) FROM source_tokens WHERE refresh_token = 'configured-0'")
    assert stored == 0  # the configured token itself is never written


async def test_a_token_answered_back_unchanged_writes_nothing(
    ledger_pool: asyncpg.Pool, party: HostileParty, tmp_path: Path
) -> None:
    """What Pixiv does in practice (pixivpy's maintainers: the same token back): no row."""
    account = f"acct-{short_id()}"
    party.paths = {"/auth/token": answer("configured-0")}
    source, context = await started(settings_with(tmp_path, party, "configured-0", account), ledger_pool, account)
    try:
        await source.client.authenticate()
        await source.client.authenticate(force=True)
    finally:
        await context.aclose()
    key = settings_with(tmp_path, party, "configured-0", account).source_task_queue(account)
    assert await ledger_pool.fetchval("SELECT count(*) FROM source_tokens WHERE account = $1", key) == 0
