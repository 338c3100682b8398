"""Answers of the source side curaflow had never been shown, played by a hostile party: each
costs one attempt, never a work, a target or an account (DESIGN.md "Attribution before
judgement"; "the unknown is cheap").

The client runs against ``httpx.MockTransport``: the token endpoint and the app-api answer
what each test scripts, in Pixiv's wire format where it is Pixiv's.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import httpx
import pytest

from curaflow.domain.reasons import TerminalReason
from curaflow.sources.errors import SourceError, WorkUnavailable
from curaflow.sources.gate import MemoryGate
from curaflow.sources.pixiv.client import PixivClient

TOKEN = {"access_token": "a", "refresh_token": "r", "expires_in": 3600}
#: Over the 64 KiB byte limit the clients below are given.
BIG = b"<html>" + b"x" * (256 * 1024)


def scripted(api: Callable[[httpx.Request], httpx.Response], *, gate: MemoryGate | None = None) -> PixivClient:
    """A client whose token endpoint grants a token and whose app-api answers ``api``."""

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/auth/token"):
            return httpx.Response(200, json=TOKEN)
        return api(request)

    http = httpx.AsyncClient(transport=httpx.MockTransport(answer))
    return PixivClient(
        http,
        refresh_token="r",
        api_url="http://api.test",
        auth_url="http://api.test",
        page_max_bytes=64 * 1024,
        gate=gate,
    )


@pytest.mark.parametrize(
    "status",
    [
        500,
        502,
        503,  # a gateway's maintenance page, larger than any page of results
        504,
        302,  # a redirect's body (never followed)
        404,  # not the app-api's error object: nothing of it could be read
        400,
    ],
)
async def test_an_oversized_answer_whose_status_is_no_pages_is_one_retried_attempt(status: int) -> None:
    """An answer over ``outbound.page_max_bytes`` was judged by its size alone, whatever its
    status: a search's was ``remote_http_error`` not retried — the job ended at the
    first answer of a gateway whose 5xx error page (or a redirect's, or a ``Content-Length``
    it announced) was over the limit. The same request does not get the same answer from
    a failing server: one attempt, retried, as the status says with no body read."""
    pixiv = scripted(lambda request: httpx.Response(status, content=BIG))
    with pytest.raises(SourceError) as raised:
        await pixiv.search_illust("tag")
    assert (raised.value.reason, raised.value.retryable) == (TerminalReason.REMOTE_HTTP_ERROR, True)
    assert raised.value.status == status


@pytest.mark.parametrize("status", [500, 502, 503, 302, 400])
@pytest.mark.parametrize("call", ["illust_detail", "ugoira_metadata"])
async def test_a_works_oversized_answer_under_a_failing_status_holds_no_work(call: str, status: int) -> None:
    """Asked of one work, the 5xx (or redirect) over the byte limit held the work back as
    an answer about it; a failing server says nothing of the work: one retried attempt,
    as the same status with a short body is."""
    pixiv = scripted(lambda request: httpx.Response(status, content=BIG))
    with pytest.raises(SourceError) as raised:
        await getattr(pixiv, call)("123")
    assert not isinstance(raised.value, WorkUnavailable)
    assert raised.value.retryable is True


async def test_an_oversized_rate_limit_is_a_rate_limit() -> None:
    """A 429 is a rate limit whatever its body (RFC 6585 §4): over the byte limit too, the
    account's ladder climbs and the attempt waits its cooldown — it ended the job."""
    gate = MemoryGate(cap_ms=900_000)
    pixiv = scripted(lambda request: httpx.Response(429, content=BIG, headers={"Retry-After": "120"}), gate=gate)
    with pytest.raises(SourceError) as raised:
        await pixiv.search_illust("tag")
    assert (raised.value.reason, raised.value.retryable) == (TerminalReason.RATE_LIMITED, True)
    assert raised.value.cooldown_s is not None and raised.value.cooldown_s >= 120


@pytest.mark.parametrize("announced", [True, False])
async def test_an_oversized_answer_of_the_pages_own_status_keeps_its_rule(announced: bool) -> None:
    """A 2xx over the byte limit is still the page's (the same request gets the same answer:
    the job ends; DESIGN.md), announced by its ``Content-Length`` or counted."""

    def answer(request: httpx.Request) -> httpx.Response:
        if announced:
            return httpx.Response(200, content=BIG)
        return httpx.Response(200, content=_streamed())  # no Content-Length: counted

    async def _streamed() -> AsyncIterator[bytes]:
        yield BIG

    pixiv = scripted(answer)
    with pytest.raises(SourceError) as raised:
        await pixiv.search_illust("tag")
    assert (raised.value.reason, raised.value.retryable) == (TerminalReason.REMOTE_HTTP_ERROR, False)
