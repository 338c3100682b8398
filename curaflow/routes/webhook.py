"""The ``webhook`` route: one signed HTTP POST per delivery (Standard Webhooks 1.0).

Request: ``POST <url>`` with a JSON body (the work, the delivery's identity and the
artifact files inlined as base64) and the headers ``webhook-id`` (the delivery's
idempotency key, stable across retries; characters outside printable ASCII, and ``%``,
are percent-encoded as UTF-8), ``webhook-timestamp`` (Unix seconds) and
``webhook-signature`` (``v1,<base64 HMAC-SHA256>`` over ``<id>.<timestamp>.<body>``),
computed as the ``standardwebhooks`` library signs (:func:`signature`, fed the body part by
part). Receivers verify with that library.

The body is bounded (:func:`encode_body`): with the files inlined it is about 4/3 of the
artifact, and a work over the route's ``max_body_bytes`` (64 MiB by default) is refused
by curaflow before a page is read (``over_route_limit``: the work is refused on this
route only, the route never paused for it, nothing sent), or as soon as the pages read
pass it. The body is built once — each page base64-encoded in its turn, off the event
loop — and streamed with its ``Content-Length``; until 2026-12-06 it had no bound and was
held four times over (the JSON's strings, the JSON text, the signature's copy, the bytes
sent: 960 MiB of the worker's memory for a work of 30 pages of 8 MiB).

Receiver contract (the answer decides the cell, :func:`classify`; the work is blamed
only when the receiver says the work is the problem):

=====================  =======================================================
2xx                     delivered when it says no word (no body, a body not
                        labelled JSON — whole or not: cut, undecodable,
                        endless, :func:`labelled_json` — or not JSON, no
                        ``status``, ``null``) or
                        one saying it has it (:data:`ACCEPTED_WORDS`:
                        ``accepted``, ``ok``, ``success`` …, or a 2xx echoed,
                        ``200``); a duplicate for ``duplicate`` /
                        ``duplicate_existing``. The body, labelled JSON (in any
                        case), with ``status`` (trimmed, any case:
                        :func:`status_word`) ``rejected``: the work refused for
                        good; ``failed`` / ``error``: the receiver's own failure
                        (``route_refused``, the work held back, never refused);
                        ``pending`` / ``queued`` / ``submitted`` — or **any
                        other word** (reference §4.1, "unknown 2xx word →
                        retry"; until 2026-12-07 a delivery) —: one attempt,
                        *ambiguous*, retried with the same key, remembered as
                        possibly delivered; the word is the receiver's answer
                        (a work whose attempts all ran out on it counts in the
                        route's refusal streak); a ``Retry-After`` is waited
                        (until 2026-12-07 ignored)
409                     the receiver already had it: duplicate — save Cloudflare's
                        own 1xxx page under it (``error code: 1001``, below)
Cloudflare's own 521,   the receiver was never reached: retried, not ambiguous;
522, 523, 525, 526,     the receiver had it: one attempt, *ambiguous*
530, its 1xxx page      (:func:`~curaflow.routes.base.cloudflare_error`, the one
under a 403 or a 409,   reading of every route; until 2026-12-07 Cloudflare's 409
its challenge page      page was the receiver's duplicate: the work recorded
(``cf-mitigated``) /    delivered, never sent, and its 403 page and challenge
520, 524                page the receiver's refusal, ``route_refused``); a
                        ``Retry-After`` is waited
303 See Other           the receiver may have taken the POST and points at its
                        result (RFC 9110 §15.4.4; never followed): one attempt,
                        *ambiguous*, retried with the same ``webhook-id``,
                        remembered as possibly delivered, its answer counted in
                        the route's streak should the attempts run out; a
                        ``Retry-After`` is waited (until 2026-12-07 the route's
                        refusal: the work offered to a later job under another
                        ``webhook-id``) — but one whose ``Location`` leaves the
                        receiver's origin is no result of its: the route's
                        refusal (:func:`leaves_origin`; a portal in front of it)
422                     the receiver refuses this work (its content):
                        ``delivery_rejected``, never retried — the one 4xx read
                        as the work's (a 415 until 2026-12-07 too: curaflow
                        sends every work as ``application/json``, so a 415
                        refuses every work alike, the route's below)
429, 5xx                retried with backoff (``Retry-After`` honoured; a 429
                        without it waits the backoff of
                        :func:`curaflow.domain.ratelimit.retry_delay_ms`; a 429
                        holds the whole route, at most the route's rate-limit
                        cap); a gateway
                        error (502, 504) may have reached the receiver: retried
                        with the same ``webhook-id`` and remembered as possibly
                        delivered
a status HTTP does      one attempt, *ambiguous* (RFC 9110 §15: read as a 5xx
not define (600–999,    not the receiver's own; retried with the same
whatever its body)      ``webhook-id``, remembered as possibly delivered):
                        :func:`~curaflow.routes.base.undefined_status_error`,
                        the one reading of every route
any other answer        the receiver refuses the request itself (401, 403, 404,
(400, 401, 403, 404,    410, 413, 415 — its credentials, its address, its size
410, 413, 415, any      limit, the media type it takes —, a status it never
other 4xx, any other    documented, a redirect — 301, 302, 307, 308: not
3xx)                    processed, the url moved —, never followed):
                        ``route_refused`` (the route's failure: the work is not used
                        up), never retried; a 410 Gone (the endpoint gone for good,
                        Standard Webhooks 1.0: disable it) pauses the route at this
                        first answer and pages (``pauses_route``; until 2026-12-07
                        after the refusal streak, two more works held back first)
connect error, connect  retried (the request never left: not ambiguous)
or pool timeout
timeout after sending   retried with the same ``webhook-id`` (receivers dedupe)
a status other than     that status: the body plays no part in it
2xx whose body broke    (:func:`~curaflow.routes.base.refusal_answered`)
(cut, undecodable,
endless)
a 2xx labelled JSON     one attempt, *ambiguous* (its word unread): retried
whose body broke        with the same ``webhook-id``; one not labelled JSON is
                        a delivery (no word, above; 2026-12-07)
=====================  =======================================================
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import ipaddress
import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import httpx
from pydantic import Field, SecretStr, field_validator
from standardwebhooks.webhooks import Webhook

from curaflow.domain.models import ArtifactFile
from curaflow.domain.ratelimit import parse_retry_after
from curaflow.domain.reasons import TerminalReason
from curaflow.outbound import (
    ROUTE_ANSWER_KEEP_BYTES,
    Destinations,
    Limits,
    Outbound,
    answer_head,
    as_outbound,
    configured,
)
from curaflow.outbound.destinations import url_port
from curaflow.routes.base import (
    SEND_AGAIN_STATUSES,
    DeliveryReceipt,
    DeliveryRequest,
    RouteError,
    RouteSettings,
    cloudflare_error,
    header_value,
    read_pages,
    refusal_answered,
    remote_id_of,
    stated_delay_s,
    undefined_status_error,
    unread_answer,
)
from curaflow.routes.registry import RouteContext, register_route

MiB = 1024 * 1024
#: ``max_body_bytes`` by default: a work of about 48 MiB of pages inlined (a manga chapter
#: of 50 pages of ~1 MB), as much as Telegram takes in one request.
DEFAULT_MAX_BODY_BYTES = 64 * MiB
#: Least ``max_body_bytes``: a body describing a work, with a small page inlined.
MIN_MAX_BODY_BYTES = 64 * 1024
#: Most ``max_body_bytes``: a delivery holds about its body in the worker's memory while
#: it is sent, and every delivery running at once holds its own.
MAX_MAX_BODY_BYTES = 1024 * MiB
#: Bytes of the body handed to the connection at a time.
SEND_CHUNK_BYTES = 1 * MiB


class WebhookRouteConfig(RouteSettings):
    """HTTP POST signed per Standard Webhooks (``webhook-id`` = delivery idempotency key).

    Attributes:
        secret: ``whsec_<base64>`` signing secret (or any string, used as raw bytes).
        timeout_ms: total time of one request (connect, send, the answer); the
            answer is read up to 256 KiB
            (:data:`~curaflow.outbound.ROUTE_ANSWER_KEEP_BYTES`).
        include_files: inline each artifact file in the JSON body, base64-encoded
            (``files[].data_base64``); without it the body only describes the files.
        max_body_bytes: largest body curaflow sends (64 MiB by default, between 64 KiB
            and 1 GiB): with the files inlined a body is about 4/3 of the pages, held
            about once in the worker's memory while it is sent. A work whose body would
            be larger is refused by curaflow, nothing sent (``over_route_limit``: that
            work on this route only). Set it to what the receiver accepts.
    """

    kind: Literal["webhook"] = "webhook"
    url: str
    secret: SecretStr
    timeout_ms: int = Field(default=30_000, ge=100)
    include_files: bool = True
    max_body_bytes: int = Field(default=DEFAULT_MAX_BODY_BYTES, ge=MIN_MAX_BODY_BYTES, le=MAX_MAX_BODY_BYTES)

    @field_validator("secret")
    @classmethod
    def _secret_shape(cls, value: SecretStr) -> SecretStr:
        from standardwebhooks.webhooks import Webhook

        try:
            Webhook(value.get_secret_value())
        # Whatever the library raises means the secret cannot sign: its classes are not all
        # ValueErrors (an empty secret raised EmptyWebhookSecretError, an Exception: a
        # traceback instead of a configuration error, until 2026-12-06).
        except Exception:  # noqa: BLE001 - any refusal of the library is this refusal
            raise ValueError("webhook secret must be 'whsec_' followed by base64") from None
        return value

    def destinations(self) -> Destinations:
        """The receiver's origin (``url``)."""
        return configured(self.url)


