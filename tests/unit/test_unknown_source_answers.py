"""An answer of Pixiv's that curaflow does not recognise costs one attempt, never the
account, the work or the target (DESIGN.md "Attribution before judgement"; the source's
side of "Safe defaults at the edges").

The client runs against ``httpx.MockTransport``: the token endpoint and the app-api answer
what each test scripts.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx
import pytest

from curaflow.domain.reasons import TerminalReason
from curaflow.sources.errors import SourceError, UnavailableKind, WorkUnavailable
from curaflow.sources.gate import MemoryGate
from curaflow.sources.pixiv.client import PixivClient
from tests.support import pixiv_answering

TOKEN = {"access_token": "a", "refresh_token": "r", "expires_in": 3600}
INVALID_GRANT = {
    "has_error": True,
    "errors": {"system": {"message": "Invalid refresh token", "code": 1508}},
    "error": "invalid_grant",
}
#: What the app-api answers an access token it does not accept (pixivpy's issues).
OAUTH_ERROR = {
    "error": {
        "user_message": "",
        "message": "Error occurred at the OAuth process. Please check your Access Token to fix this. "
        "Error Message: invalid_grant",
        "reason": "",
        "user_message_details": {},
    }
}


def client(
    auth: Callable[[], httpx.Response], api: Callable[[], httpx.Response] | None = None, gate: MemoryGate | None = None
) -> tuple[PixivClient, list[str]]:
    seen: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        if request.url.path.endswith("/auth/token"):
            return auth()
        assert api is not None
        return api()

    http = httpx.AsyncClient(transport=httpx.MockTransport(answer))
    return PixivClient(http, refresh_token="r", api_url="http://api.test", auth_url="http://api.test", gate=gate), seen


@pytest.mark.parametrize(
    "answer",
    [
        httpx.Response(400, json={"error": "invalid_request"}),  # another OAuth error than the grant's
        httpx.Response(400, json={"error": "invalid_client"}),  # the app's client id retired: every account
        httpx.Response(400, html="<html><body>400 Bad Request</body></html>"),  # a proxy's page
        httpx.Response(400, content=b""),
        httpx.Response(400, json={"has_error": True, "errors": {"system": {"message": "Try again", "code": 9}}}),
    ],
)
async def test_a_token_answer_not_recognised_as_invalid_grant_is_the_sources_and_retried(
    answer: httpx.Response,
) -> None:
    """Until 2026-12-05 every HTTP 400 of the token endpoint was ``auth_failed``: the job
    ended at once, not retried, its message telling the operator to replace a refresh
    token nothing said was wrong."""
    pixiv, _ = client(lambda: answer)
    with pytest.raises(SourceError) as raised:
        await pixiv.authenticate()
    assert raised.value.reason == TerminalReason.REMOTE_HTTP_ERROR
    assert raised.value.retryable is True


async def test_invalid_grant_is_still_the_accounts_after_one_token_request() -> None:
    pixiv, seen = client(lambda: httpx.Response(400, json=INVALID_GRANT))
    with pytest.raises(SourceError) as raised:
        await pixiv.authenticate()
    assert (raised.value.reason, raised.value.retryable) == (TerminalReason.AUTH_FAILED, False)
    assert seen == ["/auth/token"]


async def test_an_access_token_refused_right_after_its_refresh_is_the_sources() -> None:
    """The token endpoint has just accepted the refresh token: the account's token is good.
    An app-api that still refuses the fresh access token (its replicas lagging, a changed
    wording) is the source's, retried — until 2026-12-05 it was ``auth_failed``, not
    retried, the operator told to replace the account's refresh token."""
    pixiv, seen = client(lambda: httpx.Response(200, json=TOKEN), lambda: httpx.Response(400, json=OAUTH_ERROR))
    with pytest.raises(SourceError) as raised:
        await pixiv.search_illust("tag")
    assert (raised.value.reason, raised.value.retryable) == (TerminalReason.REMOTE_HTTP_ERROR, True)
    assert seen == ["/auth/token", "/v1/search/illust", "/auth/token", "/v1/search/illust"]


async def test_an_access_token_refused_then_a_refresh_token_refused_is_the_accounts() -> None:
    answers = iter([httpx.Response(200, json=TOKEN), httpx.Response(400, json=INVALID_GRANT)])
    pixiv, _ = client(lambda: next(answers), lambda: httpx.Response(400, json=OAUTH_ERROR))
    with pytest.raises(SourceError) as raised:
        await pixiv.search_illust("tag")
    assert (raised.value.reason, raised.value.retryable) == (TerminalReason.AUTH_FAILED, False)


