"""Reading an app-api answer: its JSON (every string cleaned), the error its body states
whatever the HTTP status, the reason a failed answer is classified as."""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Collection
from typing import Any

import httpx

from curaflow.domain.reasons import TerminalReason
from curaflow.domain.text import loads_clean
from curaflow.outbound import AnswerTooLarge, answer_head
from curaflow.sources.errors import SourceError
from curaflow.sources.pixiv.client.constants import (
    GONE_WORDS,
    INVALID_GRANT,
    RATE_LIMIT_MARK,
    REFRESH_TOKEN_WORDS,
    RESTRICTED_MARK,
    usable_token,
)


def error_text(body: Any) -> str | None:
    """The error an app-api body states (``{"error": …}``: a string, or an object's
    ``message`` / ``user_message`` / ``reason``), or None when it states none."""
    if not isinstance(body, dict) or "error" not in body or not body["error"]:
        return None
    err = body["error"]
    if isinstance(err, str):
        return err
    if isinstance(err, dict):
        parts = [str(err.get(k) or "") for k in ("message", "user_message", "reason")]
        return " ".join(p for p in parts if p) or "error"
    return str(err)


#: The fields of the app-api's error object (``{"error": {"user_message", "message",
#: "reason", "user_message_details"}}``) that an error answer of the app-api always holds
#: (empty or not; ``user_message_details`` and other fields beside them are no matter).
#: ``user_message`` is the app-api's own word; ``message`` alone is any gateway's.
APP_API_ERROR_FIELDS = ("user_message", "message", "reason")


def is_app_api_error(body: Any) -> bool:
    """Whether ``body`` is the app-api's own error answer: a JSON object whose ``error`` is
    an object holding every one of :data:`APP_API_ERROR_FIELDS` (others beside them allowed).

    Only such an answer may be read as the app-api speaking about what was asked (a work's
    404): a 404 of another shape — an HTML page, an empty body, another JSON — is what a
    moved endpoint or a proxy answers for every request (DESIGN.md "Attribution before
    judgement": recognise positively only what lets you blame the work). One field is not
    enough: ``{"error": {"message": …}}`` is the commonest JSON error there is (an API
    gateway's, a proxy's) — until 2026-12-05 it made the work unavailable for the week.
    """
    if not isinstance(body, dict):
        return False
    err = body.get("error")
    return isinstance(err, dict) and all(field in err for field in APP_API_ERROR_FIELDS)


#: The status by which the app-api refuses the request itself (400 Bad Request: a
#: parameter it does not take — an offset past its limit, a word or a date it refuses).
BAD_REQUEST_STATUS = 400


def is_app_api_400(status: int, body: Any) -> bool:
    """Whether an answer is HTTP 400 in the app-api's own error object
    (:func:`is_app_api_error`), whatever its words: what the app-api refuses a request
    with — and an access token it no longer takes (pixivpy #182), told apart only by words
    (:func:`refuses_token`). Asked of one work (its detail, its ugoira metadata), the work
    is held back briefly whatever the words (``PixivClient._get``: an answer never seen
    about it, which ended the job at its first answer until 2026-12-06)."""
    return status == BAD_REQUEST_STATUS and is_app_api_error(body)


#: A request parameter's name as the app-api's validator keys its refusal (``offset``,
#: ``start_date``, ``illust_id``).
PARAMETER_NAME = re.compile(r"[a-z][a-z0-9_]{0,63}")


