"""The replay server takes the query words Pixiv takes, and refuses the others as Pixiv does.

Its words are the one owner's (:mod:`curaflow.sources.pixiv.query_words`): until
2026-12-07 it served any ``sort`` as ``date_desc``, any ``search_target`` as a partial
match, ignored a ``duration`` it did not know, answered ``mode=day_manga`` / ``week_r18g``
(modes Pixiv takes) with HTTP 400 and a ranking ``date`` that is no day with a 500 — a
replay-mode stack never showed what the app-api answers such a target.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import httpx
import pytest

from curaflow.process.httpserver import BackgroundServer
from curaflow.sources.pixiv.query_words import RANKING_MODES, SEARCH_TARGETS, SORTS
from curaflow.sources.pixiv.replay.app import create_replay_app


@pytest.fixture(scope="module")
async def client() -> AsyncIterator[httpx.AsyncClient]:
    """The replay server on 127.0.0.1 (real HTTP), and a client holding its access token:
    one for the module (each test only reads)."""
    server = await BackgroundServer(create_replay_app()).start()
    try:
        async with httpx.AsyncClient(base_url=server.url) as client:
            answer = await client.post("/auth/token", data={"grant_type": "refresh_token", "refresh_token": "r"})
            client.headers["Authorization"] = f"Bearer {answer.json()['access_token']}"
            yield client
    finally:
        await server.stop()


def refused(answer: httpx.Response) -> dict[str, object]:
    """The parameters an app-api 400 names (its validator's message, a JSON object)."""
    assert answer.status_code == 400
    names: dict[str, object] = json.loads(answer.json()["error"]["message"])
    return names


@pytest.mark.parametrize(
    ("name", "word"),
    [("sort", "newest"), ("search_target", "tags"), ("duration", "week")],
)
async def test_a_search_word_pixiv_does_not_take_is_refused_naming_the_parameter(
    client: httpx.AsyncClient, name: str, word: str
) -> None:
    answer = await client.get("/v1/search/illust", params={"word": "x", name: word})
    assert list(refused(answer)) == [name]


@pytest.mark.parametrize("params", [*({"sort": s} for s in SORTS), *({"search_target": t} for t in SEARCH_TARGETS)])
async def test_every_search_word_pixiv_takes_is_served(client: httpx.AsyncClient, params: dict[str, str]) -> None:
    assert (await client.get("/v1/search/illust", params={"word": "x", **params})).status_code == 200


@pytest.mark.parametrize("mode", RANKING_MODES)
async def test_every_ranking_mode_pixiv_takes_is_served(client: httpx.AsyncClient, mode: str) -> None:
    assert (await client.get("/v1/illust/ranking", params={"mode": mode, "date": "2025-02-04"})).status_code == 200


@pytest.mark.parametrize("day", ["yesterday", "2021-02-29"])
async def test_a_ranking_date_that_is_no_day_is_refused_naming_it(client: httpx.AsyncClient, day: str) -> None:
    answer = await client.get("/v1/illust/ranking", params={"mode": "day", "date": day})
    assert list(refused(answer)) == ["date"]
