"""Receivers' limits and answers blamed on their real owner.

Route-level cases run the production routes over real HTTP against the fakes of
``tests/fakes`` (Discord's and Telegram's wire formats and limits); the verdict cases
call the one decider, :func:`curaflow.domain.verdicts.delivery_verdict`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import httpx
import pytest
from PIL import Image
from pydantic import SecretStr, ValidationError

from curaflow.domain.cells import CellState
from curaflow.domain.models import Artifact, ArtifactFile, CellSnapshot, RouteDelivery, Work
from curaflow.domain.reasons import Owner, TerminalReason
from curaflow.domain.verdicts import FailureKind, StepFailure, delivery_verdict, owner_of
from curaflow.routes import DiscordRouteConfig, TelegramRouteConfig
from curaflow.routes.base import DeliveryRequest, RouteError
from curaflow.routes.discord import DiscordRoute
from curaflow.routes.telegram import TelegramRoute
from tests.fakes.discord import DcReply, FakeDiscord
from tests.fakes.telegram import FakeTelegram, TgReply

pytestmark = [pytest.mark.integration]

MiB = 1024 * 1024


@pytest.fixture
async def http() -> Any:
    async with httpx.AsyncClient(timeout=30) as client:
        yield client


def sized_request(tmp_path: Path, sizes: list[int], **kw: Any) -> DeliveryRequest:
    """A delivery of a work whose pages are files of exactly ``sizes`` bytes."""
    files = []
    for page, size in enumerate(sizes):
        path = tmp_path / f"4242_p{page}.jpg"
        path.write_bytes(b"\xff\xd8" + os.urandom(size - 2))
        files.append(ArtifactFile(path=str(path), bytes=size, mime="image/jpeg", width=1000, height=1000, page=page))
    work = Work(work_id="4242", title="夕焼け", url="https://www.pixiv.net/artworks/4242", pages=[])
    return DeliveryRequest(
        job_id="job-1",
        target_id="demo",
        route="dc",
        idempotency_key="curaflow:dc:illustration:4242:job-1:demo",
        work=work,
        artifact=Artifact(work_id="4242", files=files),
        **kw,
    )


def dc_route(fake: FakeDiscord, http: httpx.AsyncClient, **kw: Any) -> DiscordRoute:
    return DiscordRoute("dc", DiscordRouteConfig(url=SecretStr(fake.url), **kw), http)


# ---- Discord: each request under the real 10 MiB limit --------------------------------------


@pytest.mark.parametrize(
    ("sizes", "messages"),
    [([int(4.1 * MiB)] * 3, 2), ([int(5.3 * MiB)] * 2, 2), ([int(0.9 * MiB)] * 12, 2), ([int(9.9 * MiB)], 1)],
    ids=["3x4.1MiB", "2x5.3MiB", "12x0.9MiB", "1x9.9MiB"],
)
async def test_a_discord_work_is_split_into_requests_under_the_real_limit(
    tmp_path: Path, discord: FakeDiscord, http: Any, sizes: list[int], messages: int
) -> None:
    receipt = await dc_route(discord, http).deliver(sized_request(tmp_path, sizes))

    assert discord.violations == []
    assert len(discord.messages) == messages == len(receipt.remote_ids)
    assert all(r.size <= 10 * MiB for r in discord.requests)
    assert sorted(f.size for r in discord.requests for f in r.files) == sorted(sizes)


@pytest.mark.parametrize("kind", ["413", "html_413"])
async def test_a_discord_413_is_the_routes_failure_not_the_works(
    tmp_path: Path, discord: FakeDiscord, http: Any, kind: str
) -> None:
    discord.script = [DcReply(kind)]
    with pytest.raises(RouteError) as caught:
        await dc_route(discord, http).deliver(sized_request(tmp_path, [MiB]))
    err = caught.value
    assert err.reason == TerminalReason.ROUTE_REFUSED and err.permanent and not err.ambiguous
    assert owner_of(err.reason) == Owner.ROUTE
    verdict = delivery_verdict(
        reason=err.reason, permanent=True, ambiguous=False, resend_safe=False, attempt=1, max_attempts=12
    )
    assert verdict.final and not verdict.remember_refusal  # the work is not used up


async def test_a_page_over_curaflows_own_limit_says_curaflow_refused_it(
    tmp_path: Path, discord: FakeDiscord, http: Any
) -> None:
    with pytest.raises(RouteError) as caught:
        await dc_route(discord, http, max_file_bytes=8 * MiB).deliver(sized_request(tmp_path, [int(8.9 * MiB)]))
    err = caught.value
    assert discord.requests == []  # never sent
    assert err.reason == TerminalReason.OVER_ROUTE_LIMIT and err.permanent
    assert "curaflow" in str(err) and "max_file_bytes" in str(err)
    assert owner_of(err.reason) == Owner.WORK


def test_discord_limits_agree_with_discord() -> None:
    config = DiscordRouteConfig(url=SecretStr("https://discord.com/api/webhooks/1/x"))
    assert config.max_message_bytes == 10 * MiB and config.max_file_bytes <= config.max_message_bytes
    with pytest.raises(ValidationError):
        DiscordRouteConfig(url=SecretStr("https://discord.com/api/webhooks/1/x"), max_message_bytes=30 * MiB)
    with pytest.raises(ValidationError):
        DiscordRouteConfig(
            url=SecretStr("https://discord.com/api/webhooks/1/x"), max_message_bytes=5 * MiB, max_file_bytes=6 * MiB
        )


@pytest.mark.parametrize("kind", ["404"])
async def test_an_unknown_discord_webhook_is_the_routes_failure(
    tmp_path: Path, discord: FakeDiscord, http: Any, kind: str
) -> None:
    discord.script = [DcReply(kind)]
    with pytest.raises(RouteError) as caught:
        await dc_route(discord, http).deliver(sized_request(tmp_path, [MiB]))
    assert caught.value.reason == TerminalReason.ROUTE_REFUSED


# ---- the decider -----------------------------------------------------------------------------


def test_every_reason_has_one_owner_and_only_the_work_is_refused_for_good() -> None:
    def remembered(reason: str) -> bool:
        return delivery_verdict(
            reason=reason, permanent=True, ambiguous=False, resend_safe=True, attempt=1, max_attempts=3
        ).remember_refusal

    assert remembered(TerminalReason.DELIVERY_REJECTED) and remembered(TerminalReason.OVER_ROUTE_LIMIT)
    assert not remembered(TerminalReason.ROUTE_REFUSED)
    assert not remembered(TerminalReason.TELEGRAM_FAILED)


def test_a_final_failure_after_part_of_the_work_was_posted_is_partial() -> None:
    verdict = delivery_verdict(
        reason=TerminalReason.DELIVERY_REJECTED,
        permanent=True,
        ambiguous=False,
        resend_safe=False,
        attempt=1,
        max_attempts=12,
        posted=True,
    )
    assert (verdict.outcome, verdict.unknown, verdict.remember_refusal) == ("partial", True, False)
    assert verdict.reason == TerminalReason.DELIVERY_PARTIAL and verdict.owner == Owner.ROUTE


# ---- Telegram: rate limits wherever written, albums failed at an item -------------------------

CHAT = "-1001234567890"


def tg_route(fake: FakeTelegram, http: httpx.AsyncClient, **kw: Any) -> TelegramRoute:
    config = TelegramRouteConfig(bot_token=SecretStr(fake.token), chat_id=CHAT, api_url=fake.url, **kw)
    return TelegramRoute("tg", config, http)


def photo_request(tmp_path: Path, pages: int, **kw: Any) -> DeliveryRequest:
    """A work of ``pages`` small JPEG pages (each a distinct image)."""
    files = []
    for page in range(pages):
        path = tmp_path / f"4242_p{page}.jpg"
        Image.new("RGB", (300 + page, 200), (page * 20 % 256, 40, 90)).save(path, format="JPEG")
        files.append(
            ArtifactFile(
                path=str(path), bytes=path.stat().st_size, mime="image/jpeg", width=300 + page, height=200, page=page
            )
        )
    work = Work(work_id="4242", title="夕焼け", url="https://www.pixiv.net/artworks/4242", pages=[])
    return DeliveryRequest(
        job_id="job-1",
        target_id="demo",
        route="tg",
        idempotency_key="curaflow:tg:illustration:4242:job-1:demo",
        work=work,
        artifact=Artifact(work_id="4242", files=files),
        **kw,
    )


def posted_pages(fake: FakeTelegram) -> list[str]:
    """The file hash of every item in the chat, in order (a page posted twice repeats)."""
    return [(m.get("photo") or [m.get("document")])[0]["file_unique_id"] for m in fake.messages]


async def deliver_with_retries(route: TelegramRoute, request: DeliveryRequest, attempts: int = 4) -> list[RouteError]:
    """Deliver like the ``deliver`` activity: each attempt resumes after the recorded parts."""
    recorded: list[Any] = []

    async def on_part(parts: list[Any]) -> None:
        recorded[:] = parts

    errors: list[RouteError] = []
    for _ in range(attempts):
        request.parts_done = [list(p) for p in recorded]
        request.on_part = on_part
        try:
            receipt = await route.deliver(request)
        except RouteError as err:
            errors.append(err)
            if err.permanent:
                raise
            continue
        assert receipt.remote_ids == recorded
        return errors
    raise AssertionError(f"never delivered: {errors}")


async def test_an_album_failed_at_an_item_is_sent_again_whole_never_left_out(
    tmp_path: Path, telegram: FakeTelegram, http: Any
) -> None:
    # 12 pages → two albums of 6. The second fails at its item 3 with a rate limit quoted in
    # the Bot API's 400: nothing of it posted (an album is one request to Telegram). Until
    # 2026-12-07 items 0..2 were recorded posted and the retry sent only the rest.
    telegram.script["sendMediaGroup"] = [TgReply("ok"), TgReply("item_failed", posted=3, retry_after=8)]
    route = tg_route(telegram, http)
    request = photo_request(tmp_path, 12)

    errors = await deliver_with_retries(route, request)

    [err] = errors
    assert not err.permanent and err.retry_after_s == 8 and err.reason == TerminalReason.TELEGRAM_FAILED
    pages = posted_pages(telegram)
    assert len(pages) == 12 == len(set(pages))  # every page once: none re-posted, none missing
    assert telegram.violations == []


async def test_an_album_failed_at_an_item_then_a_429_posts_every_page_once(
    tmp_path: Path, telegram: FakeTelegram, http: Any
) -> None:
    telegram.script["*"] = [TgReply("item_failed", posted=2, retry_after=1), TgReply("429", retry_after=2)]
    request = photo_request(tmp_path, 3)
    errors = await deliver_with_retries(tg_route(telegram, http), request)

    assert [e.retry_after_s for e in errors] == [1, 2]
    assert request.parts_done == []  # nothing recorded posted before the album went whole
    pages = posted_pages(telegram)
    assert len(pages) == 3 == len(set(pages))


async def test_an_album_telegram_posted_without_an_item_is_never_sent_again(
    tmp_path: Path, telegram: FakeTelegram, http: Any
) -> None:
    # Telegram's result left an item out and posted the others: which ones, the answer does
    # not say — an unknown outcome (the route's on_ambiguous decides), nothing recorded.
    telegram.script["*"] = [TgReply("partial", posted=2)]
    request = photo_request(tmp_path, 3)
    with pytest.raises(RouteError) as caught:
        await tg_route(telegram, http).deliver(request)
    assert caught.value.ambiguous and not caught.value.permanent
    assert len(posted_pages(telegram)) == 2


@pytest.mark.parametrize(
    ("status", "body", "headers", "delay"),
    [
        (429, {"ok": False, "error_code": 429, "description": "Too Many Requests: retry after 7"}, {}, 7),
        (400, {"ok": False, "error_code": 400, "description": "Bad Request: Too Many Requests: retry after 9"}, {}, 9),
        (
            400,
            {"ok": False, "error_code": 400, "description": "Bad Request", "parameters": {"retry_after": 4}},
            {},
            4,
        ),
        (429, {"ok": False, "error_code": 429, "description": "Too Many Requests"}, {"retry-after": "3"}, 3),
    ],
    ids=["429-text", "400-text", "400-parameters", "429-header"],
)
def test_a_telegram_rate_limit_is_recognised_wherever_it_is_written(
    status: int, body: dict[str, Any], headers: dict[str, str], delay: float
) -> None:
    from curaflow.routes.telegram import classify

    err = classify(
        int(body["error_code"]),
        body["description"],
        body.get("parameters") or {},
        headers.get("retry-after"),
        photo=False,
    )
    assert err is not None and not err.permanent and err.retry_after_s == delay and err.rate_limited
    assert owner_of(err.reason) == Owner.ROUTE


@pytest.mark.parametrize("kind", ["chat_not_found", "blocked", "too_large"])
async def test_a_broken_or_limited_chat_is_the_routes_failure(
    tmp_path: Path, telegram: FakeTelegram, http: Any, kind: str
) -> None:
    telegram.script["*"] = [TgReply(kind)]
    with pytest.raises(RouteError) as caught:
        await tg_route(telegram, http).deliver(photo_request(tmp_path, 1))
    assert caught.value.permanent and caught.value.reason == TerminalReason.ROUTE_REFUSED


def test_a_delivery_that_ended_with_parts_posted_is_reported_partial() -> None:
    cell = CellSnapshot(
        target_id="demo",
        state=CellState.FAILED,
        work_id="4242",
        reason="telegram_failed",
        deliveries=[RouteDelivery(route="tg", status="unknown", idempotency_key="k", parts_posted=1)],
    )
    assert [d.status for d in cell.delivery_reports()] == ["partial"]
    assert cell.landed()


async def test_a_discord_rate_limit_between_messages_never_reposts_the_first(
    tmp_path: Path, discord: FakeDiscord, http: Any
) -> None:
    discord.script = [DcReply("ok"), DcReply("429", retry_after=0.25)]
    route = dc_route(discord, http)
    request = sized_request(tmp_path, [int(4.1 * MiB)] * 3)
    recorded: list[Any] = []

    async def on_part(parts: list[Any]) -> None:
        recorded[:] = parts

    request.on_part = on_part
    with pytest.raises(RouteError) as caught:
        await route.deliver(request)
    assert caught.value.retry_after_s == 0.25 and not caught.value.permanent
    assert len(recorded) == 1  # the first message is recorded before the second leaves

    request.parts_done = list(recorded)
    receipt = await route.deliver(request)
    assert len(discord.messages) == 2 == len(receipt.remote_ids)  # the first was not posted again
    assert sorted(a["size"] for m in discord.messages for a in m["attachments"]) == [int(4.1 * MiB)] * 3


@pytest.mark.parametrize(
    ("error_type", "owner"),
    [
        ("route_refused", Owner.ROUTE),
        ("delivery_rejected", Owner.WORK),
        ("over_route_limit", Owner.WORK),
        ("remote_http_error", Owner.SOURCE),
        ("rate_limited", Owner.ACCOUNT),
        ("storage_full", Owner.CURAFLOW),
        ("OSError", Owner.CURAFLOW),  # an unclassified failure is curaflow's own
    ],
)
def test_a_failed_step_reaches_the_decider_tagged_with_its_owner(error_type: str, owner: Owner) -> None:
    failure = StepFailure(step="deliver", kind=FailureKind.APPLICATION, error_type=error_type, non_retryable=True)
    assert failure.owner == owner
