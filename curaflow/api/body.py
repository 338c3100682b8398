"""Reading a request's input — its JSON body, its query string — as protocol errors.

One reading for every route that takes a body (``POST /jobs``, the ack, the legacy
shim): the body is read only when it is JSON in UTF-8, and only when it has exactly one
meaning. A body a parser could read in more than one way, or not as the client sent it,
is refused with what was wrong (``detail.reason``) instead of being admitted as one
reading of it:

* **its label**: a ``Content-Type`` that is not JSON (``application/json`` or a
  ``+json`` type) → ``415`` ``unsupported_media_type``; a ``charset`` other than UTF-8 →
  ``415`` ``unsupported_charset`` (JSON is UTF-8, RFC 8259 §8.1: Latin-1 bytes read as
  UTF-8 would admit other text than the client sent). No ``Content-Type`` is read as JSON;
  a ``Content-Type`` given twice with different values → ``400`` ``repeated_header``
  (:func:`label_refusal`); a ``Content-Encoding`` other than ``identity`` (``gzip``, ``br``
  …, on any of its lines) → ``415``
  ``unsupported_content_encoding`` with ``Accept-Encoding: identity`` (RFC 9110
  §15.5.16): the body is read as it arrives, so a coded body would be read as other bytes
  than the client meant — a gzip body refused as "not UTF-8", a JSON body labelled gzip
  admitted although it says it is not JSON as it stands; a ``Transfer-Encoding`` other than
  ``chunked`` (``gzip, chunked`` …) → ``501`` ``unsupported_transfer_coding`` (RFC 9112
  §6.1: the server decodes no transfer coding but the framing);
* **its bytes, grammar and meaning** (:func:`curaflow.protocol.json_text.parse_json`, the
  one reading of a client's JSON text — a Temporal client's Task gets it too): not UTF-8,
  not JSON, nested too deeply, a member name twice in one object, ``NaN`` / ``Infinity``,
  a number out of range → ``400``, each with its ``detail.reason``; no bytes at all (or
  only whitespace) → ``400`` ``empty_body`` (2026-12-07: the one such refusal naming no
  reason). A JSON text that is no object where the route asks one is
  :func:`curaflow.protocol.json_text.object_refusal`'s ``400`` ``not_an_object``, asked by
  the route's reader of its body (the Task's, the ack's).

Unknown members are still ignored (reference §1.5) — but only once the body has one
meaning. A query parameter given more than once is refused the same way
(:func:`single_query_values`): ``400`` ``repeated_parameter``, ``detail.field`` naming it;
an integer query parameter is ASCII decimal digits (:data:`DecimalDigits`), else ``400``
``invalid_params`` naming it.
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from typing import Any

from fastapi import Request
from pydantic import BeforeValidator

from curaflow.protocol.errors import ProtocolError, error_body, invalid_params
from curaflow.protocol.json_text import NOT_AN_OBJECT, parse_json
from curaflow.protocol.json_text import refused as _refused

#: A qvalue (RFC 9110 §12.4.2): 0 to 1, at most three decimals.
_QVALUE = re.compile(r"0(\.[0-9]{0,3})?|1(\.0{0,3})?")
_UTF8_NAMES = ("utf-8", "utf8")


class BodyTimeout(ProtocolError):
    """The body did not arrive in time: 408 ``invalid_params``, answered with ``Connection: close``.

    The rest of the body may still come, so the connection cannot carry another request.
    """

    def __init__(self, timeout_ms: int) -> None:
        self.headers = {"connection": "close"}
        super().__init__(
            "invalid_params",
            408,
            f"the request body did not arrive within {timeout_ms} ms",
            {"reason": "body_timeout", "timeout_ms": timeout_ms},
        )


class ServerStopping(ProtocolError):
    """The server began its shutdown while the body was still arriving: 503
    ``internal_error``, retryable, ``detail.reason: server_stopping``, with ``Retry-After``
    and ``Connection: close``. Nothing was read into the ledger; send the request again
    (to another process, or to this one once it is back).
    """

    def __init__(self) -> None:
        self.headers = {"connection": "close", "retry-after": str(STOPPING_RETRY_AFTER_S)}
        super().__init__(
            "internal_error",
            503,
            "the server is stopping and the request body had not all arrived; send it again",
            {"reason": "server_stopping"},
        )

    def body(self) -> dict[str, Any]:
        """``{"error": …}`` with ``retryable: true`` (``internal_error`` is not by default)."""
        return {"error": error_body(self.code, self.message, retryable=True, detail=self.detail)}


#: How long a body still arriving when the server begins its shutdown may take to arrive
#: (seconds): a body on its way is read, one trickling in does not hold the shutdown.
STOPPING_GRACE_S = 1.0
#: ``Retry-After`` of :class:`ServerStopping`, seconds.
STOPPING_RETRY_AFTER_S = 1


async def _receive(request: Request, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise ProtocolError("invalid_params", 413, f"request body larger than {limit} bytes", {"limit": limit})
        chunks.append(chunk)
    return b"".join(chunks)


async def _receive_unless_stopping(request: Request, limit: int) -> bytes:
    """:func:`_receive`, cut :data:`STOPPING_GRACE_S` after the app's ``state.stopping``
    is set (:func:`curaflow.api.app.begin_shutdown`): a client trickling its body must
    not hold the server's graceful shutdown for the rest of ``api.body_timeout_ms``.

    Raises:
        ServerStopping: the body had not all arrived by then.
    """
    app = request.scope.get("app")
    stopping: asyncio.Event | None = getattr(getattr(app, "state", None), "stopping", None)
    if stopping is None:
        return await _receive(request, limit)
    read = asyncio.ensure_future(_receive(request, limit))
    stop = asyncio.ensure_future(stopping.wait())
    try:
        await asyncio.wait({read, stop}, return_when=asyncio.FIRST_COMPLETED)
        if not read.done():
            await asyncio.wait({read}, timeout=STOPPING_GRACE_S)
    finally:  # also when this request is cancelled (api.body_timeout_ms): nothing outlives it
        stop.cancel()
        if not read.done():
            read.cancel()
            await asyncio.wait({read})  # raises no error of the read's: a CancelledError here is ours
    if read.cancelled():  # cut above, the server stopping
        raise ServerStopping()
    return read.result()


def media_type_refusal(content_type: str | None) -> ProtocolError | None:
    """Why a body labelled ``content_type`` is not read as JSON, or None when it is.

    Returns:
        None for no label, ``application/json`` or ``application/*+json`` with no
        ``charset`` or a UTF-8 one (any case); else the 415 ``invalid_params`` with
        ``detail.reason`` ``unsupported_media_type`` or ``unsupported_charset``.
    """
    if content_type is None or not content_type.strip():
        return None
    media, _, params = content_type.partition(";")
    media = media.strip().lower()
    if media != "application/json" and not (media.startswith("application/") and media.endswith("+json")):
        return _refused(
            f"Content-Type {media or content_type.strip()!r} is not JSON: send the body as application/json",
            "unsupported_media_type",
            http_status=415,
            content_type=content_type.strip()[:200],
        )
    for param in params.split(";"):
        name, _, value = param.partition("=")
        if name.strip().lower() == "charset":
            charset = value.strip().strip('"').lower()
            if charset not in _UTF8_NAMES:
                return _refused(
                    f"charset {charset!r} is not supported: send the body in UTF-8 (RFC 8259 §8.1)",
                    "unsupported_charset",
                    http_status=415,
                    charset=charset[:100],
                )
    return None


class ContentCodingRefused(ProtocolError):
    """A body in a content coding curaflow does not decode: 415 ``invalid_params``
    (``detail.reason`` ``unsupported_content_encoding``), answered with
    ``Accept-Encoding: identity`` — RFC 9110 §15.5.16: a 415 caused by a content coding
    names the codings that would have been accepted (§12.5.3)."""

    def __init__(self, coding: str) -> None:
        self.headers = {"accept-encoding": "identity"}
        super().__init__(
            "invalid_params",
            415,
            f"Content-Encoding {coding[:100]!r} is not supported: send the body uncompressed (identity)",
            {"reason": "unsupported_content_encoding", "content_encoding": coding[:100]},
        )


def coding_refusal(content_encoding: str | None) -> ProtocolError | None:
    """Why a body sent with ``content_encoding`` is not read, or None when it is.

    Returns:
        None for no header, an empty one or ``identity`` alone (any case, RFC 9110
        §8.4.1: the codings are listed in the order applied, ``identity`` means none);
        else :class:`ContentCodingRefused` (415, ``Accept-Encoding: identity``).
    """
    if content_encoding is None:
        return None
    codings = [coding.strip().lower() for coding in content_encoding.split(",")]
    if all(coding in ("", "identity") for coding in codings):
        return None
    return ContentCodingRefused(content_encoding.strip())


class TransferCodingRefused(ProtocolError):
    """A body in a transfer coding curaflow does not decode: 501 ``invalid_params``
    (``detail.reason`` ``unsupported_transfer_coding``) — RFC 9112 §6.1: a server that
    receives a request with a transfer coding it does not understand responds 501."""

    def __init__(self, coding: str) -> None:
        super().__init__(
            "invalid_params",
            501,
            f"Transfer-Encoding {coding[:100]!r} is not supported: send the body chunked alone or with a "
            "Content-Length",
            {"reason": "unsupported_transfer_coding", "transfer_encoding": coding[:100]},
        )


def transfer_coding_refusal(transfer_encoding: str | None) -> ProtocolError | None:
    """Why a body sent with ``transfer_encoding`` is not read, or None when it is.

    The server takes the framing off (``chunked``) and decodes nothing else: a body in
    any other transfer coding (``gzip, chunked`` …) would be read as other bytes than the
    client meant, as a content coding would (:func:`coding_refusal`; 2026-12-07: a gzip
    body was refused "not UTF-8", a JSON one under ``foo, chunked`` admitted).

    Returns:
        None for no header or only ``chunked`` / ``identity`` (any case; RFC 9112 §6.1);
        else :class:`TransferCodingRefused` (501).
    """
    if transfer_encoding is None:
        return None
    codings = [coding.strip().lower() for coding in transfer_encoding.split(",")]
    if all(coding in ("", "chunked", "identity") for coding in codings):
        return None
    return TransferCodingRefused(transfer_encoding.strip())


def media_type_key(content_type: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    """What a ``Content-Type`` value says, written one way: its type/subtype and each
    parameter's name lower-cased, parameters' quotes and spaces dropped and their order
    ignored, ``charset``'s value lower-cased (RFC 9110 §8.3.1, §5.6.6; RFC 2046 §4.1.2) —
    so ``Application/JSON; charset="UTF-8"`` and ``application/json;charset=utf-8`` are one
    label. Other parameters' values keep their case."""
    media, _, params = content_type.partition(";")
    pairs = []
    for param in params.split(";"):
        name, _, value = param.partition("=")
        name, value = name.strip().lower(), value.strip().strip('"')
        if name:
            pairs.append((name, value.lower() if name == "charset" else value))
    return media.strip().lower(), tuple(sorted(pairs))


def label_refusal(request: Request) -> ProtocolError | None:
    """Why the body of ``request`` is not read as it is labelled, or None when it is.

    Every line of a label counts (RFC 9110 §5.3): ``Content-Encoding`` is a list, so its
    lines are one list (``identity`` then ``gzip`` is the coding ``gzip``);
    ``Content-Type`` is one value, so two different ones label the body two ways → 400
    ``invalid_params``, ``detail.reason`` ``repeated_header``, ``detail.field``
    ``Content-Type`` (the same value twice is that value, however written:
    :func:`media_type_key`). 2026-12-06: the first line
    alone was read, and a body labelled both JSON and text, or identity then gzip, was
    admitted.

    ``Transfer-Encoding`` is a list too: a transfer coding but ``chunked`` is refused first
    (:func:`transfer_coding_refusal`, 501), the framing being the body's outer layer.

    Returns:
        None, the 400 above, :func:`transfer_coding_refusal`'s, :func:`media_type_refusal`'s
        or :func:`coding_refusal`'s.
    """
    labels: dict[tuple[str, tuple[tuple[str, str], ...]], str] = {}
    for value in request.headers.getlist("content-type"):
        labels.setdefault(media_type_key(value), value.strip())
    types = list(labels.values())
    if len(types) > 1:
        return invalid_params(
            "Content-Type given more than once with different values; give it once",
            field="Content-Type",
            reason="repeated_header",
            values=[value[:200] for value in types[:5]],
        )
    transfer = request.headers.getlist("transfer-encoding")
    codings = request.headers.getlist("content-encoding")
    return (
        transfer_coding_refusal(", ".join(transfer) if transfer else None)
        or media_type_refusal(types[0] if types else None)
        or coding_refusal(", ".join(codings) if codings else None)
    )


async def read_json(request: Request, limit: int, timeout_ms: int, *, allow_empty: bool = False) -> Any:
    """Decode the request body as JSON (:func:`parse_json`, after its label: :func:`media_type_refusal`).

    Args:
        limit: largest accepted body in bytes.
        allow_empty: an empty body decodes to None instead of an error.
        timeout_ms: longest wait for the whole body once the route runs
            (``api.body_timeout_ms``) — a client that declares a ``Content-Length`` and
            sends less must not hold the request for ever.

    Raises:
        ProtocolError: 415 ``invalid_params`` for a label that is not JSON in UTF-8 or a
            content coding other than ``identity`` (before any byte is read); 413
            ``invalid_params`` beyond ``limit``; 400 ``invalid_params`` when the body is
            empty (``detail.reason`` ``empty_body``) or not one JSON text with one meaning
            (:func:`parse_json`); :class:`BodyTimeout` (408) when it is late;
            :class:`ServerStopping` (503, retryable) when it is still arriving
            :data:`STOPPING_GRACE_S` after the server began to stop.
        starlette.requests.ClientDisconnect: the client went away mid-body (the error
            handlers log it as ``client_disconnected``, not as a server error).
    """
    refusal = label_refusal(request)
    if refusal is not None:
        raise refusal
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise ProtocolError("invalid_params", 413, f"request body larger than {limit} bytes", {"limit": limit})
    try:
        async with asyncio.timeout(timeout_ms / 1000):
            raw = await _receive_unless_stopping(request, limit)
    except TimeoutError:
        raise BodyTimeout(timeout_ms) from None
    if not raw.strip():
        if allow_empty:
            return None
        raise _refused(NOT_AN_OBJECT, "empty_body")
    return parse_json(raw)


def decimal_digits(value: object) -> object:
    """Refuse a query value that is not ASCII decimal digits (``0``–``9``, at least one).

    The framework's integer reading is Python's and lax: ``1_0`` was 10, ``+1``, `` 1``,
    ``1.0`` and a line break before the digits were numbers, while ``1e2`` and ``١`` were
    refused. A query integer has one spelling family, as ``unacked`` has its words and an
    event id its digits (since 2026-12-07). A leading zero is still the number (``01`` is 1:
    a number, unlike an event id, is no opaque text).

    Raises:
        ValueError: for any other text (the route's 400 ``invalid_params``, ``detail.field``
            naming the parameter).
    """
    if isinstance(value, str) and not (value.isascii() and value.isdigit()):
        raise ValueError("must be written in decimal digits 0-9")
    return value


#: The reading of an integer query parameter: ``Annotated[int, Query(...), DecimalDigits]`` (after
#: ``Query``: before it, the published schema would name its bounds ``ge`` / ``le``).
DecimalDigits = BeforeValidator(decimal_digits)


async def single_query_values(request: Request) -> None:
    """Refuse a query parameter given more than once (a router dependency).

    ``?limit=1&limit=600`` has two readings; the framework would silently take one.

    Raises:
        ProtocolError: 400 ``invalid_params``, ``detail.field`` the parameter,
            ``detail.reason`` ``repeated_parameter``.
    """
    counts = Counter(name for name, _ in request.query_params.multi_items())
    for name, count in counts.items():
        if count > 1:
            raise invalid_params(
                f"query parameter {name!r} given {count} times; give it once",
                field=name[:200],
                reason="repeated_parameter",
            )


def json_refusal(accept: str | None) -> ProtocolError | None:
    """Why an answer in ``application/json`` is not acceptable to ``accept``, or None when it is.

    The most specific media range matching ``application/json`` decides (``application/json``,
    then ``application/*``, then ``*/*``; RFC 9110 §12.5.1): JSON is refused when none
    matches, or the deciding one has ``q=0``. No header, an empty one, or a ``q`` that is
    no qvalue (``nonsense``, ``nan``, ``-1``, ``inf``: taken as 1) accept it.

    Returns:
        None, or the 406 ``invalid_params`` (``detail.reason`` ``not_acceptable``).
    """
    if accept is None or not accept.strip():
        return None
    ranks = {"application/json": 3, "application/*": 2, "*/*": 1}
    best: tuple[int, float] | None = None
    for entry in accept.split(","):
        media, *params = entry.split(";")
        rank = ranks.get(media.strip().lower())
        if rank is None:
            continue
        quality = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                # Only a qvalue is read (RFC 9110 §12.4.2); float() also reads "nan",
                # "-1", "inf", which refused JSON for junk ("nan" compares false to 0).
                quality = float(value.strip()) if _QVALUE.fullmatch(value.strip()) else 1.0
        if best is None or rank > best[0]:
            best = (rank, quality)
    if best is not None and best[1] > 0:
        return None
    return invalid_params(
        f"this API answers application/json only, which Accept {accept.strip()[:200]!r} refuses",
        http_status=406,
        reason="not_acceptable",
    )


def accept_value(lines: list[str]) -> str | None:
    """The one ``Accept`` value of a request's ``Accept`` field lines: ``Accept`` is a list,
    so its lines are one value, joined with commas (RFC 9110 §5.3, §12.5.1); blank lines
    add nothing. None when no line has a member (as no header at all).

    Until 2026-12-07 only the first line was read: ``text/html`` then ``application/json``
    was a 406, ``*/*`` then ``application/json;q=0`` JSON.
    """
    members = [line.strip() for line in lines if line.strip()]
    return ", ".join(members) if members else None


async def accepts_json(request: Request) -> None:
    """Refuse a request whose ``Accept`` refuses JSON, before it does anything (a router
    dependency of the job surface; the probes ``/health`` and ``/ready`` answer any). Every
    ``Accept`` line is read (:func:`accept_value`).

    Raises:
        ProtocolError: 406 from :func:`json_refusal`.
    """
    refusal = json_refusal(accept_value(request.headers.getlist("accept")))
    if refusal is not None:
        raise refusal
