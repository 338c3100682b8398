"""Ugoira (animated works) are delivered as animations, not as their cover frame.

Real Temporal, PostgreSQL and worker; the worker's replay serves one ugoira (tag
``うごイラ``: ``/v1/ugoira/metadata`` and its frames zip); Telegram and Discord are fakes
that check what they receive.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PIL import Image

from curaflow.sources.pixiv.replay.data import UGOIRA_DELAYS_MS, UGOIRA_ID, UGOIRA_TAG
from tests.conftest import StackFactory
from tests.fakes.discord import FakeDiscord
from tests.fakes.telegram import FakeTelegram
from tests.fakes.webhook import WebhookReceiver
from tests.jobs_support import discord_route, telegram_route, webhook_route
from tests.support import short_id

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def frame_delays(path: Path) -> list[int]:
    with Image.open(path) as image:
        assert image.format == "GIF" and image.is_animated
        delays = []
        for i in range(image.n_frames):
            image.seek(i)
            delays.append(int(image.info["duration"]))
        return delays


async def test_an_ugoira_is_delivered_as_an_animation_on_every_route(
    make_stack: StackFactory,
    tmp_path: Path,
    telegram: FakeTelegram,
    discord: FakeDiscord,
    webhook: WebhookReceiver,
) -> None:
    out, tg, dc, hook = f"out-{short_id()}", f"tg-{short_id()}", f"dc-{short_id()}", f"hook-{short_id()}"
    stack = make_stack(
        {
            "routes": {
                out: {"kind": "directory", "path": str(tmp_path / "delivered")},
                tg: telegram_route(telegram),
                dc: discord_route(discord),
                hook: webhook_route(webhook),
            },
            "targets": [{"id": "demo", "query": {"tags": [UGOIRA_TAG]}, "routes": [out, tg, dc, hook]}],
        }
    )
    await stack.start_worker()
    record = await stack.wait_terminal(await stack.admit(stack.task(query={"tags": [UGOIRA_TAG]})))
    assert record.business_status == "success", record
    assert record.cells[0].work is not None and record.cells[0].work.work_id == UGOIRA_ID

    # the directory route: one animated GIF with the frames' delays, and the delays in the manifest
    folder = tmp_path / "delivered" / UGOIRA_ID
    manifest = json.loads((folder / "manifest.json").read_text())
    [entry] = manifest["files"]
    assert (entry["name"], entry["mime"]) == (f"{UGOIRA_ID}_ugoira.gif", "image/gif")
    assert entry["frame_delays_ms"] == list(UGOIRA_DELAYS_MS)
    assert frame_delays(folder / entry["name"]) == list(UGOIRA_DELAYS_MS)
    assert not list(folder.glob("*.zip")) and not list(folder.glob("*.jpg"))  # not the zip, not the cover

    # Telegram: sendAnimation (plays in the chat), never sendPhoto of one frame
    assert [r.method for r in telegram.requests if r.posted] == ["sendAnimation"]
    assert telegram.violations == []
    [message] = telegram.messages
    assert message["animation"]["file_name"] == f"{UGOIRA_ID}_ugoira.gif"
    # Discord: the GIF as a file (Discord plays an attached GIF)
    assert discord.violations == []
    assert [a["filename"] for a in discord.messages[0]["attachments"]] == [f"{UGOIRA_ID}_ugoira.gif"]
    # a webhook receiver is told the delays with the file
    [body] = [r.json() for r in webhook.received]
    assert [(f["name"], f["frame_delays_ms"]) for f in body["files"]] == [
        (f"{UGOIRA_ID}_ugoira.gif", list(UGOIRA_DELAYS_MS))
    ]
