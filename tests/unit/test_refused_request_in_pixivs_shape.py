"""A search ends its job unretried on the app-api's 400 only when the answer refuses the
request's parameters in the app-api's validator's shape (DESIGN.md "Attribution before
judgement"; the unknown costs one attempt, never a target's cell).

The app-api's validator answers ``{"error": {"user_message": "", "message":
"{\\"offset\\":[\\"offset must be no more than 5000\\"]}", "reason": "", …}}`` (reference
``pixiv-and-delivery-apis.md`` §2.2; pixivpy #39: ``{"illust_id": ["Illust Id is
required", …]}``): the request, asked again, gets the same answer. The same object with
other words — the app-api's "指定されたエンドポイントは存在しません" (the specified endpoint
does not exist, pixivpy #39) for an endpoint it no longer serves, a maintenance notice, a
``reason`` never seen, no words — says nothing curaflow recognises of the request: until
2026-12-07 it ended the job at its first answer (after one token refresh), every target's
cell of the account while it lasted; now it is one retried attempt.

The client runs against ``httpx.MockTransport``, the app-api answering in its wire format.
"""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from curaflow.domain.reasons import TerminalReason
from curaflow.sources.errors import SourceError, UnavailableKind, WorkUnavailable
from curaflow.sources.pixiv.client import PixivClient

TOKEN = {"access_token": "a", "refresh_token": "r", "expires_in": 3600}


def app_api_error(user_message: object = "", message: object = "", reason: object = "") -> dict[str, object]:
    """The app-api's own error object (its four fields, as it sends them)."""
    return {"error": {"user_message": user_message, "message": message, "reason": reason, "user_message_details": {}}}


def client(api: Callable[[httpx.Request], httpx.Response]) -> tuple[PixivClient, list[str]]:
    seen: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        if request.url.path.endswith("/auth/token"):
            return httpx.Response(200, json=TOKEN)
        return api(request)

    http = httpx.AsyncClient(transport=httpx.MockTransport(answer))
    return PixivClient(http, refresh_token="r", api_url="http://api.test", auth_url="http://api.test"), seen


NEVER_SEEN = [
    app_api_error(user_message="指定されたエンドポイントは存在しません"),  # pixivpy #39
    app_api_error(user_message="ただいまメンテナンス中です"),
    app_api_error(reason="maintenance"),  # a reason never seen, no words
    app_api_error(),  # no words at all
    app_api_error(message="Bad Request"),
    app_api_error(message='{"offset": 5000}'),  # JSON, not the validator's lists of words
    app_api_error(message="{}"),
    app_api_error(message='["offset must be no more than 5000"]'),
]


@pytest.mark.parametrize("body", NEVER_SEEN)
async def test_a_400_not_in_the_validators_shape_is_one_retried_attempt(body: dict[str, object]) -> None:
    pixiv, seen = client(lambda request: httpx.Response(400, json=body))
    with pytest.raises(SourceError) as raised:
        await pixiv.search_illust("tag")
    assert (raised.value.reason, raised.value.retryable) == (TerminalReason.REMOTE_HTTP_ERROR, True)
    # Asked once more behind a refreshed access token first (Pixiv refuses a token so too).
    assert seen == ["/auth/token", "/v1/search/illust", "/auth/token", "/v1/search/illust"]


@pytest.mark.parametrize(
    "message",
    [
        '{"start_date":["start_date is invalid"],"end_date":["end_date is invalid"]}',
        '{"word":["word is too long"]}',
        '{"search_target":["search_target is invalid"],"sort":["sort is invalid"]}',
    ],
)
async def test_a_400_refusing_the_requests_parameters_still_ends_the_job(message: str) -> None:
    pixiv, seen = client(lambda request: httpx.Response(400, json=app_api_error(message=message)))
    with pytest.raises(SourceError) as raised:
        await pixiv.search_illust("tag", start_date="2026-01-01", end_date="2026-01-02")
    assert (raised.value.reason, raised.value.retryable) == (TerminalReason.REMOTE_HTTP_ERROR, False)
    assert seen == ["/auth/token", "/v1/search/illust", "/auth/token", "/v1/search/illust"]


async def test_a_ranking_refused_on_the_mode_it_sent_ends_the_job() -> None:
    message = '{"mode":["mode is invalid"]}'
    pixiv, _ = client(lambda request: httpx.Response(400, json=app_api_error(message=message)))
    with pytest.raises(SourceError) as raised:
        await pixiv.ranking("week_rookie_manga")
    assert (raised.value.reason, raised.value.retryable) == (TerminalReason.REMOTE_HTTP_ERROR, False)


@pytest.mark.parametrize(
    "message",
    [
        '{"illust_id":["Illust Id is required","Illust Id must be an integer (0-9)"]}',  # pixivpy #39
        '{"offset":["offset must be no more than 5000"]}',  # no offset was sent (the first page)
        '{"word":["word is too long"],"illust_id":["Illust Id is required"]}',  # one sent, one not
        '{"start_date":["start_date is invalid"]}',  # the search sent no date
    ],
    ids=["illust_id", "offset-unsent", "one-of-two-unsent", "date-unsent"],
)
async def test_a_400_naming_a_parameter_never_sent_is_the_sources_one_retried_attempt(message: str) -> None:
    """The validator's refusal of a parameter curaflow did not send answers another request
    than the one sent — a cache or a proxy keyed wrongly, an endpoint moved behind the same
    path: the source's, one retried attempt, never the query's (until 2026-12-07 the search
    job ended unretried, its target's cell with it)."""
    pixiv, seen = client(lambda request: httpx.Response(400, json=app_api_error(message=message)))
    with pytest.raises(SourceError) as raised:
        await pixiv.search_illust("tag")
    assert (raised.value.reason, raised.value.retryable) == (TerminalReason.REMOTE_HTTP_ERROR, True)
    assert seen == ["/auth/token", "/v1/search/illust", "/auth/token", "/v1/search/illust"]


@pytest.mark.parametrize("body", [*NEVER_SEEN[:2], app_api_error(message='{"illust_id":["Illust Id is required"]}')])
async def test_a_works_400_in_the_app_apis_object_still_holds_the_work_briefly(body: dict[str, object]) -> None:
    """Asked of one work, the app-api's 400 (any words) holds the work back briefly, the
    cell moving on (unchanged)."""
    pixiv, _ = client(lambda request: httpx.Response(400, json=body))
    with pytest.raises(WorkUnavailable) as raised:
        await pixiv.illust_detail("123")
    assert (raised.value.kind, raised.value.recognised) == (UnavailableKind.GONE, False)
