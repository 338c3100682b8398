"""The outbound layer's failures, typed as httpx's own so callers classify them as before.

* :class:`DestinationRefused` is an ``httpx.ConnectError``: nothing was sent.
* :class:`TimeLimitBeforeSending` is an ``httpx.ConnectTimeout``: the attempt's total time
  ran out before the request's headers started to leave (nothing reached the party).
* :class:`TimeLimitAfterSending` is an ``httpx.ReadTimeout``: the request (or part of it)
  was out when the time ran out — the party may have acted on it (ambiguous).
* :class:`AnswerTooLarge` is an ``httpx.DecodingError``: the answer was longer than the
  byte limit; what was read is dropped.
* :class:`UnsupportedContentEncoding` is an ``httpx.DecodingError``: the answer is
  content-encoded with a coding curaflow does not decode (:mod:`curaflow.outbound.decoding`):
  the party's answer could not be read.

Each carries ``limit`` (seconds or bytes) for the message; none quotes the URL (a route
URL may hold a token).
"""

from __future__ import annotations

import httpx


class DestinationRefused(httpx.ConnectError):
    """The destination guard refused the request: origin not allowed, port 0, or every
    address the host resolves to is loopback / private / link-local (not configured)."""


class TimeLimitExceeded(httpx.TimeoutException):
    """The attempt's total time limit (or what the job had left) ran out.

    Attributes:
        limit_s: the limit that applied, in seconds.
        sent: whether the request had started to leave.
        by_deadline: the job's deadline, not the exchange's own limit, set the time
            (:func:`~curaflow.outbound.attempt_deadline`): the job is over.
    """

    limit_s: float = 0.0
    sent: bool = False
    by_deadline: bool = False


class TimeLimitBeforeSending(TimeLimitExceeded, httpx.ConnectTimeout):
    """The time limit ran out before the request left (connecting, waiting for the pool)."""


class TimeLimitAfterSending(TimeLimitExceeded, httpx.ReadTimeout):
    """The time limit ran out after the request started to leave: outcome unknown."""


class AnswerTooLarge(httpx.DecodingError):
    """The answer exceeded the byte limit of the exchange.

    Attributes:
        limit: the byte limit.
    """

    limit: int = 0


class UnsupportedContentEncoding(httpx.DecodingError):
    """The answer is content-encoded with a coding curaflow does not decode — anything but
    ``gzip``, ``x-gzip``, ``deflate`` and ``identity`` (:mod:`curaflow.outbound.decoding`):
    the party's answer cannot be read. Raised when its body is read, after its status
    and headers came (:func:`~curaflow.outbound.answer_head` gives them); never for an
    answer with no body (a HEAD's, a 1xx, 204 or 304, ``Content-Length: 0``).

    Attributes:
        coding: the coding refused, as the answer named it (lower case).
    """

    coding: str = ""


def time_limit_error(
    limit_s: float, sent: bool, request: httpx.Request | None, *, by_deadline: bool = False
) -> TimeLimitExceeded:
    """The :class:`TimeLimitExceeded` for a cut attempt (before / after sending)."""
    cls = TimeLimitAfterSending if sent else TimeLimitBeforeSending
    err = cls(
        f"total time limit of {limit_s:.3g} s reached {'after the request left' if sent else 'before sending'}",
        request=request,
    )
    err.limit_s, err.sent, err.by_deadline = limit_s, sent, by_deadline
    return err


def too_large_error(limit: int, request: httpx.Request | None) -> AnswerTooLarge:
    """The :class:`AnswerTooLarge` for an answer over ``limit`` bytes."""
    err = AnswerTooLarge(f"answer larger than the limit of {limit} bytes", request=request)
    err.limit = limit
    return err
