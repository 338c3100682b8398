"""The ``telegram`` route: the Telegram Bot API over raw httpx (reference §3).

What is sent (always uploaded bytes: Telegram cannot fetch Pixiv URLs, which need a
Referer):

* one image within the photo limits (≤ 10 MiB, width + height ≤ 10000, aspect ratio
  ≤ 20) → ``sendPhoto``; otherwise → ``sendDocument`` (≤ 50 MiB, else the work is
  ``over_route_limit``: curaflow's limit, nothing sent). A photo Telegram refuses anyway (``PHOTO_INVALID_DIMENSIONS``
  …, "too big for a photo", or a chat that takes no photos — "not enough rights to send photos to the
  chat": :func:`photo_refused`) is sent again as a document in the same attempt (a 400 means nothing was
  posted);
* an animation (an ugoira, one animated GIF with frame delays) → ``sendAnimation``
  (Telegram shows it playing; ≤ 50 MiB like a document);
* a multi-page work → ``sendMediaGroup`` albums of 2–10 items, split evenly beyond 10
  pages (:func:`~curaflow.routes.chunks.balanced_chunks`), and an album whose request
  would exceed ``max_request_bytes`` (the files plus the multipart framing) split again,
  in order, into requests under it (:func:`album_parts`; a part of one page goes as a
  single send), so a receiver's per-request limit is met before anyone is blamed. The photo/document choice is
  made **once per work** from all its final files: every album is
  photos, or — when any page of the work exceeds the photo limits — every album is
  documents, so a work never arrives as some photo albums and some document albums
  (and a resumed delivery keeps the shape). When Telegram refuses a photo anyway, that
  part and every later one go as documents;
* the caption (:mod:`curaflow.routes.caption`, ≤ 1024 UTF-16 units) on the first item of
  each album; later albums carry the URL and their part number.

The returned ``message_id`` s are the delivery's remote ids: one list per album (part),
one entry per item, in order, each recorded in the ledger as soon as Telegram confirmed
it, so a retry resumes at the first unconfirmed item and never re-sends a confirmed one.
A retry reads which pages are posted from those entries (one per page), never from part
numbers: under other limits than the attempt that posted them (another
``max_request_bytes``) the recorded parts stand as they were and the pages after them are
split anew (:func:`~curaflow.routes.chunks.resumed_parts`).
An album Telegram failed at an item — the Bot API's own ``400`` (``error_code`` 400)
``failed to send message #N with the error message "…"`` — posted **nothing** of that
album: the Bot API numbers the album's messages from 1 in the order their sends ended, and
TDLib sends an album to Telegram as one request (``messages.sendMultiMedia``), so an item
refused before it leaves fails every item and a refusal of Telegram's fails them all
(tdlib/telegram-bot-api ``Client::on_message_send_failed``, tdlib ``do_send_message_group``).
The quoted error is the album's answer (:func:`stated_phrase`): a photo refused sends the
album again as documents, a rate limit is retried, the work's phrase refuses the work, any
other the route's. One quoted error says otherwise: ``Message was not sent``
(:data:`ALBUM_ITEM_LEFT_OUT`: Telegram's result left that item out while it posted the
others) — some items may be in the chat, which ones the answer does not say: *ambiguous*.
Until 2026-12-07 ``#N`` was read as "items 0..N-1 are in the chat": an album whose third
photo Telegram could not take as a photo was recorded with three items posted that never
were and ended ``delivery_partial`` instead of being sent as documents. A part recorded
partly posted by a version before (``null`` ids) is still resumed after its items.

How answers are classified (:func:`classify`; the work is blamed only for an answer
recognised positively, :data:`WORK_REFUSALS`, each a whole phrase the description states —
after the Bot API's ``Bad Request:``, or quoted as an album item's error — never words
found inside another description, :func:`stated_phrase`):

===========================================  ==========================================
``{"ok": true, "result": …}`` in a 2xx        confirmed
a rate limit, wherever Telegram writes it:    retried after that many seconds; without
429, ``parameters.retry_after``, or "Too      a delay, after the backoff of
Many Requests: retry after N" in a 400's      :func:`curaflow.domain.ratelimit.retry_delay_ms`
description (an album's quoted item) — the   (``telegram_failed``, the route's); a 429
last two in the Bot API's own refusal only    not the Bot API's own (a gateway's page, a
                                              proxy's envelope) holds the whole route
                                              (``route_wide``: its cooldown, at most
                                              ``delivery.route_rate_limit_cap_ms``)
the Bot API's 400 (``error_code`` 400) with   the chat became a supergroup: switch to the
``parameters.migrate_to_chat_id`` a           new id and send again (once); in any other
supergroup's id (``-100…``)                   answer, or to another id, never followed
JSON 5xx other than 502/504                   retried (Telegram did not post it); a
                                              ``Retry-After`` on any 5xx is waited
                                              (``stated_delay_s``; until 2026-12-07
                                              ignored)
Cloudflare's own 521, 522, 523, 525, 526,     retried, not ambiguous: the Bot API server
530, its 1xxx page under a 403 or a 409, its  was never reached (``cloudflare_error`` in
challenge page (``cf-mitigated``)             :mod:`curaflow.routes.base`; until
(``Server: cloudflare`` or ``CF-RAY``: a      2026-12-07 ambiguous, the 409, the 403
Bot API server behind Cloudflare)             and the challenge the route's); its 520,
                                              524 stay ambiguous
a status HTTP does not define (600–999),      *ambiguous*, as a 5xx not the Bot API's
whatever its body (the Bot API's shape too)   (RFC 9110 §15; ``undefined_status_error``
                                              in :mod:`curaflow.routes.base`, every
                                              route's one reading; until 2026-12-07 the
                                              Bot API's shape was ``route_refused``)
the Bot API's own 400 (``error_code`` 400)    ``delivery_rejected`` (the work), never
naming the file itself                        retried; a photo Telegram cannot take as a
(:data:`WORK_REFUSALS`: a page Telegram       photo is first sent again as a document
cannot process, a file too big for the
chat)
any other answer: "chat not found", "message  ``route_refused`` (the route: its chat,
thread not found", ``TOPIC_CLOSED``, a        topic, bot, rights or limits, or an answer
blocked bot, no rights, 401, 403, 404, 413,   curaflow does not know), never retried;
the words of media given by URL ("wrong type  the work is not used up (held back from
of the web page content", "failed to get      the route for a while); its message names
HTTP URL content": curaflow uploads bytes),   the setting the answer is about
a wording or status never seen before, an     (:func:`route_hint`: a 401 ``bot_token``, a
error of an unknown shape                     403 the bot in ``chat_id``'s chat …)
connect error, connect/write/pool timeout,    retried (the request never reached Telegram)
a request that never left whole (a reset
while it was written, RequestNotWhole)
read timeout, broken response, a 2xx that is *ambiguous*: the message may exist. Telegram
not the Bot API's (``ok`` not a boolean,      has no idempotency key, so the route's
``ok: true`` without ``result`` — until       ``on_ambiguous`` decides: ``fail`` (default,
2026-12-07 a delivery —, ``ok: false``: the   at most once) or ``retry`` (at least once)
Bot API never writes it under a 2xx),
gateway errors 502 / 504 (HTML
or JSON), any 5xx that is not the Bot API's
own refusal (an HTML page from the gateway,
``ok: true`` under a 5xx, ``ok: false`` whose
``error_code`` is not that 5xx)
a 3xx / 4xx / 429 that is not the Bot API's   the route's / a rate limit, as above
JSON (``ok`` not a boolean, ``ok: true``
under it — never a delivery), or whose body
broke (cut, undecodable, endless)
``ok: false`` whose ``error_code`` is not     its HTTP status decides, its words name
its HTTP status (another number, text, none:  nothing (never the work, a photo refused,
a proxy rewriting statuses, a gateway's JSON) a gateway error, a migration or items of
                                              an album posted): a 3xx / 4xx the route's
                                              or a rate limit, a 2xx or a 5xx ambiguous
===========================================  ==========================================

Gateway errors are ambiguous because the gateway in front of the Bot API answers them
after it forwarded the request: public bot threads report posts that exist although
the answer was ``502 Bad Gateway``.

The bot token is part of the request URL; it never appears in errors or logs.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any, Literal, NoReturn

import httpx
from pydantic import Field, SecretStr

from curaflow.domain.models import ArtifactFile
from curaflow.domain.ratelimit import first_retry_after, parse_retry_after
from curaflow.domain.reasons import TerminalReason
from curaflow.observability.logs import get_logger
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
    stated_delay_s,
    undefined_status_error,
    unread_answer,
)
from curaflow.routes.caption import build_caption, utf16_len
from curaflow.routes.chunks import balanced_chunks, packed_chunks, resumed_parts
from curaflow.routes.registry import RouteContext, register_route

MiB = 1024 * 1024


class TelegramRouteConfig(RouteSettings):
    """Telegram Bot API route (raw HTTP; reference ``pixiv-and-delivery-apis.md`` §3).

    One image within the photo limits goes as ``sendPhoto``, otherwise ``sendDocument``;
    a multi-page work goes as ``sendMediaGroup`` albums of 2–10 (split evenly beyond 10).
    Limits may only be tightened, never raised above Telegram's.

    Attributes:
        bot_token: the bot's token (``123456:ABC…``); never logged.
        chat_id: ``-100…`` for a channel/supergroup, a user id, or ``@channelname``.
        api_url: the Bot API base URL (a local Bot API server, or a fake in tests).
        timeout_ms: total time of one request (connect, send, the answer); a send cut
            after the request started to leave is *ambiguous*.
        on_ambiguous: ``fail`` (default: the cell fails ``delivery_unknown``, nothing is
            re-sent, at most once) or ``retry`` (re-send, at least once).
        caption_max: caption limit in UTF-16 units (≤ 1024).
        photo_max_bytes / photo_max_side_sum / photo_max_ratio: ``sendPhoto`` limits
            (≤ 10 MiB, width + height ≤ 10000, aspect ratio ≤ 20); beyond → document.
        document_max_bytes: largest upload (≤ 50 MiB); beyond → ``over_route_limit``.
        max_request_bytes: largest request (≤ 50 MiB, default 50 MiB: an album of 10
            photos of 5.5 MB is refused by the Bot API as ``413 Request Entity Too
            Large``); albums are split into requests under it, a page too big for a
            request alone is ``over_route_limit``. Lower it when the Bot API server in
            front of you takes less.
        disable_notification / message_thread_id: passed through to Telegram.
    """

    kind: Literal["telegram"] = "telegram"
    bot_token: SecretStr
    chat_id: str
    api_url: str = "https://api.telegram.org"
    timeout_ms: int = Field(default=60_000, ge=100)
    on_ambiguous: Literal["fail", "retry"] = "fail"
    caption_max: int = Field(default=1024, ge=0, le=1024)
    photo_max_bytes: int = Field(default=10 * MiB, ge=1, le=10 * MiB)
    photo_max_side_sum: int = Field(default=10_000, ge=1, le=10_000)
    photo_max_ratio: float = Field(default=20.0, ge=1.0, le=20.0)
    document_max_bytes: int = Field(default=50 * MiB, ge=1, le=50 * MiB)
    max_request_bytes: int = Field(default=50 * MiB, ge=64 * 1024, le=50 * MiB)
    disable_notification: bool = False
    message_thread_id: int | None = None

    def destinations(self) -> Destinations:
        """The Bot API's origin (``api_url``)."""
        return configured(self.api_url)


