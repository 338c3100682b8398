"""What every delivery route implements, and how its failures are classified.

A route delivers one work's artifact for one cell. It returns a
:class:`DeliveryReceipt` when the destination confirmed, and raises :class:`RouteError`
otherwise. The ``deliver`` activity turns a receipt or an error into the ledger
transition and, for errors, into an ``ApplicationError`` for Temporal's retry policy.
"""

from __future__ import annotations

import errno
import re
from abc import abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import quote

import httpx
from pydantic import ConfigDict, model_validator

from curaflow.domain.config_numbers import BooleansAreNoNumbers
from curaflow.domain.models import Artifact, ArtifactFile, Work
from curaflow.domain.ratelimit import parse_retry_after
from curaflow.domain.reasons import TerminalReason
from curaflow.domain.text import clean_text
from curaflow.observability.secrets import redacted
from curaflow.outbound import answer_head
from curaflow.outbound.destinations import Destinations


class RouteSettings(BooleansAreNoNumbers):
    """What the configuration of every route kind takes (``[routes.<name>]``); each kind
    subclasses it next to its route (``DirectoryRouteConfig`` in
    :mod:`curaflow.routes.directory`, …) with a ``kind`` literal, implements
    :meth:`destinations` and is registered with
    :func:`~curaflow.routes.registry.register_route`.

    Attributes:
        kind: the route kind (``Literal["<kind>"]`` in each model: the word ``[routes]``
            tables are told apart by, :func:`~curaflow.routes.registry.parse_route_configs`).
        task_queue: run this route's deliveries on their own task queue (e.g. on workers
            that can reach the destination); None: the main task queue.
    """

    model_config = ConfigDict(extra="forbid")

    kind: str
    task_queue: str | None = None

    @abstractmethod
    def destinations(self) -> Destinations:
        """Who this route's outbound client may reach — the one place a route kind says it
        (the worker builds the client from it, :class:`~curaflow.routes.registry.RouteContext`).

        A route that talks to the operator's own URLs returns
        :func:`curaflow.outbound.configured` of them; one that reaches no one (the
        directory route) ``Destinations(origins=())``. A model that leaves this abstract
        is refused by :func:`~curaflow.routes.registry.register_route`.
        """

    @model_validator(mode="after")
    def _destinations_readable(self) -> RouteSettings:
        # A destination that cannot be read (no host, an unknown scheme) is refused when
        # the settings load, not at the route's first delivery.
        self.destinations()
        return self


#: Awaited with every part confirmed so far (see :attr:`DeliveryRequest.on_part`).
PartHook = Callable[[list[Any]], Awaitable[None]]


@dataclass
class DeliveryRequest:
    """One delivery on one route.

    Attributes:
        idempotency_key: stable across retries
            (``curaflow:<route>:<work_type>:<work_id>:<job_id>:<target_id>``).
        attempt: the number of sends recorded before this one, plus one.
        parts_done: for routes that send one work as several requests (a Telegram
            album split into chunks of 10, several Discord messages): the parts confirmed
            by earlier attempts, one entry per part in order, each one element per page
            it carries (the id of the message that carries it, None when unknown). The
            route resumes at the first page not in the list — by pages, never by part
            number, since an earlier attempt may have split under other limits
            (:func:`~curaflow.routes.chunks.resumed_parts`).
        on_part: awaited with the whole list of confirmed parts after each part is
            confirmed; the ``deliver`` activity records it in the ledger before the next
            part leaves, so a retry never re-sends a confirmed part.
    """

    job_id: str
    target_id: str
    route: str
    idempotency_key: str
    work: Work
    artifact: Artifact
    attempt: int = 1
    parts_done: list[Any] = field(default_factory=list)
    on_part: PartHook | None = None


@dataclass
class DeliveryReceipt:
    """A confirmed delivery.

    Attributes:
        duplicate: the destination already had this work (e.g. webhook HTTP 409).
        remote_id: the destination's id of what was created (the first message id …).
        remote_ids: every id when one delivery created several: one entry per part
            (request) sent, each one element per page it carried — the id of the message
            that carries that page (Telegram: one message per item; Discord: the one
            message of the request, repeated), None when the answer gave none.
    """

    duplicate: bool = False
    remote_id: str | None = None
    remote_ids: list[Any] = field(default_factory=list)
    remote_status: str | None = None