#: RFC 9110 §15.4.4 See Other: the one redirect that answers a POST after processing it
#: (:func:`classify`: possibly delivered, never the route's refusal).
SEE_OTHER = 303
#: RFC 9110 §15.5.11 Gone: the receiver's endpoint is gone for good (Standard Webhooks 1.0:
#: the sender should disable it) — the route's refusal that pauses it at once
#: (:attr:`~curaflow.routes.base.RouteError.pauses_route`).
GONE = 410
#: Statuses by which a receiver says the work itself is the problem: its content (422
#: Unprocessable Content) — the one 4xx whose answer can depend on the work. Every other
#: 4xx answers what curaflow sends alike for every work: the media type (415 Unsupported
#: Media Type: curaflow always sends ``application/json``; until 2026-12-07 the work's, each
#: work refused for good on the route one by one), the credentials, the address, the method,
#: the framing (401, 403, 404, 405, 406, 411, 414, 426, 431 …) — the route's
#: (``route_refused``), as any answer curaflow does not recognise ("the unknown is cheap").
WORK_STATUSES = frozenset({422})

#: A 2xx ``status`` saying the receiver has the delivery: the reference's acknowledgements
#: (``accepted``, ``idempotent_replay``: reference §1.3, "2xx + explicit success word →
#: delivered", §4.1), JSend's ``success`` and the plain words a receiver says it took or
#: did it with. Read as :func:`status_word` spells it; a 2xx that says no word at all is a
#: delivery too (:meth:`WebhookRoute._business_status`).
ACCEPTED_WORDS = frozenset(
    {
        "accepted",
        "idempotent_replay",
        "success",
        "succeeded",
        "ok",
        "delivered",
        "received",
        "created",
        "processed",
        "done",
        "completed",
        "stored",
    }
)
#: A 2xx ``status`` saying the receiver already had it (reference §1.3: ``duplicate_existing``
#: → the ledger's ``duplicate``): as a 409.
DUPLICATE_WORDS = frozenset({"duplicate", "duplicate_existing"})
#: A 2xx ``status`` by which a receiver refuses the work itself: the only word that names
#: the act (DESIGN.md "Safe defaults at the edges": a 2xx saying ``rejected``).
REJECTED_WORDS = frozenset({"rejected"})
#: A 2xx ``status`` saying only that something failed: no work is named — JSend's
#: ``error`` is the server's own failure, ``failed`` says no why — so it is the route's
#: (``route_refused``: the work held back, the refusal streak), never the work refused
#: for good (until 2026-12-05 both refused the work for good on the route).
FAILED_WORDS = frozenset({"failed", "error"})
#: A 2xx ``status`` saying the receiver holds the delivery, not done yet (reference §4.1:
#: ``pending/queued/submitted`` → retry with the same key).
PENDING_WORDS = frozenset({"pending", "queued", "submitted"})
#: Characters of a word never seen that its message quotes.
WORD_QUOTED_MAX = 64