log = get_logger("curaflow.routes.telegram")

ALBUM_MAX = 10
#: Bytes of a request besides its files: the form fields (caption ≤ 1024 characters of up
#: to 4 bytes, the ``media`` JSON) and the multipart framing around them.
REQUEST_RESERVE = 16 * 1024
#: Multipart framing of one file (boundary, ``Content-Disposition`` with its name, type).
FILE_RESERVE = 512
#: 400 phrases meaning "this photo cannot be a photo": send it as a document (whole
#: phrases, lowercased, as :func:`stated_phrase` reads a description).
PHOTO_REFUSED = frozenset(
    {
        "photo_invalid_dimensions",
        "image_process_failed",
        "photo_save_file_invalid",
        "photo_ext_invalid",
        "photo_invalid",
        "wrong file identifier/http url specified",
    }
)
#: TDLib's words for a page over Telegram's photo limit, as the Bot API quotes them
#: (td ``check_full_local_location``: "file of size N bytes is too big for a photo; the
#: maximum size is M bytes", and before it "File \"<path>\" of size N bytes is too big for a
#: photo"; lowercased, whole, as :func:`stated_phrase` reads a description): the page cannot
#: be a *photo* — never that it cannot be sent —, so it goes again as a document, as
#: :data:`PHOTO_REFUSED` does (:func:`photo_refused`). Until 2026-12-07 they were the
#: route's refusal: the work held back and sent as a photo again after each hold, for ever,
#: three works so pausing the route, though a document would have gone.
PHOTO_TOO_BIG = re.compile(
    r'file (?:"[^"]*" )?of size \d+ bytes is too big for a photo(?:; the maximum size is \d+ bytes)?'
)

