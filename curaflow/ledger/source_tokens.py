"""An account's rotated refresh token in the ledger (table ``source_tokens``, migration
0052; its candidate, 0053): the :class:`~curaflow.sources.tokens.TokenStore` the worker hands each Pixiv
account, so a token Pixiv rotated survives a restart and serves every worker process
(:mod:`curaflow.sources.tokens`)."""

from __future__ import annotations

import asyncpg

from curaflow.domain.text import clipped_within
from curaflow.ledger.db import DB_NOW_MS, LEDGER_ERRORS, REASON_CHARS
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
                clipped_within(
                    f"refresh token of {self.key!r}: the ledger failed to read it ({type(err).__name__}: {err})",
                    REASON_CHARS,
                )
            ) from err
        return str(token) if token else None

    async def save(self, configured: str, refresh_token: str) -> None:
        """Keep ``refresh_token`` as rotated from ``configured`` (one row per account,
        replaced; its candidate kept while the row is of the same configured token)."""
        await self._upsert(configured, refresh_token, "refresh_token", "save")

    async def propose(self, configured: str, refresh_token: str) -> None:
        """Keep ``refresh_token`` as ``configured``'s candidate (the rotated token kept
        while the row is of the same configured token)."""
        await self._upsert(configured, refresh_token, "candidate_token", "propose")

    async def _upsert(self, configured: str, token: str, column: str, what: str) -> None:
        other = "candidate_token" if column == "refresh_token" else "refresh_token"
        try:
            await self._pool.execute(
                f"""INSERT INTO source_tokens (account, origin_sha256, {column}, updated_at)
                    VALUES ($1, $2, $3, {DB_NOW_MS})
                    ON CONFLICT (account) DO UPDATE SET origin_sha256 = EXCLUDED.origin_sha256,
                        {column} = EXCLUDED.{column}, updated_at = EXCLUDED.updated_at,
                        {other} = CASE WHEN source_tokens.origin_sha256 = EXCLUDED.origin_sha256
                                       THEN source_tokens.{other} END""",
                self.key,
                origin_of(configured),
                token,
            )
        except LEDGER_ERRORS as err:
            raise TokenStoreUnavailable(
                clipped_within(
                    f"refresh token of {self.key!r}: the ledger failed to {what} it ({type(err).__name__}: {err})",
                    REASON_CHARS,
                )
            ) from err

    async def candidate(self, configured: str) -> str | None:
        """``configured``'s candidate, else None."""
        try:
            token = await self._pool.fetchval(
                "SELECT candidate_token FROM source_tokens WHERE account = $1 AND origin_sha256 = $2",
                self.key,
                origin_of(configured),
            )
        except LEDGER_ERRORS as err:
            raise TokenStoreUnavailable(
                clipped_within(
                    f"candidate token of {self.key!r}: the ledger failed to read it ({type(err).__name__}: {err})",
                    REASON_CHARS,
                )
            ) from err
        return str(token) if token else None

    async def settle(self, configured: str, refresh_token: str) -> None:
        """Drop the candidate if it is still ``refresh_token`` (a candidate another worker
        proposed since stays); a row left holding no token goes."""
        await self._clear(configured, refresh_token, "candidate_token", "settle")

    async def forget(self, configured: str, refresh_token: str) -> None:
        """Forget the rotated token if it is still ``refresh_token`` as rotated from
        ``configured`` (a token another worker wrote since stays; so does a candidate); a
        row left holding no token goes."""
        await self._clear(configured, refresh_token, "refresh_token", "forget")

    async def _clear(self, configured: str, token: str, column: str, what: str) -> None:
        try:
            async with self._pool.acquire() as conn, conn.transaction():
                await conn.execute(
                    f"""UPDATE source_tokens SET {column} = NULL, updated_at = {DB_NOW_MS}
                        WHERE account = $1 AND origin_sha256 = $2 AND {column} = $3""",
                    self.key,
                    origin_of(configured),
                    token,
                )
                await conn.execute(
                    """DELETE FROM source_tokens
                        WHERE account = $1 AND refresh_token IS NULL AND candidate_token IS NULL""",
                    self.key,
                )
        except LEDGER_ERRORS as err:
            raise TokenStoreUnavailable(
                clipped_within(
                    f"refresh token of {self.key!r}: the ledger failed to {what} it ({type(err).__name__}: {err})",
                    REASON_CHARS,
                )
            ) from err