@pytest.mark.parametrize(
    "answer",
    [
        httpx.Response(404, html="<html><body><h1>404 Not Found</h1>nginx</body></html>"),  # a moved path, a proxy
        httpx.Response(404, content=b""),
        httpx.Response(404, json={"detail": "Not Found"}),  # a JSON of another shape than the app-api's
    ],
)
async def test_a_404_not_in_the_app_apis_words_is_not_recognised_as_the_works(answer: httpx.Response) -> None:
    """A 404 is the work's only when it is the app-api's error object: an HTML 404 is what
    a moved endpoint or a proxy answers for every work, and remembered for the week it cost
    every ugoira its jobs met (until 2026-12-05)."""
    pixiv, _ = client(lambda: httpx.Response(200, json=TOKEN), lambda: answer)
    for call in (pixiv.illust_detail, pixiv.ugoira_metadata):
        with pytest.raises(WorkUnavailable) as raised:
            await call("123")
        assert (raised.value.kind, raised.value.recognised) == (UnavailableKind.GONE, False)


async def test_the_app_apis_404_is_still_the_works() -> None:
    words = "該当作品は削除されたか、存在しない作品IDです。"  # Pixiv's (answers.says_gone, 2026-12-07)
    body = {"error": {"user_message": words, "message": "", "reason": "", "user_message_details": {}}}
    pixiv, _ = client(lambda: httpx.Response(200, json=TOKEN), lambda: httpx.Response(404, json=body))
    with pytest.raises(WorkUnavailable) as raised:
        await pixiv.illust_detail("123")
    assert raised.value.recognised is True
    # The ugoira metadata's: the work's once its detail says so too (corroboration.corroborated,
    # tests/integration/test_image_404_corroborated.py, 2026-12-07).
    with pytest.raises(WorkUnavailable) as raised:
        await pixiv.ugoira_metadata("123")
    assert (raised.value.recognised, raised.value.corroborate) == (False, True)


@pytest.mark.parametrize("retry_after", ["604800", "99999999999", "Fri, 31 Dec 9999 23:59:59 GMT", "86400.5"])
async def test_a_stated_delay_beyond_the_ladders_cap_does_not_cool_the_account_down_for_longer(
    retry_after: str,
) -> None:
    """A ``Retry-After`` of a week (or a date in year 9999) on a rate limit cooled the
    account down for a week: every job of the account ended ``rate_limited`` meanwhile
    (until 2026-12-05). A stated delay is the cooldown's floor up to the ladder's cap; a
    longer limit costs one more request after the cap, and the ladder climbs."""
    gate = MemoryGate(cap_ms=900_000)
    limited = httpx.Response(429, json={"error": {"message": "Rate Limit"}}, headers={"Retry-After": retry_after})
    pixiv, _ = client(lambda: httpx.Response(200, json=TOKEN), lambda: limited, gate=gate)
    with pytest.raises(SourceError) as raised:
        await pixiv.search_illust("tag")
    assert raised.value.reason == TerminalReason.RATE_LIMITED
    assert raised.value.cooldown_s is not None and raised.value.cooldown_s <= 900.0 + 1e-6  # monotonic float sums
    assert json.dumps(raised.value.cooldown_s)  # a number a next_retry_delay can hold


@pytest.mark.parametrize(
    "body",
    [
        # Google-style API error (Cloud Endpoints, an API gateway, a proxy): the most common
        # JSON error object there is, with a `message` field of its own.
        {"error": {"code": 404, "message": "Requested entity was not found.", "status": "NOT_FOUND"}},
        {"error": {"message": "Not Found"}},
        {"error": {"reason": "route not found"}},
    ],
)
async def test_a_generic_json_error_object_is_not_the_app_apis_404(body: dict[str, object]) -> None:
    """Only the app-api's own error object blames the work for the week. Its
    ``user_message``, ``message`` and ``reason`` come together in every answer of it (the
    replay, pixivpy's issues); a JSON error that merely has a ``message`` — what any
    gateway or proxy answers for every request — is not recognised (until 2026-12-05 one
    such field sufficed, the work remembered for the week)."""
    pixiv, _ = client(lambda: httpx.Response(200, json=TOKEN), lambda: httpx.Response(404, json=body))
    for call in (pixiv.illust_detail, pixiv.ugoira_metadata):
        with pytest.raises(WorkUnavailable) as raised:
            await call("123")
        assert (raised.value.kind, raised.value.recognised) == (UnavailableKind.GONE, False)


