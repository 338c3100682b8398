"""Where an account's rotated refresh token is kept, so that it survives a restart.

OAuth 2 lets the token endpoint answer a refresh with a *new* refresh token and revoke
the one sent (RFC 6749 §6: "the client MUST discard the old refresh token and replace it
with the new refresh token"; the authorization server "MAY revoke the old refresh
token"). Pixiv has been seen to answer the same token back (pixivpy's maintainers,
2024), and the reference says to keep whatever comes back
(``pixiv-and-delivery-apis.md`` §2.1). A token kept only in memory is lost at the next
restart: the worker would send the configured token again — revoked, if Pixiv rotated —
and every job of the account would end ``auth_failed`` until an operator logged in again.

A :class:`TokenStore` keeps the rotated token per account, tied to the *configured* token
it was rotated from (its SHA-256, :func:`origin_of`): a token the operator configures
anew (after ``curaflow pixiv login``) starts its own chain and wins over a token rotated
from the old one. :class:`curaflow.ledger.source_tokens.LedgerTokenStore` keeps it in
PostgreSQL (the worker hands one per account through
:class:`curaflow.sources.registry.SourceContext`); :class:`MemoryTokenStore` is the same in
one process (tests, tools).

A refresh token answered beside an access token curaflow cannot use (missing, null, a
number, empty) is kept as the account's *candidate* (:meth:`TokenStore.propose`), beside
the rotated token and never in its place: Pixiv may have revoked the token sent, so the
candidate may be the only one it accepts — or it may be as broken as the access token
beside it. The next refresh sends the candidate first and the kept tokens after it, and
then settles it (:meth:`TokenStore.settle`): accepted, it becomes the rotated token;
refused, it is dropped (2026-12-07: the whole answer was dropped, and a glitch of the
token endpoint after a rotation cost the account).
"""

from __future__ import annotations

import hashlib
from typing import Protocol

from curaflow.sources.gate import GateUnavailable


class TokenStoreUnavailable(GateUnavailable):
    """The token store could not be read or written (curaflow's ledger failed): curaflow's
    own failure under a source's call, handled as :class:`GateUnavailable` is (passed
    unchanged by the source guard, the attempt retried by Temporal; the ledger's error is
    its ``__cause__``)."""


def origin_of(configured: str) -> str:
    """The SHA-256 (hex) of a configured refresh token: what ties a rotated token to the
    token it was rotated from, without storing the configured token itself."""
    return hashlib.sha256(configured.encode("utf-8")).hexdigest()


class TokenStore(Protocol):
    """One account's rotated refresh token (module doc)."""

    async def load(self, configured: str) -> str | None:
        """The refresh token last rotated from ``configured`` (the account's configured
        token), or None when none was (or the operator configured another since).

        Raises:
            TokenStoreUnavailable: the store could not be read.
        """
        ...

    async def save(self, configured: str, refresh_token: str) -> None:
        """Keep ``refresh_token``, the token Pixiv answered, as rotated from ``configured``.

        Raises:
            TokenStoreUnavailable: the store could not be written.
        """
        ...

    async def forget(self, configured: str, refresh_token: str) -> None:
        """Forget ``refresh_token`` (Pixiv refused it; the configured token was accepted)
        if it is still the token kept as rotated from ``configured`` — a token another
        worker kept since stays.

        Raises:
            TokenStoreUnavailable: the store could not be written.
        """
        ...

    async def candidate(self, configured: str) -> str | None:
        """The candidate refresh token proposed from ``configured``'s chain (module doc),
        or None.

        Raises:
            TokenStoreUnavailable: the store could not be read.
        """
        ...

    async def propose(self, configured: str, refresh_token: str) -> None:
        """Keep ``refresh_token`` as the candidate of ``configured``'s chain (replacing an
        older candidate; the rotated token stays).

        Raises:
            TokenStoreUnavailable: the store could not be written.
        """
        ...

    async def settle(self, configured: str, refresh_token: str) -> None:
        """Drop the candidate ``refresh_token`` (a refresh sent it: refused, or accepted and
        kept by :meth:`save`) if it is still ``configured``'s candidate.

        Raises:
            TokenStoreUnavailable: the store could not be written.
        """
        ...


class MemoryTokenStore:
    """:class:`TokenStore` in this process only (tests, tools): one account's rotated
    token, its candidate and their origin (:func:`origin_of`); ``saves`` counts the writes."""

    def __init__(self) -> None:
        self.origin: str | None = None
        self.refresh_token: str | None = None
        self.candidate_token: str | None = None
        self.saves = 0

    def _chain(self, configured: str) -> None:
        if self.origin != origin_of(configured):
            self.origin, self.refresh_token, self.candidate_token = origin_of(configured), None, None

    async def load(self, configured: str) -> str | None:
        """The token rotated from ``configured``, else None."""
        return self.refresh_token if self.origin == origin_of(configured) else None

    async def save(self, configured: str, refresh_token: str) -> None:
        """Keep ``refresh_token`` as rotated from ``configured`` (replacing any other)."""
        self._chain(configured)
        self.refresh_token = refresh_token
        self.saves += 1

    async def forget(self, configured: str, refresh_token: str) -> None:
        """Forget ``refresh_token`` if it is the token kept as rotated from ``configured``."""
        if self.origin == origin_of(configured) and self.refresh_token == refresh_token:
            self.refresh_token = None

    async def candidate(self, configured: str) -> str | None:
        """The candidate of ``configured``'s chain, else None."""
        return self.candidate_token if self.origin == origin_of(configured) else None

    async def propose(self, configured: str, refresh_token: str) -> None:
        """Keep ``refresh_token`` as ``configured``'s candidate."""
        self._chain(configured)
        self.candidate_token = refresh_token

    async def settle(self, configured: str, refresh_token: str) -> None:
        """Drop the candidate if it is still ``refresh_token``."""
        if self.origin == origin_of(configured) and self.candidate_token == refresh_token:
            self.candidate_token = None
