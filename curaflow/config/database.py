"""The ``[database]`` section: the ledger's PostgreSQL and the bounds of every wait on it."""

from __future__ import annotations

from typing import TypedDict
from urllib.parse import parse_qs, unquote, urlparse

from pydantic import Field

from curaflow.config.base import Section


def url_password(url: str) -> str | None:
    """The password asyncpg sends for the ledger URL ``url``, read as asyncpg (0.32,
    ``asyncpg.connect_utils._parse_connect_dsn_and_args``) reads it: the URL's netloc
    (``urllib.parse.urlparse``) before its *first* ``@``, after its first ``:``,
    percent-decoded; when that is empty, the last ``password`` of its query
    (``?password=…``). ``urlsplit(url).password`` differs — the netloc before its *last*
    ``@``, not decoded, the query never read — and until 2026-12-07 curaflow masked and
    checked that one: a percent-encoded password or one in the query ran unchecked.

    Returns:
        None: the URL holds no password (asyncpg then reads ``PGPASSWORD`` or the passfile),
        or a query asyncpg cannot parse (it refuses the URL when the pool opens).
    """
    parsed = urlparse(url)
    auth, at, _ = parsed.netloc.partition("@")
    written = auth.partition(":")[2] if at else ""
    if written:
        return unquote(written)
    try:
        query = parse_qs(parsed.query, strict_parsing=True) if parsed.query else {}
    except ValueError:
        return None
    given = query.get("password")
    return given[-1] if given else None


class DatabaseSettings(Section):
    """The ledger's PostgreSQL. ``url`` None → embedded PostgreSQL (pgserver) in the state dir.

    Every wait on it is bounded (:class:`curaflow.ledger.db.LedgerPool`), so a PostgreSQL
    that stops answering fails calls instead of holding them:

    Attributes:
        pool_min_size / pool_max_size: the API's pool of connections (asyncpg's
            ``min_size`` ≥ 0, ``max_size`` ≥ 1, min ≤ max: refused at load, where until
            2026-12-06 they failed the API as it started; the order is one of
            :data:`curaflow.config.checks.ORDERED_SETTINGS`).
        connect_timeout_ms: one connection attempt.
        acquire_timeout_ms: waiting for a pooled connection (a connect included).
        statement_timeout_ms: one statement (client side, and the server's
            ``statement_timeout``). The API bounds its own waits tighter
            (``api.ledger_timeout_ms``).
    """

    url: str | None = None
    pool_min_size: int = Field(default=1, ge=0)
    pool_max_size: int = Field(default=10, ge=1)
    connect_timeout_ms: int = Field(default=5_000, ge=100)
    acquire_timeout_ms: int = Field(default=30_000, ge=100)
    statement_timeout_ms: int = Field(default=30_000, ge=100)

    def pool_bounds(self, cap_ms: int | None = None) -> PoolBounds:
        """The timeouts of :func:`curaflow.ledger.db.create_pool`, seconds, each at most ``cap_ms``."""

        def bound(ms: int) -> float:
            return min(ms, cap_ms) / 1000 if cap_ms is not None else ms / 1000

        return {
            "connect_timeout_s": bound(self.connect_timeout_ms),
            "acquire_timeout_s": bound(self.acquire_timeout_ms),
            "statement_timeout_s": bound(self.statement_timeout_ms),
        }


class PoolBounds(TypedDict):
    """The timeouts of :func:`curaflow.ledger.db.create_pool`, seconds."""

    connect_timeout_s: float
    acquire_timeout_s: float
    statement_timeout_s: float