def status_word(value: object) -> str | None:
    """A receiver's ``status`` as curaflow reads it: text trimmed of blanks and case-folded
    (``" Rejected\n"`` → ``rejected``; until 2026-12-07 only lowercased, and ``"rejected "``
    read as no word of curaflow's: a delivery); an HTTP status echoed as a number
    (``200``) → its digits; JSON ``null`` (or no ``status``) → None, no word said; any other
    value — ``true`` / ``false``, another number, an object, a list — → a word no set holds
    (``true``, ``<a JSON object>``): a word never seen."""
    if value is None:
        return None
    if isinstance(value, str):
        return value.strip().casefold()
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int) and 0 <= value < 1000:
        return str(value)
    # Named by its JSON type, never written back (an integer of 4 000 digits, an object
    # nested as deep as the parser went): a word never seen all the same.
    kind = "number" if isinstance(value, int | float) else "array" if isinstance(value, list) else "object"
    return f"<a JSON {kind}>"


def labelled_json(headers: httpx.Headers) -> bool:
    """Whether an answer's body is labelled JSON — the only body in which a receiver's 2xx
    says a word (:meth:`WebhookRoute._business_status`); any other 2xx body, or none, says
    none: a delivery, whatever it holds or however it ends (a body cut, in a coding curaflow
    does not decode, trickled past the time limit: its status line is the whole answer,
    2026-12-07). A media type is case-insensitive (RFC 9110 §8.3.1): ``Application/JSON``
    is JSON (until 2026-12-06 only a lowercase label was read, and a 2xx labelled
    ``Application/JSON`` saying "pending", "failed" or "rejected" was a delivery)."""
    return "json" in headers.get("content-type", "").lower()