async def test_calls_refused_one_token_together_refresh_it_once() -> None:
    """Calls of one account that met the same refused access token refresh it once: the
    first refreshes, the others take the token it got. Each refreshing on its own asked the
    token endpoint once per call — and since a fresh token refused again is retried
    (2026-12-05), once per call of every retry — and a token refreshed by one call could be
    replaced under another before it asked again (its second refusal: the attempt lost)."""
    import asyncio

    issued: list[str] = []

    def token() -> httpx.Response:
        issued.append(f"t{len(issued)}")
        return httpx.Response(200, json={**TOKEN, "access_token": issued[-1]})

    async def answer(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(0.01)  # the calls' requests are in flight together
        if request.url.path.endswith("/auth/token"):
            return token()
        if request.headers["authorization"] != f"Bearer {issued[-1]}":
            return httpx.Response(400, json=OAUTH_ERROR)  # only the newest token is good
        return httpx.Response(200, json={"illusts": [], "next_url": None})

    http = httpx.AsyncClient(transport=httpx.MockTransport(answer))
    pixiv = PixivClient(http, refresh_token="r", api_url="http://api.test", auth_url="http://api.test")
    await pixiv.authenticate()
    issued.append("t-rotated")  # the app-api no longer takes t0: every call meets a refusal
    pages = await asyncio.gather(*(pixiv.search_illust("tag") for _ in range(4)))
    assert [p["illusts"] for p in pages] == [[]] * 4
    assert issued == ["t0", "t-rotated", "t2"]  # one refresh for the four calls


@pytest.mark.parametrize(
    "answer",
    [
        httpx.Response(200, json={"error": "invalid_grant"}),  # a success status: no OAuth error answer
        httpx.Response(401, json=INVALID_GRANT),  # RFC 6749 §5.2: 401 is invalid_client's only
        httpx.Response(403, json=INVALID_GRANT),  # a WAF in front of the endpoint
        httpx.Response(500, json=INVALID_GRANT),  # the endpoint failing while it answers
        httpx.Response(503, json={"error": "invalid_grant", "message": "maintenance"}),
        httpx.Response(302, json=INVALID_GRANT, headers={"Location": "https://example.test/"}),
    ],
)
async def test_invalid_grant_outside_an_oauth_error_answer_is_the_sources_and_retried(
    answer: httpx.Response,
) -> None:
    """Only the token endpoint's OAuth error answer — HTTP 400 with ``error:
    invalid_grant`` (RFC 6749 §5.2; Pixiv's, the reference §2.1) — refuses the refresh
    token. The word in any other answer (a 5xx, a redirect, a 200, a 401/403 of a
    firewall) is an answer curaflow never saw: until 2026-12-05 each was ``auth_failed``,
    not retried, the job failed at once and the operator told to replace a refresh token
    nothing had refused."""
    gate = MemoryGate()
    pixiv, seen = client(lambda: answer, gate=gate)
    with pytest.raises(SourceError) as raised:
        await pixiv.authenticate()
    assert (raised.value.reason, raised.value.retryable) == (TerminalReason.REMOTE_HTTP_ERROR, True)
    assert seen == ["/auth/token"]
    assert (gate.penalty, gate._paused_until) == (0, 0.0)  # the account is not held either


#: Pixiv's answer to every refresh when it retired the password grant (2021-02: pixivpy
#: #158, #159, gallery-dl #1304): the grant's error word, its code, words about the request.
GRANT_TYPE_REFUSED = {
    "has_error": True,
    "errors": {"system": {"message": "Invalid grant_type parameter or parameter missing", "code": 1508}},
    "error": "invalid_grant",
}


@pytest.mark.parametrize(
    "body",
    [
        GRANT_TYPE_REFUSED,  # observed: the same to every account, whatever its token
        {"has_error": True, "errors": {"system": {"message": "System error", "code": 1508}}, "error": "invalid_grant"},
        {"error": "invalid_grant"},  # no words at all: never Pixiv's shape
        {"error": "invalid_grant", "error_description": "client_id is not allowed to use this grant"},
        {"has_error": True, "errors": {"system": {"message": "", "code": 1508}}, "error": "invalid_grant"},
    ],
)
async def test_invalid_grant_whose_words_do_not_name_the_refresh_token_is_the_sources_and_retried(
    body: dict[str, object],
) -> None:
    """``invalid_grant`` is what Pixiv answers a revoked refresh token ("Invalid refresh
    token", the reference §2.1) — and also what it answered *every* account when it retired
    a grant type (2021-02, "Invalid grant_type parameter or parameter missing"): the word
    alone does not say the account's token is refused. Until 2026-12-06 any words beside it
    (or none) ended every job of the account ``auth_failed``, not retried, the operator paged
    and told to log in again — which a retired grant does not cure."""
    gate = MemoryGate()
    pixiv, seen = client(lambda: httpx.Response(400, json=body), gate=gate)
    with pytest.raises(SourceError) as raised:
        await pixiv.authenticate()
    assert (raised.value.reason, raised.value.retryable) == (TerminalReason.REMOTE_HTTP_ERROR, True)
    assert seen == ["/auth/token"]
    assert (gate.penalty, gate._paused_until) == (0, 0.0)


@pytest.mark.parametrize(
    "body",
    [
        INVALID_GRANT,
        {
            "has_error": True,
            "errors": {"system": {"message": "invalid refresh_token", "code": 1508}},
            "error": "invalid_grant",
        },
        {"error": "invalid_grant", "error_description": "The refresh token has been revoked"},
    ],
)
async def test_invalid_grant_naming_the_refresh_token_is_still_the_accounts(body: dict[str, object]) -> None:
    pixiv, seen = client(lambda: httpx.Response(400, json=body))
    with pytest.raises(SourceError) as raised:
        await pixiv.authenticate()
    assert (raised.value.reason, raised.value.retryable) == (TerminalReason.AUTH_FAILED, False)
    assert seen == ["/auth/token"]


@pytest.mark.parametrize(
    "words",
    [
        "アクセストークンが無効です",  # the account's language: none of the English marks
        "Error Message: invalid_token",  # RFC 6750's word for an expired bearer token
        "Token expired",
    ],
)
async def test_an_app_api_400_in_words_never_seen_refreshes_the_token_once_before_it_ends_the_job(
    words: str,
) -> None:
    """The app-api answers an access token it no longer takes with HTTP 400 in its own error
    object (pixivpy #182) — the same status and shape as its refusal of a request, which
    ends the job unretried. Recognised only by its words ("OAuth", "access token",
    "invalid_grant"), until 2026-12-06 the same refusal in words never seen ended the
    job at its first answer with the account's token never refreshed; now the token is
    refreshed once and the request asked again: a request the app-api refuses is refused
    again (the job ends only in its validator's shape since 2026-12-07, else one retried
    attempt), an access token it refused passes."""
    api = iter(
        [httpx.Response(400, json=_app_api_error(words)), httpx.Response(200, json={"illusts": [], "next_url": None})]
    )
    pixiv, seen = client(lambda: httpx.Response(200, json=TOKEN), lambda: next(api))
    page = await pixiv.search_illust("tag")
    assert page["illusts"] == []
    assert seen == ["/auth/token", "/v1/search/illust", "/auth/token", "/v1/search/illust"]


async def test_an_app_api_400_refused_again_after_the_refresh_still_ends_the_job() -> None:
    # A parameter the search sent (one it never sent is another request's answer, retried).
    refused = _app_api_error('{"word":["word is too long"]}')
    pixiv, seen = client(lambda: httpx.Response(200, json=TOKEN), lambda: httpx.Response(400, json=refused))
    with pytest.raises(SourceError) as raised:
        await pixiv.search_illust("tag")
    assert (raised.value.reason, raised.value.retryable) == (TerminalReason.REMOTE_HTTP_ERROR, False)
    assert seen == ["/auth/token", "/v1/search/illust", "/auth/token", "/v1/search/illust"]


@pytest.mark.parametrize(
    "answer",
    [
        lambda: httpx.Response(401),
        lambda: httpx.Response(401, headers={"www-authenticate": 'Bearer error="invalid_token"'}),
        lambda: httpx.Response(401, text="<html><body>401 Authorization Required</body></html>"),
        lambda: httpx.Response(401, json={"error": {"message": "Unauthorized"}}),
    ],
    ids=["bare", "rfc6750", "html", "gateway-json"],
)
@pytest.mark.parametrize("call", ["search_illust", "illust_detail"])
async def test_a_401_refreshes_the_access_token_once_and_is_asked_again(
    answer: Callable[[], httpx.Response], call: str
) -> None:
    """HTTP 401 is how a bearer token no longer taken is refused (RFC 6750 §3.1), by the
    app-api or a gateway in front of it. Until 2026-12-07 it was retried with the very
    token refused — every attempt of every job of the account the same 401, until the
    token's lifetime (up to a day) ran out; now the token is refreshed once and the request
    asked again: a token refused passes, and a 401 again after the refresh is the source's,
    one retried attempt (never the account's: the token endpoint has just accepted it)."""
    api = iter([answer(), httpx.Response(200, json={"illusts": [], "next_url": None, "illust": WORK_123})])
    pixiv, seen = client(lambda: httpx.Response(200, json=TOKEN), lambda: next(api))
    await getattr(pixiv, call)("123")
    assert seen[0] == "/auth/token" and seen.count("/auth/token") == 2 and len(seen) == 4, seen

    pixiv, seen = client(lambda: httpx.Response(200, json=TOKEN), answer)
    with pytest.raises(SourceError) as raised:
        await getattr(pixiv, call)("123")
    assert (raised.value.reason, raised.value.retryable) == (TerminalReason.REMOTE_HTTP_ERROR, True)
    assert seen.count("/auth/token") == 2 and len(seen) == 4, seen


WORK_123 = {
    "id": 123,
    "title": "t",
    "type": "illust",
    "user": {"id": 1, "name": "u"},
    "tags": [{"name": "tag", "translated_name": None}],
    "create_date": "2025-01-01T00:00:00+09:00",
    "page_count": 1,
    "x_restrict": 0,
    "illust_ai_type": 0,
    "total_bookmarks": 1,
    "visible": True,
    "meta_single_page": {"original_image_url": "https://i.pximg.net/img-original/img/2025/01/01/00/00/00/123_p0.png"},
    "meta_pages": [],
    "image_urls": {},
    "width": 10,
    "height": 10,
    "caption": "",
}


def _app_api_error(message: str) -> dict[str, object]:
    return {"error": {"user_message": "", "message": message, "reason": "", "user_message_details": {}}}


@pytest.mark.parametrize("status", [200, 403, 400])
async def test_a_token_answer_over_the_byte_limit_is_the_sources_and_retried(status: int) -> None:
    """Every request of the account asks the token endpoint first: an answer of it over
    ``outbound.page_max_bytes`` (a captive portal's or a WAF's page, a body that never
    ends) says nothing of any job's request. Until 2026-12-06 it was the search page's
    rule — the same request gets the same answer, not retried — so every job of the
    account ended ``remote_http_error`` at its first attempt while it lasted."""
    big = b"<html>" + b"x" * (1024 * 1024)
    http = httpx.AsyncClient(transport=httpx.MockTransport(lambda request: httpx.Response(status, content=big)))
    pixiv = PixivClient(
        http, refresh_token="r", api_url="http://api.test", auth_url="http://api.test", page_max_bytes=64 * 1024
    )
    with pytest.raises(SourceError) as raised:
        await pixiv.authenticate()
    assert (raised.value.reason, raised.value.retryable) == (TerminalReason.REMOTE_HTTP_ERROR, True)


RESTRICTED = "Your access is currently restricted."


@pytest.mark.parametrize(
    "answer",
    [
        httpx.Response(200, json={"error": RESTRICTED}),  # an error that is text, not the app-api's object
        httpx.Response(403, json={"error": {"message": RESTRICTED}}),  # a gateway's JSON error carrying the words
        httpx.Response(502, json={"error": {"message": RESTRICTED, "code": 502}}),
        httpx.Response(200, json={"illusts": [], "error": {"reason": RESTRICTED}}),
    ],
)
async def test_the_restricted_words_outside_the_app_apis_error_pause_nothing(answer: httpx.Response) -> None:
    """The account is paused (``pixiv.restriction_pause_ms``, every job of it failing
    ``account_restricted``, not retried) only for the app-api's own error object saying
    so (:func:`is_app_api_error`, as a work's 404 is judged). The words in another shape
    — an error that is text, a gateway's JSON — are an answer curaflow never saw: one
    retried attempt, the account untouched (until 2026-12-05 each paused it for the hour)."""
    gate = MemoryGate()
    pixiv, _ = client(lambda: httpx.Response(200, json=TOKEN), lambda: answer, gate=gate)
    with pytest.raises(SourceError) as raised:
        await pixiv.search_illust("tag")
    assert raised.value.reason == TerminalReason.REMOTE_HTTP_ERROR
    assert raised.value.retryable is True
    assert gate._paused_until == 0.0


async def test_the_app_apis_restricted_answer_still_pauses_the_account() -> None:
    body = {"error": {"user_message": RESTRICTED, "message": "", "reason": "", "user_message_details": {}}}
    gate = MemoryGate()
    pixiv, _ = client(lambda: httpx.Response(200, json=TOKEN), lambda: httpx.Response(403, json=body), gate=gate)
    with pytest.raises(SourceError) as raised:
        await pixiv.search_illust("tag")
    assert (raised.value.reason, raised.value.retryable) == (TerminalReason.ACCOUNT_RESTRICTED, False)
    assert gate._paused_until > 0


def app_api_error(user_message: object, message: str) -> dict[str, object]:
    return {"error": {"user_message": user_message, "message": message, "reason": "", "user_message_details": {}}}


@pytest.mark.parametrize(
    "body",
    [
        app_api_error("", "Not Found"),  # the app-api's own words for a path it does not serve
        app_api_error("", "Something never seen"),
        app_api_error("   ", ""),
        app_api_error(None, "Not Found"),
        app_api_error(["該当作品は削除されたか、存在しない作品IDです。"], ""),
    ],
    ids=["not-found", "unknown-message", "blank", "null", "a-list"],
)
async def test_an_app_api_404_with_no_word_to_its_user_is_not_the_works(body: dict[str, object]) -> None:
    """The app-api's error object says a work is gone in its words to its user
    (``user_message``, in the account's language); a 404 of that object with none — an
    empty ``user_message`` and a ``message`` of the server's (its "Not Found" for a path
    it does not serve, a wording never seen) — would come for every work while it lasts.
    Until 2026-12-06 the object's shape alone made every work the detail or the ugoira
    metadata was asked for gone for the week."""
    pixiv, _ = client(lambda: httpx.Response(200, json=TOKEN), lambda: httpx.Response(404, json=body))
    for call in (pixiv.illust_detail, pixiv.ugoira_metadata):
        with pytest.raises(WorkUnavailable) as raised:
            await call("123")
        assert (raised.value.kind, raised.value.recognised) == (UnavailableKind.GONE, False)


@pytest.mark.parametrize(
    "words", ["該当作品は削除されたか、存在しない作品IDです。", "Work has been deleted or the ID does not exist."]
)
async def test_an_app_api_404_in_pixivs_words_that_the_work_is_gone_is_the_works(words: str) -> None:
    """Any other words to its user are not recognised (2026-12-07: words in any language
    were; tests/unit/test_gone_in_pixivs_words.py)."""
    pixiv, _ = client(
        lambda: httpx.Response(200, json=TOKEN), lambda: httpx.Response(404, json=app_api_error(words, ""))
    )
    with pytest.raises(WorkUnavailable) as raised:
        await pixiv.illust_detail("123")
    assert raised.value.recognised is True
    # The ugoira metadata's is the work's once its detail says so too (2026-12-07).
    with pytest.raises(WorkUnavailable) as raised:
        await pixiv.ugoira_metadata("123")
    assert raised.value.corroborate is True


def restricted_object() -> dict[str, object]:
    return app_api_error(RESTRICTED, "")


def rate_limit_object() -> dict[str, object]:
    return app_api_error("", "Rate Limit")


@pytest.mark.parametrize("status", [500, 502, 503, 504, 599, 301, 302, 307])
async def test_the_restricted_object_under_a_5xx_or_a_redirect_pauses_nothing(status: int) -> None:
    """The app-api speaks of the account in a 2xx or a 4xx (its restricted object came with
    HTTP 200 and 403, reference §2.3 and pixivpy #327); a 5xx is the server failing and a
    3xx sends the request elsewhere — a cache or a gateway replaying a stale body of the
    app-api's for every request while it lasts. Until 2026-12-06 the object under any status
    paused the account for the hour (``account_restricted``, every job of it failing, not
    retried): one retried attempt now, the account untouched."""
    gate = MemoryGate()
    answer = httpx.Response(status, json=restricted_object())
    pixiv, _ = client(lambda: httpx.Response(200, json=TOKEN), lambda: answer, gate=gate)
    with pytest.raises(SourceError) as raised:
        await pixiv.search_illust("tag")
    assert (raised.value.reason, raised.value.retryable) == (TerminalReason.REMOTE_HTTP_ERROR, True)
    assert gate._paused_until == 0.0


@pytest.mark.parametrize("status", [500, 502, 503, 504, 302])
@pytest.mark.parametrize(
    "body",
    [rate_limit_object(), {"error": {"message": "Rate Limit"}}, {"error": "rate limit exceeded"}],
    ids=["app-api-object", "message", "text"],
)
@pytest.mark.parametrize("endpoint", ["api", "token"])
async def test_rate_limit_words_under_a_5xx_or_a_redirect_cool_nothing(
    status: int, body: dict[str, object], endpoint: str
) -> None:
    """A rate limit is HTTP 429, or Pixiv's "Rate Limit" words in a 2xx or a 4xx (reference
    §2.5: reported with 403 in the wild, returned as a result by pixivpy). The words under a
    5xx or a redirect — an upstream's, a gateway's failure page — are an answer never seen:
    until 2026-12-06 each climbed the account's cooldown ladder (60 s doubling to 15 min,
    every job of the account held), and a run of them kept it at the cap. One retried
    attempt now, the ladder untouched."""
    gate = MemoryGate()
    answer = httpx.Response(status, json=body)
    if endpoint == "token":
        pixiv, _ = client(lambda: answer, gate=gate)
        call = pixiv.authenticate()
    else:
        pixiv, _ = client(lambda: httpx.Response(200, json=TOKEN), lambda: answer, gate=gate)
        call = pixiv.search_illust("tag")
    with pytest.raises(SourceError) as raised:
        await call
    assert (raised.value.reason, raised.value.retryable) == (TerminalReason.REMOTE_HTTP_ERROR, True)
    assert raised.value.cooldown_s is None
    assert gate.penalty == 0


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (403, rate_limit_object()),  # the reference's own (§2.5)
        (200, rate_limit_object()),  # returned as a result (pixivpy #327)
        (429, {}),
        (429, rate_limit_object()),
    ],
)
async def test_a_recognised_rate_limit_still_climbs_the_ladder(status: int, body: dict[str, object]) -> None:
    gate = MemoryGate()
    pixiv, _ = client(lambda: httpx.Response(200, json=TOKEN), lambda: httpx.Response(status, json=body), gate=gate)
    with pytest.raises(SourceError) as raised:
        await pixiv.search_illust("tag")
    assert raised.value.reason == TerminalReason.RATE_LIMITED
    assert raised.value.cooldown_s is not None and gate.penalty == 1


