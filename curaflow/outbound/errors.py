"""The outbound layer's failures, typed as httpx's own so callers classify them as before.

* :class:`DestinationRefused` is an ``httpx.ConnectError``: nothing was sent. Its
  :class:`AddressRefused` says the origin was allowed and the name led, at connect time,
  only to addresses the guard never connects to: the network's answer of the moment.
* :class:`TimeLimitBeforeSending` is an ``httpx.ConnectTimeout``: the attempt's total time
  ran out before the request's headers started to leave (nothing reached the party),
  after its connection broke under the write (:class:`RequestNotWhole`'s case), or while
  its body was still being handed to the connection, its last bytes not yet (the request
  never left whole; since 2026-12-07 — before, "maybe sent").
* :class:`TimeLimitAfterSending` is an ``httpx.ReadTimeout``: the whole request may have
  been out when the time ran out — the party may have acted on it (ambiguous): a write the
  time limit cuts once the body's last bytes were handed on stays out, since what was
  handed to the connection may still leave while it closes.
* :class:`RequestNotWhole` is an ``httpx.WriteError``: the connection failed (a reset, a
  close) while the request was being written and no answer came — nothing was sent.
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
    address the host resolves to is loopback / private / link-local (not configured:
    :class:`AddressRefused`)."""


class AddressRefused(DestinationRefused):
    """The origin is allowed, but every address its name resolved to when connecting is
    one the guard never connects to (loopback, private, link-local, unspecified …, outside
    ``outbound.private_networks``): nothing was connected to.

    That is the answer of a lookup — a DNS sinkhole's ``0.0.0.0``, a rebinding, a
    resolver's blip — not of the party and not the operator's rule: a caller that must
    not blame a work or an event on one answer takes it as a failed connection (the
    callback pushes retry it; the image downloads since 2026-12-07)."""


class RequestNotWhole(httpx.WriteError):
    """The connection failed — the party reset or closed it, a write failed — while the
    request was still being written, and no answer came: the party never had the whole
    request (its body's end never left this process), so it cannot have acted on it.

    httpcore swallows the write's error to read an answer the party may have sent early
    (a ``413`` before the body), then fails reading (``ReadError``,
    ``RemoteProtocolError``): that failure, taken as it came, was a request that had left
    (ambiguous) until 2026-12-06, and an at-most-once route's work ended
    ``delivery_unknown`` though nothing had arrived."""


class TimeLimitExceeded(httpx.TimeoutException):
    """The attempt's total time limit (or what the job had left) ran out.

    Attributes:
        limit_s: the limit that applied, in seconds.
        sent: whether the request had started to leave (and its connection did not
            break under the write): the party may have acted on it.
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
        f"total time limit of {limit_s:.3g} s reached "
        + ("after the request left" if sent else "before sending: before the request left whole"),
        request=request,
    )
    err.limit_s, err.sent, err.by_deadline = limit_s, sent, by_deadline
    return err


def not_whole_error(request: httpx.Request | None, cause: BaseException) -> RequestNotWhole:
    """The :class:`RequestNotWhole` for an exchange that failed with ``cause`` after its
    request could not be written to its end."""
    return RequestNotWhole(
        f"the connection failed before the request left whole ({type(cause).__name__}); nothing was sent",
        request=request,
    )


def too_large_error(limit: int, request: httpx.Request | None) -> AnswerTooLarge:
    """The :class:`AnswerTooLarge` for an answer over ``limit`` bytes."""
    err = AnswerTooLarge(f"answer larger than the limit of {limit} bytes", request=request)
    err.limit = limit
    return err
