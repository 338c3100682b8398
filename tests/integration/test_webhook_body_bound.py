"""The webhook route's body is bounded: by a configured size, and held about once.

A webhook delivery inlines every page of the work as base64 in one JSON body (4/3 of
the artifact). Until 2026-12-06 nothing bounded it and it was built in memory four
times over (the JSON's strings, the JSON text, the signature's copy, the bytes sent): a
work of 30 pages of 8 MiB held 960 MiB of the worker's memory for one delivery (8 bodies
when the title holds an emoji), and Pixiv works have up to 200 pages of tens of MB each.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import tracemalloc
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr, ValidationError

from curaflow.domain.models import Artifact, ArtifactFile, Work
from curaflow.domain.reasons import Owner, TerminalReason
from curaflow.domain.verdicts import delivery_verdict, owner_of
from curaflow.outbound import as_outbound
from curaflow.routes.base import DeliveryRequest, Route, RouteError
from curaflow.routes.registry import RouteContext
from curaflow.routes.webhook import WebhookRouteConfig, build_webhook_route
from tests.fakes.webhook import WebhookReceiver
from tests.support import whsec

pytestmark = [pytest.mark.integration]

KiB = 1024
MiB = 1024 * KiB


@pytest.fixture
async def http() -> Any:
    async with httpx.AsyncClient(timeout=30) as client:
        yield client


def paged_request(tmp_path: Path, sizes: list[int], *, listed: list[int] | None = None) -> DeliveryRequest:
    """A delivery of work 4242 whose pages are files of ``sizes`` bytes (the artifact
    lists ``listed`` bytes for them when given)."""
    files = []
    for page, size in enumerate(sizes):
        path = tmp_path / f"4242_p{page}.png"
        path.write_bytes(os.urandom(size))
        files.append(
            ArtifactFile(
                path=str(path),
                bytes=(listed or sizes)[page],
                mime="image/png",
                width=100,
                height=100,
                page=page,
                sha256=hashlib.sha256(path.read_bytes()).hexdigest(),
            )
        )
    work = Work(work_id="4242", title="夕焼け 😀", url="https://www.pixiv.net/artworks/4242", pages=[])
    return DeliveryRequest(
        job_id="job-1",
        target_id="demo",
        route="hook",
        idempotency_key="curaflow:hook:illustration:4242:job-1:demo",
        work=work,
        artifact=Artifact(work_id="4242", files=files),
    )


def hook(url: str, http: httpx.AsyncClient, **kw: Any) -> Route:
    """The ``webhook`` route as the worker builds it, from its configuration."""
    config = WebhookRouteConfig(url=url, secret=SecretStr(whsec()), **kw)
    return build_webhook_route("hook", config, RouteContext(http=as_outbound(http, config.destinations())))


async def test_a_body_over_max_body_bytes_is_curaflows_refusal_before_anything_is_sent(
    tmp_path: Path, webhook: WebhookReceiver, http: Any
) -> None:
    route = hook(webhook.url + "/in", http, max_body_bytes=1 * MiB)
    (tmp_path / "big").mkdir()
    big = paged_request(tmp_path / "big", [400 * KiB, 400 * KiB])  # a body of ~1.07 MiB

    with pytest.raises(RouteError) as caught:
        await route.deliver(big)

    err = caught.value
    assert webhook.received == []  # nothing sent
    assert err.reason == TerminalReason.OVER_ROUTE_LIMIT and err.permanent and not err.ambiguous
    assert "curaflow" in str(err) and "max_body_bytes" in str(err)
    # No answer: never counted in the route's refusal streak (a route is never paused for
    # the works' sizes); the work is refused on this route only, remembered as such.
    assert err.answer is None
    assert owner_of(err.reason) == Owner.WORK
    verdict = delivery_verdict(
        reason=err.reason, permanent=True, ambiguous=False, resend_safe=True, attempt=1, max_attempts=12
    )
    assert verdict.final and verdict.remember_refusal

    # A work under the bound is delivered whole, signed, its pages as they are.
    (tmp_path / "small").mkdir()
    small = paged_request(tmp_path / "small", [300 * KiB, 400 * KiB])
    await route.deliver(small)
    (received,) = webhook.received
    assert received.signature_ok
    assert len(received.body) <= 1 * MiB
    assert int(received.headers["content-length"]) == len(received.body)
    sent = received.json()["files"]
    assert [base64.b64decode(f["data_base64"]) for f in sent] == [
        Path(f.path).read_bytes() for f in small.artifact.files
    ]
    assert received.json()["work"]["title"] == "夕焼け 😀"


async def test_a_page_larger_than_the_artifact_lists_is_bounded_as_it_is_read(
    tmp_path: Path, webhook: WebhookReceiver, http: Any
) -> None:
    """The bound holds on the bytes read, not only on the sizes the artifact lists."""
    route = hook(webhook.url + "/in", http, max_body_bytes=1 * MiB)
    with pytest.raises(RouteError) as caught:
        await route.deliver(paged_request(tmp_path, [900 * KiB], listed=[1000]))
    assert caught.value.reason == TerminalReason.OVER_ROUTE_LIMIT
    assert webhook.received == []


async def test_a_body_without_files_is_not_bounded_by_the_pages_it_describes(
    tmp_path: Path, webhook: WebhookReceiver, http: Any
) -> None:
    route = hook(webhook.url + "/in", http, max_body_bytes=64 * KiB, include_files=False)
    await route.deliver(paged_request(tmp_path, [100 * KiB, 100 * KiB]))
    (received,) = webhook.received
    assert received.signature_ok and all("data_base64" not in f for f in received.json()["files"])


def test_max_body_bytes_has_a_default_and_a_range() -> None:
    config = WebhookRouteConfig(url="https://hook.example/in", secret=SecretStr(whsec()))
    assert config.max_body_bytes == 64 * MiB
    for wrong in (0, 1000, 2 * 1024 * MiB):
        with pytest.raises(ValidationError, match="max_body_bytes"):
            WebhookRouteConfig(url="https://hook.example/in", secret=SecretStr(whsec()), max_body_bytes=wrong)


class Discarding(httpx.AsyncBaseTransport):
    """A receiver in the test's process that keeps nothing: it checks the signature as the
    body streams past (``httpx.MockTransport`` reads a request whole before answering,
    which would add its own copy to what is measured)."""

    def __init__(self) -> None:
        self.key = base64.b64decode(whsec().removeprefix("whsec_") + "==")
        self.size = 0
        self.signature_ok = False

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        h = request.headers
        signed = hmac.new(self.key, f"{h['webhook-id']}.{h['webhook-timestamp']}.".encode(), "sha256")
        assert isinstance(request.stream, httpx.AsyncByteStream)
        async for chunk in request.stream:
            signed.update(chunk)
            self.size += len(chunk)
        self.signature_ok = h["webhook-signature"] == "v1," + base64.b64encode(signed.digest()).decode()
        assert int(h["content-length"]) == self.size
        return httpx.Response(200, json={"status": "accepted"})


async def test_a_delivery_holds_its_body_about_once(tmp_path: Path) -> None:
    """Measured with tracemalloc around one delivery of 24 MiB of pages (a body of 32 MiB):
    before, the peak was 256 MiB — the JSON text and the signed string are ``str``, 4 bytes
    a character once the title holds an emoji (3 bodies with an ASCII title) —; now 35 MiB,
    the body once and the page being encoded."""
    pages = [2 * MiB] * 12  # a body of 32 MiB
    request = paged_request(tmp_path, pages)
    receiver = Discarding()
    async with httpx.AsyncClient(transport=receiver) as http:
        route = hook("https://hook.example/in", http, max_body_bytes=64 * MiB)
        tracemalloc.start()
        try:
            await route.deliver(request)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert receiver.signature_ok
    body = receiver.size
    assert body > sum(pages) * 4 // 3
    assert peak < body * 1.5, f"peak {peak / MiB:.0f} MiB for a body of {body / MiB:.0f} MiB"
