"""Rate limits: the cooldown ladder and ``Retry-After`` (one definition each; pure).

**Ladder** (reference ``pixiv-and-delivery-apis.md`` §2.5, PixivFlow's client kit): the
``n``-th consecutive rate limit cools down ``base × 2^(n-1)`` — 60 s, 120 s, 240 s …
capped at 15 min by default — with the delay the source asked for (``Retry-After``) as
the floor. Used by the account gates (:mod:`curaflow.sources.gate`, the ledger's
``source_gates``) and by an activity without a gate (its attempt number is the step).

**Retry-After** (RFC 9110 §10.2.3): either delay-seconds or an HTTP-date; both forms are
read (the date relative to ``now``; a date in the past means "now"). Decimal seconds
are accepted too (some APIs send them); anything else, negative or not finite, is no
delay at all.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

#: First step of the cooldown ladder (milliseconds).
LADDER_BASE_MS = 60_000
#: Cap of the cooldown ladder (milliseconds).
LADDER_CAP_MS = 900_000


def ladder_ms(step: int, base_ms: int = LADDER_BASE_MS, cap_ms: int = LADDER_CAP_MS) -> int:
    """The cooldown of the ``step``-th consecutive rate limit (1-based): ``base × 2^(step-1)``,
    at most ``cap_ms``. Milliseconds."""
    if step <= 1:
        return int(min(cap_ms, base_ms))
    # No float overflow however long the streak: past the cap the cap holds.
    return int(min(cap_ms, base_ms * 2 ** min(step - 1, 62)))


def cooldown_ms(
    step: int, retry_after_ms: float | None = None, *, base_ms: int = LADDER_BASE_MS, cap_ms: int = LADDER_CAP_MS
) -> int:
    """The cooldown after the ``step``-th consecutive rate limit: the ladder's step, or
    the source's ``Retry-After`` when that is longer. Milliseconds."""
    return int(max(ladder_ms(step, base_ms, cap_ms), retry_after_ms or 0))


def parse_retry_after(value: str | float | None, *, now: datetime | None = None) -> float | None:
    """The delay a ``Retry-After`` value asks for, in seconds (see the module doc).

    Args:
        value: the header's text (delay-seconds or an HTTP-date), or a number of seconds
            (as in the JSON bodies of Discord and Telegram).
        now: the reference time of an HTTP-date (default: the current time, UTC).

    Returns:
        Seconds (>= 0), or None when ``value`` is absent or not a delay.
    """
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        seconds = float(value)
    else:
        text = value.strip()
        if not text:
            return None
        try:
            seconds = float(text)
        except ValueError:
            return _until(text, now)
    if not math.isfinite(seconds) or seconds < 0:
        return None
    return seconds


def _until(text: str, now: datetime | None) -> float | None:
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:  # asctime form: HTTP-dates are always UTC (GMT)
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def first_retry_after(*values: str | float | None, default: float, now: datetime | None = None) -> float:
    """The first of ``values`` that is a delay (:func:`parse_retry_after`), else ``default``.

    For answers that carry the delay twice (a JSON ``retry_after`` and the header): the
    body's value first. A delay of 0 counts as none (the next value, or the default,
    applies). Seconds.
    """
    for value in values:
        seconds = parse_retry_after(value, now=now)
        if seconds:
            return seconds
    return default