#: TDLib's words for a chat whose members may not send photos (Telegram's granular rights:
#: ``can_send_photos`` apart from ``can_send_documents``, Bot API 6.5; td
#: ``can_send_message_content``: "Not enough rights to send photos to the chat", a 400 the
#: Bot API quotes as "Bad Request: not enough rights to send photos to the chat"; whole,
#: lowercased, as :func:`stated_phrase` reads a description): the page cannot go there as a
#: *photo* — never that it cannot go —, so it goes again as a document (:func:`photo_refused`),
#: whose own refusal ("… to send documents …") is the route's. Until 2026-12-07 it was the
#: route's refusal: the work held back and sent as a photo again after each hold, three
#: works so pausing the route, though a document would have gone.
NO_PHOTO_RIGHTS = "not enough rights to send photos to the chat"


def photo_refused(phrase: str) -> bool:
    """Whether ``phrase`` (a description as :func:`stated_phrase` reads it) says a page
    cannot be a photo and may go as a document: one of :data:`PHOTO_REFUSED`, TDLib's
    photo size limit (:data:`PHOTO_TOO_BIG`), or a chat that takes no photos
    (:data:`NO_PHOTO_RIGHTS`)."""
    return phrase in PHOTO_REFUSED or phrase == NO_PHOTO_RIGHTS or PHOTO_TOO_BIG.fullmatch(phrase) is not None


#: 400 phrases that blame the work's file itself — the only answers that do (any other
#: refusal is the route's, :func:`classify`): a page Telegram cannot process as an image
#: (Bot API ``PHOTO_INVALID_DIMENSIONS``, ``IMAGE_PROCESS_FAILED`` …: reference
#: ``pixiv-and-delivery-apis.md`` §3.2; a photo gets a second chance as a document
#: first), a file over what the chat takes ("file is too big"). Whole phrases,
#: lowercased (:func:`stated_phrase`): until 2026-12-07 they were found anywhere in a
#: description, and ``CHAT_PHOTO_INVALID`` or "… the upload file is too big for the proxy"
#: refused the work for good.
#:
#: Not "wrong type of the web page content" (in this list until 2026-12-07, read as "an
#: animation Telegram cannot play"): it is the Bot API's wording of Telegram's
#: ``WEBPAGE_MEDIA_EMPTY`` (tdlib/telegram-bot-api ``Client::fail_query_with_error``, beside
#: ``WEBPAGE_CURL_FAILED`` → "Failed to get HTTP URL content"): media given *by URL* that
#: is not of its type. curaflow uploads every page's bytes and never sends a URL, so the
#: answer names no file of the work — one curaflow should never meet: the route's.
WORK_REFUSALS = frozenset(
    {
        "photo_invalid_dimensions",
        "image_process_failed",
        "photo_save_file_invalid",
        "photo_ext_invalid",
        "photo_invalid",
        "file is too big",
    }
)
NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout, httpx.WriteError, httpx.WriteTimeout)
#: Gateway errors: the gateway forwarded the request and lost the answer (or gave up waiting).
GATEWAY_ERRORS = (502, 504)


class _PhotoRefused(Exception):
    """Telegram refused the upload as a photo; a document may still go."""


