"""The rate gate of one source instance (its *account*): spacing between requests and the rate-limit cooldown.

Every source request of an account — a source instance, what a target's ``account``
names (for Pixiv, one account of ``[pixiv]``: token refresh, API call, image download) —
passes the account's gate first (DESIGN.md decision 10; reference ``pixiv-and-delivery-apis.md`` §2.5,
PixivFlow's client kit):

* **spacing**: at least ``min_interval_ms`` between two requests of the account, whatever
  process sends them; a request that leaves late after its slot (a busy event loop)
  moves the next slot to an interval after it really left;
* **cooldown ladder**: a rate limit ("Rate Limit" body, HTTP 429) starts a cooldown of
  60 s, doubling with every further rate limit up to 15 min, with the source's
  ``Retry-After`` as the floor up to the cap (:func:`~curaflow.domain.ratelimit.cooldown_ms`).
  One limit is one step: its answers to the requests that were out when it came (an
  account of ``max_concurrency`` above 1) arrive while its cooldown runs and keep the
  step. While it runs no request of the account leaves — not even one that took its
  slot before and waited for it (a pause likewise) — callers
  get a ``rate_limited`` :class:`~curaflow.sources.errors.SourceError` whose
  ``cooldown_s`` becomes the activity's ``next_retry_delay``, so the wait happens in
  Temporal, not in a sleeping worker slot;
* **decay**: after ``decay_after`` (20) consecutive successes the ladder starts again at
  its first step;
* **pause**: an account the source restricted (Pixiv: "Your access is currently
  restricted.") is paused for ``pause_ms`` (Pixiv: ``pixiv.restriction_pause_ms``,
  default 1 h): every request of
  it fails at once with ``account_restricted`` (not retryable), so no job of the account
  keeps asking. An operator lifts it early with ``curaflow accounts resume ACCOUNT``.

:class:`curaflow.ledger.gates.LedgerGate` keeps this state in PostgreSQL (``source_gates``)
so it holds across worker processes and restarts (the worker hands it to every source
through :class:`curaflow.sources.registry.SourceContext`); :class:`MemoryGate` is the same
policy in one process (unit tests, tools). Concurrency (one request stream per account) is the job of the
account's source task queue, served by exactly one process (:mod:`curaflow.process.source_queues`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Protocol

from curaflow.domain.ratelimit import LADDER_BASE_MS, LADDER_CAP_MS, cooldown_ms
from curaflow.domain.reasons import TerminalReason
from curaflow.sources.errors import SourceError

DECAY_AFTER = 20
PAUSE_MS = 3_600_000
#: How late (seconds) a request may leave after its slot before a gate moves
#: the next slot back to an interval after it (one more statement, only then).
LATE_S = 0.005


class GateUnavailable(Exception):
    """The account's gate could not be read or written (its store, curaflow's ledger, failed:
    unreachable, out of connections, a statement past its timeout, a connection reset).

    curaflow's own failure under a source's call, never the source's: the source guard
    (:mod:`curaflow.sources.guard`) passes it unchanged, the activity raises it as it is and
    Temporal retries the attempt; the ledger's error is its ``__cause__``, so
    :func:`curaflow.ledger.db.is_unavailable` reads it as an outage.
    """


class Gate(Protocol):
    """What a source's client needs from a rate gate."""

    async def acquire(self) -> None:
        """Wait for this request's slot — and do not leave into a cooldown or a pause the
        gate recorded while this request waited for it.

        Raises:
            SourceError: ``rate_limited`` with ``cooldown_s`` when the account is cooling
                down (no request may leave now); ``account_restricted`` (not retryable)
                while the account is paused.
        """
        ...

    async def restricted(self) -> float:
        """Pause the account (the source restricted it); returns the pause in seconds."""
        ...

    async def rate_limited(self, retry_after_s: float | None) -> float:
        """Record a rate limit; returns the cooldown in seconds (the next retry delay).

        One limit, one step of the ladder: an answer of it while its cooldown runs (a
        request that left before the cooldown began) keeps the step, its stated delay a
        floor of the cooldown up to the cap.
        """
        ...

    async def succeeded(self) -> None:
        """Record a successful request (decays the ladder)."""
        ...