def refused_parameters(body: Any) -> frozenset[str] | None:
    """The parameters an app-api error object's ``message`` refuses when it is its
    validator's refusal of the request's parameters — text holding a JSON object, not
    empty, each key a parameter's name (:data:`PARAMETER_NAME`) and each value a non-empty
    list of text: ``"{\"offset\":[\"offset must be no more than 5000\"]}"`` (reference
    ``pixiv-and-delivery-apis.md`` §2.2), ``"{\"illust_id\":[\"Illust Id is required\", …]}"``
    (pixivpy #39) —; None for any other body. Its words are never matched: the shape names
    the parameters."""
    message = body["error"].get("message") if is_app_api_error(body) else None
    if not isinstance(message, str) or not message.lstrip().startswith("{"):
        return None
    try:
        refused = json.loads(message)
    except (ValueError, RecursionError):
        return None
    shaped = (
        isinstance(refused, dict)
        and bool(refused)
        and all(
            isinstance(name, str)
            and PARAMETER_NAME.fullmatch(name) is not None
            and isinstance(words, list)
            and bool(words)
            and all(isinstance(w, str) for w in words)
            for name, words in refused.items()
        )
    )
    return frozenset(refused) if shaped else None


def refuses_parameters(body: Any) -> bool:
    """Whether an app-api error object's ``message`` is its validator's refusal of the
    request's parameters (:func:`refused_parameters`), whichever it names."""
    return refused_parameters(body) is not None


def refuses_offset_alone(status: int, body: Any, sent: Collection[str]) -> bool:
    """Whether an app-api answer refuses the request (:func:`refuses_request`, ``sent`` the
    names of the parameters sent) naming ``offset`` and no other parameter:
    ``{"offset":["offset must be no more than 5000"]}`` (reference
    ``pixiv-and-delivery-apis.md`` §2.2) — the limit of its pages, whatever number its
    words give. ``PixivClient._get`` tells it apart (:class:`OffsetRefused`) for a page
    asked past offset 0 (2026-12-07)."""
    return refuses_request(status, body, sent) and refused_parameters(body) == {"offset"}


class OffsetRefused(SourceError):
    """The app-api refused a page asked at ``offset`` (> 0) naming ``offset`` alone
    (:func:`refuses_offset_alone`): the limit of its pages lies before ``offset``.

    Final as any refusal of the request (``remote_http_error``, not retried) for a caller
    that does not page; a scan paging to it takes it for the last offset of its walk
    (:func:`curaflow.sources.pixiv.scan.pages._past_last_offset`, decision 2026-12-07:
    until then it ended the job, and every later job of a target that deep).

    Attributes:
        offset: the offset refused (places from the first result, ≥ 1).
    """

    def __init__(self, offset: int, message: str) -> None:
        super().__init__(TerminalReason.REMOTE_HTTP_ERROR, message, retryable=False, status=400)
        self.offset = offset


def refuses_request(status: int, body: Any, sent: Collection[str]) -> bool:
    """Whether an app-api answer refuses the request itself, so that asking again gets
    the same answer: HTTP 400 in the app-api's own error object (:func:`is_app_api_400`)
    whose ``message`` is its validator's refusal of the request's parameters
    (:func:`refused_parameters`), every parameter it names one of ``sent`` (the names of
    the parameters the request carried) — ``remote_http_error``, not retried: the job ends
    — for a request of no work (a search, a ranking); asked of one work, the work is held
    back briefly instead (:func:`is_app_api_400`).

    A refusal naming a parameter the request did not carry (``illust_id`` to a search, an
    ``offset`` to a first page, a date to a search that sent none) answers another request
    than the one sent — a cache or a proxy keyed wrongly, an endpoint moved behind the same
    path: it says nothing of the query, and is the source's, one retried attempt (until
    2026-12-07 it ended the search's job unretried, its target's cell with it).

    Recognised positively, status, shape and the parameters named (2026-12-07): the same
    object with other words — the app-api's "指定されたエンドポイントは存在しません" (the
    specified endpoint does not exist, pixivpy #39) for an endpoint it no longer serves, a
    maintenance notice, a ``reason`` never seen, no words — is one retried attempt (until
    2026-12-07 it ended the job at its first answer, every target's cell of the account
    while it lasted). Pixiv refuses an access token it no longer takes with the same status
    and shape (pixivpy #182): ``PixivClient._get`` refreshes the token and asks once more
    before it reads the answer so (:func:`refuses_token`, 2026-12-06).

    Any other 4xx — a 403, a 404, a 410, a status never seen — says nothing of the request
    even in the app-api's object with words never seen (forbidden now, not there, a
    maintenance): one attempt, retried with backoff like a 5xx (until 2026-12-06 the
    object under any 4xx ended the job at its first answer). The answers that are the
    account's or a work's are recognised before it (:func:`says_restricted`,
    :func:`says_gone`, the OAuth marks, a rate limit).
    """
    if not is_app_api_400(status, body):
        return False
    refused = refused_parameters(body)
    return refused is not None and refused <= frozenset(sent)


