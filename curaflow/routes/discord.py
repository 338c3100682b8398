"""The ``discord`` route: a Discord channel webhook over raw httpx (reference §4.3).

``POST <webhook url>?wait=true`` — with ``wait=true`` Discord answers with the created
message, whose ``id`` is the delivery's remote id (without it the answer is a bare 204
and there would be nothing to reconcile: a 2xx without the created message, a 204
included, confirms nothing and is *ambiguous*). The body is ``multipart/form-data``:
``payload_json`` (``content`` ≤ 2000 characters built by :mod:`curaflow.routes.caption`,
its source text Markdown-escaped and without bidirectional controls, so a title is shown
as written; ``allowed_mentions`` empty so a title can never ping anyone, ``attachments``) and the
files as ``files[0]`` … ``files[9]``.

Pages are packed in order into messages of at most 10 files whose whole request — the
files plus ``payload_json`` and the multipart framing (:data:`REQUEST_RESERVE`,
:data:`FILE_RESERVE`) — stays under ``max_message_bytes``, Discord's per-request limit
(10 MiB for a webhook; :func:`~curaflow.routes.chunks.packed_chunks`). A page over
``max_file_bytes``, or too big for a request even alone, is refused by curaflow before
anything is sent (``over_route_limit``, owned by the work: its message says curaflow's
limit refused it). Each message's id is recorded as soon as Discord confirmed it — one
element per page it carries (the message's id, None when Discord gave none) —, so a
retry continues with the first unconfirmed page and a confirmed one is never posted
again, whatever limits the attempt that posted it packed under
(:func:`~curaflow.routes.chunks.resumed_parts`; until 2026-12-06 an entry was one per
message and a retry under another ``max_message_bytes`` skipped or re-posted pages). An
entry recorded before that (one id for the whole message) is read as one page: at worst
the rest of that message is posted again, never left out.

Classification (:func:`classify`; the reason names the failure's owner,
:mod:`curaflow.domain.verdicts`): a 2xx with the created message (an object with its
``id`` and ``channel_id``, :func:`is_discords_message`) → confirmed; 429 → retried after the body's
``retry_after`` or ``Retry-After`` — in the unit of the API version the URL names
(:func:`delays_in_ms`: seconds from v8, milliseconds before it and for a URL naming none,
as Discord hands one out; until 2026-12-07 always seconds, the default version's 6457 ms
waited 1 h 48 min) —, and without either after the backoff
of :func:`curaflow.domain.ratelimit.retry_delay_ms`; a 429 that is global (the body's
``global``, ``X-RateLimit-Global``, ``X-RateLimit-Scope: global``, or any of them of a
value curaflow does not recognise: :func:`is_global_limit`) or not Discord's rate limit
(:func:`is_discords_rate_limit`: Cloudflare's IP-level block, "error code: 1015", a
gateway's JSON) holds the whole route (``route_wide``: the route cools down); Discord's
own JSON 5xx (``{"code", "message"}``, :func:`is_discords_error`) → retried; a gateway
error (502, 504) or any 5xx that is not Discord's error JSON (Cloudflare's HTML page, a
proxy's JSON of another shape) → *ambiguous* (the gateway may have forwarded the
request) — either waits the delay its ``Retry-After`` states (Discord's own in its API
version's unit, anything else HTTP's seconds; until 2026-12-07 ignored) — save
Cloudflare's own 521, 522, 523, 525, 526 and 530, its 1xxx page under a 403 or a 409 and
its challenge page (``cf-mitigated: challenge``; its ``Server: cloudflare`` or ``CF-RAY``:
Discord was never reached; the 403 and the challenge ``route_refused`` until 2026-12-07)
→ retried, not ambiguous,
on an at-most-once route too (:func:`~curaflow.routes.base.cloudflare_error`, the one
reading of every route; until 2026-12-07 ambiguous, the work ``delivery_unknown`` for
good — the 530 and the 409 until 2026-12-07 too; its 520 and 524, after which Discord may
have posted, stay ambiguous); a status HTTP does not define (600–999), whatever its body — Discord's error
shape included — → *ambiguous* too, the one reading of every route
(:func:`~curaflow.routes.base.undefined_status_error`; until 2026-12-07 one in Discord's
shape was ``route_refused``); a 4xx Discord says is about the content
(:data:`WORK_CODES`: explicit content, automatic moderation, a file over the server's
size; ``50035`` Invalid Form Body whose errors name only the uploaded files,
:data:`WORK_FIELDS`), under a status a refusal of the content comes with
(:data:`WORK_STATUSES`: 400, 403, 413) → ``delivery_rejected`` (the work); **any other
answer** — 401, 403, 404 (``10015`` Unknown Webhook), 413 (``40005`` or Cloudflare's
page), a form error about a field curaflow composes (``content``, ``attachments``: the
work's until 2026-12-07) or the route's own (``username``, ``thread_id``), a content
code under another status (a 401, a 404: the webhook's), a code or status never seen
before, any 3xx (never followed) → ``route_refused`` (the route: the work is not used up); a
non-2xx whose body broke after its status came (cut, undecodable, endless) is read as
that status with a body that is not Discord's (:func:`~curaflow.routes.base.refusal_answered`);
connect errors and a request that never left whole (the receiver reset the connection
while it was written: :class:`~curaflow.outbound.RequestNotWhole`) → retried; a timeout
after the whole request left → *ambiguous*, decided by
``on_ambiguous`` (``fail`` by default: at most once; ``retry``: at least once). Discord
has no idempotency key. The webhook URL holds its token and is never logged.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any, Literal, TypeGuard

import httpx
from pydantic import Field, SecretStr, field_validator, model_validator

from curaflow.domain.models import ArtifactFile
from curaflow.domain.ratelimit import first_retry_after
from curaflow.domain.reasons import TerminalReason
from curaflow.outbound import ROUTE_ANSWER_KEEP_BYTES, Destinations, Limits, Outbound, as_outbound, configured
from curaflow.routes.base import (
    SEND_AGAIN_STATUSES,
    DeliveryReceipt,
    DeliveryRequest,
    RouteError,
    RouteSettings,
    cloudflare_error,
    read_pages,
    refusal_answered,
    remote_id_of,
    undefined_status_error,
    unread_answer,
)
from curaflow.routes.caption import build_caption, escape_markdown
from curaflow.routes.chunks import packed_chunks, resumed_parts
from curaflow.routes.registry import RouteContext, register_route

MiB = 1024 * 1024


#: Discord's limit on one webhook request (413 / JSON code 40005 beyond it); it cannot be
#: raised by configuration.
DISCORD_REQUEST_MAX_BYTES = 10 * MiB


#: Most characters of a webhook's name (Discord developer docs, Webhook Resource, "Create
#: Webhook": the nickname guidelines, "with an exception that webhook names can be up to 80
#: characters"); the least is the nickname's, 1.
USERNAME_MAX_CHARS = 80
#: Words a webhook's name may not hold, in any case (the same section: "It does not contain
#: the substrings clyde or discord (case-insensitive)").
USERNAME_FORBIDDEN = ("clyde", "discord")


def username_refusal(username: str) -> str | None:
    """Why Discord refuses ``username`` as the name of a webhook's message, or None when it
    takes it (Discord developer docs, Webhook Resource, "Create Webhook" — the rules of a
    webhook's name, which ``username`` overrides, and "Usernames and Nicknames": a name is
    trimmed of leading and trailing blanks). Counted in characters (code points) once
    trimmed: at least 1, at most :data:`USERNAME_MAX_CHARS`; none of
    :data:`USERNAME_FORBIDDEN`, case-folded.

    Discord refuses such a name at delivery, every message alike (a 400 naming
    ``username``: the route's refusal, each work held back until the route paused): the
    configuration refuses it at load instead (2026-12-07; before, it loaded and cost
    deliveries and a page)."""
    name = username.strip()
    if not name:
        return "Discord refuses an empty name (blanks are trimmed); leave username out to keep the webhook's own"
    if len(name) > USERNAME_MAX_CHARS:
        return f"Discord takes a name of at most {USERNAME_MAX_CHARS} characters; this one has {len(name)}"
    folded = name.casefold()
    for word in USERNAME_FORBIDDEN:
        if word in folded:
            return f"Discord refuses a webhook name holding {word!r} in any case"
    return None


class DiscordRouteConfig(RouteSettings):
    """Discord webhook route (reference ``pixiv-and-delivery-apis.md`` §4.3).

    ``POST <url>?wait=true`` (so Discord answers with the created message and its id),
    multipart with ``payload_json`` and ``files[n]``.

    Attributes:
        url: ``https://discord.com/api/webhooks/<id>/<token>``; never logged.
        timeout_ms: total time of one request (connect, send, the answer); a send cut
            after the request started to leave is *ambiguous*.
        on_ambiguous: ``fail`` (default) or ``retry``, as for Telegram.
        max_file_bytes: largest attachment (≤ 10 MiB, default 10 MiB; lower it to your
            server's upload cap); a bigger page is refused by curaflow
            (``over_route_limit``), never sent.
        max_message_bytes: largest request (≤ 10 MiB, Discord's per-request limit for a
            webhook, default 10 MiB); pages are packed in order into messages of ≤ 10
            files whose whole request (files, ``payload_json``, framing) fits.
        content_max: message text limit (≤ 2000 characters).
        username: overrides the webhook's display name: 1 to 80 characters once trimmed
            of blanks, never holding ``clyde`` or ``discord`` in any case
            (:func:`username_refusal`, Discord's rules for a webhook's name); refused at
            load otherwise — Discord refuses it for every message.
        thread_id: post into this thread of a forum channel.
    """

    kind: Literal["discord"] = "discord"
    url: SecretStr
    timeout_ms: int = Field(default=60_000, ge=100)
    max_file_bytes: int = Field(default=DISCORD_REQUEST_MAX_BYTES, ge=1024, le=DISCORD_REQUEST_MAX_BYTES)
    max_message_bytes: int = Field(default=DISCORD_REQUEST_MAX_BYTES, ge=64 * 1024, le=DISCORD_REQUEST_MAX_BYTES)
    content_max: int = Field(default=2000, ge=0, le=2000)
    username: str | None = None
    thread_id: str | None = None
    on_ambiguous: Literal["fail", "retry"] = "fail"

    @field_validator("username")
    @classmethod
    def _username_discord_takes(cls, value: str | None) -> str | None:
        refusal = username_refusal(value) if value is not None else None
        if refusal is not None:
            raise ValueError(refusal)
        return value

    @model_validator(mode="after")
    def _file_fits_a_request(self) -> DiscordRouteConfig:
        if self.max_file_bytes > self.max_message_bytes:
            raise ValueError(
                f"max_file_bytes ({self.max_file_bytes}) must not exceed max_message_bytes "
                f"({self.max_message_bytes}): a file travels in one request"
            )
        return self

    def destinations(self) -> Destinations:
        """The webhook's origin (``url``)."""
        return configured(self.url.get_secret_value())


FILES_MAX = 10
#: The first API version whose rate limits state their delays in seconds (Discord's change
#: log, "API and Gateway v8": "The Retry-After header is now based in seconds instead of
#: milliseconds"; the body's ``retry_after`` likewise, a float). A webhook URL naming an
#: earlier version — or none, as Discord hands one out (``/api/webhooks/<id>/<token>``: its
#: default version) — is answered in milliseconds (discord-api-docs #2360, #4722).
SECONDS_SINCE_VERSION = 8
#: The API version a webhook URL's path names (``/api/v10/webhooks/…``).
_API_VERSION = re.compile(r"/api/v(\d{1,3})/")
#: Bytes of a request besides its files: ``payload_json`` (content ≤ 2000 characters of
#: up to 4 bytes, the attachment list) and the multipart framing around it.
REQUEST_RESERVE = 16 * 1024
#: Multipart framing of one file (boundary, ``Content-Disposition`` with its name, type).
FILE_RESERVE = 512
#: Discord's JSON error codes that blame the content itself (docs "JSON Error Codes"):
#: explicit content, a file over the server's upload size, automatic moderation of the
#: message (200000: the caption holds the work's title and tags), the harmful links
#: filter. Not 200001, automatic moderation of a *title* (a forum post's ``thread_name``):
#: curaflow sends none, so it speaks of the route's channel — the route's (the work's
#: until 2026-12-07, refused for good).
WORK_CODES = frozenset({20009, 50045, 200000, 240000})
#: The statuses a refusal of the content comes with (a bad request, a forbidden content, a
#: payload too large): only under one of them may :data:`WORK_CODES` blame the work. A
#: 401 (the webhook's token refused), a 404 (the webhook unknown), a 405 or a 409 speak of
#: the webhook or the request whatever their body says — the route's (until 2026-12-06 a
#: content code under any 4xx refused the work for good).
WORK_STATUSES = frozenset({400, 403, 413})
#: Fields of a ``50035`` Invalid Form Body that are the work's: the uploaded files, the
#: work's pages as they are (a file over the server's size, as ``50045``). An error on any
#: other field is the route's: one curaflow composes — ``content`` (the caption built from
#: the title, author, URL and tags under ``content_max``, at most 2000 characters, Discord's
#: limit: :func:`~curaflow.routes.caption.build_caption`) and ``attachments`` (the list of
#: curaflow's file names), whose refusal is curaflow's or the route's doing, never a reason
#: to refuse the work for good (as Telegram's "message caption is too long"); in this list
#: until 2026-12-07, the work refused for good —, one of the route's settings (``username``,
#: ``thread_id``), or one curaflow never sends (``embeds``: no embed is built; in this list
#: until 2026-12-07 too).
WORK_FIELDS = re.compile(r"^(files\[\d+\]|file\d*)(\.|$)")
#: Discord's code for an invalid form body.
INVALID_FORM_BODY = 50035
NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout, httpx.WriteError, httpx.WriteTimeout)
#: Gateway errors: the gateway forwarded the request and lost the answer (or gave up waiting).
GATEWAY_ERRORS = (502, 504)


class DiscordRoute:
    """Deliver to a Discord webhook (see the module doc).

    Args:
        name: route name.
        config: the route's configuration.
        http: the route's outbound client (a plain ``httpx.AsyncClient`` is wrapped,
            limited to the webhook URL). ``timeout_ms`` bounds each request's total
            time; answers are read up to :data:`~curaflow.outbound.ROUTE_ANSWER_KEEP_BYTES`.
    """

    kind = "discord"

    def __init__(self, name: str, config: DiscordRouteConfig, http: httpx.AsyncClient | Outbound) -> None:
        self.name = name
        self.config = config
        self.resend_safe = config.on_ambiguous == "retry"
        self._url = config.url.get_secret_value()
        self._millis = delays_in_ms(self._url)
        self._out = as_outbound(http, config.destinations())
        self._timeout = config.timeout_ms / 1000

    async def deliver(self, request: DeliveryRequest) -> DeliveryReceipt:
        """Post every page of the work, resuming after ``request.parts_done``.

        Raises:
            RouteError: see the module doc.
        """
        files = sorted(request.artifact.files, key=lambda f: f.page)
        if not files:
            raise RouteError(TerminalReason.DELIVERY_REJECTED, "discord: the artifact has no file", permanent=True)
        room = self.config.max_message_bytes - REQUEST_RESERVE
        for f in files:
            if f.bytes > self.config.max_file_bytes:
                raise RouteError(
                    TerminalReason.OVER_ROUTE_LIMIT,
                    f"discord: not sent by curaflow: page {f.page} is {f.bytes} bytes, over the route's "
                    f"max_file_bytes of {self.config.max_file_bytes}",
                    permanent=True,
                )
            if f.bytes + FILE_RESERVE > room:
                raise RouteError(
                    TerminalReason.OVER_ROUTE_LIMIT,
                    f"discord: not sent by curaflow: page {f.page} is {f.bytes} bytes; with its message it is "
                    f"over the route's max_message_bytes of {self.config.max_message_bytes} per request",
                    permanent=True,
                )
        # Resumed by the pages each recorded message carries (one element per page), never
        # by message number: an earlier attempt may have packed under other limits.
        groups = resumed_parts(
            files,
            [len(entry) if isinstance(entry, list) else 1 for entry in request.parts_done],
            lambda pages: self._pack(list(pages), room),
        )
        done = list(request.parts_done)[: len(groups)]
        for index, group in enumerate(groups):
            if index < len(done):
                continue
            content = build_caption(
                request.work, self.config.content_max, part=(index + 1, len(groups)), escape=escape_markdown
            )
            message_id = await self._post(group, content)
            done.append([message_id] * len(group))  # the message that carries each page
            if request.on_part is not None:
                await request.on_part(list(done))
        first = next((i for part in done if isinstance(part, list) for i in part if i is not None), None)
        return DeliveryReceipt(remote_id=first, remote_ids=done, remote_status="sent")

    @staticmethod
    def _pack(files: list[ArtifactFile], room: int) -> list[list[ArtifactFile]]:
        """``files`` in order in messages of ≤ :data:`FILES_MAX` files within ``room`` bytes."""
        groups = packed_chunks([f.bytes + FILE_RESERVE for f in files], FILES_MAX, room)
        return [[files[i] for i in group] for group in groups]

    async def _post(self, files: list[ArtifactFile], content: str) -> str | None:
        blobs = await asyncio.to_thread(read_pages, files)
        payload: dict[str, Any] = {
            "content": content,
            "allowed_mentions": {"parse": []},
            "attachments": [{"id": i, "filename": Path(f.path).name} for i, f in enumerate(files)],
        }
        if self.config.username:
            payload["username"] = self.config.username
        uploads = [
            (f"files[{i}]", (Path(f.path).name, blob, f.mime))
            for i, (f, blob) in enumerate(zip(files, blobs, strict=True))
        ]
        params = {"wait": "true"}
        if self.config.thread_id:
            params["thread_id"] = self.config.thread_id
        try:
            response = await self._out.request(
                "POST",
                self._url,
                params=params,
                data={"payload_json": json.dumps(payload, ensure_ascii=False)},
                files=uploads,
                limits=Limits(time_s=self._timeout, keep_bytes=ROUTE_ANSWER_KEEP_BYTES),
            )
        except NOT_SENT as err:
            raise RouteError(TerminalReason.DELIVERY_FAILED, f"discord: {type(err).__name__}; not sent") from err
        except httpx.HTTPError as err:
            refused = refusal_answered(err)  # a refusal whose body broke: read as one not Discord's
            if refused is None:
                raise RouteError(
                    TerminalReason.DELIVERY_FAILED,
                    f"discord: {type(err).__name__} after the request was sent; outcome unknown",
                    ambiguous=True,
                    answer=unread_answer(err),  # an acceptance whose body broke is an answer
                ) from err
            response = refused
        status = response.status_code
        cloudflare = cloudflare_error("discord", response, TerminalReason.DELIVERY_FAILED)
        if cloudflare is not None:
            raise cloudflare  # Cloudflare's own 52x about Discord behind it: the one reading of every route
        try:
            body = response.json() if response.content else None
        except (ValueError, RecursionError):  # not JSON; nested deeper than the parser recurses
            body = None
        if 200 <= status < 300:
            # Only the created message confirms: the request asks `wait=true`, so Discord
            # answers it. A 2xx without it — a bare 204 is Discord's answer when it did
            # not wait, and then "a message that is not saved does not return an error" —
            # says nothing about whether the message exists: unknown, as any answer that
            # does not say. Until 2026-12-06 a 204 was a delivery (the intent `delivered`,
            # the work never sent again, though nothing confirmed it); until 2026-12-07 so
            # was any object with an `id` (:func:`is_discords_message`).
            if not is_discords_message(body):
                raise RouteError(
                    TerminalReason.DELIVERY_FAILED,
                    f"discord: HTTP {status} without the created message; outcome unknown",
                    ambiguous=True,
                    answer=f"HTTP {status} without the created message",
                )
            return remote_id_of(body["id"])
        headers = response.headers
        raise classify(
            status,
            body,
            headers.get("retry-after"),
            headers.get("x-ratelimit-scope"),
            headers.get("x-ratelimit-global"),
            millis=self._millis,
        )


def _work_fields(errors: Any, prefix: str = "") -> list[str] | None:
    """The dotted names of the fields a 50035 ``errors`` object names (None: not that shape)."""
    if not isinstance(errors, dict):
        return None
    names: list[str] = []
    for key, value in errors.items():
        if key == "_errors":
            names.append(prefix or "(body)")
            continue
        nested = _work_fields(value, f"{prefix}.{key}" if prefix else str(key))
        if nested is None:
            return None
        names.extend(nested)
    return names


def delays_in_ms(url: str) -> bool:
    """Whether Discord states the delays of its own rate limits in milliseconds for the
    webhook ``url``: when its path names no API version (Discord's default version: the URL
    as Discord hands it out) or one before :data:`SECONDS_SINCE_VERSION`."""
    named = _API_VERSION.search(httpx.URL(url).path)
    return named is None or int(named.group(1)) < SECONDS_SINCE_VERSION


def _ms_as_s(value: object) -> object:
    """A delay Discord stated in milliseconds, as seconds: a number, or text of one (the
    ``Retry-After`` header); anything else as it is (not a delay: :func:`first_retry_after`
    reads it as none)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):  # of any length (JSON reads 4 300 digits): no OverflowError
        return max(-1, min(value, _MS_MAX)) / 1000
    if isinstance(value, float):
        return value / 1000
    if isinstance(value, str) and _DECIMAL.fullmatch(value.strip()):
        return float(value) / 1000
    return value


_DECIMAL = re.compile(r"\d+(?:\.\d+)?")
#: Past any delay curaflow waits (a week, :data:`~curaflow.domain.ratelimit.MAX_STATED_S`), ms.
_MS_MAX = 10**12


def is_discords_message(body: Any) -> TypeGuard[dict[str, Any]]:
    """Whether ``body`` (a 2xx's JSON, None when it is not JSON) is the message Discord
    created: an object with its ``id`` and the ``channel_id`` it was posted in — both always
    in Discord's message object (docs "Message Object"), which a webhook executed with
    ``wait=true`` answers. The id's shape is not judged (one curaflow cannot keep is
    recorded unknown, :func:`~curaflow.routes.base.remote_id_of`): the object is Discord's
    word that it posted.

    Any other 2xx body — an ``id`` alone (what any service answers a create with: a
    webhook URL mistyped to another service's), no ``id``, a list, a page — confirms
    nothing: ambiguous, never a delivery. Until 2026-12-07 an object with an ``id`` was a
    delivery, the work recorded delivered with nothing in the channel."""
    return isinstance(body, dict) and "id" in body and "channel_id" in body


def is_discords_error(body: Any) -> bool:
    """Whether ``body`` (an answer's JSON, None when it is not JSON) has the shape of
    Discord's own error: an object with an integer ``code`` and a text ``message`` (docs
    "JSON Error Codes"; its 5xx say ``{"message": "500: Internal Server Error", "code": 0}``).

    Only such a 5xx is Discord's word that the request failed before a message was made
    (retried as not posted); a 5xx in any other JSON — ``{}``, ``{"error": …}``, a
    ``message`` with no ``code`` — is a gateway's or a proxy's in front of Discord, which
    may have forwarded the request: ambiguous, as its HTML pages are. Until 2026-12-06 any
    JSON object was taken for Discord's, and such a 5xx was retried on an at-most-once
    route too (a second post, reported as one delivery)."""
    if not isinstance(body, dict):
        return False
    code = body.get("code")
    return isinstance(code, int) and not isinstance(code, bool) and isinstance(body.get("message"), str)


#: The ``X-RateLimit-Scope`` values of a limit of one send (docs "Rate Limits", header
#: format: ``user``, the per-route limit of the webhook's bucket; ``shared``, a limit of
#: the resource). ``global`` is the global limit; any other value is one curaflow does
#: not know: the wider scope (:func:`is_global_limit`).
ONE_SEND_SCOPES = frozenset({"user", "shared"})


def discords_flag(value: object) -> bool | None:
    """A boolean of Discord's rate limit (the body's ``global``, the ``X-RateLimit-Global``
    header) as Discord writes it or as a proxy or a library in front of it does: the JSON
    boolean, or the word ``true`` / ``false`` (any case, blanks around). None for any
    other value — ``"yes"``, ``1``, ``0``, null, an object —: one curaflow does not
    recognise (never read as ``false``)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        return {"true": True, "false": False}.get(value.strip().lower())
    return None


def is_discords_rate_limit(body: Any) -> bool:
    """Whether ``body`` (a 429's JSON, None when it is not JSON) is Discord's own rate
    limit: an object carrying its fields (docs "Rate Limits": ``{"message", "retry_after",
    "global"}``) — a ``retry_after`` (of any value: one that is no delay is backed off
    from) or a ``global`` that is a boolean (:func:`discords_flag`: ``"true"`` written
    as a string too). Any other 429 — Cloudflare's HTML page, a gateway's JSON
    (``{"message": "API rate limit exceeded"}``), ``{}`` — is the limit of what stands in
    front of Discord: route-wide (:func:`classify`)."""
    return isinstance(body, dict) and ("retry_after" in body or discords_flag(body.get("global")) is not None)


def is_global_limit(body: Any, global_header: str | None, scope: str | None) -> bool:
    """Whether a 429 of Discord's own shape (:func:`is_discords_rate_limit`) is the global
    limit, which holds every send of the route, rather than a limit of one send.

    Discord says it three ways (docs "Rate Limits"): the body's ``global`` (a boolean),
    the ``X-RateLimit-Global`` header (sent on a global limit only, ``true``) and the
    ``X-RateLimit-Scope`` header (``user``, ``global``, ``shared``). Any of them saying
    global is enough; so is any of them present with a value curaflow does not recognise
    (a ``global`` of ``"yes"`` or ``1``, a scope never documented): the wider scope is
    the cheap side — the route waits, at most ``delivery.route_rate_limit_cap_ms`` —,
    where a global limit read as one send's would be met again by every other send of the
    route. ``true`` / ``false`` written as strings (a proxy, a library) are read as their
    word (:func:`discords_flag`). Until 2026-12-06 only the JSON ``true`` and the scope
    ``global`` were read: ``"global": "true"`` held one send, and the header was ignored.

    Args:
        body: the 429's JSON object.
        global_header: the ``X-RateLimit-Global`` header, None when absent.
        scope: the ``X-RateLimit-Scope`` header, None when absent.
    """
    words: list[bool | None] = []
    if isinstance(body, dict) and "global" in body:
        words.append(discords_flag(body["global"]))
    if global_header is not None:
        words.append(discords_flag(global_header))
    if scope is not None:
        said = scope.strip().lower()
        words.append(True if said == "global" else False if said in ONE_SEND_SCOPES else None)
    return any(word is not False for word in words)


def is_the_works(body: Any) -> bool:
    """Whether a Discord 4xx answer's body blames the content (:data:`WORK_CODES`, or a
    form error naming only :data:`WORK_FIELDS`); :func:`classify` reads it only under
    :data:`WORK_STATUSES`."""
    if not isinstance(body, dict):
        return False
    code = body.get("code")
    if isinstance(code, bool) or not isinstance(code, int):
        return False
    if code in WORK_CODES:
        return True
    if code != INVALID_FORM_BODY:
        return False
    fields = _work_fields(body.get("errors"))
    return bool(fields) and all(WORK_FIELDS.match(name) for name in fields or [])


#: Fields of a ``50035`` Invalid Form Body that curaflow composes (the caption, the
#: attachment list): the route's, never the work's (:data:`WORK_FIELDS`).
COMPOSED_FIELDS = re.compile(r"^(content|attachments)(\.|$)")


def composed_fields(body: Any) -> bool:
    """Whether a Discord answer's body is a ``50035`` Invalid Form Body naming a field
    curaflow composes (:data:`COMPOSED_FIELDS`): its message then says so, for the route's
    refusal it is."""
    if not isinstance(body, dict) or body.get("code") != INVALID_FORM_BODY or isinstance(body.get("code"), bool):
        return False
    return any(COMPOSED_FIELDS.match(name) for name in _work_fields(body.get("errors")) or [])


def classify(
    status: int,
    body: Any,
    retry_after: str | None,
    scope: str | None = None,
    global_header: str | None = None,
    *,
    millis: bool = False,
) -> RouteError:
    """The failure a Discord answer other than 2xx means (module doc).

    Args:
        status: the HTTP status.
        body: the answer's JSON (None when it is not JSON).
        retry_after: the ``Retry-After`` header, if any.
        scope: the ``X-RateLimit-Scope`` header (``user``, ``global``, ``shared``), if any.
        global_header: the ``X-RateLimit-Global`` header, if any.
        millis: the webhook URL's API version states Discord's delays in milliseconds
            (:func:`delays_in_ms`): a 429 of Discord's own shape is read so; one that is
            not Discord's (Cloudflare's page, a gateway's JSON) states HTTP's seconds.
    """
    undefined = undefined_status_error("discord", status, TerminalReason.DELIVERY_FAILED, retry_after)
    if undefined is not None:
        return undefined  # a status HTTP does not define: whatever its body, not Discord's answer
    detail = ""
    if isinstance(body, dict):
        detail = f" code {body.get('code')} {body.get('message') or ''}".rstrip()
    answer = f"HTTP {status}{detail}" if isinstance(body, dict) else f"HTTP {status} (not Discord's answer)"
    if status == 429:
        stated = body.get("retry_after") if isinstance(body, dict) else None
        # Discord's own limit in the unit of the URL's API version: until 2026-12-07 every
        # delay was read as seconds, and the default version's 6457 (ms) held the send
        # 1 h 48 min. What stands in front of Discord speaks HTTP: seconds.
        if millis and is_discords_rate_limit(body):
            delay = first_retry_after(_ms_as_s(stated), _ms_as_s(retry_after))
        else:
            delay = first_retry_after(stated, retry_after)
        # A global limit, or a block in front of Discord (Cloudflare's 1015 page, a
        # gateway's JSON: no rate limit of Discord's shape): every send of the route
        # waits, not only this one. Until 2026-12-06 any JSON object was Discord's, and a
        # gateway's JSON 429 held that send alone, its stated wait uncapped (a week).
        # A global limit said in a way curaflow does not recognise is global too.
        wide = not is_discords_rate_limit(body) or is_global_limit(body, global_header, scope)
        return RouteError(
            TerminalReason.DELIVERY_FAILED,
            f"discord: {answer}" + (" (a global or IP-level limit)" if wide else ""),
            retry_after_s=delay,
            rate_limited=True,
            route_wide=wide,
        )
    # A 5xx's (or a send-again's) stated Retry-After is waited (until 2026-12-07 it was not:
    # the next attempt came on Temporal's backoff, while a webhook's was honoured): in the
    # unit of the URL's API version when the answer is Discord's own error, HTTP's seconds
    # when it is what stands in front of Discord (as for a 429).
    unavailable = first_retry_after(_ms_as_s(retry_after) if millis and is_discords_error(body) else retry_after)
    if status in GATEWAY_ERRORS or (status >= 500 and not is_discords_error(body)):
        return RouteError(
            TerminalReason.DELIVERY_FAILED,
            f"discord: HTTP {status}, a gateway error; the request may have reached Discord, outcome unknown",
            retry_after_s=unavailable,
            ambiguous=True,
            answer=answer,
        )
    if 500 <= status < 600 or status in SEND_AGAIN_STATUSES:
        return RouteError(TerminalReason.DELIVERY_FAILED, f"discord: HTTP {status}{detail}", retry_after_s=unavailable)
    if status in WORK_STATUSES and is_the_works(body):
        return RouteError(
            TerminalReason.DELIVERY_REJECTED,
            f"discord: {answer}: Discord refuses this work's content",
            permanent=True,
            answer=answer,
        )
    if 300 <= status < 400:
        what = "a redirect (never followed): the webhook URL is wrong"
    elif composed_fields(body):
        what = (
            "Discord refused what curaflow composed (the message text or the attachment list), not the work: "
            "lower content_max, or report it"
        )
    elif status == 413 or (isinstance(body, dict) and body.get("code") == 40005):
        what = "over the receiver's size limit: lower max_message_bytes / max_file_bytes"
    elif status in (401, 403, 404):
        what = "the webhook is unknown or not allowed: check the route's url"
    else:
        what = "the route refused the request (or an answer curaflow does not know): fix the route"
    return RouteError(TerminalReason.ROUTE_REFUSED, f"discord: {answer}: {what}", permanent=True, answer=answer)


def build_discord_route(name: str, config: DiscordRouteConfig, context: RouteContext) -> DiscordRoute:
    """The ``discord`` route ``name`` on the route's own client."""
    return DiscordRoute(name, config, context.http)


register_route("discord", DiscordRouteConfig, build_discord_route)
