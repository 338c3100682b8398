"""How long a rate limit may hold a route or an account: the cap of what is written, and
of what is read.

* A route-wide rate limit (Discord's ``"global": true``, a proxy's 429 for the whole
  route) holds the route, and the send that met it, at most
  ``delivery.route_rate_limit_cap_ms`` — its own setting: the pause after a receiver's
  refusals (``delivery.route_pause_ms``) is another decision, and shortening or
  lengthening it changed how long a global ban held the route. The deliver activity runs
  here in the test process (``ActivityEnvironment``) with a worker's real dependencies,
  the fake Discord answering.
* A cooldown written before the caps existed (a row a week ahead: a proxy's
  ``Retry-After`` believed whole) holds no longer than the cap from when it is read, on a
  route (``claim_send``, the deliver step's claim) and on an account (``gates.reserve``,
  every source request's slot) — and the row is mended there, in the statement that reads
  it: a row read shorter but left a week ahead would hold another cap at each read, the
  whole week. A pause — a broken route's, a restricted account's — is not a rate limit's
  stated delay and keeps its time (``curaflow routes resume`` / ``accounts resume``).
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import asyncpg
import pytest
from temporalio.exceptions import ApplicationError

from activities.deliver import DeliverActivity
from activities.deps import ActivityDeps, close_deps, open_deps
from curaflow.domain.messages import DeliverInput
from curaflow.ledger import gates, route_gates
from curaflow.ledger.gates import LedgerGate
from curaflow.ledger.gauges import LedgerGauges, refresh
from curaflow.sources.errors import SourceError
from tests.conftest import StackFactory
from tests.deps_support import acquired
from tests.fakes.discord import DcReply, FakeDiscord
from tests.fakes.replay import ReplayServer
from tests.jobs_support import curaflow, discord_route
from tests.support import Stack, run_as_job, short_id

pytestmark = pytest.mark.integration

HOUR_MS = 3_600_000
WEEK_S = 7 * 24 * 3600
WEEK_MS = WEEK_S * 1000


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


async def deliver_failing(deps: ActivityDeps, inp: DeliverInput) -> ApplicationError:
    """Run the deliver step once; it must fail (a rate limit): its error."""
    with pytest.raises(ApplicationError) as raised:
        await run_as_job(DeliverActivity(deps).deliver, inp)
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
    inp = await acquired(stack, deps, "demo")
    discord.script = [DcReply("429_global_stated", retry_after=WEEK_S)]

    err = await deliver_failing(deps, inp)
    assert err.next_retry_delay == timedelta(milliseconds=held_ms)
    gate = await route_gates.read_gate(deps.pool, route)
    assert gate is not None and held_ms - 60_000 < gate.cooldown_ms <= held_ms


@pytest.mark.parametrize(
    ("delivery", "held_ms"),
    [({}, HOUR_MS), ({"route_rate_limit_cap_ms": 600_000}, 600_000)],
    ids=["default-cap", "own-cap"],
)
async def test_an_unavailable_receivers_stated_week_holds_the_send_at_most_the_routes_cap(
    stacks: Any, discord: FakeDiscord, delivery: dict[str, Any], held_ms: int
) -> None:
    # A 503 says the receiver is unavailable (RFC 9110 §15.6.4: overloaded, maintenance),
    # not one send: every send of the route meets it. Its Retry-After stating a week (a
    # proxy's, a misconfigured gateway's, a hostile one's) held each send the week — each
    # job of the route's targets to its deadline — where a route-wide 429 stating it
    # holds the route at most delivery.route_rate_limit_cap_ms; until 2026-12-07 only the
    # webhook route read a 5xx's Retry-After, since then every route did, uncapped.
    stack, deps, route = await stacks(delivery)
    inp = await acquired(stack, deps, "demo")
    discord.script = [DcReply("503_stated", retry_after=WEEK_S)]

    err = await deliver_failing(deps, inp)
    assert not err.non_retryable
    assert err.next_retry_delay == timedelta(milliseconds=held_ms)
    # The wait the job's report names, should it end in it (the intent's hold), is the one waited.
    row = await deps.pool.fetchrow(
        "SELECT held_until, held_kind FROM delivery_intents WHERE route = $1 AND job_id = $2", route, inp.job_id
    )
    assert row is not None and row["held_kind"] == "unavailable"
    assert held_ms - 60_000 < row["held_until"] - await db_now(deps.pool) <= held_ms


async def test_a_route_cooldown_written_a_week_ahead_holds_only_the_cap_from_when_it_is_read(
    stacks: Any, discord: FakeDiscord
) -> None:
    # A row written before the cap existed: the route cooling down for a week.
    stack, deps, route = await stacks({"route_rate_limit_cap_ms": 600_000})
    inp = await acquired(stack, deps, "demo")
    await deps.pool.execute(
        "INSERT INTO route_gates (route, cooldown_until) VALUES ($1, $2)", route, await db_now(deps.pool) + WEEK_MS
    )
    err = await deliver_failing(deps, inp)
    assert discord.requests == []  # nothing sent: the route cools down, but not for the week
    assert err.next_retry_delay is not None
    assert 590_000 < err.next_retry_delay / timedelta(milliseconds=1) <= 600_000
    # The row is mended, not only read shorter: a row left a week ahead would hold the
    # route another cap at each read, for the whole week.
    gate = await route_gates.read_gate(deps.pool, route)
    assert gate is not None and 590_000 < gate.cooldown_ms <= 600_000
    # A rate limit of one send meeting the mended row keeps it as it is.
    async with deps.pool.acquire() as conn:
        await route_gates.rate_limited(conn, route=route, stated_ms=1_000, route_wide=False, cap_ms=600_000)
    again = await route_gates.read_gate(deps.pool, route)
    assert again is not None and again.cooldown_until == gate.cooldown_until


async def test_a_route_limit_meeting_a_cooldown_a_week_ahead_keeps_only_the_cap(stacks: Any) -> None:
    # The other writer of the row: a rate limit counted while a week-long cooldown (written
    # before the cap) is still in the row kept the week, route-wide or not.
    _, deps, route = await stacks({})
    for wide in (False, True):
        await deps.pool.execute(
            """INSERT INTO route_gates (route, cooldown_until) VALUES ($1, $2)
               ON CONFLICT (route) DO UPDATE SET cooldown_until = EXCLUDED.cooldown_until""",
            route,
            await db_now(deps.pool) + WEEK_MS,
        )
        async with deps.pool.acquire() as conn:
            await route_gates.rate_limited(conn, route=route, stated_ms=5_000, route_wide=wide, cap_ms=600_000)
        gate = await route_gates.read_gate(deps.pool, route)
        assert gate is not None and 590_000 < gate.cooldown_ms <= 600_000, wide


async def test_a_route_pause_is_not_a_rate_limit_and_keeps_its_time(stacks: Any, discord: FakeDiscord) -> None:
    # A pause (a broken route: refusals in a row, for delivery.route_pause_ms, which may
    # be long on purpose) is no delay a third party stated: it holds until its end or
    # `curaflow routes resume`.
    stack, deps, route = await stacks({"route_rate_limit_cap_ms": 600_000})
    inp = await acquired(stack, deps, "demo")
    week_ahead = await db_now(deps.pool) + WEEK_MS
    await deps.pool.execute(
        "INSERT INTO route_gates (route, paused_until, pause_reason) VALUES ($1, $2, 'broken')", route, week_ahead
    )
    err = await deliver_failing(deps, inp)
    assert err.non_retryable and err.type == "route_paused" and discord.requests == []
    gate = await route_gates.read_gate(deps.pool, route)
    assert gate is not None and gate.paused_until == week_ahead


async def legacy_account(pool: asyncpg.Pool, **columns: int) -> str:
    """A ``source_gates`` row as written before the caps: ``columns`` a week ahead."""
    key = f"gate-{short_id()}"
    until = await db_now(pool) + WEEK_MS
    names = ", ".join(columns)
    values = ", ".join(f"${i + 2}" for i in range(len(columns)))
    await pool.execute(
        f"INSERT INTO source_gates (gate, {names}) VALUES ($1, {values})", key, *[until for _ in columns]
    )
    return key


async def test_an_account_cooldown_written_a_week_ahead_holds_only_the_cap_from_when_it_is_read(
    ledger_pool: asyncpg.Pool,
) -> None:
    # Penalize wrote the stated week into both the cooldown and the next slot.
    key = await legacy_account(ledger_pool, cooldown_until=1, next_at=1)
    gate = LedgerGate(ledger_pool, key, min_interval_ms=1_000, cap_ms=900_000)
    with pytest.raises(SourceError) as raised:
        await gate.acquire()
    assert raised.value.reason == "rate_limited"
    assert raised.value.cooldown_s is not None and 890 < raised.value.cooldown_s <= 900
    # mended in the slot's statement: the cooldown and the next slot at most the cap ahead
    state = await gates.read_gate(ledger_pool, key)
    assert state is not None and state.requests == 0
    assert 890_000 < state.cooldown_until - state.now <= 900_000
    assert state.next_at <= state.cooldown_until


async def test_an_account_limit_meeting_a_cooldown_a_week_ahead_keeps_only_the_cap(ledger_pool: asyncpg.Pool) -> None:
    key = await legacy_account(ledger_pool, cooldown_until=1, next_at=1)
    cooldown = await gates.penalize(ledger_pool, key, base_ms=60_000, cap_ms=900_000)
    assert 890_000 < cooldown <= 900_000
    state = await gates.read_gate(ledger_pool, key)
    assert state is not None and state.next_at == state.cooldown_until  # the next slot with it


async def test_an_account_pause_is_not_a_rate_limit_and_keeps_its_time(ledger_pool: asyncpg.Pool) -> None:
    # Paused: the source restricted the account (pixiv.restriction_pause_ms) — until its
    # end or `curaflow accounts resume`, whatever the rate-limit cap.
    key = await legacy_account(ledger_pool, paused_until=1)
    before = await gates.read_gate(ledger_pool, key)
    gate = LedgerGate(ledger_pool, key, min_interval_ms=0, cap_ms=900_000)
    with pytest.raises(SourceError) as raised:
        await gate.acquire()
    assert raised.value.reason == "account_restricted"
    after = await gates.read_gate(ledger_pool, key)
    assert before is not None and after is not None and after.paused_until == before.paused_until


async def db_now(pool: asyncpg.Pool) -> int:
    """The database's clock, epoch ms (the gates' clock)."""
    return int(await pool.fetchval("SELECT (extract(epoch from clock_timestamp()) * 1000)::bigint"))


async def test_a_route_paused_and_cooling_down_a_week_ahead_keeps_its_pause_and_only_the_caps_cooldown(
    stacks: Any, discord: FakeDiscord
) -> None:
    # Both columns a week ahead: the claim answers the pause (its time kept) and mends the
    # cooldown to the cap in the same statement.
    stack, deps, route = await stacks({"route_rate_limit_cap_ms": 600_000})
    inp = await acquired(stack, deps, "demo")
    week_ahead = await db_now(deps.pool) + WEEK_MS
    await deps.pool.execute(
        """INSERT INTO route_gates (route, paused_until, pause_reason, cooldown_until, rate_limits)
           VALUES ($1, $2, 'broken', $2, 3)""",
        route,
        week_ahead,
    )
    err = await deliver_failing(deps, inp)
    assert err.non_retryable and err.type == "route_paused" and discord.requests == []
    gate = await route_gates.read_gate(deps.pool, route)
    assert gate is not None and gate.paused_until == week_ahead
    assert 590_000 < gate.cooldown_ms <= 600_000 and gate.rate_limits == 3


async def test_workers_with_different_caps_mend_an_account_row_once_and_never_lengthen_it(
    ledger_pool: asyncpg.Pool,
) -> None:
    # Paused and cooling down a week ahead (a restricted account whose last answer stated
    # a week), two workers' slots at once, one with a cap of 1 h and one of 24 h: the pause
    # keeps its time, the cooldown and the next slot end at most an hour ahead whichever
    # ran first — the 24 h worker never writes them back further — and no slot is counted.
    key = await legacy_account(ledger_pool, paused_until=1, cooldown_until=1, next_at=1)
    await ledger_pool.execute("UPDATE source_gates SET penalty = 4, rate_limits = 9 WHERE gate = $1", key)
    before = await gates.read_gate(ledger_pool, key)
    slots = await asyncio.gather(
        *(gates.reserve(ledger_pool, key, 1_000, cap_ms=cap) for cap in (HOUR_MS, 24 * HOUR_MS) * 4)
    )
    assert all(s.paused_ms > 0 and s.wait_ms == 0 for s in slots)
    after = await gates.read_gate(ledger_pool, key)
    assert before is not None and after is not None
    assert after.paused_until == before.paused_until
    assert after.cooldown_until - after.now <= HOUR_MS and after.next_at <= after.cooldown_until
    assert (after.requests, after.penalty, after.rate_limits) == (0, 4, 9)
    # Lifted by an operator, the cooldown (mended) still holds the next slot, at most the cap.
    assert await gates.resume(ledger_pool, key)
    with pytest.raises(SourceError) as raised:
        await LedgerGate(ledger_pool, key, min_interval_ms=1_000, cap_ms=24 * HOUR_MS).acquire()
    assert raised.value.reason == "rate_limited"
    assert raised.value.cooldown_s is not None and raised.value.cooldown_s <= HOUR_MS / 1000


async def test_the_reports_show_a_cooldown_written_a_week_ahead_as_what_is_held(stacks: Any) -> None:
    # `curaflow routes list` / `accounts list` and the account's cooldown gauge read the
    # row: a week written before the caps showed a week while the claim and the slot hold
    # at most the cap — a report saying more than what happens. Each applies the same rule
    # (cooldown_left_ms).
    stack, deps, route = await stacks({"route_rate_limit_cap_ms": 600_000})
    account_cap_ms = stack.settings.pixiv.rate_limit_cap_ms  # the ladder's cap: 15 min by default
    now = await db_now(deps.pool)
    await deps.pool.execute("INSERT INTO route_gates (route, cooldown_until) VALUES ($1, $2)", route, now + WEEK_MS)
    gate = stack.settings.source_task_queue("default")
    await deps.pool.execute(
        """INSERT INTO source_gates (gate, cooldown_until, next_at) VALUES ($1, $2, $2)
           ON CONFLICT (gate) DO UPDATE SET cooldown_until = $2, next_at = $2""",
        gate,
        now + WEEK_MS,
    )

    listed = await curaflow("routes", "list", "--json", stack=stack)
    assert listed.returncode == 0, listed.stderr
    [row] = [r for r in json.loads(listed.stdout) if r["route"] == route]
    assert now < row["cooldown_until"] <= await db_now(deps.pool) + 600_000

    accounts = await curaflow("accounts", "list", "--json", stack=stack)
    assert accounts.returncode == 0, accounts.stderr
    [acc] = [r for r in json.loads(accounts.stdout) if r["account"] == "default"]
    assert now < acc["cooldown_until"] <= await db_now(deps.pool) + account_cap_ms

    snap = await refresh(LedgerGauges(), deps.pool, stack.settings)
    assert 0 < snap.cooldown_s["default"] <= account_cap_ms / 1000


# ---- the next slot read from the ledger, no cooldown running --------------------------------
#
# A slot is the row's ``next_at``; the spacing alone never puts it further ahead than the
# queue the account's requests can form (each request waiting holds one interval of it:
# its concurrency × the interval), and a rate limit's at most the cap. One further ahead
# with no cooldown — the database clock stepped back (a restored database, an NTP
# correction), a hand edit — was waited whole by the request that met it, asleep in its
# activity until the job's deadline, every other job of the account queued behind it;
# and each later slot went an interval further. ``gates.reserve`` mends it in its one
# statement: the slot is handed out behind the longest queue that can still be waiting.


async def test_an_account_slot_a_week_ahead_without_a_cooldown_waits_one_queue_not_the_week(
    ledger_pool: asyncpg.Pool,
) -> None:
    key = await legacy_account(ledger_pool, next_at=1)  # no cooldown, no pause
    first = await gates.reserve(ledger_pool, key, 10_000, cap_ms=900_000)
    assert (first.cooldown_ms, first.paused_ms) == (0, 0)
    assert first.wait_ms <= 10_000  # behind the queue one request can form, not a week
    state = await gates.read_gate(ledger_pool, key)
    assert state is not None and state.next_at - state.now <= 20_000  # mended in the slot's statement
    # The next request is spaced behind it, an interval later, not a week and an interval.
    second = await gates.reserve(ledger_pool, key, 10_000, cap_ms=900_000)
    assert 9_000 <= second.wait_ms - first.wait_ms <= 10_050, (first, second)
    after = await gates.read_gate(ledger_pool, key)
    assert after is not None and after.requests == 2


async def test_a_mended_account_slot_keeps_the_spacing_of_requests_waiting_at_once(ledger_pool: asyncpg.Pool) -> None:
    # Four requests of an account of concurrency 4 meet the week at once: the first is
    # handed the slot behind the longest queue (4 × 10 s), the other three queue behind it,
    # one interval apart — the mend never hands two of them the same slot.
    key = await legacy_account(ledger_pool, next_at=1)
    slots = await asyncio.gather(*(gates.reserve(ledger_pool, key, 10_000, cap_ms=60_000, waiters=4) for _ in range(4)))
    waits = sorted(s.wait_ms for s in slots)
    assert 39_000 <= waits[0] <= 40_000, waits
    assert all(9_000 <= b - a <= 10_050 for a, b in itertools.pairwise(waits)), waits
    state = await gates.read_gate(ledger_pool, key)
    assert state is not None and state.requests == 4 and state.next_at - state.now <= 80_000


async def test_a_queue_longer_than_the_cap_is_spacing_and_is_kept(ledger_pool: asyncpg.Pool) -> None:
    # Real load is never mended: 20 requests waiting at once, 10 s apart, make a queue of
    # 200 s, far beyond a cap of 1 s — every slot stays an interval after the one before.
    key = f"gate-{short_id()}"
    await gates.reserve(ledger_pool, key, 10_000, cap_ms=1_000, waiters=20)
    opened = await gates.read_gate(ledger_pool, key)
    assert opened is not None
    slots = await asyncio.gather(
        *(gates.reserve(ledger_pool, key, 10_000, cap_ms=1_000, waiters=20) for _ in range(20))
    )
    waits = sorted(s.wait_ms for s in slots)
    assert all(9_000 <= b - a <= 10_050 for a, b in itertools.pairwise(waits)), waits
    state = await gates.read_gate(ledger_pool, key)
    assert state is not None and state.next_at == opened.next_at + 20 * 10_000


async def test_a_slot_a_week_ahead_waits_out_a_cooldown_and_a_pause_then_is_mended(ledger_pool: asyncpg.Pool) -> None:
    # While a cooldown or a pause holds the account no slot is handed out and the row's
    # next slot is left as it is; the first slot after them is mended as any other.
    key = await legacy_account(ledger_pool, next_at=1)
    now = await db_now(ledger_pool)
    await ledger_pool.execute(
        "UPDATE source_gates SET cooldown_until = $2, paused_until = $2 WHERE gate = $1", key, now + 60_000
    )
    held = await gates.reserve(ledger_pool, key, 1_000, cap_ms=900_000)
    assert held.paused_ms > 0 and held.wait_ms == 0
    await ledger_pool.execute("UPDATE source_gates SET paused_until = 0 WHERE gate = $1", key)
    cooling = await gates.reserve(ledger_pool, key, 1_000, cap_ms=900_000)
    assert 0 < cooling.cooldown_ms <= 60_000 and cooling.wait_ms == 0
    await ledger_pool.execute("UPDATE source_gates SET cooldown_until = 0 WHERE gate = $1", key)
    slot = await gates.reserve(ledger_pool, key, 1_000, cap_ms=900_000)
    assert (slot.cooldown_ms, slot.paused_ms) == (0, 0) and slot.wait_ms <= 1_000
    state = await gates.read_gate(ledger_pool, key)
    assert state is not None and state.requests == 1


async def test_the_reports_show_an_account_held_only_by_its_next_slot_as_free(stacks: Any) -> None:
    # `curaflow accounts list` and the cooldown gauge read the pause and the cooldown: with
    # the slot a week ahead and neither, they say the account is not cooling down — true
    # now that the slot holds a request at most one queue (here, at an interval of 0 in
    # replay mode, none: no next slot is shown either).
    stack, deps, _ = await stacks({})
    gate = stack.settings.source_task_queue("default")
    now = await db_now(deps.pool)
    await deps.pool.execute(
        """INSERT INTO source_gates (gate, next_at) VALUES ($1, $2)
           ON CONFLICT (gate) DO UPDATE SET next_at = $2, cooldown_until = 0, paused_until = 0""",
        gate,
        now + WEEK_MS,
    )
    accounts = await curaflow("accounts", "list", "--json", stack=stack)
    assert accounts.returncode == 0, accounts.stderr
    [acc] = [r for r in json.loads(accounts.stdout) if r["account"] == "default"]
    assert acc["cooldown_until"] is None and acc["paused_until"] is None and acc["next_at"] is None
    snap = await refresh(LedgerGauges(), deps.pool, stack.settings)
    assert snap.cooldown_s["default"] == 0
    slot = await gates.reserve(deps.pool, gate, 1_000, cap_ms=stack.settings.pixiv.rate_limit_cap_ms)
    assert slot.wait_ms <= 1_000


@pytest.mark.parametrize(("ahead_ms", "shown"), [(300_000, "stored"), (WEEK_MS, "one queue")])
async def test_accounts_list_shows_the_next_slot_a_request_would_wait_for(
    make_stack: StackFactory, replay: ReplayServer, ahead_ms: int, shown: str
) -> None:
    # The account's next slot 5 min ahead (a queue of requests, a rate limit's slot past
    # its cooldown) holds the next request that long, while `accounts list` said nothing —
    # the account looked free. It shows the slot the gate would hand out now: as stored
    # within the cap and two queues, else one queue from now (gates._RESERVE mends it).
    stack = make_stack(
        {
            "pixiv": {**replay.config(), "replay_min_interval_ms": 2_000, "replay_max_concurrency": 2},
        }
    )
    pool = await stack.ledger()
    gate = stack.settings.source_task_queue("default")
    now = await db_now(pool)
    await pool.execute(
        """INSERT INTO source_gates (gate, next_at) VALUES ($1, $2)
           ON CONFLICT (gate) DO UPDATE SET next_at = $2, cooldown_until = 0, paused_until = 0""",
        gate,
        now + ahead_ms,
    )
    accounts = await curaflow("accounts", "list", "--json", stack=stack)
    assert accounts.returncode == 0, accounts.stderr
    [acc] = [r for r in json.loads(accounts.stdout) if r["account"] == "default"]
    assert acc["cooldown_until"] is None and acc["paused_until"] is None
    if shown == "stored":
        assert acc["next_at"] == now + ahead_ms
    else:  # one queue: 2 requests × 2 s
        assert now < acc["next_at"] <= await db_now(pool) + 4_000
    # What the gate then hands out: that slot — for "one queue", one queue from when the
    # gate reads, which is later than the listing's read by at most the time since `now`
    # (a command's start and exit: seconds on a busy machine).
    slot = await gates.reserve(pool, gate, 2_000, cap_ms=stack.settings.pixiv.rate_limit_cap_ms, waiters=2)
    after = await db_now(pool)
    assert -2_000 < after + slot.wait_ms - acc["next_at"] < 2_000 + (after - now)
    table = await curaflow("accounts", "list", stack=stack)
    assert "next slot" in table.stdout, table.stdout