#: The status by which a bearer token is refused (RFC 6750 §3.1: ``invalid_token``).
UNAUTHORIZED_STATUS = 401


def refuses_token(status: int, body: Any) -> bool:
    """Whether an app-api answer may be the refusal of the access token sent, so that the
    token is refreshed once and the request asked again (``PixivClient._get``) before the
    answer is read otherwise: the app-api's own 400 (:func:`is_app_api_400`: Pixiv refuses
    a token it no longer takes so, pixivpy #182, in words curaflow may not know), or HTTP
    401 in any shape (RFC 6750 §3.1, the app-api's or a gateway's in front of it) but the
    app-api's restricted object (:func:`says_restricted`: the account's words, read as
    such). Costs one token request; blames nothing — a 401 again after the refresh is
    the source's, one retried attempt (until 2026-12-07 a 401 was retried with the token
    it refused, every attempt the same until the token's lifetime ran out).
    """
    if status == UNAUTHORIZED_STATUS:
        return not says_restricted(status, body)
    return is_app_api_400(status, body)


#: The status of the app-api's answer that a work is not there (deleted, private, never
#: existed): HTTP 404.
GONE_STATUS = 404


def says_gone(status: int, body: Any) -> bool:
    """Whether a work's answer (its detail, its ugoira metadata) says the work is gone:
    HTTP 404 in the app-api's own error object (:func:`is_app_api_error`) whose
    ``user_message`` — the app-api's words to its user about what was asked — is Pixiv's
    wording that the work was deleted or never existed (:func:`names_a_work_gone`:
    "該当作品は削除されたか、存在しない作品IDです。", "Work has been deleted or the ID does
    not exist.").

    What makes the work unavailable for the week — and, through the fetch, a lasting
    ``unavailable`` its target's scan frontier passes for good; an empty page where the
    work stood taken for the end of results — so recognised positively, status, shape and
    words together. The same object under a 404 with other words is what every work gets
    while it lasts: the app-api's "指定されたエンドポイントは存在しません" ("the specified
    endpoint does not exist", pixivpy #39) for an endpoint it no longer serves, a
    maintenance notice, a wording in a language curaflow holds none of, the server's
    "Not Found" beside an empty ``user_message``: not recognised, held back briefly and
    counted (until 2026-12-07 any words with a letter or a digit made every work asked
    gone for the week; until 2026-12-06 the object's shape alone). So is the object
    carrying Pixiv's restricted words (:func:`says_restricted`) in any of its fields:
    the account's, what a restricted account gets for every request (until 2026-12-06
    they under a 404 cost each work asked the week).
    """
    if status != GONE_STATUS or not is_app_api_error(body) or says_restricted(status, body):
        return False
    words = body["error"].get("user_message")
    return isinstance(words, str) and names_a_work_gone(words)


def folded_words(words: str) -> str:
    """``words`` as a wording is compared: NFKC (full-width letters and digits as ASCII),
    case-folded, every run of whitespace one space, no closing mark (``。``, ``.``, ``!``)
    at the end."""
    folded = " ".join(unicodedata.normalize("NFKC", words).casefold().split())
    return folded.rstrip("。.!！ ")


def names_a_work_gone(words: str) -> bool:
    """Whether ``words`` hold one of Pixiv's wordings that a work was deleted or never
    existed (:data:`~curaflow.sources.pixiv.client.constants.GONE_WORDS`), both read by
    :func:`folded_words` — what may stand around it (an id Pixiv adds, ``(illust_id:…)``)
    is no matter."""
    folded = folded_words(words)
    return any(wording in folded for wording in GONE_WORDS)