@pytest.mark.parametrize(
    "answer",
    [
        *(httpx.Response(status, json=restricted_object()) for status in (500, 502, 503, 504, 599, 301, 302, 307)),
        httpx.Response(200, json={"error": RESTRICTED}),  # an error that is text, not the app-api's object
        httpx.Response(200, json={"error": {"message": RESTRICTED}}),  # a gateway's JSON error
        httpx.Response(401, json={"error": {"message": RESTRICTED}}),
        httpx.Response(410, json={"error": RESTRICTED}),
        httpx.Response(400, json={"error": {"user_message": RESTRICTED, "message": ""}}),  # no "reason": not its object
        httpx.Response(503, text=f"<html><body>{RESTRICTED}</body></html>"),
    ],
)
@pytest.mark.parametrize("call", ["illust_detail", "ugoira_metadata"])
async def test_the_restricted_words_on_a_works_call_hold_it_only_as_the_app_api_speaks(
    answer: httpx.Response, call: str
) -> None:
    """A work's detail or ugoira metadata answering "Your access is currently restricted."
    holds the work back for ``unrecognised_hold_ms`` (what a restricted account gets for
    every request; a work Pixiv restricts is a placeholder in the listing) only as the
    app-api says it — its own error object under a 2xx or a 4xx
    (:func:`~curaflow.sources.pixiv.client.answers.says_restricted`), as for the account.
    The object under a 5xx or a redirect, or the words in another shape, are an answer
    never seen: one retried attempt, the work neither held nor the account paused (until
    2026-12-06 the words in any answer held the work for the hour)."""
    gate = MemoryGate()
    pixiv, _ = client(lambda: httpx.Response(200, json=TOKEN), lambda: answer, gate=gate)
    with pytest.raises(SourceError) as raised:
        await getattr(pixiv, call)("123")
    assert (raised.value.reason, raised.value.retryable) == (TerminalReason.REMOTE_HTTP_ERROR, True)
    assert gate._paused_until == 0.0 and gate.penalty == 0


