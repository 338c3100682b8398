"""An ugoira's metadata naming another work's frames zip is no answer about the work asked.

``GET /v1/ugoira/metadata?illust_id=<id>`` carries no id of its own: the work it is about
is named only by its frames zip, ``<id>_ugoira600x600.zip`` as Pixiv names it. A cache or a
proxy keyed without the query (``illust_id``) answers every ugoira with the first one's
metadata; until 2026-12-07 that zip was fetched and its animation delivered as the work
asked — the work recorded delivered on its routes (a duplicate for ever: never sent again,
its own frames never sent) and the consumer handed another work's animation. The illust
detail is checked so since 2026-12-05 (``PixivClient.illust_detail_texts``).

Recognised positively, as the detail's id is: a zip whose file name names another work in
Pixiv's shape is the source's answer (``metadata_failed``, retried; never the work's). A
name in no shape curaflow knows names no work: the metadata is taken (the unknown is cheap:
a renamed zip must not refuse every ugoira).

The client runs against ``httpx.MockTransport``, the app-api answering in its wire format.
"""

from __future__ import annotations

import httpx
import pytest

from curaflow.domain.reasons import TerminalReason
from curaflow.sources.errors import SourceError
from tests.support import pixiv_answering

FRAMES = [{"file": "000000.jpg", "delay": 100}, {"file": "000001.jpg", "delay": 100}]
ZIPS = "https://i.pximg.net/img-zip-ugoira/img/2025/02/04/21/07/55"


def _metadata(zip_url: str) -> dict[str, object]:
    return {"ugoira_metadata": {"zip_urls": {"medium": zip_url}, "frames": FRAMES}}


@pytest.mark.parametrize(
    "zip_url",
    [
        f"{ZIPS}/126897195_ugoira600x600.zip",  # another work's (a cache keyed without illust_id)
        f"{ZIPS}/126897195_ugoira1920x1080.zip",
        f"{ZIPS}/1_ugoira600x600.zip",
    ],
)
async def test_metadata_naming_another_works_zip_is_the_sources_answer(zip_url: str) -> None:
    pixiv = pixiv_answering(lambda request: httpx.Response(200, json=_metadata(zip_url)))
    with pytest.raises(SourceError) as raised:
        await pixiv.ugoira_metadata("123")
    assert raised.value.reason is TerminalReason.METADATA_FAILED and raised.value.retryable


@pytest.mark.parametrize(
    "zip_url",
    [
        f"{ZIPS}/123_ugoira600x600.zip",  # the work's own
        f"{ZIPS}/123_ugoira1920x1080.zip",
        f"{ZIPS}/frames.zip",  # a name in no shape curaflow knows: names no work
        f"{ZIPS}/123.zip",
    ],
)
async def test_metadata_of_the_work_or_naming_none_is_taken(zip_url: str) -> None:
    pixiv = pixiv_answering(lambda request: httpx.Response(200, json=_metadata(zip_url)))
    animation = await pixiv.ugoira_metadata("123")
    assert animation.zip_url == zip_url and len(animation.frames) == 2