#: The HTTP status of an OAuth error answer of the token endpoint (RFC 6749 §5.2: 400;
#: 401 is ``invalid_client``'s alone, never the grant's).
OAUTH_ERROR_STATUS = 400


def grant_words(body: Any) -> str:
    """The words a token endpoint's error answer says beside its error code: Pixiv's
    ``errors.system.message`` and OAuth 2's ``error_description`` (RFC 6749 §5.2), joined;
    empty when it says none (or ``body`` is no JSON object)."""
    if not isinstance(body, dict):
        return ""
    words: list[str] = []
    errors = body.get("errors")
    system = errors.get("system") if isinstance(errors, dict) else None
    if isinstance(system, dict) and isinstance(system.get("message"), str):
        words.append(system["message"])
    if isinstance(body.get("error_description"), str):
        words.append(body["error_description"])
    return " ".join(w.strip() for w in words if w.strip())


def names_the_refresh_token(words: str) -> bool:
    """Whether a token endpoint's words name the refresh token ("Invalid refresh token",
    Pixiv's; "refresh_token" spelled as the form's field too; any case)."""
    return REFRESH_TOKEN_WORDS in " ".join(words.lower().replace("_", " ").split())


def refuses_grant(status: int, body: Any, grant: str = "refresh_token") -> bool:
    """Whether a token endpoint's answer refuses the grant itself — Pixiv's refusal of the
    refresh token (or, at a login, of the code): HTTP 400 with a JSON object whose
    ``error`` is ``invalid_grant`` (RFC 6749 §5.2; reference ``pixiv-and-delivery-apis.md``
    §2.1, Pixiv's ``{"has_error": true, "errors": {"system": {"message": "Invalid refresh
    token", "code": 1508}}, "error": "invalid_grant"}``) — and, for the refresh-token grant
    (``grant``, the form's ``grant_type``), words naming the refresh token
    (:func:`grant_words`, :func:`names_the_refresh_token`).

    The one answer that blames the account's credentials (``auth_failed``: not retried, the
    operator paged and told to log in again), so recognised positively, status, word and
    words together. The word in any other answer — a 5xx or a 200 carrying it, a redirect,
    a firewall's 401 / 403 — is an answer never seen, the source's, retried (until
    2026-12-05 the word alone, whatever the status, ended every job of the account). So is
    ``invalid_grant`` to a refresh with words about anything else, or none: Pixiv answered
    it, code 1508, to *every* account when it retired the password grant (2021-02,
    "Invalid grant_type parameter or parameter missing"; pixivpy #158, #159) — no new login
    cures that (until 2026-12-06 it ended every job of every account ``auth_failed``). A
    login's code (``authorization_code``) is refused by the word alone: the operator reads
    Pixiv's words at once, and nothing of the account is held.
    """
    if status != OAUTH_ERROR_STATUS or not isinstance(body, dict) or body.get("error") != INVALID_GRANT:
        return False
    return grant != "refresh_token" or names_the_refresh_token(grant_words(body))


#: Where Pixiv's token endpoint duplicates its grant in a successful answer (reference
#: ``pixiv-and-delivery-apis.md`` §2.1: ``access_token``, ``refresh_token``,
#: ``expires_in`` … at the top level and again under ``response``; pixivpy reads it there).
GRANT_COPY = "response"


def _grant_places(body: Any) -> list[dict[str, Any]]:
    """The objects of a token answer that may hold its grant: the answer itself, then its
    :data:`GRANT_COPY` when that is a JSON object."""
    if not isinstance(body, dict):
        return []
    copy = body.get(GRANT_COPY)
    return [body, copy] if isinstance(copy, dict) else [body]