#: Telegram's words for a rate limit, in whatever answer carries them (a 429, or a 400
#: "failed to send message #N with the error message \"Too Many Requests: retry after 8\"").
RATE_LIMIT_TEXT = re.compile(r"too many requests(?:: retry after (\d+(?:\.\d+)?))?", re.IGNORECASE)
#: The prefix of the Bot API's 400 descriptions (``Bad Request: chat not found``).
BAD_REQUEST = "bad request:"
#: An album failed at its item N, as the Bot API states it, the item's own error quoted:
#: ``failed to send message #2 with the error message "PHOTO_INVALID_DIMENSIONS"`` (at most 4
#: digits: an album has 10 items). The Bot API numbers the items from 1, in the order their
#: sends ended; the number says nothing of what is in the chat — an album is one request to
#: Telegram, failed whole (the module doc; until 2026-12-07 read as "items 0..N-1 posted").
ALBUM_ITEM_FAILED = re.compile(
    r'failed to send message #(\d{1,4})(?: with the error message "(.*)")?', re.IGNORECASE | re.DOTALL
)
#: The quoted error of an album item Telegram's answer left out while it posted the others
#: (TDLib's ``SendMultiMediaQuery``: "Message was not sent"; lowercased, as
#: :func:`stated_phrase` reads it): the only album failure after which items may be in the
#: chat — which ones the answer does not say (*ambiguous*).
ALBUM_ITEM_LEFT_OUT = "message was not sent"


def stated_phrase(description: str) -> tuple[int | None, str]:
    """What a Bot API description states, read whole: the album's item it failed at (None:
    no album item named) and the phrase, lowercased and trimmed.

    The phrase is the description without the Bot API's ``Bad Request:`` prefix (present
    or not); when that is an album's failure at item N (:data:`ALBUM_ITEM_FAILED`, the whole
    phrase), the phrase is the item's quoted error message, read the same way. Words
    inside a longer phrase state nothing: ``CHAT_PHOTO_INVALID`` is not ``PHOTO_INVALID``,
    "… file is too big for the proxy" is not "file is too big".
    """

    def bare(text: str) -> str:
        text = text.strip()
        if text.lower().startswith(BAD_REQUEST):
            text = text[len(BAD_REQUEST) :].strip()
        return text

    phrase = bare(description)
    item = ALBUM_ITEM_FAILED.fullmatch(phrase)
    if item is None:
        return None, phrase.lower()
    return int(item.group(1)), bare(item.group(2) or "").lower()


def supergroup_id(value: object) -> bool:
    """Whether ``value`` is a supergroup's chat id as the Bot API gives one (an Integer,
    ``-100`` followed by the chat's own id): the one chat a group migrates to
    (``parameters.migrate_to_chat_id``)."""
    return isinstance(value, int) and not isinstance(value, bool) and str(value).startswith("-100") and value < -1000


def classify(
    code: int,
    description: str,
    params: dict[str, Any],
    retry_after: str | None,
    *,
    photo: bool,
    recognised: bool = True,
) -> RouteError | None:
    """The failure a Bot API answer means (None: a photo Telegram refuses as a photo, to
    be sent again as a document), its reason naming the owner (module doc):

    * a rate limit wherever Telegram writes it (429, ``parameters.retry_after``, "Too
      Many Requests: retry after N" in any description of the Bot API's own refusal —
      in an answer not ``recognised``, only a 429) → ``telegram_failed``,
      ``rate_limited``, with the delay Telegram stated (``retry_after`` header last), or
      none (the backoff of :func:`curaflow.domain.ratelimit.retry_delay_ms` then); a 429
      that is not the Bot API's own (not ``recognised``) is ``route_wide``: the limit of
      a gateway in front of it, every send of the route waits it (at most the route's cap);
    * a status HTTP does not define (600–999), whatever the answer says → ``telegram_failed``,
      *ambiguous* (:func:`~curaflow.routes.base.undefined_status_error`, the one reading
      of every route);
    * a 5xx, or HTTP's own "send it again" (:data:`~curaflow.routes.base.SEND_AGAIN_STATUSES`:
      408, 421, 425) → ``telegram_failed``, retried;
    * the Bot API's own 400 (``recognised``) whose description is in
      :data:`WORK_REFUSALS` → ``delivery_rejected`` (the work);
    * anything else — a destination or permission message, 401, 403, 404, 413, a wording
      or a status never seen before — → ``route_refused`` (the route), its answer kept
      for the route's refusal streak.

    Args:
        code: the HTTP status (the Bot API's ``error_code`` when ``recognised``).
        description: Telegram's ``description`` ("" when there is none).
        params: Telegram's ``parameters`` ({} when absent or not an object).
        retry_after: the ``Retry-After`` header, if any.
        photo: the request sent the page(s) as photos.
        recognised: the answer is the Bot API's own refusal (``ok: false`` with an
            ``error_code`` that is its HTTP status); False: an answer of another shape,
            whose words never name the work nor a photo refused (2026-12-06).
    """
    undefined = undefined_status_error("telegram", code, TerminalReason.TELEGRAM_FAILED, retry_after)
    if undefined is not None:
        return undefined
    text = f"telegram: {code} {description}".strip()
    _item, phrase = stated_phrase(description)
    said = RATE_LIMIT_TEXT.search(description)
    # Telegram's words for a rate limit are read in the Bot API's own refusal only: in an
    # answer of another shape (`recognised` False: an `error_code` that is not its status,
    # or none) the status decides, and only a 429 is a rate limit. Until 2026-12-06 a
    # 403 (or a 302, a 404) whose envelope carried `parameters.retry_after` or "retry
    # after N" held that send as long as it said — up to a week, never capped — instead
    # of being the route's refusal.
    if code == 429 or (recognised and (params.get("retry_after") is not None or said is not None)):
        delay = first_retry_after(params.get("retry_after"), said.group(1) if said is not None else None, retry_after)
        # A 429 that is not the Bot API's own (a gateway's page, a proxy's envelope) is the
        # limit of what stands in front of it — the worker's address, not one send: the
        # route cools down, its stated delay at most the route's cap (DESIGN.md, as
        # Discord's Cloudflare 1015). Until 2026-12-06 it held this send alone, for as
        # long as the proxy said (a week), while every other send of the route met it.
        wide = code == 429 and not recognised
        return RouteError(
            TerminalReason.TELEGRAM_FAILED,
            f"{text} (rate limited{', a limit in front of the Bot API: the whole route' if wide else ''})",
            retry_after_s=delay,
            rate_limited=True,
            route_wide=wide,
        )
    if 500 <= code < 600 or code in SEND_AGAIN_STATUSES:
        # Telegram did not post it; a stated Retry-After is waited (until 2026-12-07 it was
        # not: the next attempt came on Temporal's backoff, while a webhook's was honoured).
        return RouteError(TerminalReason.TELEGRAM_FAILED, text, retry_after_s=parse_retry_after(retry_after))
    if recognised and photo and code == 400 and photo_refused(phrase):
        return None
    if recognised and code == 400 and phrase in WORK_REFUSALS:
        return RouteError(
            TerminalReason.DELIVERY_REJECTED,
            f"{text}: Telegram cannot take this work's file",
            permanent=True,
            answer=f"{code} {description}",
        )
    return RouteError(
        TerminalReason.ROUTE_REFUSED,
        f"{text}: {route_hint(code, phrase, recognised=recognised)}",
        permanent=True,
        answer=f"{code} {description}",
    )


