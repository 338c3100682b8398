"""Rate limits: the cooldown ladder, the delay of a retry and ``Retry-After`` (one
definition each; pure).

**Ladder** (reference ``pixiv-and-delivery-apis.md`` §2.5, PixivFlow's client kit): the
``n``-th consecutive rate limit cools down ``base × 2^(n-1)`` — 60 s, 120 s, 240 s …
capped at 15 min by default — with the delay the source asked for (``Retry-After``) as
the floor, up to the same cap (a longer stated delay costs one request after the cap,
never the account for a week). Used by the account gates (:mod:`curaflow.sources.gate`, the ledger's
``source_gates``) and by an activity without a gate (its attempt number is the step):
:func:`cooldown_ms`.

**An unknown or absent delay is a backoff, never a constant** (:func:`retry_delay_ms`):
a receiver's rate limit (a route's 429, a callback's 429) waits exactly the delay the
receiver stated, at least a second (:data:`MIN_STATED_MS`); one that states none — no
``retry_after``, no ``Retry-After``, a value that is not a delay, an HTML page — backs
off on the ladder from :data:`UNSTATED_BASE_MS` (5 s, 10 s, 20 s … capped at 15 min), the
step being how many rate limits in a row the receiver answered. A retry never comes back
within a second, whether a delay was missing or stated shorter: each early retry prolongs
a ban (Discord's, Cloudflare's) and spends an attempt.
Routes, the callback pushes and the source all take their delays from this module;
Temporal's retry is the only retry (the delay becomes ``next_retry_delay``).

**Retry-After** (RFC 9110 §10.2.3): either delay-seconds or an HTTP-date; both forms are
read (the date relative to ``now``; a date in the past means "now"). Decimal seconds
are accepted too (some APIs send them); anything else, negative or not finite, is no
delay at all. A ``Retry-After`` sent twice (a proxy in front of the receiver adding its
own) reaches curaflow as one value joined by ``", "`` (RFC 9110 §5.3; httpx's
``headers.get``): a list whose every item is a delay is the longest it states — never
earlier than any of them (until 2026-12-05 it was no delay, and the backoff came back
after 5 s, 10 s … however long the receiver had asked); a list with an item that is no
delay is none.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

#: First step of the cooldown ladder (milliseconds).
LADDER_BASE_MS = 60_000
#: Cap of the cooldown ladder (milliseconds).
LADDER_CAP_MS = 900_000
#: First step of the backoff of a rate limit that states no delay (milliseconds).
UNSTATED_BASE_MS = 5_000
#: The longest stated delay that is waited (seconds): a week, longer than any job lives
#: (``start_job``'s execution timeout), so a longer one changes nothing but what a
#: ``timedelta`` and the ledger's milliseconds can hold (a receiver stated 10^20 s).
MAX_STATED_S = 7 * 24 * 3600
#: The shortest wait of a stated delay (milliseconds): a receiver stating less than a
#: second (Discord's float ``retry_after`` of 0.001, a ``Retry-After: 0.01``) is waited a
#: second. Until 2026-12-06 it was waited as stated: the next attempt came a millisecond
#: later, and a receiver answering so every time spent a delivery's whole attempt budget
#: in a hot loop within a second. Never shorter than stated; a stated 0 is no delay.
MIN_STATED_MS = 1_000


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
    """The cooldown of a source account after the ``step``-th consecutive rate limit: the
    ladder's step, or the source's ``Retry-After`` when that is longer — **at most
    ``cap_ms``** (the ladder's cap). Milliseconds.

    A stated delay beyond the cap (a week, a date in year 9999) is not waited: it would
    stop every job of the account for as long as the answer said, on the word of a header
    of a form never seen from the source. The account asks again after the cap instead —
    one request; a limit still running answers it and the ladder climbs (DESIGN.md "Safe
    defaults at the edges": the unknown costs one attempt, never an account). Not finite,
    zero or negative: no delay stated.
    """
    stated = min(retry_after_ms, cap_ms) if retry_after_ms and math.isfinite(retry_after_ms) else 0
    return int(max(ladder_ms(step, base_ms, cap_ms), stated))


def cooldown_left_ms(cooldown_until: int, now: int, cap_ms: int) -> int:
    """How long a rate-limit cooldown stored in the ledger still holds, in ms: what is left
    of it (``cooldown_until`` and ``now``: epoch ms on the database clock), **at most
    ``cap_ms``** — a cooldown written before the cap existed, or under a larger one (a
    proxy's week believed whole), holds at most the cap from now; 0 when it has ended.

    The rule of every reader of a stored cooldown: the ledger's statements that decide a
    send or a request apply it in SQL and mend the row (``claim_send``, ``gates._RESERVE``),
    the reports (``curaflow accounts list`` / ``routes list``, the
    ``curaflow_source_cooldown_seconds`` gauge) through this function, so what they show
    is what is held. A pause (an operator's setting, not a third party's word) is never
    capped.
    """
    return max(0, min(cooldown_until - now, max(0, cap_ms)))


def retry_delay_ms(
    step: int, stated_ms: float | None = None, *, base_ms: int = UNSTATED_BASE_MS, cap_ms: int = LADDER_CAP_MS
) -> int:
    """The wait before retrying after the ``step``-th rate limit in a row of a receiver
    (1-based; a route, a callback): the delay it stated (``stated_ms`` > 0), exactly — at
    least :data:`MIN_STATED_MS` (:func:`stated_wait_ms`); else the ladder from ``base_ms``
    (5 s, 10 s, 20 s … at most ``cap_ms``). Milliseconds.
    """
    stated = stated_wait_ms(stated_ms)
    return stated if stated is not None else ladder_ms(step, base_ms, cap_ms)


def stated_wait_ms(stated_ms: float | None, cap_ms: int | None = None) -> int | None:
    """The wait of a delay a receiver stated (a rate limit's, or a 5xx's ``Retry-After``),
    in ms: as stated, rounded up, at least :data:`MIN_STATED_MS` and at most ``cap_ms``
    (:data:`MAX_STATED_S` when None, and never beyond it); None when it stated none (None,
    zero, negative, not finite).

    ``cap_ms`` is how long curaflow waits a receiver on its word alone: a receiver
    unavailable (a 5xx) is waited at most ``delivery.route_rate_limit_cap_ms``, as a
    route-wide rate limit is — a 503 is the receiver's, not one send's (RFC 9110 §15.6.4),
    and a week stated by a proxy in front of it held every send of the route, each job of
    its targets to its deadline (2026-12-07: :func:`activities.errors.route_failure`, the
    deliver step's recording)."""
    if stated_ms is None or not math.isfinite(stated_ms) or stated_ms <= 0:
        return None
    most = MAX_STATED_S * 1000 if cap_ms is None else min(max(MIN_STATED_MS, cap_ms), MAX_STATED_S * 1000)
    return max(MIN_STATED_MS, math.ceil(min(stated_ms, most)))


def parse_retry_after(value: object, *, now: datetime | None = None) -> float | None:
    """The delay a ``Retry-After`` value asks for, in seconds (see the module doc).

    Args:
        value: the header's text (delay-seconds or an HTTP-date; the header sent twice:
            the longest delay of the list), or a number of seconds
            (as in the JSON bodies of Discord and Telegram); any other value (an object,
            a list: a third party's answer of an unknown shape) is no delay.
        now: the reference time of an HTTP-date (default: the current time, UTC).

    Returns:
        Seconds (>= 0, at most :data:`MAX_STATED_S`), or None when ``value`` is absent or
        not a delay.
    """
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        seconds = float(max(-1, min(value, MAX_STATED_S)))  # 400 digits: no OverflowError
    elif isinstance(value, float):
        seconds = value
    elif not isinstance(value, str):
        return None
    else:
        text = value.strip()
        if not text:
            return None
        if "," in text and (listed := _listed(text, now)) is not None:
            return listed
        try:
            seconds = float(text)
        except ValueError:
            return _until(text, now)
    if not math.isfinite(seconds) or seconds < 0:
        return None
    return min(seconds, float(MAX_STATED_S))


#: One item of a ``Retry-After`` list: delay-seconds (decimal accepted) or an IMF-fixdate
#: (RFC 9110 §5.6.7: the form a sender must use; its comma is not the list's).
_LIST_ITEM = r"(?:\d+(?:\.\d+)?|[A-Za-z]{3}, \d{2} [A-Za-z]{3} \d{4} \d{2}:\d{2}:\d{2} GMT)"
_LIST = re.compile(rf"{_LIST_ITEM}(?:[ \t]*,[ \t]*{_LIST_ITEM})+")


def _listed(text: str, now: datetime | None) -> float | None:
    """The longest delay of a ``Retry-After`` sent more than once (``"120, 120"``, two
    dates joined), or None when ``text`` is no such list (module doc)."""
    if not _LIST.fullmatch(text):
        return None
    delays = [parse_retry_after(item, now=now) for item in re.findall(_LIST_ITEM, text)]
    return None if any(d is None for d in delays) else max(d for d in delays if d is not None)


def _until(text: str, now: datetime | None) -> float | None:
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:  # asctime form: HTTP-dates are always UTC (GMT)
        when = when.replace(tzinfo=UTC)
    return min(max(0.0, (when - (now or datetime.now(UTC))).total_seconds()), float(MAX_STATED_S))


def first_retry_after(*values: object, default: float | None = None, now: datetime | None = None) -> float | None:
    """The first of ``values`` that is a delay (:func:`parse_retry_after`), else ``default``
    (None: the receiver stated no delay; :func:`retry_delay_ms` backs off).

    For answers that carry the delay twice (a JSON ``retry_after`` and the header): the
    body's value first. A delay of 0 counts as none (the next value, or the default,
    applies). Seconds.
    """
    for value in values:
        seconds = parse_retry_after(value, now=now)
        if seconds:
            return seconds
    return default