@pytest.mark.parametrize("status", [200, 400, 401, 403, 410])
@pytest.mark.parametrize("call", ["illust_detail", "ugoira_metadata"])
async def test_the_app_apis_restricted_object_on_a_works_call_holds_the_work_briefly(status: int, call: str) -> None:
    gate = MemoryGate()
    answer = httpx.Response(status, json=restricted_object())
    pixiv, _ = client(lambda: httpx.Response(200, json=TOKEN), lambda: answer, gate=gate)
    with pytest.raises(WorkUnavailable) as raised:
        await getattr(pixiv, call)("123")
    assert (raised.value.kind, raised.value.recognised) == (UnavailableKind.GONE, False)
    assert gate._paused_until == 0.0


@pytest.mark.parametrize("call", ["illust_detail", "ugoira_metadata"])
@pytest.mark.parametrize(
    "error",
    [
        restricted_object(),
        app_api_error(f"  {RESTRICTED.upper()}  ", ""),
        app_api_error("", RESTRICTED),  # in its message: the user_message words are anything
    ],
)
async def test_the_restricted_object_under_a_404_is_not_the_work_gone(error: dict[str, object], call: str) -> None:
    """The app-api's own 404 object with words to its user is the work gone (the week,
    :func:`says_gone`, words in any language never matched) — but "Your access is currently
    restricted." are words curaflow does know: the account's, what a restricted account
    gets for every request. Until 2026-12-06 the object under a 404 cost each work asked the
    week; held briefly now, as under a 403 or a 200."""
    if not error["error"]["user_message"]:  # type: ignore[index]
        error = {"error": {**error["error"], "user_message": "該当作品は削除されたか、存在しない作品IDです。"}}  # type: ignore[dict-item]
    gate = MemoryGate()
    pixiv, _ = client(lambda: httpx.Response(200, json=TOKEN), lambda: httpx.Response(404, json=error), gate=gate)
    with pytest.raises(WorkUnavailable) as raised:
        await getattr(pixiv, call)("123")
    assert (raised.value.kind, raised.value.recognised) == (UnavailableKind.GONE, False)
    assert gate._paused_until == 0.0