#: The Bot API's words for a ``message_thread_id`` its chat has no open topic of (TDLib's
#: "Message thread not found" — a forum topic deleted, or an id of another chat —,
#: ``TOPIC_CLOSED``, ``TOPIC_DELETED``; whole, lowercased, as :func:`stated_phrase` reads them).
TOPIC_REFUSALS = frozenset({"message thread not found", "topic_closed", "topic_deleted"})
#: The Bot API's words for a ``chat_id`` it knows no chat of the bot's by.
CHAT_NOT_FOUND = "chat not found"


def route_hint(code: int, phrase: str, *, recognised: bool = True) -> str:
    """What a refusal of the route (``route_refused``) tells the operator to fix, by the
    answer's status ``code`` and the ``phrase`` its description states
    (:func:`stated_phrase`): the settings the answer is about, and no other — a 401 the
    Bot API's refusal of the token (revoked, mistyped: ``bot_token``), a 404 a token it
    knows no bot by or an ``api_url`` that is not the Bot API, a 3xx (never followed) the
    ``api_url``, a 403 the bot's place in the chat (blocked, kicked, not a member, no
    right to post), "chat not found" the ``chat_id``, a topic's words the
    ``message_thread_id``, a 413 the ``max_request_bytes``; another refusal not the Bot
    API's own (``recognised`` False: a proxy's page, another service's JSON) what stands at
    ``api_url``; any other answer (one curaflow does not know) the route as a whole. The
    hint is the message's, never the verdict's (the owner is the route's whatever it
    says). Until 2026-12-07 every refusal said "fix the route (chat_id, message_thread_id,
    the bot's rights, max_request_bytes)": a revoked token was told to check everything
    but the token."""
    if 300 <= code < 400:
        return "a redirect (never followed): api_url is not the Bot API's address; fix api_url"
    if code == 404:
        return "the Bot API knows no bot by this token, or api_url is not the Bot API; fix bot_token or api_url"
    if code == 413:
        return "the request is over what the Bot API server takes; lower max_request_bytes"
    if not recognised:
        return "an answer that is not the Bot API's (a proxy, or another service at api_url); fix api_url"
    if code == 401:
        return "the Bot API refused the bot's token (revoked or mistyped); fix bot_token"
    if code == 403:
        return (
            "the bot may not post in the chat (blocked, kicked, not a member, or without the right to post); "
            "add the bot to chat_id's chat with that right, or fix chat_id"
        )
    if phrase == CHAT_NOT_FOUND:
        return "the bot has no chat by this id (a typo, or the bot is not in it); fix chat_id"
    if phrase in TOPIC_REFUSALS:
        return "the chat has no open topic by this id (deleted, closed, or of another chat); fix message_thread_id"
    return (
        "the route's chat, topic, bot, rights or limits refused the request (or an answer curaflow does not know); "
        "fix the route (bot_token, chat_id, message_thread_id, the bot's rights, max_request_bytes)"
    )


def _message_id(message: object) -> int | None:
    """The ``message_id`` of a posted ``Message`` (Bot API: an Integer), or None when the
    answer's item has none curaflow can read (not an object, no id, an id of another type,
    an integer longer than any id: :func:`~curaflow.routes.base.remote_id_of`)."""
    if not isinstance(message, dict):
        return None
    value = message.get("message_id")
    return value if isinstance(value, int) and remote_id_of(value) is not None else None


