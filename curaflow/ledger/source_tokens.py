"""An account's rotated refresh token in the ledger (table ``source_tokens``, migration
0052): the :class:`~curaflow.sources.tokens.TokenStore` the worker hands each Pixiv
account, so a token Pixiv rotated survives a restart and serves every worker process
(:mod:`curaflow.sources.tokens`)."""

from __future__ import annotations

import asyncpg

from curaflow.ledger.db import DB_NOW_MS, LEDGER_ERRORS
from curaflow.sources.tokens import TokenStoreUnavailable, origin_of


class LedgerTokenStore:
    """The ``source_tokens`` row ``key`` (:class:`~curaflow.sources.tokens.TokenStore`).

    A ledger error of either method is raised as
    :class:`~curaflow.sources.tokens.TokenStoreUnavailable` (curaflow's failure, never the
    source's).

    Args:
        pool: the ledger pool.
        key: the account's source task queue name (as its gate's row).
    """

    def __init__(self, pool: asyncpg.Pool, key: str) -> None:
        self._pool = pool
        self.key = key

    async def load(self, configured: str) -> str | None:
        """The token rotated from ``configured``, else None (no row, or a row of another
        configured token: the operator's newer token wins)."""
        try:
            token = await self._pool.fetchval(
                "SELECT refresh_token FROM source_tokens WHERE account = $1 AND origin_sha256 = $2",
                self.key,
                origin_of(configured),
            )
        except LEDGER_ERRORS as err:
            raise TokenStoreUnavailable(
                f"refresh token of {self.key!r}: the ledger failed to read it ({type(err).__name__}: {err})"[:500]
            ) from err
        return str(token) if token else None

    async def save(self, configured: str, refresh_token: str) -> None:
        """Keep ``refresh_token`` as rotated from ``configured`` (one row per account,
        replaced)."""
        try:
            await self._pool.execute(
                f"""INSERT INTO source_tokens (account, origin_sha256, refresh_token, updated_at)
                    VALUES ($1, $2, $3, {DB_NOW_MS})
                    ON CONFLICT (account) DO UPDATE SET origin_sha256 = EXCLUDED.origin_sha256,
                        refresh_token = EXCLUDED.refresh_token, updated_at = EXCLUDED.updated_at""",
                self.key,
                origin_of(configured),
                refresh_token,
            )
        except LEDGER_ERRORS as err:
            raise TokenStoreUnavailable(
                f"refresh token of {self.key!r}: the ledger failed to write it ({type(err).__name__}: {err})"[:500]
            ) from err

    async def forget(self, configured: str, refresh_token: str) -> None:
        """Delete the row if it still keeps ``refresh_token`` as rotated from ``configured``
        (a token another worker wrote since stays)."""
        try:
            await self._pool.execute(
                "DELETE FROM source_tokens WHERE account = $1 AND origin_sha256 = $2 AND refresh_token = $3",
                self.key,
                origin_of(configured),
                refresh_token,
            )
        except LEDGER_ERRORS as err:
            raise TokenStoreUnavailable(
                f"refresh token of {self.key!r}: the ledger failed to forget it ({type(err).__name__}: {err})"[:500]
            ) from err