ILLUST_123 = {
    "id": 123,
    "title": "t",
    "type": "illust",
    "caption": "",
    "tags": [{"name": "t", "translated_name": None}],
    "meta_single_page": {"original_image_url": "https://i.pximg.net/img-original/img/2025/01/01/00/00/00/123_p0.png"},
}
UGOIRA_UNUSABLE = {"ugoira_metadata": {"zip_urls": {}, "frames": []}}


@pytest.mark.parametrize("status", [301, 302, 303, 304, 307, 308, 300, 399])
@pytest.mark.parametrize(
    ("call", "body"),
    [
        ("illust_detail", {"illust": ILLUST_123}),
        ("ugoira_metadata", UGOIRA_UNUSABLE),
        ("search_illust", {"illusts": [], "next_url": None}),
    ],
    ids=["detail", "ugoira", "search"],
)
async def test_a_redirects_body_is_no_answer_of_the_app_apis(status: int, call: str, body: dict[str, object]) -> None:
    """Redirects are never followed: a 3xx sends the request elsewhere, and the JSON it
    carries (a cache's or a gateway's, a stale answer replayed) is no answer to what was
    asked. Until 2026-12-06 ``_get`` read a 3xx's JSON object as the app-api's answer: a
    work described by it was taken as the detail, an ugoira's metadata of no animation held
    the work for the hour, a search page's empty ``illusts`` was the end of results. One
    retried attempt now."""
    pixiv, _ = client(lambda: httpx.Response(200, json=TOKEN), lambda: httpx.Response(status, json=body))
    with pytest.raises(SourceError) as raised:
        await (pixiv.search_illust("tag") if call == "search_illust" else getattr(pixiv, call)("123"))
    assert (raised.value.reason, raised.value.retryable, raised.value.status) == (
        TerminalReason.REMOTE_HTTP_ERROR,
        True,
        status,
    )


