"""Answers nobody named, on the delivery side: each costs one attempt, never a work.

Probes of the defaults the route tables leave (DESIGN.md "Safe defaults at the edges: the
delivery side"): an OS error of curaflow's own disk before anything left, a 2xx of the Bot
API's envelope of an unknown shape. The routes run against ``httpx.MockTransport``
speaking the platforms' wire formats (:mod:`tests.unit.test_route_answers`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from activities.deliver.sending import _guarded
from curaflow.domain.reasons import TerminalReason
from curaflow.domain.verdicts import delivery_verdict
from curaflow.routes.base import RouteError
from tests.unit.test_route_answers import discord, request_of, telegram, webhook


def verdict_of(err: RouteError, *, resend_safe: bool = False) -> Any:
    return delivery_verdict(
        reason=err.reason,
        permanent=err.permanent,
        ambiguous=err.ambiguous,
        resend_safe=resend_safe,
        attempt=1,
        max_attempts=5,
    )


# ---- curaflow's own files, read before anything leaves ------------------------------------------


@pytest.mark.parametrize("route_of", [telegram, discord, webhook], ids=["telegram", "discord", "webhook"])
async def test_an_artifact_page_unreadable_before_the_send_is_not_sent_and_retried(
    tmp_path: Path, route_of: Callable[[httpx.AsyncClient], Any]
) -> None:
    # A page of the artifact vanished (retention, a cleanup race) or cannot be opened
    # (EMFILE under load) between the claim and the send: nothing left, so the send is
    # neither ambiguous (on an at-most-once route that blocked the work there for good,
    # delivery_unknown) nor the work's; the next attempt restores the artifact.
    asked: list[httpx.Request] = []

    def answer(req: httpx.Request) -> httpx.Response:
        asked.append(req)
        return httpx.Response(500)

    request = request_of(tmp_path, pages=2)
    Path(request.artifact.files[1].path).unlink()
    async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as http:
        with pytest.raises(RouteError) as caught:
            await _guarded(route_of(http), request)  # as the deliver activity runs a route
    err = caught.value
    assert not asked, "nothing is sent"
    assert not err.ambiguous and not err.permanent and err.answer is None, str(err)
    assert err.reason == TerminalReason.DELIVERY_FAILED
    verdict = verdict_of(err)
    assert not verdict.final and not verdict.unknown and not verdict.remember_refusal
    assert "page 1" in str(err) and "nothing was sent" in str(err)