def grant_of(body: Any) -> dict[str, Any] | None:
    """The grant of a token endpoint's successful answer: the object whose ``access_token``
    is usable (:func:`~curaflow.sources.pixiv.client.constants.usable_token`) — the answer
    itself, else its copy under :data:`GRANT_COPY` — read whole from there (its
    ``expires_in``, its ``refresh_token``); None when neither holds one.

    Owner of where a grant is read (2026-12-07): until then only the top level was, and an
    answer holding the grant under ``response`` alone (Pixiv's own duplicate, its top level
    dropped or emptied by a version or a proxy) was no grant: the attempt failed and the
    refresh token it carried — a rotated one, Pixiv revoking the token sent — was dropped,
    so the next refresh sent the revoked token and the account ended ``auth_failed``. A
    grant read that names no usable ``refresh_token`` leaves the one its other copy names
    (:func:`answered_refresh_token`) to the caller, kept as the account's candidate."""
    return next((place for place in _grant_places(body) if usable_token(place.get("access_token"))), None)


def says_a_token(body: Any) -> bool:
    """Whether a token answer names an ``access_token`` at all (usable or not), at its top
    level or in its copy under :data:`GRANT_COPY`."""
    return any("access_token" in place for place in _grant_places(body))


def answered_refresh_token(body: Any) -> str | None:
    """The usable refresh token a token answer carries — at its top level, else in its
    copy under :data:`GRANT_COPY` — or None (an answer whose access token is unusable
    keeps it as the account's candidate: ``PixivClient._keep_candidate``)."""
    return next((token for place in _grant_places(body) if (token := usable_token(place.get("refresh_token")))), None)


def speaks_of_the_request(status: int) -> bool:
    """Whether an answer of ``status`` may be the app-api speaking of what was asked — of
    the account, its rate: a 2xx (pixivpy returns its error objects as results, pixivpy
    #327) or a 4xx (its "Rate Limit" with 403, reference §2.5; its restricted object with
    403). A 5xx is the server failing and a 3xx sends the request elsewhere: a body under
    them — a cache, a gateway or a CDN replaying a stale answer of the app-api's for every
    request while it lasts, an upstream's own limit — says nothing of the account.
    """
    return 200 <= status < 300 or 400 <= status < 500


def says_rate_limit(status: int, body: Any) -> bool:
    """Whether an answer is a rate limit of the account: HTTP 429 (RFC 6585 §4), whatever
    its body, or Pixiv's words (:data:`~curaflow.sources.pixiv.client.constants.RATE_LIMIT_MARK`,
    "Rate Limit") in a JSON error under a status in which the app-api speaks
    (:func:`speaks_of_the_request`; reference §2.5: "classify by body, not status" — the
    body of a 2xx or a 4xx).

    What climbs the account's cooldown ladder (60 s doubling to the cap, every job of the
    account held meanwhile), so recognised positively: the words under a 5xx or a redirect
    are an answer never seen, the source's, one retried attempt (until 2026-12-06 they
    cooled the account down).
    """
    if status == 429:
        return True
    return speaks_of_the_request(status) and RATE_LIMIT_MARK in (error_text(body) or "").lower()


def says_restricted(status: int, body: Any) -> bool:
    """Whether an app-api answer says the account is restricted: the app-api's own error
    object (:func:`is_app_api_error`) whose text holds Pixiv's words
    (:data:`~curaflow.sources.pixiv.client.constants.RESTRICTED_MARK`, "Your access is
    currently restricted."), under a status in which the app-api speaks
    (:func:`speaks_of_the_request`: a 2xx or a 4xx).

    What pauses the account (``pixiv.restriction_pause_ms``, every job of it failing
    ``account_restricted``, not retried), so recognised positively, status, shape and
    words together, as a work's 404 is: the words in another shape — an error that is
    text, a gateway's ``{"error": {"message": …}}`` — are an answer never seen, the
    source's, one retried attempt (until 2026-12-05 the words in any JSON error paused the
    account); so is the object under a 5xx or a redirect (until 2026-12-06 it paused the
    account).
    """
    return (
        speaks_of_the_request(status) and is_app_api_error(body) and RESTRICTED_MARK in (error_text(body) or "").lower()
    )