@pytest.mark.parametrize("status", [301, 302, 304, 307])
async def test_a_redirects_token_is_no_token(status: int) -> None:
    pixiv, _ = client(lambda: httpx.Response(status, json=TOKEN))
    with pytest.raises(SourceError) as raised:
        await pixiv.authenticate()
    assert (raised.value.reason, raised.value.retryable) == (TerminalReason.REMOTE_HTTP_ERROR, True)


def oversized_answers() -> PixivClient:
    """A client whose every app-api answer is a 1 MiB page over its 64 KiB byte limit."""
    big = b"<html>" + b"x" * (1024 * 1024)
    return pixiv_answering(lambda request: httpx.Response(200, content=big), page_max_bytes=64 * 1024)


@pytest.mark.parametrize("call", ["illust_detail", "ugoira_metadata"])
async def test_a_works_answer_over_the_byte_limit_holds_the_work_briefly(call: str) -> None:
    """A work's detail or ugoira metadata answered over ``outbound.page_max_bytes`` (a
    proxy's or a WAF's page, a body that never ends) is an answer never seen about that
    work: held back briefly, the cell moving on — as the app-api's own 400 asked of one
    work is. Until 2026-12-06 it was a search page's rule (the same request gets the same
    answer: ``remote_http_error``, not retried): the job ended at its first answer with
    nothing held back, so each later job of the target met the same work first and ended
    so, and an empty search page whose known work's detail was so answered ended the scan
    for good instead of one retried attempt."""
    pixiv = oversized_answers()
    with pytest.raises(WorkUnavailable) as raised:
        await getattr(pixiv, call)("123")
    assert raised.value.recognised is False
    assert raised.value.work_id == "123"


@pytest.mark.parametrize("call", ["search_illust", "ranking"])
async def test_a_search_answer_over_the_byte_limit_is_one_retried_attempt(call: str) -> None:
    """A 2xx search or ranking page over ``outbound.page_max_bytes`` (a captive portal's or a
    proxy's page, a body that never ends) is an answer never seen: one attempt, retried —
    as a page listing more items than a page holds, and the token endpoint's oversized
    answer, are. Until 2026-12-07 it ended the job at its first answer, not retried ("the
    same request gets the same answer"): a proxy's passing page cost the job."""
    pixiv = oversized_answers()
    with pytest.raises(SourceError) as raised:
        await getattr(pixiv, call)("tag" if call == "search_illust" else "day")
    assert (raised.value.reason, raised.value.retryable) == (TerminalReason.REMOTE_HTTP_ERROR, True)
