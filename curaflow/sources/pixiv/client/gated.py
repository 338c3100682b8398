"""The account's rate gate around every request of the client: passed before it, told of a
success, climbed on a rate-limit answer."""

from __future__ import annotations

from typing import Any

import httpx

from curaflow.domain.ratelimit import parse_retry_after
from curaflow.domain.reasons import TerminalReason
from curaflow.sources.errors import SourceError
from curaflow.sources.gate import Gate
from curaflow.sources.pixiv.client.answers import says_rate_limit


class GatedRequests:
    """The gate half of :class:`~curaflow.sources.pixiv.client.PixivClient`: every request
    (token, API, image) first passes the account's gate (``_gate``; None: no gate)."""

    _gate: Gate | None

    async def _pass_gate(self) -> None:
        if self._gate is not None:
            await self._gate.acquire()

    async def _gate_ok(self) -> None:
        if self._gate is not None:
            await self._gate.succeeded()

    async def _check_rate_limit(self, response: httpx.Response, body: Any) -> None:
        """Raise ``rate_limited`` (after climbing the gate's ladder) for a rate-limit answer.

        Pixiv reports rate limits in the body (``{"error": {"message": "Rate Limit"}}``),
        often with HTTP 403, sometimes as HTTP 429: recognised by
        :func:`~curaflow.sources.pixiv.client.answers.says_rate_limit` (429, or the words
        in a 2xx or a 4xx — never under a 5xx or a redirect, which cool nothing).
        """
        if not says_rate_limit(response.status_code, body):
            return
        retry_after = parse_retry_after(response.headers.get("retry-after"))
        cooldown = await self._gate.rate_limited(retry_after) if self._gate is not None else None
        raise SourceError(
            TerminalReason.RATE_LIMITED,
            f"pixiv rate limit (HTTP {response.status_code})",
            retry_after_s=retry_after,
            cooldown_s=cooldown,
            status=response.status_code,
        )