def accepted(word: str) -> bool:
    """Whether ``word`` (:func:`status_word`) says the receiver has the delivery: one of
    :data:`ACCEPTED_WORDS`, or a 2xx status echoed (``200``, ``"202"``: it says what the
    answer's own 2xx says)."""
    return word in ACCEPTED_WORDS or (len(word) == 3 and word.isascii() and word.isdigit() and word[0] == "2")


def describe_body(request: DeliveryRequest) -> dict[str, Any]:
    """The JSON body of a delivery (schema_version 1) without the files' bytes: the work,
    the delivery's identity and each file described (``files[]``, in the artifact's order)."""
    work = request.work
    files = []
    for f in request.artifact.files:
        entry: dict[str, Any] = {
            "name": Path(f.path).name,
            "page": f.page,
            "mime": f.mime,
            "bytes": f.bytes,
            "sha256": f.sha256,
            "width": f.width,
            "height": f.height,
        }
        if f.frame_delays_ms:  # an animation: each frame's delay, ms, in order
            entry["frame_delays_ms"] = f.frame_delays_ms
        files.append(entry)
    return {
        "type": "curaflow.delivery",
        "schema_version": 1,
        "idempotency_key": request.idempotency_key,
        "job_id": request.job_id,
        "target_id": request.target_id,
        "route": request.route,
        "work": {
            "work_id": work.work_id,
            "work_type": work.work_type,
            "title": work.title,
            "url": work.url,
            "author": work.author,
            "tags": work.tags,
            "create_date": work.create_date,
            "page_count": work.page_count,
        },
        "files": files,
    }