#: Longest remote id kept from a receiver's answer (characters; a Discord snowflake is 20).
REMOTE_ID_MAX = 128


def remote_id_of(value: object) -> str | None:
    """The id a receiver's answer gives what it created, as kept on the receipt: an
    integer (not a boolean) as its digits, text of printable ASCII, each of 1 to
    :data:`REMOTE_ID_MAX` characters; else None — the delivery is confirmed all the
    same (the answer said so), its id unknown. An object, a list, a huge integer or huge
    or unprintable text (a lone surrogate the ledger cannot store) is never recorded as an
    id (until 2026-12-06 an integer of any length was: JSON reads up to 4 300 digits)."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value) if -(10**REMOTE_ID_MAX) < value < 10**REMOTE_ID_MAX else None
    if isinstance(value, str) and 0 < len(value) <= REMOTE_ID_MAX and value.isascii() and value.isprintable():
        return value
    return None


_HEADER_SAFE = "".join(chr(c) for c in range(0x20, 0x7F) if chr(c) != "%")


def header_value(value: str) -> str:
    """``value`` made safe for an HTTP header: every character outside printable ASCII
    (and ``%`` itself) percent-encoded as UTF-8 (RFC 3986). Plain ASCII values without
    ``%`` are unchanged; the mapping is stable, so a retry sends the same header."""
    return quote(value, safe=_HEADER_SAFE)


_DIGITS = re.compile(r"\d+")
_SPACE = re.compile(r"\s+")
#: The status an answer starts with (``"HTTP 404"``, Telegram's ``"400 Bad Request: …"``):
#: three digits, alone, after an optional ``http``.
_STATUS = re.compile(r"(?:http )?\d{3}(?!\d)")
#: Longest :func:`answer_key` (characters).
ANSWER_KEY_MAX = 200


def answer_key(answer: str) -> str:
    """What makes two answers of a receiver "the same answer" (a route's refusal streak,
    :mod:`curaflow.ledger.route_gates`): the text lowercased, whitespace collapsed, the
    status it starts with kept, every other run of digits one ``#`` (ids, counts, sizes
    and item numbers differ from work to work), at most :data:`ANSWER_KEY_MAX`
    characters, cleaned for storage. ``"HTTP 400 Bad Request: message thread not found
    (item 3)"`` → ``"http 400 bad request: message thread not found (item #)"``.

    The status is the answer's own: until 2026-12-07 its digits were folded too, and a
    webhook receiver refusing one work with 415, another with 422 and a third with 404
    (``"http #"`` each time) paused the route as broken and lifted the works' refusals."""
    text = _SPACE.sub(" ", clean_text(answer).lower()).strip()
    status = _STATUS.match(text)
    head = status.group(0) if status is not None else ""
    return (head + _DIGITS.sub("#", text[len(head) :]))[:ANSWER_KEY_MAX]


#: Statuses by which HTTP itself says the request was not processed and may be sent again
#: later: ``408 Request Timeout`` (RFC 9110 §15.5.9: the server — often a proxy in front of
#: the receiver — closed the connection before it received the whole request), ``421
#: Misdirected Request`` (RFC 9110 §15.5.20: the connection reached a server that does not
#: serve the URL's origin; sent again "over a different connection", idempotent or not —
#: the outbound layer never uses a connection that answered it again,
#: :data:`curaflow.outbound.client.NEW_CONNECTION_STATUSES`) and ``425 Too Early`` (RFC
#: 8470 §5.2: it will not risk processing a request that might be replayed).
#: Every route, and a job's pushes to its callback URL (:func:`curaflow.jobs.pushes.classify_answer`),
#: retry them as they retry a 5xx — one attempt, never ambiguous (nothing was
#: processed), no refusal counted; until 2026-12-06 408 and 425 were ``route_refused`` (the
#: cell failed unretried, the work held back from the route, three in a row paused it),
#: and 421 until 2026-12-07 (a push so answered was dead-lettered at once).
SEND_AGAIN_STATUSES = frozenset({408, 421, 425})


def status_undefined(status: int) -> bool:
    """Whether ``status`` is one HTTP does not define: outside 100–599 (RFC 9110 §15, "Values
    outside the range 100..599 are invalid"; HTTP/1.1 carries any three digits, and httpx
    hands 600–999 over as they came — below 200 it refuses the answer itself, a transport
    error)."""
    return not 100 <= status <= 599


def undefined_status_error(
    route: str, status: int, reason: TerminalReason, retry_after: str | None = None
) -> RouteError | None:
    """The one reading every route gives an answer whose status HTTP does not define
    (:func:`status_undefined`), before its body or headers are read; None for any other status.

    RFC 9110 §15: "A client that receives a response with an invalid status code SHOULD
    process the response as if it had a 5xx (Server Error) status code." No receiver
    documents such a status (Telegram's, Discord's, a webhook receiver's contract), so
    whatever it carries — the receiver's own refusal's shape included — is not the
    receiver's answer: as a 5xx that is not its own, the request may have been processed
    (``ambiguous``: retried with backoff, the same key where the route has one, or the
    route's ``on_ambiguous`` decides) — one attempt, never the work refused nor the route.
    Its answer is kept (``HTTP <status> (…)``), so on an at-most-once route it counts in the
    route's streak as any answer that may follow a post. Until 2026-12-07 the webhook route
    read every such status as ``route_refused`` and Telegram and Discord read one carrying
    their own error's shape as ``route_refused``; the routes read it here alone.

    Args:
        route: how the message names the route's request (``webhook``, ``telegram sendPhoto``).
        status: the answer's HTTP status.
        reason: the route's reason for a failed attempt (``delivery_failed``, ``telegram_failed``).
        retry_after: the answer's ``Retry-After``: read as a 5xx's, the delay it states is
            waited (:func:`stated_delay_s`; 2026-12-07).
    """
    if not status_undefined(status):
        return None
    return RouteError(
        reason,
        f"{route}: HTTP {status}, a status HTTP does not define (read as a 5xx that is not the receiver's own); "
        "the request may have been processed, outcome unknown",
        retry_after_s=parse_retry_after(retry_after),
        ambiguous=True,
        answer=f"HTTP {status} (a status HTTP does not define)",
    )


#: Statuses Cloudflare answers itself when it never handed the request to the origin server
#: behind it (Cloudflare's docs, "Cloudflare 5xx errors"): ``521`` web server is down (the
#: origin refused the connection), ``522`` connection timed out, ``523`` origin is
#: unreachable, ``525`` SSL handshake failed, ``526`` invalid SSL certificate, ``530``
#: Cloudflare "is unable to resolve the origin hostname, preventing it from establishing a
#: connection to the origin server" (its body one of Cloudflare's 1xxx codes: 1016 Origin
#: DNS error, 1033 a tunnel Cloudflare cannot resolve; 2026-12-07).
CLOUDFLARE_NOT_SENT = frozenset({521, 522, 523, 525, 526, 530})
#: Statuses Cloudflare answers itself after the origin had the request (same docs): ``520``
#: the origin answered something Cloudflare could not read (empty, reset, malformed),
#: ``524`` the origin took the request and sent no answer in time. It may have processed it.
CLOUDFLARE_MAYBE_PROCESSED = frozenset({520, 524})
#: Statuses of an origin's own answer under which Cloudflare answers one of its 1xxx errors
#: itself, the request handed to no origin: ``409`` (Cloudflare's docs, "Error 409": "Cloudflare
#: will return a 409 response for Error 1001: DNS Resolution Error") and ``403`` (its edge's
#: blocks, same docs: 1006–1008 a banned address, 1009 a country, 1010 the client's
#: signature, 1012 access denied, 1020 a firewall rule — "the request never reaches the
#: origin"; 2026-12-07). Read as Cloudflare's only when its page states its code
#: (:func:`cloudflare_code`): a receiver behind Cloudflare answers its own 409 or 403 with
#: Cloudflare's headers too (a webhook receiver's duplicate, Discord's own refusal).
CLOUDFLARE_1XXX_NOT_SENT = frozenset({403, 409})
#: Of those, the status whose page says something passing (409: 1001, the origin's name not
#: resolved): on a route, one attempt retried; every other 4xx of Cloudflare's own (its 403
#: blocks, its challenge page under a 4xx) is the route's refusal there (:func:`cloudflare_error`).
CLOUDFLARE_1XXX_TRANSIENT = frozenset({409})
#: The ``cf-mitigated`` value of Cloudflare's challenge page (Cloudflare's docs, "Detect a
#: Challenge Page response": "the Challenge Page response (regardless of the Challenge Page
#: type) will have the cf-mitigated header present and set to challenge"; "challenge is the
#: only valid value"), read in any case, blanks around.
CLOUDFLARE_CHALLENGE = "challenge"
#: ``Server`` values Cloudflare's edge writes (``cloudflare``; ``cloudflare-nginx`` on older
#: zones), read in any case, blanks around.
CLOUDFLARE_SERVERS = frozenset({"cloudflare", "cloudflare-nginx"})
#: The code of one of Cloudflare's own 1xxx errors, as its error page states it (Cloudflare's
#: docs, "Cloudflare 1xxx errors": "1XXX errors appear in the HTML body of the response"): the
#: whole body ``error code: 1016`` it gives a client that does not ask for HTML, or the
#: ``cf-error-code`` span of its HTML page.
_CLOUDFLARE_CODE_TEXT = re.compile(r"\s*error code: (1\d{3})\s*", re.IGNORECASE)
_CLOUDFLARE_CODE_HTML = re.compile(r'<span class="cf-error-code">\s*(1\d{3})\s*</span>', re.IGNORECASE)


def cloudflares_answer(headers: httpx.Headers) -> bool:
    """Whether an answer's ``headers`` say it came through Cloudflare's edge: a ``Server``
    Cloudflare writes (:data:`CLOUDFLARE_SERVERS`) or a ``CF-RAY`` (the id Cloudflare gives
    every request it handles), either alone: a proxy between curaflow and Cloudflare may
    rewrite ``Server`` and keep ``CF-RAY``."""
    server = headers.get("server", "").strip().lower()
    return server in CLOUDFLARE_SERVERS or bool(headers.get("cf-ray", "").strip())


def cloudflare_code(response: httpx.Response) -> int | None:
    """The code of Cloudflare's own 1xxx error ``response`` is (1001, 1016, 1020 …): an
    answer through Cloudflare's edge (:func:`cloudflares_answer`) whose body is Cloudflare's
    error page stating it — ``error code: <code>`` as the whole body, or the HTML page's
    ``cf-error-code``; None for any other answer (the words inside another body, another
    number, no Cloudflare header: the receiver's own answer)."""
    if not cloudflares_answer(response.headers):
        return None
    text = response.text
    said = _CLOUDFLARE_CODE_TEXT.fullmatch(text) or _CLOUDFLARE_CODE_HTML.search(text)
    return int(said.group(1)) if said is not None else None


def cloudflare_challenged(status: int, headers: httpx.Headers) -> bool:
    """Whether an answer is Cloudflare's challenge page standing in the origin's place: an
    answer through Cloudflare's edge (:func:`cloudflares_answer`) saying
    ``cf-mitigated: challenge`` (:data:`CLOUDFLARE_CHALLENGE`) under a status of refusal
    (4xx, 5xx) but 429, whose reading as a limit (the route waits, route-wide) stands. The
    origin never had the request: a client with no browser never passes it, and the next
    attempt may not meet it (2026-12-07)."""
    mitigated = headers.get("cf-mitigated", "").strip().lower()
    return mitigated == CLOUDFLARE_CHALLENGE and 400 <= status < 600 and status != 429 and cloudflares_answer(headers)


def cloudflare_reads_body(status: int, headers: httpx.Headers) -> bool:
    """Whether reading an answer as Cloudflare's own (:func:`cloudflare_said`) takes its body:
    a :data:`CLOUDFLARE_1XXX_NOT_SENT` status (403, 409) or a 530 through Cloudflare's edge,
    whose page states its 1xxx code (:func:`cloudflare_code`) — but a challenge page, known by
    its header alone (:func:`cloudflare_challenged`). A caller that otherwise reads no body —
    a push, whose answer is its status line — reads this one's (2026-12-07)."""
    if cloudflare_challenged(status, headers):
        return False
    return cloudflares_answer(headers) and (status in CLOUDFLARE_1XXX_NOT_SENT or status == 530)


@dataclass(frozen=True)
class CloudflareSaid:
    """What Cloudflare's edge said itself about the origin behind it (:func:`cloudflare_said`).

    Attributes:
        reached: False: the origin never had the request (:data:`CLOUDFLARE_NOT_SENT`, its
            1xxx page under a :data:`CLOUDFLARE_1XXX_NOT_SENT` status, its challenge page);
            True: the origin had it and its answer was lost (:data:`CLOUDFLARE_MAYBE_PROCESSED`).
        code: the 1xxx code its page stated (:func:`cloudflare_code`), or None.
        challenge: the answer is Cloudflare's challenge page (:func:`cloudflare_challenged`).
    """

    reached: bool
    code: int | None = None
    challenge: bool = False

    def words(self, status: int) -> str:
        """How a report says it: ``HTTP 409 from Cloudflare in front of the receiver (error
        code 1001)``, ``HTTP 403 from Cloudflare in front of the receiver (its challenge page)``."""
        stated = f" (error code {self.code})" if self.code is not None else ""
        if self.challenge:
            stated = " (its challenge page)"
        return f"HTTP {status} from Cloudflare in front of the receiver{stated}"


def cloudflare_said(response: httpx.Response) -> CloudflareSaid | None:
    """The one reading of an answer Cloudflare gave itself about the origin behind it
    (:func:`cloudflares_answer`): the routes' (:func:`cloudflare_error`) and a callback
    push's (:mod:`activities.push_events`, since 2026-12-07: Cloudflare's 409 page was the
    consumer's "already recorded", the push recorded delivered, nothing sent; its 403 page
    — a 1xxx block, 1020 a firewall rule — and its challenge page were the consumer's "other
    4xx", the event dead-lettered at once, never received; on the routes they were the
    receiver's refusal, ``route_refused``). None for any other answer — another status, or
    one no header says is Cloudflare's: the receiver's own.

    Its body is read only for a 403, a 409 or a 530 (:func:`cloudflare_reads_body`):
    ``response`` must then hold it, read.
    """
    status = response.status_code
    if not cloudflares_answer(response.headers):
        return None
    if cloudflare_challenged(status, response.headers):
        return CloudflareSaid(reached=False, challenge=True)
    if status in CLOUDFLARE_NOT_SENT or status in CLOUDFLARE_1XXX_NOT_SENT:
        code = cloudflare_code(response) if cloudflare_reads_body(status, response.headers) else None
        if status in CLOUDFLARE_1XXX_NOT_SENT and code is None:
            return None  # the receiver's own answer through Cloudflare
        return CloudflareSaid(reached=False, code=code)
    if status in CLOUDFLARE_MAYBE_PROCESSED:
        return CloudflareSaid(reached=True)
    return None


def stated_delay_s(headers: httpx.Headers) -> float | None:
    """The delay an answer's ``Retry-After`` states, seconds
    (:func:`curaflow.domain.ratelimit.parse_retry_after`), None when it states none: read
    by every route from a 5xx (and HTTP's "send it again", :data:`SEND_AGAIN_STATUSES`), so
    a receiver unavailable for a stated while is asked again after it
    (:func:`curaflow.domain.ratelimit.stated_wait_ms`), not on Temporal's backoff — until
    2026-12-07 only the webhook route read it, and not from Cloudflare's pages nor from a
    status HTTP does not define."""
    return parse_retry_after(headers.get("retry-after"))


def cloudflare_error(route: str, response: httpx.Response, reason: TerminalReason) -> RouteError | None:
    """The one reading every route gives an answer Cloudflare gave itself about the origin
    behind it (:func:`cloudflares_answer`), before the route's own table is read; None for
    any other answer (another status, one no header says is Cloudflare's: the route's own
    reading — a 5xx not the platform's, which may follow a post).

    * :data:`CLOUDFLARE_NOT_SENT` (521, 522, 523, 525, 526, 530), Cloudflare's 409 page
      (:data:`CLOUDFLARE_1XXX_TRANSIENT`: ``error code: 1001``, the origin's name not
      resolved) and its challenge page under a 5xx (:func:`cloudflare_challenged`): the
      request never reached the receiver — one attempt, retried, *not* ambiguous (no
      duplicate possible, on an at-most-once route too), no answer of the receiver's (never
      counted in a streak), never the receiver's duplicate nor its refusal.
    * Cloudflare's own refusal under a 4xx — its 403 page stating a 1xxx block
      (:func:`cloudflare_code`: 1006–1010 a ban, 1012, 1020 a firewall rule) or its challenge
      page: nothing was sent, and the same request meets the same rule again — the route's
      refusal (``route_refused``, permanent: the work held back, the route's streak pauses
      it and pages), as a receiver's own 403 is; its code is kept in the answer. A callback
      push, which has no route to pause, retries it (:mod:`activities.push_events`).
    * :data:`CLOUDFLARE_MAYBE_PROCESSED` (520, 524): the receiver had the request and may
      have acted on it — *ambiguous* (the webhook retried with the same ``webhook-id`` and
      remembered as possibly delivered; Telegram and Discord as ``on_ambiguous`` says), its
      answer kept for an at-most-once route's streak.

    Either carries the delay its ``Retry-After`` states (:func:`stated_delay_s`).

    Until 2026-12-07 Discord and Telegram read 521–526 as a gateway error that may have
    posted (a work behind a Cloudflare whose origin was down ended ``delivery_unknown``,
    blocked on the route for good), and the webhook route read 520 and 524 as the
    receiver's own 5xx that processed nothing (offered again, once attempts ran out, under
    another ``webhook-id``). Until 2026-12-07 too, 530 was a gateway error on Telegram and
    Discord, and Cloudflare's 409 page (``error code: 1001``) the *receiver's duplicate* on
    the webhook route — the work recorded delivered, nothing sent (``the route's refusal``
    on Telegram and Discord); and its challenge page under a 5xx was the receiver's own 5xx
    (ambiguous on Discord's 503).

    Args:
        route: how the message names the route's request (``webhook``, ``telegram sendPhoto``).
        response: the answer (its status and headers; its body only for a
            :data:`CLOUDFLARE_1XXX_NOT_SENT` status or a 530, to quote Cloudflare's code).
        reason: the route's reason for a failed attempt (``delivery_failed``, ``telegram_failed``).
    """
    status = response.status_code
    said = cloudflare_said(response)
    if said is None:
        return None
    if not said.reached and 400 <= status < 500 and status not in CLOUDFLARE_1XXX_TRANSIENT:
        # Cloudflare refused the request itself (a firewall rule, a ban, a challenge): nothing
        # was sent, but the same request meets the same rule again — the route's refusal, as
        # a receiver's own 403 is (the work held back, the route's streak pauses it and pages:
        # fix the route). A callback push, with no route to pause, retries it instead
        # (activities.push_events).
        return RouteError(
            TerminalReason.ROUTE_REFUSED,
            f"{route}: {said.words(status)}: Cloudflare refused the request itself (a firewall rule, "
            "a ban or a challenge), nothing was sent; fix the route (let curaflow's addresses through)",
            permanent=True,
            answer=f"HTTP {status} (Cloudflare{'' if said.code is None else f' {said.code}'})",
        )
    if not said.reached:
        return RouteError(
            reason,
            f"{route}: {said.words(status)}: the origin was never reached "
            "(down, unreachable, its name unresolved, its connection or TLS refused, or Cloudflare "
            "blocked or challenged the request itself); not sent, retried",
            retry_after_s=stated_delay_s(response.headers),
        )
    return RouteError(
        reason,
        f"{route}: {said.words(status)}: the origin had the request and its "
        "answer was lost; it may have been processed, outcome unknown",
        retry_after_s=stated_delay_s(response.headers),
        ambiguous=True,
        answer=f"HTTP {status} (Cloudflare: the origin had the request)",
    )


class RouteError(Exception):
    """A delivery attempt that did not confirm.

    Attributes:
        reason: the cell's terminal reason if this ends it (``delivery_rejected``,
            ``delivery_failed``, ``telegram_failed``, ``configuration_error`` …). A route
            names the *work* (``delivery_rejected``) only for an answer it positively
            recognises as the work's (its module's table); every other refusal is the
            route's (``route_refused``).
        permanent: another attempt cannot succeed (4xx, chat not found …).
        retry_after_s: the delay the destination *stated* (a 429's ``retry_after``, a
            ``Retry-After``), seconds; None when it stated none.
        rate_limited: the destination rate-limited the request: the next attempt waits
            ``retry_after_s``, or the backoff of
            :func:`curaflow.domain.ratelimit.retry_delay_ms` when none was stated.
        route_wide: the limit holds every send of the route (Discord's ``global``
            limit, Cloudflare's IP-level block): the route cools down, not one attempt.
        ambiguous: the request may have reached the destination (read timeout after
            sending, a gateway error, an answer that is not the platform's); the route's
            ambiguity policy decides.
        answer: the destination's answer as :func:`answer_key` keys it (status and
            words): a refusal's, or one that may follow a post (``ambiguous``: a proxy's
            page under a 200, a gateway's 502); None when the destination did not answer
            (curaflow's own limit, a transport error, a timeout). Several different works
            refused in a row with the same answer — or ending ``delivery_unknown`` with it
            on an at-most-once route — make the route paused
            (:mod:`curaflow.ledger.route_gates`).
        pauses_route: the answer says the route's destination is gone for good, whatever
            the work (a webhook receiver's 410 Gone: RFC 9110 §15.5.11, and Standard
            Webhooks 1.0 — the sender should disable the endpoint): a refusal of the route
            (``route_refused``, with its ``answer``) that pauses the route at this first
            answer and pages, instead of waiting for the refusal streak (2026-12-07; before,
            two more works were held back first).

    The message may quote the destination's words (Telegram's ``description``, Discord's
    ``message``): it is cleaned (:func:`~curaflow.domain.text.clean_text`), holds none of
    the secrets the process holds (:func:`~curaflow.observability.secrets.redacted`) and is
    cut to 500 characters, so it can be stored and sent.
    """

    def __init__(
        self,
        reason: TerminalReason,
        message: str,
        *,
        permanent: bool = False,
        retry_after_s: float | None = None,
        rate_limited: bool = False,
        route_wide: bool = False,
        ambiguous: bool = False,
        answer: str | None = None,
        pauses_route: bool = False,
    ) -> None:
        super().__init__(redacted(clean_text(message))[:500])
        self.reason = reason
        self.permanent = permanent
        self.retry_after_s = retry_after_s
        self.rate_limited = rate_limited
        self.route_wide = route_wide
        self.ambiguous = ambiguous
        self.answer = answer_key(redacted(answer)) if answer is not None else None
        self.pauses_route = pauses_route


def read_pages(files: Sequence[ArtifactFile]) -> list[bytes]:
    """The bytes of ``files`` (the artifact's pages, in the given order), read before a
    request is built — the one way a route reads curaflow's own files.

    An OS error reading one (the page vanished between the claim and the send — a
    retention sweep, another process's cleanup —, too many open files under load, an I/O
    error of curaflow's disk) is no answer of the route and nothing has left: a
    :class:`RouteError` ``delivery_failed``, retried, *not* ambiguous and naming no
    answer, so it never blocks the work on an at-most-once route (``delivery_unknown``)
    nor counts in the route's refusal streak. The next attempt restores the artifact from
    the ledger when this process no longer holds it (``deliver``'s ``store.holds``).
    Before 2026-12-05 such an error escaped the route and was taken as one the route did
    not classify (``internal_error``, ambiguous): the work ended ``unknown`` on Telegram
    and Discord for good.

    Raises:
        RouteError: as above; its message names the page and the error, never the path.
    """
    blobs: list[bytes] = []
    for f in files:
        try:
            blobs.append(Path(f.path).read_bytes())
        except OSError as err:
            raise page_unreadable(f, err) from err
    return blobs


def page_unreadable(f: ArtifactFile, err: OSError) -> RouteError:
    """The failure of a page of the artifact curaflow cannot read (:func:`read_pages`'s
    rule, for a route that streams a page instead of reading it whole): ``delivery_failed``,
    retried, not ambiguous, no answer."""
    name = errno.errorcode.get(err.errno, "an OS error") if err.errno is not None else "an OS error"
    return RouteError(
        TerminalReason.DELIVERY_FAILED,
        f"page {f.page} of the artifact could not be read ({name}: {err.strerror or type(err).__name__}); "
        "nothing was sent, retried",
    )


def refusal_answered(err: httpx.HTTPError) -> httpx.Response | None:
    """The answer a receiver gave before its body broke, when its status is no acceptance:
    the status and headers (no body, :func:`curaflow.outbound.answer_head`) of a 3xx, 4xx,
    429 or 5xx whose body was cut, undecodable, or trickled past the route's own time
    limit — the one rule every route follows (DESIGN.md "Safe defaults at the edges: the
    delivery side", 2026-12-05).

    Such an answer is read by the route's classification as that status with a body that
    is not the platform's (the route's refusal, a rate limit with its ``Retry-After``, a
    gateway's 5xx); it was taken for a send whose outcome is unknown, which ends the work
    ``delivery_unknown`` on an at-most-once route, blocked there for good, though the
    receiver said no. None for a 2xx (what it posted is in the body: the outcome stays
    unknown), a failure before any answer, and the job's deadline.
    """
    head = answer_head(err)
    return head if head is not None and not 200 <= head.status_code < 300 else None


def unread_answer(err: httpx.HTTPError) -> str | None:
    """The answer of a receiver whose acceptance came — a 2xx status line and headers — and
    whose body then broke (cut, undecodable, trickled past the route's own time limit:
    :func:`curaflow.outbound.answer_head`), as :attr:`RouteError.answer` keys it: ``HTTP
    <status> (its body could not be read: <the failure's type>)``; None when no answer's
    head came (a timeout, a reset before it: no answer at all), for a refusal's head
    (:func:`refusal_answered` reads it as its status), and for the job's deadline (its
    stop, not the receiver's answer).

    Such a send may have posted (the body says what was): ambiguous, the work
    ``delivery_unknown`` on an at-most-once route. It is the receiver's answer all the
    same, counted in the route's streak like a proxy's page under a 200: a receiver (a
    proxy) answering every send so pauses the route instead of blocking one more work with
    every job, unpaged. Until 2026-12-07 it carried no answer and was never counted, while
    the same 5xx was (its head is a refusal's). The failure's type stays in the answer: a
    body cut, one in a coding curaflow does not decode and one trickled past the limit are
    three answers, each counted with its own kind.
    """
    head = answer_head(err)
    if head is None or not 200 <= head.status_code < 300:
        return None
    return f"HTTP {head.status_code} (its body could not be read: {type(err).__name__})"


class Route(Protocol):
    """A delivery destination.

    Attributes:
        name: the configured route name.
        kind: its registered kind word (``directory``, ``webhook``, ``telegram``,
            ``discord``, or one a ``route_modules`` module registered).
        resend_safe: re-sending after an unknown outcome cannot create a duplicate
            (the destination deduplicates on the idempotency key, or the route's
            ``on_ambiguous`` policy is ``retry``).
    """

    name: str
    kind: str
    resend_safe: bool

    async def deliver(self, request: DeliveryRequest) -> DeliveryReceipt:
        """Deliver ``request``; raise :class:`RouteError` unless the destination confirmed."""
        ...
