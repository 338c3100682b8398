"""A multi-part delivery resumed under another split than the one that posted its first
parts: the attempt that continues it runs on a worker whose route limits differ (a rolling
change of ``max_message_bytes`` / ``max_request_bytes`` — the change a 413's message asks
for —, a restart with the new setting while the delivery waited out a rate limit).

Every page reaches the chat exactly once, whatever split the earlier attempt used: the
recorded parts say which pages are posted, never the current split's part numbers.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import httpx
import pytest
from PIL import Image
from pydantic import SecretStr

from curaflow.artifacts import describe
from curaflow.domain.models import Artifact, Work
from curaflow.routes import DiscordRouteConfig, TelegramRouteConfig
from curaflow.routes.base import DeliveryRequest, RouteError
from curaflow.routes.discord import DiscordRoute
from curaflow.routes.telegram import TelegramRoute
from tests.fakes.discord import DcReply, FakeDiscord
from tests.fakes.telegram import FakeTelegram, TgReply

CHAT = "-1001234567890"
SMALL = 64 * 1024  # the least request either route takes: one page of ~30 KB per request


def noisy_pages(tmp_path: Path, count: int) -> list[Path]:
    """``count`` PNG pages of ~30 KB each (noise does not compress), distinct."""
    paths = []
    for page in range(count):
        path = tmp_path / f"4242_p{page}.png"
        noise = random.Random(page).randbytes(30_000)
        image = Image.frombytes("L", (200, 150), noise)
        image.save(path, format="PNG")
        paths.append(path)
    return paths


def request_for(paths: list[Path], **kw: Any) -> DeliveryRequest:
    work = Work(work_id="4242", title="夕焼け", url="https://www.pixiv.net/artworks/4242", page_count=len(paths))
    files = [describe(path, page) for page, path in enumerate(paths)]
    return DeliveryRequest(
        job_id="job-1",
        target_id="demo",
        route="r",
        idempotency_key="curaflow:r:illustration:4242:job-1:demo",
        work=work,
        artifact=Artifact(work_id="4242", files=files),
        **kw,
    )


@pytest.fixture
async def http() -> Any:
    async with httpx.AsyncClient() as client:
        yield client


def dc_route(fake: FakeDiscord, http: httpx.AsyncClient, **kw: Any) -> DiscordRoute:
    return DiscordRoute("dc", DiscordRouteConfig(url=SecretStr(fake.url), **kw), http)


def tg_route(fake: FakeTelegram, http: httpx.AsyncClient, **kw: Any) -> TelegramRoute:
    config = TelegramRouteConfig(bot_token=SecretStr(fake.token), chat_id=CHAT, api_url=fake.url, **kw)
    return TelegramRoute("tg", config, http)


def discord_pages(fake: FakeDiscord) -> list[str]:
    return [a["filename"] for m in fake.messages for a in m["attachments"]]


def telegram_pages(fake: FakeTelegram) -> list[str]:
    return [(m.get("photo") or [m.get("document")])[-1]["file_unique_id"] for m in fake.messages]


@pytest.mark.parametrize(
    ("first", "then"),
    [
        ({"max_message_bytes": SMALL, "max_file_bytes": SMALL}, {}),
        ({}, {"max_message_bytes": 200_000, "max_file_bytes": 200_000}),
    ],
)
async def test_discord_resumed_under_another_split_posts_every_page_once(
    tmp_path: Path, discord: FakeDiscord, http: Any, first: dict[str, Any], then: dict[str, Any]
) -> None:
    paths = noisy_pages(tmp_path, 12)
    parts: list[Any] = []

    async def on_part(done: list[Any]) -> None:
        parts[:] = done

    discord.script = [DcReply("ok"), DcReply("429", retry_after=0.25)]
    with pytest.raises(RouteError):
        await dc_route(discord, http, **first).deliver(request_for(paths, on_part=on_part))
    assert len(parts) == 1 and len(discord.messages) == 1
    receipt = await dc_route(discord, http, **then).deliver(request_for(paths, parts_done=list(parts)))
    names = discord_pages(discord)
    assert sorted(names) == sorted(p.name for p in paths), names  # every page, none twice
    assert names == [p.name for p in paths]  # in order
    assert receipt.remote_status == "sent" and discord.violations == []


@pytest.mark.parametrize(
    ("first", "then", "confirmed"),
    [
        ({"max_request_bytes": SMALL}, {}, 1),  # one page a request, then albums of 7
        ({"max_request_bytes": 100_000}, {}, 2),  # two albums of 2 posted, then albums of 7
        ({}, {"max_request_bytes": 130_000}, 1),  # an album of 7 posted, then albums of 3
    ],
)
async def test_telegram_resumed_under_another_split_posts_every_page_once(
    tmp_path: Path, telegram: FakeTelegram, http: Any, first: dict[str, Any], then: dict[str, Any], confirmed: int
) -> None:
    paths = noisy_pages(tmp_path, 14)
    parts: list[Any] = []

    async def on_part(done: list[Any]) -> None:
        parts[:] = done

    telegram.script["*"] = [TgReply("ok")] * confirmed + [TgReply("429", retry_after=1)]
    with pytest.raises(RouteError):
        await tg_route(telegram, http, **first).deliver(request_for(paths, on_part=on_part))
    assert len(parts) == confirmed
    posted = len(telegram.messages)
    receipt = await tg_route(telegram, http, **then).deliver(request_for(paths, parts_done=list(parts)))
    pages = telegram_pages(telegram)
    assert len(pages) == 14 == len(set(pages)), (posted, pages)  # every page, none twice
    assert receipt.remote_status == "sent" and telegram.violations == []