@dataclass(frozen=True)
class EncodedBody:
    """A delivery's JSON body as the bytes sent, in parts (each page's base64 one part:
    the body is never joined into one more copy).

    Attributes:
        parts: the body's bytes, in order.
        size: their total length, bytes (the request's ``Content-Length``).
    """

    parts: tuple[bytes, ...]
    size: int

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body in pieces of at most :data:`SEND_CHUNK_BYTES` (the request's content)."""
        for part in self.parts:
            for start in range(0, len(part), SEND_CHUNK_BYTES):
                yield part[start : start + SEND_CHUNK_BYTES]


def base64_length(size: int) -> int:
    """Length of the padded base64 of ``size`` bytes (RFC 4648 §4: 4 characters per 3 bytes)."""
    return 4 * ((size + 2) // 3)


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def encode_body(request: DeliveryRequest, include_files: bool, max_body_bytes: int) -> EncodedBody:
    """The body of a delivery (:func:`describe_body`, each file's ``data_base64`` last in
    its entry when ``include_files``), as UTF-8 JSON bytes — the same bytes as
    ``json.dumps(body, ensure_ascii=False)`` — built once, a page at a time.

    Blocking (reads the pages): run it in a thread.

    Raises:
        RouteError: ``over_route_limit`` (permanent, no answer: curaflow's own limit,
            nothing sent) when the body would be over ``max_body_bytes`` — checked from
            the sizes the artifact lists before a page is read, and again on the bytes
            read, page by page; ``delivery_failed`` when a page cannot be read
            (:func:`~curaflow.routes.base.read_pages`: nothing sent, retried).
    """
    body = describe_body(request)
    entries = [_dumps(entry) for entry in body.pop("files")]
    head = _dumps(body)[:-1].encode() + b', "files": ['  # the body's keys, "files" last
    tail = b"]}"
    if not include_files:
        whole = head + ", ".join(entries).encode() + tail
        return EncodedBody((whole,), len(whole))
    # Each entry's closing brace gives way to its data: ``, "data_base64": "<base64>"}``.
    entry_heads = [((", " if i else "") + text[:-1] + ', "data_base64": "').encode() for i, text in enumerate(entries)]
    files = request.artifact.files
    listed = len(head) + len(tail) + sum(len(h) + 2 for h in entry_heads)
    listed += sum(base64_length(f.bytes) for f in files)
    if listed > max_body_bytes:
        raise _over_limit(files, listed, max_body_bytes)
    parts: list[bytes] = [head]
    size = listed - sum(base64_length(f.bytes) for f in files)  # everything but the data
    for f, entry_head in zip(files, entry_heads, strict=True):
        data = base64.b64encode(read_pages([f])[0])
        size += len(data)
        if size > max_body_bytes:  # a page larger than the artifact lists it
            raise _over_limit(files, size, max_body_bytes, at_least=True)
        parts += (entry_head, data, b'"}')
    parts.append(tail)
    return EncodedBody(tuple(parts), size)


def _over_limit(files: Sequence[ArtifactFile], size: int, max_body_bytes: int, *, at_least: bool = False) -> RouteError:
    return RouteError(
        TerminalReason.OVER_ROUTE_LIMIT,
        f"webhook: not sent by curaflow: the body of this work is {'at least ' if at_least else ''}{size} bytes "
        f"({len(files)} files inlined as base64), over the route's max_body_bytes of {max_body_bytes}",
        permanent=True,
    )


def signing_key(secret: str) -> bytes:
    """The HMAC key of a Standard Webhooks ``secret``, as the ``standardwebhooks`` library
    reads it: ``whsec_`` dropped, the rest base64-decoded (padding added, characters
    outside the alphabet skipped)."""
    return base64.b64decode(secret.removeprefix("whsec_") + "==")


def signature(key: bytes, message_id: str, timestamp: int, parts: Sequence[bytes]) -> str:
    """``webhook-signature`` (Standard Webhooks 1.0): ``v1,<base64 HMAC-SHA256>`` over
    ``<id>.<timestamp>.<body>`` — ``timestamp`` in Unix seconds, the body fed part by part
    (the library's ``Webhook.sign`` copies it whole into the signed string)."""
    mac = hmac.new(key, f"{message_id}.{timestamp}.".encode(), hashlib.sha256)
    for part in parts:
        mac.update(part)
    return "v1," + base64.b64encode(mac.digest()).decode()


class WebhookRoute:
    """Signed webhook delivery (see the module doc).

    Args:
        name: route name.
        url: the receiver URL.
        secret: ``whsec_<base64>`` signing secret.
        http: the route's outbound client (:class:`~curaflow.outbound.Outbound`; a
            plain ``httpx.AsyncClient`` is wrapped, limited to the route's URL).
        timeout_s: total time of one request, seconds (connect, send, answer;
            :class:`~curaflow.outbound.Limits`); the answer is read up to
            :data:`~curaflow.outbound.ROUTE_ANSWER_KEEP_BYTES`.
        include_files: inline the artifact bytes.
        max_body_bytes: largest body sent (:func:`encode_body`).
    """

    kind = "webhook"
    resend_safe = True

    def __init__(
        self,
        name: str,
        url: str,
        secret: str,
        http: httpx.AsyncClient | Outbound,
        *,
        timeout_s: float = 30.0,
        include_files: bool = True,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    ) -> None:
        self.name = name
        self.url = url
        Webhook(secret)  # refuses a secret the library cannot sign with
        self._key = signing_key(secret)
        self._out = as_outbound(http, configured(url))
        self.timeout_s = timeout_s
        self.include_files = include_files
        self.max_body_bytes = max_body_bytes

    async def deliver(self, request: DeliveryRequest) -> DeliveryReceipt:
        """POST the signed delivery and classify the answer.

        Raises:
            RouteError: see the receiver contract in the module doc.
        """
        body = await asyncio.to_thread(encode_body, request, self.include_files, self.max_body_bytes)
        timestamp = int(datetime.now(UTC).timestamp())
        message_id = header_value(request.idempotency_key)
        headers = {
            "content-type": "application/json",
            "content-length": str(body.size),
            "webhook-id": message_id,
            "webhook-timestamp": str(timestamp),
            "webhook-signature": await asyncio.to_thread(signature, self._key, message_id, timestamp, body.parts),
        }
        try:
            response = await self._out.request(
                "POST",
                self.url,
                content=body.chunks(),
                headers=headers,
                limits=Limits(time_s=self.timeout_s, keep_bytes=ROUTE_ANSWER_KEEP_BYTES),
            )
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout, httpx.WriteError) as err:
            # Nothing left: no connection (or no TLS session) to send it on, or the
            # request never left whole (the receiver reset the connection while it was
            # written: :class:`~curaflow.outbound.RequestNotWhole`).
            raise RouteError(TerminalReason.DELIVERY_FAILED, f"webhook: {type(err).__name__}; not sent") from err
        except httpx.HTTPError as err:
            head = answer_head(err)
            if head is not None and 200 <= head.status_code < 300 and not labelled_json(head.headers):
                # An acceptance whose body is not labelled JSON says no word (the receiver
                # contract, `_business_status`): its status line is the whole answer, a
                # delivery, whatever the body then did. Until 2026-12-07 a body cut, in a
                # coding curaflow does not decode or trickled past the time limit made it an
                # unknown outcome — retried, answered alike, and once the attempts ran out
                # the work held on the route for good, counted toward its pause.
                return DeliveryReceipt(remote_status=str(head.status_code))
            refused = refusal_answered(err)  # a refusal whose body broke: its status is the answer
            if refused is None:
                what = "timeout" if isinstance(err, httpx.TimeoutException) else "transport"
                raise RouteError(
                    TerminalReason.DELIVERY_FAILED,
                    f"webhook {what}: {type(err).__name__}",
                    ambiguous=True,
                    answer=unread_answer(err),  # an acceptance whose body broke is an answer
                ) from err
            response = refused
        status = response.status_code
        undefined = undefined_status_error(
            "webhook", status, TerminalReason.DELIVERY_FAILED, response.headers.get("retry-after")
        )
        if undefined is not None:
            raise undefined  # a status HTTP does not define: the one reading of every route
        cloudflare = cloudflare_error("webhook", response, TerminalReason.DELIVERY_FAILED)
        if cloudflare is not None:
            raise cloudflare  # Cloudflare's own 52x about the receiver behind it: the one reading of every route
        if status == 409:
            return DeliveryReceipt(duplicate=True, remote_status="409")
        if 200 <= status < 300:
            word, remote_id = self._business_status(response)
            if word is None or accepted(word):
                return DeliveryReceipt(remote_id=remote_id, remote_status=str(status))
            if word in DUPLICATE_WORDS:
                return DeliveryReceipt(duplicate=True, remote_id=remote_id, remote_status=str(status))
            if word in REJECTED_WORDS:
                raise RouteError(
                    TerminalReason.DELIVERY_REJECTED,
                    f"webhook answered {status} with status {word!r}",
                    permanent=True,
                    answer=f"HTTP 2xx status {word}",
                )
            if word in FAILED_WORDS:
                raise RouteError(
                    TerminalReason.ROUTE_REFUSED,
                    f"webhook answered {status} with status {word!r}: the receiver failed the request without "
                    "naming the work (its own error); fix the receiver, or answer 'rejected' / 422 for a work "
                    "it refuses",
                    permanent=True,
                    answer=f"HTTP 2xx status {word}",
                )
            # A receiver that holds the delivery may say when to ask again (`Retry-After`,
            # RFC 9110 §10.2.3): waited as a 5xx's is, at least a second, at most the
            # route's cap (`delivery.route_rate_limit_cap_ms`). Until 2026-12-07 it was
            # ignored, and the next attempt came on Temporal's backoff.
            stated = stated_delay_s(response.headers)
            if word in PENDING_WORDS:
                # The receiver has the delivery and will act on it: retried with the same
                # webhook-id, and remembered as possibly delivered (as a 502 or a timeout),
                # so attempts that run out end the intent `unknown` — never `failed`, the
                # work sent again by the next job under a webhook-id the receiver cannot
                # deduplicate (until 2026-12-07).
                raise RouteError(
                    TerminalReason.DELIVERY_FAILED,
                    f"webhook answered {status} with status {word!r}: the receiver holds it; retried with the same "
                    "webhook-id",
                    retry_after_s=stated,
                    ambiguous=True,
                    answer=f"HTTP 2xx status {word}",
                )
            # A word curaflow has never seen (reference §4.1: "unknown 2xx word → retry"):
            # the receiver said something other than that it has the delivery, and it may
            # have it — one attempt, read as `pending` is: ambiguous, retried with the
            # same webhook-id, and an answer of the receiver's, so a work whose attempts
            # all ran out on it is counted in the route's streak as `pending`'s is
            # (activities.deliver.recording): a receiver saying it to every work pauses the
            # route, named, instead of spending every work's attempts unseen (2026-12-07).
            # Until 2026-12-07 it was a delivery for good (`submitted`, the reference's own
            # word for a delivery not yet done, too).
            quoted = word[:WORD_QUOTED_MAX]
            raise RouteError(
                TerminalReason.DELIVERY_FAILED,
                f"webhook answered {status} with status {quoted!r}, a word curaflow does not know; "
                "retried with the same webhook-id (answer a 2xx with no status, or 'accepted', for a delivery)",
                retry_after_s=stated,
                ambiguous=True,
                answer=f"HTTP 2xx status {quoted}",
            )
        raise classify(
            status, response.headers.get("retry-after"), location=response.headers.get("location"), url=self.url
        )

    @staticmethod
    def _business_status(response: httpx.Response) -> tuple[str | None, str | None]:
        if not labelled_json(response.headers):
            return None, None
        try:
            data = response.json()
        except (ValueError, RecursionError):  # not JSON; nested deeper than the parser recurses
            return None, None
        if not isinstance(data, dict):
            return None, None
        remote = data.get("id") or data.get("remote_id")
        return status_word(data.get("status")), remote_id_of(remote)


def _origin_host(url: httpx.URL) -> str:
    """``url``'s host as an origin compares it (WHATWG URL, host serializing): a name
    without case, an IP address in its one canonical form — ``[0:0::1]`` and ``[::0001]``
    are ``::1``, as httpx keeps an IPv6 literal as written (until 2026-12-08 a receiver's
    303 to its own address written so was read as leaving its origin)."""
    host = (url.host or "").lower()
    try:
        return ipaddress.ip_address(host).compressed
    except ValueError:
        return host


_C0_CONTROLS_AND_SPACE = "".join(map(chr, range(0x21)))


def _as_a_browser_reads(location: str) -> str:
    """A ``Location`` of an http(s) receiver as the WHATWG URL Standard reads it ("basic
    URL parser", special schemes): leading and trailing C0 controls and spaces dropped, every
    ASCII tab and newline dropped, a backslash before the query or fragment read as a slash —
    ``\\\\evil.example/x`` names the host ``evil.example``, where httpx (RFC 3986) reads a
    path of the receiver's own."""
    text = location.strip(_C0_CONTROLS_AND_SPACE).replace("\t", "").replace("\n", "").replace("\r", "")
    cut = min((i for i in (text.find("?"), text.find("#")) if i >= 0), default=len(text))
    return text[:cut].replace("\\", "/") + text[cut:]


def leaves_origin(location: str | None, url: str | None) -> bool:
    """Whether a redirect's ``Location`` (read as a browser reads it: :func:`_as_a_browser_reads`;
    resolved against the receiver's ``url``) names
    another origin than the receiver's — another scheme, host or port (host compared
    without case, an IP address in its canonical form: :func:`_origin_host`; a port its
    scheme's default when none is written). A ``Location`` absent, or one that is no URL
    — a host IDNA refuses among them —, names none: False (nothing is known of where it
    points)."""
    if not location or not url:
        return False
    try:
        own = httpx.URL(url)
        target = own.join(_as_a_browser_reads(location))
        # A host is decoded on reading (IDNA: ``xn--ls8h.la`` raises ``idna.IDNAError``, a
        # ValueError), so it is read here too.
        return (target.scheme, _origin_host(target), url_port(target)) != (
            own.scheme,
            _origin_host(own),
            url_port(own),
        )
    except (httpx.InvalidURL, ValueError, TypeError):
        return False


def classify(
    status: int, retry_after: str | None, *, location: str | None = None, url: str | None = None
) -> RouteError:
    """The failure a receiver's answer other than 2xx and 409 means (the module's
    receiver contract): 429 → rate limited, route-wide (its stated delay, or none; the
    route's cooldown at most ``delivery.route_rate_limit_cap_ms``); 5xx and HTTP's
    own "send it again" (:data:`~curaflow.routes.base.SEND_AGAIN_STATUSES`: 408, 421, 425) →
    retried (502 / 504 ambiguous); :data:`SEE_OTHER` → retried, ambiguous (the POST may
    have been processed, RFC 9110 §15.4.4) — but one whose ``location`` leaves the
    receiver's origin (``url``: :func:`leaves_origin`) points at no result of the
    receiver's: a server in front of it took the POST (an authentication portal), the
    route's refusal; :data:`GONE` → ``route_refused`` pausing the route at once
    (``pauses_route``); :data:`WORK_STATUSES` → ``delivery_rejected`` (the work);
    anything else → ``route_refused`` (the route: the work is not used up). A status HTTP
    does not define (600–999) is none of these: one attempt, ambiguous
    (:func:`~curaflow.routes.base.undefined_status_error`)."""
    undefined = undefined_status_error("webhook", status, TerminalReason.DELIVERY_FAILED, retry_after)
    if undefined is not None:
        return undefined
    if status == 429 or 500 <= status < 600 or status in SEND_AGAIN_STATUSES:
        # A receiver's 429 limits curaflow's requests to it — no chat or channel of one
        # send to limit —: route-wide, every send of the route waits it, at most
        # `delivery.route_rate_limit_cap_ms` (as the limits in front of Telegram and
        # Discord). Until 2026-12-07 it held that send alone, for as long as it said (a
        # week), while every other send of the route met it in turn.
        # A gateway's 502 / 504 may follow a post: retried with the same webhook-id, and its
        # answer kept — should the attempts run out on it, the work is held on the route
        # for good and counted in the route's streak (activities.deliver.recording).
        gateway = status in (502, 504)
        return RouteError(
            TerminalReason.DELIVERY_FAILED,
            f"webhook answered HTTP {status}"
            + (" (the receiver's limit: the whole route waits)" if status == 429 else ""),
            retry_after_s=parse_retry_after(retry_after),
            rate_limited=status == 429,
            route_wide=status == 429,
            ambiguous=gateway,
            answer=f"HTTP {status}" if gateway else None,
        )
    if status == SEE_OTHER and leaves_origin(location, url):
        # A 303 to another origin is no result of the receiver's: something in front of it
        # answered the POST — Authelia's forward auth answers every request it will not let
        # through, of any method but GET / HEAD, 303 to its portal on its own host
        # (authelia/authelia #2184). Nothing was delivered: the route's refusal, as every
        # 303 was until 2026-12-07 — the work held back and lifted by the route's pause.
        # Read as possibly delivered (since 2026-12-07, until the same day), every work
        # such a route was sent ran out of attempts held on the route for good.
        return RouteError(
            TerminalReason.ROUTE_REFUSED,
            "webhook answered HTTP 303 See Other to another origin: not the receiver's result — a server in front "
            "of it (an authentication portal) took the request; nothing delivered, never followed; fix the route "
            "(its url, or let curaflow through)",
            permanent=True,
            answer=f"HTTP {status}",
        )
    if status == SEE_OTHER:
        # RFC 9110 §15.4.4: "an indirect response to the original request" — the receiver
        # may have processed the POST and points at its result (a receiver's
        # POST-redirect-GET). Never followed (it names a destination nobody checked): one
        # attempt, retried with the same webhook-id (the receiver deduplicates; Standard
        # Webhooks 1.0 counts a 3xx a failed attempt), possibly delivered as a 502 is, its
        # answer counted in the route's streak should the attempts run out; a stated
        # `Retry-After` waited (§10.2.3 names it for any 3xx). Until 2026-12-07 it was the
        # route's refusal: the work held back, then offered to a later job under another
        # webhook-id — a second copy for a receiver that had it.
        return RouteError(
            TerminalReason.DELIVERY_FAILED,
            "webhook answered HTTP 303 See Other: the receiver may have taken the delivery and points elsewhere "
            "for its result (never followed); retried with the same webhook-id — answer a 2xx for a delivery",
            retry_after_s=parse_retry_after(retry_after),
            ambiguous=True,
            answer=f"HTTP {status}",
        )
    if status == GONE:
        # RFC 9110 §15.5.11: the endpoint is gone, "likely to be permanent"; Standard
        # Webhooks 1.0: the sender should disable the endpoint. The URL is the route's, the
        # same for every work: the route's refusal, the route paused at this first answer
        # and paged (pauses_route) — until 2026-12-07 it waited for the refusal streak, two
        # more works held back first.
        return RouteError(
            TerminalReason.ROUTE_REFUSED,
            "webhook answered HTTP 410 Gone: the receiver says this endpoint is gone for good; the route is paused "
            "— fix its url, then resume it",
            permanent=True,
            answer=f"HTTP {status}",
            pauses_route=True,
        )
    if status in WORK_STATUSES:
        return RouteError(
            TerminalReason.DELIVERY_REJECTED,
            f"webhook answered HTTP {status}: the receiver refuses this work",
            permanent=True,
            answer=f"HTTP {status}",
        )
    return RouteError(
        TerminalReason.ROUTE_REFUSED,
        f"webhook answered HTTP {status}: the receiver refused the request (its address, credentials or limits, "
        "or an answer curaflow does not know; a redirect is never followed); fix the route",
        permanent=True,
        answer=f"HTTP {status}",
    )


def build_webhook_route(name: str, config: WebhookRouteConfig, context: RouteContext) -> WebhookRoute:
    """The ``webhook`` route ``name`` on the route's own client."""
    return WebhookRoute(
        name,
        config.url,
        config.secret.get_secret_value(),
        context.http,
        timeout_s=config.timeout_ms / 1000,
        include_files=config.include_files,
        max_body_bytes=config.max_body_bytes,
    )


register_route("webhook", WebhookRouteConfig, build_webhook_route)
