"""How long a rate limit may hold a route.

* A route-wide rate limit (Discord's ``"global": true``, a proxy's 429 for the whole
  route) holds the route, and the send that met it, at most
  ``delivery.route_rate_limit_cap_ms`` — its own setting: the pause after a receiver's
  refusals (``delivery.route_pause_ms``) is another decision, and shortening or
  lengthening it changed how long a global ban held the route. The deliver activity runs
  here in the test process (``ActivityEnvironment``) with a worker's real dependencies,
  the fake Discord answering.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.acquire import AcquireActivity
from activities.deliver import DeliverActivity
from activities.deps import ActivityDeps, close_deps, open_deps
from curaflow.domain.cells import CellState
from curaflow.domain.messages import AcquireInput, DeliverInput
from curaflow.jobs.admission import Admitter
from curaflow.ledger import route_gates
from tests.conftest import StackFactory
from tests.fakes.discord import DcReply, FakeDiscord
from tests.fakes.replay import ReplayServer
from tests.jobs_support import discord_route
from tests.support import Stack, short_id

pytestmark = pytest.mark.integration

HOUR_MS = 3_600_000
WEEK_S = 7 * 24 * 3600


@pytest.fixture
async def stacks(make_stack: StackFactory, replay: ReplayServer, discord: FakeDiscord) -> AsyncIterator[Any]:
    """A factory of ``(stack, deps, route)`` over ``[delivery]`` settings: target ``demo``
    (the replay's ranking) delivering to one route on the fake Discord; a worker's
    dependencies opened on it (closed at the end)."""
    opened: list[ActivityDeps] = []

    async def factory(delivery: dict[str, Any]) -> tuple[Stack, ActivityDeps, str]:
        route = f"dc-{short_id()}"
        stack = make_stack(
            {
                "pixiv": replay.config(),
                "delivery": delivery,
                "routes": {route: discord_route(discord)},
                "targets": [{"id": "demo", "query": {"mode": "ranking"}, "routes": [route], "scan_limit": 30}],
            }
        )
        deps = await open_deps(stack.settings, None, replay_url=replay.url)
        opened.append(deps)
        return stack, deps, route

    try:
        yield factory
    finally:
        for deps in opened:
            await close_deps(deps)


async def deliver_input(stack: Stack, deps: ActivityDeps) -> DeliverInput:
    """Admit a one-cell job and acquire its work (the replay): the input of its deliver step."""
    task = {
        "protocol_version": "1",
        "job_type": "candidate_search",
        "idempotency_key": f"caps-{short_id()}",
        "params": {"target_id": "demo"},
    }
    admitted = await Admitter(stack.settings, deps.pool, None).admit(task, start=False)
    assert admitted.job_input is not None
    job_id, target = admitted.job_id, admitted.job_input.targets[0]
    acquired = await ActivityEnvironment().run(
        AcquireActivity(deps).acquire, AcquireInput(job_id=job_id, target=target, heartbeat_interval_ms=30_000)
    )
    assert acquired.cell.state == CellState.ARTIFACT_READY
    return DeliverInput(job_id=job_id, target=target, route=target.routes[0], heartbeat_interval_ms=30_000)


async def deliver_failing(deps: ActivityDeps, inp: DeliverInput) -> ApplicationError:
    """Run the deliver step once; it must fail (a rate limit): its error."""
    with pytest.raises(ApplicationError) as raised:
        await ActivityEnvironment().run(DeliverActivity(deps).deliver, inp)
    return raised.value


@pytest.mark.parametrize(
    ("delivery", "held_ms"),
    [
        ({"route_pause_ms": 60_000}, HOUR_MS),  # a shorter refusal pause: the ban still holds 1 h
        ({"route_pause_ms": 6 * HOUR_MS}, HOUR_MS),  # a longer one: still 1 h
        ({"route_pause_ms": 60_000, "route_rate_limit_cap_ms": 600_000}, 600_000),  # its own setting decides
    ],
)
async def test_a_global_rate_limit_holds_the_route_its_own_cap_whatever_the_refusal_pause(
    stacks: Any, discord: FakeDiscord, delivery: dict[str, Any], held_ms: int
) -> None:
    # Discord's global limit stating a week: the route, and the send that met it, wait the
    # route-wide cap — before, delivery.route_pause_ms (the pause after refusals) decided it.
    stack, deps, route = await stacks(delivery)
    inp = await deliver_input(stack, deps)
    discord.script = [DcReply("429_global_stated", retry_after=WEEK_S)]

    err = await deliver_failing(deps, inp)
    assert err.next_retry_delay == timedelta(milliseconds=held_ms)
    gate = await route_gates.read_gate(deps.pool, route)
    assert gate is not None and held_ms - 60_000 < gate.cooldown_ms <= held_ms