def json_body(response: httpx.Response) -> Any:
    """The answer's JSON with every string cleaned (:func:`~curaflow.domain.text.loads_clean`); None if not JSON.

    Owner of how an answer's bytes become text (2026-12-07): JSON is UTF-8 (RFC 8259
    §8.1; UTF-16 and UTF-32 told by its first bytes, ``json.detect_encoding``, as
    ``json.loads`` reads bytes), a byte that is none read as U+FFFD — **the charset its
    ``Content-Type`` declares is not read**. Until 2026-12-07 it was (httpx's
    ``response.text``): ``charset=punycode`` names a text codec whose decoder is quadratic
    (~5 s of the worker's CPU, on the event loop every job of the process shares, for
    384 KB; hours for the 4 MiB an answer may hold), and a proxy labelling Pixiv's UTF-8
    as ``iso-8859-1`` or ``shift_jis`` turned every title and tag into mojibake — a detail
    whose tags then held none of the query's words "no longer matched", an empty page
    taken for the end of results.
    """
    content = response.content
    text = content.decode(json.detect_encoding(content), "replace")  # names only UTF codecs
    try:
        return loads_clean(text)
    except ValueError:
        return None


def oversized_failure(err: AnswerTooLarge) -> httpx.Response | None:
    """The status and headers of an app-api answer over ``outbound.page_max_bytes`` when its
    status is no page's (anything but a 2xx: a 5xx, a 3xx, a 429, a 4xx), as a response
    with no body (:func:`~curaflow.outbound.answer_head`); None for a 2xx, or when no
    answer's head came — the size is then the answer (:func:`too_large`).

    Owner of how an oversized answer is judged (2026-12-07): by its status, as any answer
    whose body is not the app-api's — a failing server's or a gateway's error page larger
    than any page of results, a redirect's body, a ``Content-Length`` announced so, says
    nothing of the request nor of a work (a 5xx or a 3xx is one retried attempt, a 429 a
    rate limit, a 403 / 404 asked of a work held briefly as a bare one is). Until then the
    size alone was judged, whatever the status: a search's 503 page over the limit ended
    the job at its first answer (``remote_http_error``, not retried), a detail's held the
    work back.
    """
    head = answer_head(err)
    if head is None or 200 <= head.status_code < 300:
        return None
    return head


def too_large(err: AnswerTooLarge, *, auth: bool = False) -> SourceError:
    """An answer over ``outbound.page_max_bytes``: ``remote_http_error``, one retried attempt.

    Only for an answer of a 2xx, or with no head (:func:`oversized_failure`: any other
    status is judged by it): a captive portal's or a proxy's page, a body that never ends —
    an answer never seen, which says nothing of the job's request ("the unknown is
    cheap"). A search's, a ranking's or a followed page's costs the attempt, as a page
    listing more items than a page holds does (2026-12-07: it was not retried, "the same
    request gets the same answer" — the job ended at its first answer); ``auth`` for the
    token endpoint's (every request of the account asks it first; 2026-12-06: every job of
    the account ended at its first attempt while it lasted). Asked of one work (its detail,
    its ugoira metadata), ``PixivClient._get`` holds the work back briefly instead, with
    these words (2026-12-06: the job ended, and each later job of the target met the work
    first again).
    """
    return SourceError(
        TerminalReason.REMOTE_HTTP_ERROR,
        f"pixiv {'auth ' if auth else ''}answered more than {err.limit} bytes (outbound.page_max_bytes); "
        "the answer was dropped",
        retryable=True,
    )


def reason_for_status(status: int, body: Any) -> TerminalReason:
    """The reason of a failed answer: ``rate_limited`` for a rate limit
    (:func:`says_rate_limit`), else ``remote_http_error``."""
    return TerminalReason.RATE_LIMITED if says_rate_limit(status, body) else TerminalReason.REMOTE_HTTP_ERROR
