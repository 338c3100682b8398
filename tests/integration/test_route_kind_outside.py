"""A route kind registered from outside curaflow delivers end to end (the route seam).

The ``chat`` kind (``tests/fakes/chat_route.py``: its config model declaring its one
destination, the route and its registration, in one module) posts to the fake chat
service's own API (``tests/fakes/chat.py``). The stack names the module in
``route_modules`` and configures one route as ``[routes.<name>] kind = "chat"``. Real
Temporal dev server, real PostgreSQL, real worker processes: the worker process
registers the kind when it loads the settings, builds the route's outbound client from
what the config model declares and delivers through the
:class:`~curaflow.routes.base.Route` protocol alone.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import StackFactory
from tests.fakes.chat import TOKEN, ChatServer
from tests.jobs_support import intents
from tests.support import Stack, short_id

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture
async def chat() -> AsyncIterator[ChatServer]:
    async with ChatServer() as server:
        yield server


def chat_stack(make_stack: StackFactory, chat: ChatServer) -> tuple[Stack, str]:
    name = f"room-{short_id()}"
    config: dict[str, Any] = {
        "route_modules": ["tests.fakes.chat_route"],
        "routes": {name: {"kind": "chat", "url": chat.url, "room": "pictures", "token": TOKEN}},
        "targets": [{"id": "demo", "query": {"tags": ["オリジナル"]}, "routes": [name]}],
    }
    return make_stack(config), name


async def test_a_route_kind_registered_from_outside_delivers(make_stack: StackFactory, chat: ChatServer) -> None:
    stack, room = chat_stack(make_stack, chat)
    assert type(stack.settings.routes[room]).__name__ == "ChatRouteConfig"
    await stack.start_worker()
    # The service fails the first request (the route retries with the same key), then posts.
    chat.service.fail_next.append((503, {"problem": "busy"}))

    first = await stack.wait_terminal(await stack.admit(stack.task(query={"tags": ["オリジナル"]})))

    cell = first.cells[0]
    assert (cell.state, first.business_status) == ("submitted", "success"), first
    [post] = chat.service.posts
    assert post.room == "pictures"
    assert f"/artworks/{cell.work_id}" in post.text  # the work's caption
    assert cell.artifact is not None
    sent = [(name, hashlib.sha256(data).hexdigest()) for name, _, data in post.images]
    assert sent == [(Path(f.path).name, f.sha256) for f in cell.artifact.files]
    intent = (await intents(await stack.ledger(), first.job_id))[room]
    assert (intent["status"], intent["remote_id"], intent["attempts"]) == ("delivered", post.id, 2)
    assert post.key == intent["idempotency_key"]
    assert [key for _, key, _ in chat.service.requests] == [post.key, post.key]  # one key across attempts

    # A later job never delivers that work to the route again.
    second = await stack.wait_terminal(await stack.admit(stack.task(query={"tags": ["オリジナル"]})))
    assert second.cells[0].state == "submitted", second
    assert second.cells[0].work_id != cell.work_id
    assert [p.id for p in chat.service.posts] == ["p1", "p2"]
