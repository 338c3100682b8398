"""The ``[database]`` section: the ledger's PostgreSQL and the bounds of every wait on it."""

from __future__ import annotations

from typing import TypedDict

from pydantic import Field

from curaflow.config.base import Section


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
