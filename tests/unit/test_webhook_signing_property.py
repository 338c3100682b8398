"""The webhook route signs as the ``standardwebhooks`` library verifies, and sends the
bytes ``json.dumps`` gave receivers before its body was streamed (2026-12-06).

The route computes its own HMAC, fed the body part by part (:func:`signature`,
:func:`signing_key`), instead of the library's ``Webhook.sign``; receivers verify with the
library's ``Webhook.verify``. Every secret shape the library accepts is drawn — with and
without ``whsec_``, standard and URL-safe base64, padded or not, characters outside the
alphabet, odd lengths, any text — and the body cut into arbitrary parts; a secret the
library refuses is refused by the route's configuration too. The body built a page at a
time (:func:`encode_body`) is the same bytes as ``json.dumps(body, ensure_ascii=False)``
for titles, tags and names of any text (emoji, control characters, quotes, backslashes).
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import SecretStr, ValidationError
from standardwebhooks.webhooks import Webhook

from curaflow.domain.models import Artifact, ArtifactFile, Work
from curaflow.routes.base import DeliveryRequest
from curaflow.routes.webhook import WebhookRouteConfig, describe_body, encode_body, signature, signing_key

#: Text the ledger can hold (no NUL, no lone surrogate: the source guard cleans them first).
TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=40)


@st.composite
def secrets(draw: st.DrawFn) -> str:
    key = draw(st.binary(min_size=0, max_size=64))
    encoded = draw(st.sampled_from([base64.b64encode, base64.urlsafe_b64encode]))(key).decode()
    if draw(st.booleans()):
        encoded = encoded.rstrip("=")
    if draw(st.booleans()):
        cut = draw(st.integers(0, len(encoded)))
        encoded = encoded[:cut]  # an odd length
    if draw(st.booleans()):
        at = draw(st.integers(0, len(encoded)))
        encoded = encoded[:at] + draw(TEXT) + encoded[at:]  # characters outside the alphabet
    if draw(st.booleans()):
        encoded = draw(TEXT)  # any text at all
    return ("whsec_" if draw(st.booleans()) else "") + encoded


def library_accepts(secret: str) -> bool:
    try:
        Webhook(secret)
    except Exception:  # noqa: BLE001 - any refusal of the library
        return False
    return True


@settings(max_examples=400, deadline=None)
@given(secret=secrets(), message_id=TEXT.filter(bool), body=st.binary(max_size=300), cuts=st.lists(st.integers(0, 300)))
def test_every_signature_verifies_with_the_librarys_own_verify(
    secret: str, message_id: str, body: bytes, cuts: list[int]
) -> None:
    if not library_accepts(secret):
        with pytest.raises(ValidationError):
            WebhookRouteConfig(url="https://receiver.example/hook", secret=SecretStr(secret))
        return
    WebhookRouteConfig(url="https://receiver.example/hook", secret=SecretStr(secret))
    assert signing_key(secret) == Webhook(secret)._whsecret
    bounds = sorted({0, len(body), *(min(c, len(body)) for c in cuts)})
    parts = [body[a:b] for a, b in itertools.pairwise(bounds)]
    timestamp = int(datetime.now(UTC).timestamp())
    headers = {
        "webhook-id": message_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": signature(signing_key(secret), message_id, timestamp, parts),
    }
    Webhook(secret).verify(body, headers, json_parse=False)  # raises when it does not verify


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    title=TEXT,
    author=TEXT,
    tags=st.lists(TEXT, max_size=4),
    pages=st.lists(st.binary(max_size=200), min_size=0, max_size=3),
    include_files=st.booleans(),
)
def test_the_body_is_the_bytes_json_dumps_gave(
    tmp_path: Path, title: str, author: str, tags: list[str], pages: list[bytes], include_files: bool
) -> None:
    files = []
    for page, data in enumerate(pages):
        path = tmp_path / f"7_p{page}.png"
        path.write_bytes(data)
        files.append(
            ArtifactFile(
                path=str(path),
                bytes=len(data),
                mime="image/png",
                width=1,
                height=1,
                page=page,
                sha256=hashlib.sha256(data).hexdigest(),
                frame_delays_ms=[40] if page == 1 else None,
            )
        )
    work = Work(work_id="7", title=title, author=author, tags=tags, url="https://www.pixiv.net/artworks/7", pages=[])
    request = DeliveryRequest(
        job_id="job-\u2028",
        target_id='t"\\',
        route="hook",
        idempotency_key="curaflow:hook:illustration:7:job:t",
        work=work,
        artifact=Artifact(work_id="7", files=files),
    )
    expected = describe_body(request)
    if include_files:
        for entry, data in zip(expected["files"], pages, strict=True):
            entry["data_base64"] = base64.b64encode(data).decode()
    body = encode_body(request, include_files, 64 * 1024 * 1024)
    sent = b"".join(body.parts)
    assert sent == json.dumps(expected, ensure_ascii=False).encode()
    assert body.size == len(sent)


@pytest.mark.parametrize("listed_delta", [0, -1])
def test_max_body_bytes_holds_at_the_byte(tmp_path: Path, listed_delta: int) -> None:
    """A body of exactly ``max_body_bytes`` is sent, one byte more is ``over_route_limit``
    — whether the artifact lists the page's size right or one byte short (the file grew
    since): the size sent is the bytes read."""
    from curaflow.domain.reasons import TerminalReason
    from curaflow.routes.base import RouteError

    data = bytes(range(256)) * 300  # 76 800 bytes: a body over the least max_body_bytes
    path = tmp_path / "7_p0.png"
    path.write_bytes(data)
    listed = ArtifactFile(
        path=str(path), bytes=len(data) + listed_delta, mime="image/png", width=1, height=1, page=0, sha256="0" * 64
    )
    request = DeliveryRequest(
        job_id="job",
        target_id="t",
        route="hook",
        idempotency_key="k",
        work=Work(work_id="7", title="😀\x01", url="https://www.pixiv.net/artworks/7", pages=[]),
        artifact=Artifact(work_id="7", files=[listed]),
    )
    size = encode_body(request, True, 1 << 30).size
    body = encode_body(request, True, size)
    assert body.size == size == len(b"".join(body.parts))
    with pytest.raises(RouteError) as over:
        encode_body(request, True, size - 1)
    assert over.value.reason == TerminalReason.OVER_ROUTE_LIMIT and over.value.permanent