def album_parts(files: list[ArtifactFile], room: int) -> list[list[ArtifactFile]]:
    """The requests a work's pages go in: albums of at most :data:`ALBUM_MAX`, split
    evenly (:func:`~curaflow.routes.chunks.balanced_chunks`), and an album whose files
    with their framing (:data:`FILE_RESERVE` each) exceed ``room`` bytes split again, in
    order, into parts under it (:func:`~curaflow.routes.chunks.packed_chunks`). Depends
    only on the files' sizes, ``ALBUM_MAX`` and ``room``, so a resumed delivery finds
    the same parts."""
    parts: list[list[ArtifactFile]] = []
    for chunk in balanced_chunks(files, ALBUM_MAX):
        if sum(f.bytes + FILE_RESERVE for f in chunk) <= room:
            parts.append(chunk)
            continue
        groups = packed_chunks([f.bytes + FILE_RESERVE for f in chunk], ALBUM_MAX, room)
        parts.extend([chunk[i] for i in group] for group in groups)
    return parts


def fits_photo(f: ArtifactFile, config: TelegramRouteConfig) -> bool:
    """Whether ``f`` may go as ``sendPhoto`` (size, width + height, aspect ratio)."""
    if f.bytes > config.photo_max_bytes or f.width is None or f.height is None:
        return False
    w, h = f.width, f.height
    if w <= 0 or h <= 0 or w + h > config.photo_max_side_sum:
        return False
    return max(w, h) / min(w, h) <= config.photo_max_ratio


