"""The token endpoint's grant answered only under ``response`` is Pixiv's grant.

Pixiv answers a refresh with its grant at the top level and duplicated under ``response``
(reference ``pixiv-and-delivery-apis.md`` §2.1; pixivpy reads ``response``). An answer
holding it under ``response`` alone was read as holding no access token: the attempt
failed (``remote_http_error``) and the refresh token it carried — a rotated one, Pixiv
revoking the token sent — was dropped, so the next refresh sent the revoked token and the
account ended ``auth_failed``, an operator told to log in again (until 2026-12-07).

The client runs against ``httpx.MockTransport``: the token endpoint rotates the refresh
token once and then refuses the one it rotated away, as Pixiv may (RFC 6749 §6).
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from curaflow.sources.errors import SourceError
from curaflow.sources.pixiv.client import PixivClient
from curaflow.sources.tokens import MemoryTokenStore

REFUSED = {
    "has_error": True,
    "errors": {"system": {"message": "Invalid refresh token", "code": 1508}},
    "error": "invalid_grant",
}


def rotating(first: dict[str, Any], sent: list[str], bearers: list[str]) -> httpx.AsyncClient:
    """A token endpoint answering ``first`` to the configured token ``r1`` once, then
    refusing ``r1`` (revoked) and granting ``a3`` to ``r2``; an app-api answering an empty page."""

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/auth/token"):
            token = dict(httpx.QueryParams(request.content.decode()))["refresh_token"]
            sent.append(token)
            if token == "r1" and len(sent) == 1:
                return httpx.Response(200, json=first)
            if token == "r2":
                return httpx.Response(200, json={"access_token": "a3", "refresh_token": "r2", "expires_in": 3600})
            return httpx.Response(400, json=REFUSED)
        bearers.append(request.headers["Authorization"])
        return httpx.Response(200, json={"illusts": [], "next_url": None})

    return httpx.AsyncClient(transport=httpx.MockTransport(answer))


async def _search_twice(client: PixivClient) -> None:
    for _ in range(2):
        try:
            await client.search_illust("tag")
        except SourceError as err:
            if err.retryable is False:
                raise
            continue  # one attempt; the next asks again
        client.expire_access_token()


GRANT = {"access_token": "a2", "refresh_token": "r2", "expires_in": 3600, "token_type": "bearer"}


@pytest.mark.parametrize(
    "first",
    [
        {"response": GRANT},  # the grant under `response` alone
        {"response": {**GRANT, "access_token": None}},  # no usable access token: its refresh token kept
        {"access_token": None, "response": GRANT},  # the top level's empty, `response`'s whole
        # the top level's access token usable, its refresh token dropped: `response`'s kept
        {"access_token": "a2", "expires_in": 3600, "response": GRANT},
        {"access_token": "a2", "refresh_token": None, "expires_in": 3600, "response": GRANT},
    ],
    ids=[
        "response-only",
        "response-without-access-token",
        "top-level-null",
        "top-level-without-refresh-token",
        "top-level-refresh-token-null",
    ],
)
async def test_a_refresh_token_answered_under_response_is_kept(first: dict[str, Any]) -> None:
    sent: list[str] = []
    bearers: list[str] = []
    store = MemoryTokenStore()
    client = PixivClient(
        rotating(first, sent, bearers), refresh_token="r1", api_url="http://api.test", auth_url="http://api.test",
        token_store=store,
    )  # fmt: skip
    await _search_twice(client)  # raised auth_failed (not retryable) when r2 was dropped
    assert "r2" in sent
    assert store.refresh_token == "r2"
    assert bearers and bearers[-1] in ("Bearer a2", "Bearer a3")


async def test_a_grant_under_response_is_used() -> None:
    sent: list[str] = []
    bearers: list[str] = []
    client = PixivClient(
        rotating({"response": GRANT}, sent, bearers), refresh_token="r1", api_url="http://api.test",
        auth_url="http://api.test",
    )  # fmt: skip
    await client.search_illust("tag")
    assert sent == ["r1"]
    assert bearers == ["Bearer a2"]


@pytest.mark.parametrize(
    "answer",
    [[], {"response": []}, {"response": "granted"}, {"response": {"access_token": 5}}, {"response": {}}],
    ids=["list", "response-list", "response-text", "response-number-token", "response-empty"],
)
async def test_a_grant_in_no_shape_is_still_one_retried_attempt(answer: Any) -> None:
    client = PixivClient(
        httpx.AsyncClient(transport=httpx.MockTransport(lambda request: httpx.Response(200, json=answer))),
        refresh_token="r1", api_url="http://api.test", auth_url="http://api.test",
    )  # fmt: skip
    with pytest.raises(SourceError) as raised:
        await client.search_illust("tag")
    assert raised.value.retryable is True
    assert str(raised.value.reason) == "remote_http_error"
