"""A destination that holds its connections never starves the source or another route.

Each route (and the callback pushes) has an HTTP client, and so a connection pool, of
its own, apart from the source's. Found by the benchmark: with one shared pool, 100
deliveries held by a slow receiver left no connection for image downloads, and every
other job's ``fetch`` failed with a pool timeout.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from activities.deps import close_deps, open_deps
from curaflow.sources.pixiv.source import api_outbound, endpoints
from tests.conftest import StackFactory
from tests.fakes.webhook import Reply, WebhookReceiver
from tests.support import short_id, whsec

pytestmark = pytest.mark.integration


def config(webhook: WebhookReceiver, tmp_path: Path) -> tuple[dict[str, object], str, str]:
    held, other = f"held-{short_id()}", f"other-{short_id()}"
    return (
        {
            "delivery": {"max_connections": 1},
            "routes": {
                held: {"kind": "webhook", "url": webhook.url + "/hold", "secret": whsec(), "timeout_ms": 60_000},
                other: {"kind": "webhook", "url": webhook.url + "/ok", "secret": whsec()},
            },
            "targets": [
                {"id": "slow", "query": {"tags": ["オリジナル"]}, "routes": [held]},
                {"id": "fast", "query": {"tags": ["風景"]}, "routes": [other]},
            ],
        },
        held,
        other,
    )


async def test_each_route_has_a_pool_of_its_own(
    make_stack: StackFactory, tmp_path: Path, webhook: WebhookReceiver
) -> None:
    conf, held, other = config(webhook, tmp_path)
    stack = make_stack(conf)
    deps = await open_deps(stack.settings, None, replay_url="http://127.0.0.1:9")
    try:
        account = stack.settings.pixiv.sources()["default"]
        clients = {id(api_outbound(deps.sources, endpoints(account, deps.sources.replay_url)).http)}
        for name in (held, other):
            clients.add(id(deps.route(name)._out.http))  # type: ignore[attr-defined]
        assert len(clients) == 3
    finally:
        await close_deps(deps)


@pytest.mark.slow  # whole jobs in a worker process: the full suite only
async def test_a_held_delivery_does_not_block_other_jobs(
    make_stack: StackFactory, tmp_path: Path, webhook: WebhookReceiver
) -> None:
    webhook.script["/hold"] = [Reply(200, {"status": "accepted"}, delay_s=30)]
    conf, _, _ = config(webhook, tmp_path)
    stack = make_stack(conf)
    await stack.start_worker()
    slow = await stack.admit(stack.task(target_id="slow"))
    await webhook.arrived.wait()

    fast = await stack.wait_terminal(await stack.admit(stack.task(target_id="fast")), 30)

    assert fast.cells[0].state == "submitted"
    assert (await stack.job(slow)).cells[0].state == "delivery_pending"