class TelegramRoute:
    """Deliver to a Telegram chat (see the module doc).

    Args:
        name: route name.
        config: the route's configuration.
        http: the route's outbound client (a plain ``httpx.AsyncClient`` is wrapped,
            limited to ``api_url``). ``timeout_ms`` bounds each request's total time;
            answers are read up to :data:`~curaflow.outbound.ROUTE_ANSWER_KEEP_BYTES`.
    """

    kind = "telegram"

    def __init__(self, name: str, config: TelegramRouteConfig, http: httpx.AsyncClient | Outbound) -> None:
        self.name = name
        self.config = config
        self.chat_id = config.chat_id
        self.resend_safe = config.on_ambiguous == "retry"
        self._out = as_outbound(http, config.destinations())
        self._base = f"{config.api_url.rstrip('/')}/bot{config.bot_token.get_secret_value()}"
        self._timeout = config.timeout_ms / 1000

    async def deliver(self, request: DeliveryRequest) -> DeliveryReceipt:
        """Send every page of the work, resuming after ``request.parts_done``.

        Raises:
            RouteError: see the classification table in the module doc.
        """
        files = sorted(request.artifact.files, key=lambda f: f.page)
        if not files:
            raise RouteError(TerminalReason.DELIVERY_REJECTED, "telegram: the artifact has no file", permanent=True)
        room = self.config.max_request_bytes - REQUEST_RESERVE
        for f in files:
            if f.bytes > self.config.document_max_bytes:
                raise RouteError(
                    TerminalReason.OVER_ROUTE_LIMIT,
                    f"telegram: not sent by curaflow: page {f.page} is {f.bytes} bytes, over the route's "
                    f"document_max_bytes of {self.config.document_max_bytes}",
                    permanent=True,
                )
            if f.bytes + FILE_RESERVE > room:
                raise RouteError(
                    TerminalReason.OVER_ROUTE_LIMIT,
                    f"telegram: not sent by curaflow: page {f.page} is {f.bytes} bytes; with its request it is "
                    f"over the route's max_request_bytes of {self.config.max_request_bytes}",
                    permanent=True,
                )
        # Resumed by the pages each recorded part carries (one element per item), never by
        # part number: an earlier attempt may have split the work under other limits.
        parts = resumed_parts(
            files,
            [len(entry) for entry in request.parts_done],
            lambda pages: album_parts(list(pages), room),
            partial_last=True,
        )
        # One shape per work, decided from all its files (not album by album); an
        # animation goes as sendAnimation, never as a photo (a photo shows one frame).
        as_photo = all(fits_photo(f, self.config) and not f.frame_delays_ms for f in files)
        done = [list(entry) for entry in request.parts_done[: len(parts)]]
        for index, chunk in enumerate(parts):
            posted = done[index] if index < len(done) else None
            if posted is not None and len(posted) >= len(chunk):
                continue  # confirmed whole by an earlier attempt
            if posted is None:
                caption = build_caption(
                    request.work, self.config.caption_max, measure=utf16_len, part=(index + 1, len(parts))
                )
                posted = []
                done.append(posted)
            else:
                caption = ""  # the album's first item, with the caption, is in the chat
            message_ids, as_photo = await self._send_part(chunk[len(posted) :], caption, as_photo=as_photo)
            posted.extend(message_ids)
            if request.on_part is not None:
                await request.on_part([list(entry) for entry in done])
        # The first id Telegram returned (a part recorded partly posted before 2026-12-07 has none).
        first = next((i for part in done for i in part if i is not None), None)
        return DeliveryReceipt(
            remote_id=str(first) if first is not None else None, remote_ids=done, remote_status="sent"
        )

    async def _send_part(
        self, chunk: list[ArtifactFile], caption: str, *, as_photo: bool
    ) -> tuple[list[int | None], bool]:
        """Send one part in the work's shape; returns its message ids and the shape for the rest."""
        if as_photo:
            try:
                return await self._send(chunk, caption, as_photo=True), True
            except _PhotoRefused as refused:
                log.info("telegram.photo_refused", route=self.name, description=str(refused))
        return await self._send(chunk, caption, as_photo=False), False

    async def _send(self, chunk: list[ArtifactFile], caption: str, *, as_photo: bool) -> list[int | None]:
        blobs = await asyncio.to_thread(read_pages, chunk)
        data: dict[str, str] = {}
        if self.config.disable_notification:
            data["disable_notification"] = "true"
        if self.config.message_thread_id is not None:
            data["message_thread_id"] = str(self.config.message_thread_id)
        uploads: dict[str, tuple[str, bytes, str]] = {}
        if len(chunk) == 1 and chunk[0].frame_delays_ms:
            method, field = "sendAnimation", "animation"
            if caption:
                data["caption"] = caption
            uploads[field] = (Path(chunk[0].path).name, blobs[0], chunk[0].mime)
        elif len(chunk) == 1:
            method, field = ("sendPhoto", "photo") if as_photo else ("sendDocument", "document")
            if caption:
                data["caption"] = caption
            uploads[field] = (Path(chunk[0].path).name, blobs[0], chunk[0].mime)
        else:
            method = "sendMediaGroup"
            media = []
            for i, (f, blob) in enumerate(zip(chunk, blobs, strict=True)):
                item: dict[str, Any] = {"type": "photo" if as_photo else "document", "media": f"attach://file{i}"}
                if i == 0 and caption:
                    item["caption"] = caption
                media.append(item)
                uploads[f"file{i}"] = (Path(f.path).name, blob, f.mime)
            data["media"] = json.dumps(media, ensure_ascii=False)
        result = await self._call(method, data, uploads, photo=as_photo)
        # `ok: true` is Telegram's word that the request was done: every file of the chunk
        # is posted, whatever the answer's messages look like. An id curaflow cannot read
        # is unknown (None), as a partly posted album's are; never a failure or a re-post.
        messages = result if isinstance(result, list) else [result]
        ids = [_message_id(m) for m in messages][: len(chunk)]
        return ids + [None] * (len(chunk) - len(ids))

    async def _call(
        self, method: str, data: dict[str, str], uploads: dict[str, tuple[str, bytes, str]], *, photo: bool
    ) -> Any:
        for _ in range(2):  # at most one chat migration
            data["chat_id"] = self.chat_id
            try:
                response = await self._out.request(
                    "POST",
                    f"{self._base}/{method}",
                    data=data,
                    files=uploads,
                    limits=Limits(time_s=self._timeout, keep_bytes=ROUTE_ANSWER_KEEP_BYTES),
                )
            except NOT_SENT as err:
                raise RouteError(
                    TerminalReason.TELEGRAM_FAILED, f"telegram {method}: {type(err).__name__}; not sent"
                ) from err
            except httpx.HTTPError as err:
                refused = refusal_answered(err)  # a refusal whose body broke: read as one not the Bot API's
                if refused is None:
                    raise RouteError(
                        TerminalReason.TELEGRAM_FAILED,
                        f"telegram {method}: {type(err).__name__} after the request was sent; outcome unknown",
                        ambiguous=True,
                        answer=unread_answer(err),  # an acceptance whose body broke is an answer
                    ) from err
                response = refused
            status = response.status_code
            undefined = undefined_status_error(
                f"telegram {method}", status, TerminalReason.TELEGRAM_FAILED, response.headers.get("retry-after")
            )
            if undefined is not None:
                raise undefined  # a status HTTP does not define: whatever its body, not the Bot API's
            cloudflare = cloudflare_error(f"telegram {method}", response, TerminalReason.TELEGRAM_FAILED)
            if cloudflare is not None:
                raise cloudflare  # Cloudflare's own 52x about the Bot API server behind it
            try:
                body = response.json()
            except (ValueError, RecursionError):  # not JSON; nested deeper than the parser recurses
                body = None
            ok = body.get("ok") if isinstance(body, dict) else None
            if not isinstance(body, dict) or not isinstance(ok, bool) or (ok and not 200 <= status < 300):
                # Not the Bot API's answer: a gateway's page (HTML), garbage, an envelope
                # whose `ok` is no boolean (`"true"`, 1, null), or `ok: true` under a status
                # that is no acceptance (a 3xx, a 4xx, a 429, a 5xx: a proxy rewriting
                # statuses, a cached page) — its status decides, as for `ok: false` whose
                # `error_code` disagrees: a 2xx or a 5xx of it may follow a post
                # (ambiguous), a 3xx or a 4xx of it blames no one but the route, a 429 is
                # a rate limit. Until 2026-12-05 any `ok` that was not `true` was read as
                # the Bot API's refusal — a 2xx became route_refused (the work posted again
                # after its hold) and a 4xx naming "file is too big" refused the work for
                # good; until 2026-12-06 `ok: true` under any status was a delivery (a 403,
                # a 302 or a 500 reported the work delivered).
                if 200 <= status < 300 or status >= 500:
                    raise _maybe_posted(method, response)
                self._raise_for(
                    method, status, "(not the Bot API's answer)", {}, response, photo=False, recognised=False
                )
            if body.get("ok") is True:
                # The Bot API's success is `ok` with its `result` (of whatever shape: the
                # `ok` is its word). `{"ok": true}` alone is no answer of the Bot API's — a
                # stub, a health endpoint, another service at a mistyped api_url — and may
                # follow a post or not: until 2026-12-07 it was every file posted, the work
                # recorded delivered with nothing in the chat, every delivery so, unpaged.
                if "result" not in body:
                    raise _maybe_posted(method, response)
                return body["result"]
            raw_params = body.get("parameters")
            params: dict[str, Any] = raw_params if isinstance(raw_params, dict) else {}
            raw_code, raw_description = body.get("error_code"), body.get("description")
            # The Bot API's refusal carries its status as `error_code` (an Integer): one that
            # does not — another number, text, none — is an answer of an unknown shape (a
            # proxy rewriting statuses, a gateway's JSON), classified by the HTTP status with
            # no word of it read as naming the work (`recognised`). Until 2026-12-06 a 200,
            # a 403 or a 500 carrying "file is too big" refused the work for good, and a 400
            # whose JSON said 502 was a gateway error (the work `unknown` for good).
            recognised = isinstance(raw_code, int) and not isinstance(raw_code, bool) and raw_code == status
            # `ok: false` under a 2xx (the Bot API never writes one: its refusals carry
            # their 4xx / 5xx), or under a 5xx whose `error_code` is not that status (a
            # proxy's or a gateway's envelope), is no refusal of the Bot API's: the status
            # decides, and a 2xx or a 5xx may follow a post — ambiguous, as the same answer
            # in any other shape. Until 2026-12-06 such a 2xx was `route_refused` (the work
            # held back, then posted again; a rate limit in its words retried it at once)
            # and such a 5xx retried as not posted (a second post on an at-most-once route).
            if 200 <= status < 300 or (status >= 500 and not recognised):
                raise _maybe_posted(method, response)
            migrated = params.get("migrate_to_chat_id")
            # Followed only in the Bot API's own 400 and to a supergroup's id (the one chat
            # a group migrates to, :func:`supergroup_id`); any other is an answer not
            # understood: the refusal below, the chat kept. Until 2026-12-06 any answer (a
            # 200, a 429, a 500) moved every later delivery of the process to any integer.
            if recognised and status == 400 and supergroup_id(migrated):
                log.warning(
                    "telegram.chat_migrated",
                    route=self.name,
                    new_chat_id=str(migrated),
                    hint="update chat_id in the route's configuration",
                )
                self.chat_id = str(migrated)
                continue
            # A description of another shape is no words at all (the route's, below).
            description = raw_description if isinstance(raw_description, str) else ""
            self._raise_for(method, status, description, params, response, photo=photo, recognised=recognised)
        raise RouteError(
            TerminalReason.ROUTE_REFUSED,
            f"telegram {method}: the chat migrated twice; set the route's chat_id to the supergroup's id",
            permanent=True,
            answer="chat migrated twice",
        )

    def _raise_for(
        self,
        method: str,
        code: int,
        description: str,
        params: dict[str, Any],
        response: httpx.Response,
        *,
        photo: bool,
        recognised: bool,
    ) -> NoReturn:
        """Raise what the refusal ``code`` (the HTTP status) with ``description`` means
        (:func:`classify`; ``recognised``: the answer is the Bot API's own refusal)."""
        text = f"telegram {method}: {code} {description}".strip()
        if code in GATEWAY_ERRORS:
            raise RouteError(
                TerminalReason.TELEGRAM_FAILED,
                f"{text}: a gateway error; the request may have reached Telegram, outcome unknown",
                retry_after_s=stated_delay_s(response.headers),
                ambiguous=True,
                answer=f"{code} {description}",
            )
        retry_after = response.headers.get("retry-after")
        error = classify(code, description, params, retry_after, photo=photo, recognised=recognised)
        # An album failed at an item posted nothing of it (the module doc: the Bot API's
        # numbering is the order the item sends ended, and an album is one request to
        # Telegram): its quoted error is the answer, classified above — save the item
        # Telegram's result left out while it posted the others, read only in the Bot API's
        # own 400: which items are in the chat the answer does not say. Until 2026-12-07
        # `#N` recorded items 0..N-1 as posted: the album's refused photo ended the work
        # `partial` instead of going as a document, pages never posted reported posted.
        item, phrase = stated_phrase(description) if recognised and code == 400 else (None, "")
        if method == "sendMediaGroup" and item is not None and phrase == ALBUM_ITEM_LEFT_OUT:
            raise RouteError(
                TerminalReason.TELEGRAM_FAILED,
                f"{text}: Telegram posted the album without an item; which items are in the chat is not said, "
                "outcome unknown",
                ambiguous=True,
                answer=f"{code} {description}",
            )
        if error is None:
            raise _PhotoRefused(description)
        raise error