def cooling_down(cooldown_ms: int, penalty: int) -> SourceError:
    """The error raised when a request meets an account that is cooling down."""
    return SourceError(
        TerminalReason.RATE_LIMITED,
        f"account cooling down after a rate limit for another {cooldown_ms / 1000:.1f} s (step {penalty})",
        cooldown_s=cooldown_ms / 1000,
    )


def paused(paused_ms: int) -> SourceError:
    """The error raised when a request meets an account that is paused (restricted)."""
    return SourceError(
        TerminalReason.ACCOUNT_RESTRICTED,
        f"account paused for another {paused_ms / 1000:.0f} s: the source restricted its access "
        "(lift it with `curaflow accounts resume ACCOUNT` once the account was checked)",
        retryable=False,
    )


class MemoryGate:
    """The same policy as :class:`curaflow.ledger.gates.LedgerGate`, held in this process only.

    Args:
        min_interval_ms / base_ms / cap_ms / decay_after / pause_ms: as for
            :class:`curaflow.ledger.gates.LedgerGate`.
        concurrency: accepted as :class:`~curaflow.ledger.gates.LedgerGate` takes it, and
            unused: the next slot here is on this process's monotonic clock, which never
            steps back, and nothing else writes it.
        clock: monotonic seconds (tests pass a fake one to walk the ladder without waiting).
    """

    def __init__(
        self,
        min_interval_ms: int = 0,
        *,
        base_ms: int = LADDER_BASE_MS,
        cap_ms: int = LADDER_CAP_MS,
        decay_after: int = DECAY_AFTER,
        pause_ms: int = PAUSE_MS,
        concurrency: int = 1,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.min_interval_ms = min_interval_ms
        self._clock = clock
        self.base_ms = base_ms
        self.cap_ms = cap_ms
        self.decay_after = decay_after
        self.pause_ms = pause_ms
        self.penalty = 0
        self.successes = 0
        self._next = 0.0
        self._cooldown_until = 0.0
        self._paused_until = 0.0
        self._lock = asyncio.Lock()

    async def acquire(self) -> None:
        """Wait for the next slot (see :class:`Gate`)."""
        async with self._lock:
            now = self._clock()
            if self._paused_until > now:
                raise paused(int((self._paused_until - now) * 1000))
            if self._cooldown_until > now:
                raise cooling_down(int((self._cooldown_until - now) * 1000), self.penalty)
            slot = max(now, self._next)
            self._next = slot + self.min_interval_ms / 1000
        if slot > now:
            await asyncio.sleep(slot - now)
            # A limit or a pause recorded while this request waited for its slot (another
            # request's answer): it does not leave into them (as LedgerGate).
            now = self._clock()
            if self._paused_until > now:
                raise paused(int((self._paused_until - now) * 1000))
            if self._cooldown_until > now:
                raise cooling_down(int((self._cooldown_until - now) * 1000), self.penalty)
        # A late wake-up (a busy event loop) must not shorten the next gap: the next slot is
        # at least an interval after this request really leaves.
        self._next = max(self._next, self._clock() + self.min_interval_ms / 1000)

    async def rate_limited(self, retry_after_s: float | None) -> float:
        """Climb the ladder — once per limit: an answer of it while its cooldown runs keeps
        the step (as :func:`curaflow.ledger.gates.penalize`); returns the cooldown in seconds."""
        now = self._clock()
        if not (self._cooldown_until > now and self.penalty > 0):
            self.penalty += 1
        self.successes = 0
        retry_ms = retry_after_s * 1000 if retry_after_s else None
        cooldown = cooldown_ms(self.penalty, retry_ms, base_ms=self.base_ms, cap_ms=self.cap_ms) / 1000
        self._cooldown_until = max(self._cooldown_until, now + cooldown)
        self._next = max(self._next, self._cooldown_until)
        return self._cooldown_until - now

    async def restricted(self) -> float:
        """Pause the account for ``pause_ms``; returns the pause in seconds."""
        self._paused_until = max(self._paused_until, self._clock() + self.pause_ms / 1000)
        return self.pause_ms / 1000

    async def succeeded(self) -> None:
        """Count a success; reset the ladder after ``decay_after`` in a row."""
        if self.penalty == 0:
            return
        self.successes += 1
        if self.successes >= self.decay_after:
            self.penalty = 0
            self.successes = 0