def _maybe_posted(method: str, response: httpx.Response) -> RouteError:
    """The failure of an answer under a 2xx or a 5xx that is not the Bot API's own (a
    gateway's page, an envelope of another shape or whose ``error_code`` is not its
    status): the request may have reached Telegram and been posted — ambiguous, the
    route's ``on_ambiguous`` decides (module doc). It is an answer all the same: its
    status is counted in the route's streak when it ends the work ``delivery_unknown``
    (a proxy answering every request so pauses the route instead of blocking one work a
    job for ever; :mod:`activities.deliver.recording`, 2026-12-07). A 5xx's
    ``Retry-After`` is the wait before a route that may send again does
    (:func:`~curaflow.routes.base.stated_delay_s`, 2026-12-07)."""
    status = response.status_code
    what = "a gateway error" if status in GATEWAY_ERRORS else "an answer that is not the Bot API's"
    return RouteError(
        TerminalReason.TELEGRAM_FAILED,
        f"telegram {method}: HTTP {status}, {what}; the request may have reached Telegram, outcome unknown",
        retry_after_s=stated_delay_s(response.headers) if status >= 500 else None,
        ambiguous=True,
        answer=f"{status} ({what})",
    )


def build_telegram_route(name: str, config: TelegramRouteConfig, context: RouteContext) -> TelegramRoute:
    """The ``telegram`` route ``name`` on the route's own client."""
    return TelegramRoute(name, config, context.http)


register_route("telegram", TelegramRouteConfig, build_telegram_route)
