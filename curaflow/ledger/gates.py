"""Source rate gates in the ledger: one row per Pixiv account (table ``source_gates``).

Every source request of an account first takes a *slot* here: the row's ``next_at`` is
moved forward by the account's minimum interval under a row lock, so requests from any
number of worker processes leave at least that interval apart; a ``next_at`` further
ahead than any queue of the account's requests (its database clock stepped back, a hand
edit) is mended by the slot that reads it (:data:`_RESERVE`). A rate limit climbs the
cooldown ladder (``penalty``) once — its answers to the requests out with it keep the step
(:func:`penalize`) — and sets ``cooldown_until``; while it lies in the future no slot is
handed out, and a request that waited for its slot does not leave into it
(:meth:`LedgerGate.acquire`). A restricted account ("Your access is currently restricted.") is
*paused* (``paused_until``): no slot at all until then, and callers fail at once instead
of waiting. All of it lives in PostgreSQL, so a restarted or replacement worker keeps
the spacing, the cooldown and the pause (reference ``pixiv-and-delivery-apis.md`` §2.5).

Times come from the database clock (:data:`DB_NOW_MS`) so that workers on hosts with
skewed clocks agree. Each function runs its own short transaction on the pool.
:class:`LedgerGate` is the gate a source's client uses (:class:`curaflow.sources.gate.Gate`)
over these rows; the worker builds one per source instance.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass

import asyncpg

from curaflow.domain.ratelimit import LADDER_BASE_MS, LADDER_CAP_MS, cooldown_left_ms, cooldown_ms
from curaflow.domain.text import clipped_within
from curaflow.ledger.db import DB_NOW_MS, LEDGER_ERRORS, REASON_CHARS
from curaflow.sources.gate import DECAY_AFTER, LATE_S, PAUSE_MS, GateUnavailable, cooling_down, paused


@dataclass
class Slot:
    """What :func:`reserve` handed out.

    Attributes:
        wait_ms: how long to wait before sending (0 = now); meaningful when
            ``cooldown_ms`` is 0.
        cooldown_ms: > 0 when the account is cooling down after a rate limit: no slot
            was taken, come back after this many milliseconds.
        penalty: the account's current step on the cooldown ladder.
        paused_ms: > 0 when the account is paused (restricted by Pixiv): no slot was
            taken and none will be for this many milliseconds.
    """

    wait_ms: int
    cooldown_ms: int = 0
    penalty: int = 0
    paused_ms: int = 0


@dataclass
class GateState:
    """A ``source_gates`` row as read by :func:`read_gate` (times in epoch ms, DB clock)."""

    gate: str
    next_at: int
    cooldown_until: int
    penalty: int
    successes: int
    requests: int
    rate_limits: int
    now: int
    paused_until: int = 0
    pause_reason: str | None = None


async def _locked_row(conn: asyncpg.Connection, gate: str) -> asyncpg.Record:
    await conn.execute(
        f"INSERT INTO source_gates (gate, updated_at) VALUES ($1, {DB_NOW_MS}) ON CONFLICT (gate) DO NOTHING",
        gate,
    )
    row = await conn.fetchrow(
        f"""SELECT next_at, cooldown_until, penalty, successes, paused_until, {DB_NOW_MS} AS now
            FROM source_gates WHERE gate = $1 FOR UPDATE""",
        gate,
    )
    assert row is not None
    return row


#: :func:`reserve` as one statement (one round trip, no explicit transaction): the upsert
#: takes the row lock, so concurrent reservations of a gate still serialise on its row. A
#: slot is taken (``next_at`` moved, ``requests`` counted) only while the gate is neither
#: paused nor cooling down; ``now`` is read once from the database clock.
#:
#: Its commit is asynchronous (``synchronous_commit`` off for this statement's own
#: transaction, ``set_config(..., true)``): a slot is pacing, not a fact anyone is told
#: of, so it does not wait for a WAL flush — the flush was most of what a source request
#: cost PostgreSQL (docs/performance.md). PostgreSQL's "Asynchronous Commit": a crash of
#: the database may lose the last few hundred milliseconds of slots (the next request
#: then leaves at most that much early), never corrupt the row. A rate limit
#: (:func:`penalize`) and a pause (:func:`pause`) stay synchronous: they protect the account.
#: The ``WITH`` query calls a volatile function, so PostgreSQL evaluates it (all of it) once
#: rather than folding it into the insert ("WITH Queries", PostgreSQL 12 and later).
#:
#: The cooldown holds at most the ladder's cap (``$3``) from now: a row further ahead
#: (written before ``cooldown_ms`` capped a stated ``Retry-After``, or under a larger
#: cap) is mended here — its cooldown, and the next slot :func:`penalize` pushed past it,
#: brought back to the cap — rather than only read shorter (left a week ahead, it would
#: hold another cap at each request, the whole week). The pause (``paused_until``: the
#: source restricted the account) is not a rate limit and is never shortened.
#:
#: The next slot, no cooldown or pause running, is handed out at most ``$3 + 2 × $4``
#: ahead (the cap, and twice ``$4``: the *queue*, the account's concurrency × the interval
#: — each request waiting for its slot holds one interval of it). Spacing alone never
#: puts ``next_at`` further than one queue ahead (a rate limit's at most the cap, mended
#: above); one beyond the cap and two queues — the database clock stepped back (a
#: restored database, an NTP correction), a hand edit — was waited whole by the request
#: that met it (asleep in its activity, heartbeating, until the job's deadline, every
#: other request of the account queued behind it), and each later slot went an interval
#: further. It is mended here: the slot is handed out one queue from now — behind every request that can still
#: be waiting, so none of them is passed — and the requests after it queue behind it as
#: always (their slots stay within the cap and two queues: none is mended again, no two
#: share a slot). The cap is the margin for requests beyond the concurrency (a
#: replaced worker's, still asleep). ``EXCLUDED.updated_at`` is ``clock.now``; every
#: ``SET`` expression reads the row as it was.
_RESERVE = f"""
WITH clock AS (SELECT {DB_NOW_MS} AS now, set_config('synchronous_commit', 'off', true) AS commit_mode)
INSERT INTO source_gates AS g (gate, next_at, requests, updated_at)
SELECT $1, clock.now + $2, 1, clock.now FROM clock
ON CONFLICT (gate) DO UPDATE SET
    cooldown_until = least(g.cooldown_until, EXCLUDED.updated_at + $3),
    next_at = CASE WHEN g.cooldown_until > EXCLUDED.updated_at + $3 THEN least(g.next_at, EXCLUDED.updated_at + $3)
                   WHEN g.paused_until > EXCLUDED.updated_at OR g.cooldown_until > EXCLUDED.updated_at
                   THEN g.next_at
                   WHEN g.next_at > EXCLUDED.updated_at + $3 + 2 * $4::bigint THEN EXCLUDED.updated_at + $4::bigint + $2
                   ELSE greatest(EXCLUDED.updated_at, g.next_at) + $2 END,
    requests = g.requests + CASE WHEN g.paused_until > EXCLUDED.updated_at
                                   OR g.cooldown_until > EXCLUDED.updated_at THEN 0 ELSE 1 END,
    updated_at = EXCLUDED.updated_at
RETURNING g.next_at, g.cooldown_until, g.penalty, g.paused_until, g.updated_at AS now"""


def next_slot_at(state: GateState, *, interval_ms: int, cap_ms: int, waiters: int = 1) -> int | None:
    """The slot :func:`reserve` would hand a request of the gate now, when it is ahead of
    now and no pause or cooldown runs (they refuse every request and are reported as
    themselves), else None. Epoch ms, the database's clock (``state.now``).

    The reports' copy of :data:`_RESERVE`'s rule for a next slot, no cooldown or pause
    running (so ``curaflow accounts list`` shows what holds a request): the stored
    ``next_at``, unless it lies beyond ``cap_ms`` and two queues (``waiters`` ×
    ``interval_ms``) from now — no state the gate writes — where the slot is handed out
    one queue from now.

    Args:
        state: the gate's row (:func:`read_gate`).
        interval_ms / cap_ms / waiters: as :func:`reserve` takes them for the account.
    """
    now = state.now
    if state.paused_until > now or state.cooldown_until > now:
        return None
    interval = max(0, interval_ms)
    queue = max(1, waiters) * interval
    slot = now + queue if state.next_at > now + max(1, cap_ms) + 2 * queue else max(now, state.next_at)
    return slot if slot > now else None


async def reserve(
    pool: asyncpg.Pool, gate: str, interval_ms: int, *, cap_ms: int = LADDER_CAP_MS, waiters: int = 1
) -> Slot:
    """Take the next request slot of ``gate``, ``interval_ms`` after the previous one.

    One statement (:data:`_RESERVE`): every source request of every worker passes here,
    so it costs a single round trip to the ledger, and no WAL flush (asynchronous commit).

    Args:
        gate: the gate's key (the account's source task queue name).
        interval_ms: minimum spacing between two requests of this gate.
        cap_ms: the cooldown ladder's cap (the account's ``rate_limit_cap_ms``): a
            cooldown in the row further ahead than that from now is brought back to it
            (:data:`_RESERVE`).
        waiters: how many requests of the gate may wait for their slots at once (the
            account's concurrency): the queue they can form is ``waiters × interval_ms``,
            and a next slot further ahead than ``cap_ms`` and two such queues (a database
            clock stepped back, a hand edit: no state the gate writes) is handed out one
            queue from now instead (:data:`_RESERVE`).

    Returns:
        A :class:`Slot`: wait ``wait_ms`` (at most ``cap_ms`` and two queues) then send,
        or (``paused_ms > 0``) do not send because the account is paused, or
        (``cooldown_ms > 0``) do not send at all because the account is cooling down
        after a rate limit.

    Raises:
        ValueError: given a connection inside a transaction: the asynchronous commit
            would then be the whole transaction's, and a ledger fact written in it could
            be lost in a crash.
    """
    if isinstance(pool, asyncpg.Connection) and pool.is_in_transaction():
        raise ValueError("a rate-gate slot is its own transaction (its commit is asynchronous)")
    interval = max(0, interval_ms)
    row = await pool.fetchrow(_RESERVE, gate, interval, max(1, cap_ms), max(1, waiters) * interval)
    assert row is not None
    now = row["now"]
    if row["paused_until"] > now:
        return Slot(wait_ms=0, paused_ms=row["paused_until"] - now, penalty=row["penalty"])
    if row["cooldown_until"] > now:
        return Slot(wait_ms=0, cooldown_ms=row["cooldown_until"] - now, penalty=row["penalty"])
    slot = row["next_at"] - interval
    return Slot(wait_ms=max(0, slot - now), penalty=row["penalty"])


async def hold_back(pool: asyncpg.Pool, gate: str, interval_ms: int) -> None:
    """Keep the next slot at least ``interval_ms`` after now (a request leaving late).

    A caller that woke up after its slot (a busy event loop) sends later than the slot
    :func:`reserve` spaced from the previous one; without this, a caller that reserves
    next would leave less than an interval after it. Only moves ``next_at`` forward.
    """
    await pool.execute(
        f"UPDATE source_gates SET next_at = greatest(next_at, {DB_NOW_MS} + $2) WHERE gate = $1",
        gate,
        max(0, interval_ms),
    )


async def penalize(
    pool: asyncpg.Pool, gate: str, *, base_ms: int, cap_ms: int, retry_after_ms: int | None = None
) -> int:
    """Record a rate limit: climb the ladder and start the cooldown.

    The cooldown is ``base × 2^(penalty-1)`` (60 s, 120 s, 240 s … capped at 15 min by
    default) with the source's ``Retry-After`` as a floor, up to the cap. The next slot is pushed past it.
    A longer cooldown already in the row is kept, but at most ``cap_ms`` from now (one
    written before the cap, or under a larger one: as :func:`reserve` reads it).

    **One limit, one step**: a limit answered while a cooldown runs is the limit that
    started it — no request of the gate leaves during a cooldown (:func:`reserve`, and
    :meth:`LedgerGate.acquire` for a request that waited for its slot), so its request left
    before — and keeps the step: the cooldown is floored by its stated delay (up to the
    cap), the answer counted (``rate_limits``), the ladder not climbed, and
    ``last_rate_limit_at`` stays when the limit started the cooldown (what the finish's
    holds compare with the job's deadline). Until 2026-12-06
    each answer climbed it, so ``n`` requests out together when the limit came cooled the
    account down ``60 s × 2^(n-1)`` (four: 8 min; eight: the cap) instead of 60 s.

    Returns:
        The cooldown in milliseconds from now.
    """
    async with pool.acquire() as conn, conn.transaction():
        row = await _locked_row(conn, gate)
        now = row["now"]
        running = row["cooldown_until"] > now and row["penalty"] > 0  # this limit's cooldown already runs
        penalty = row["penalty"] if running else row["penalty"] + 1
        cooldown = cooldown_ms(penalty, retry_after_ms, base_ms=base_ms, cap_ms=cap_ms)
        mended = row["cooldown_until"] > now + max(0, cap_ms)  # the next slot was pushed past it too
        until = max(min(row["cooldown_until"], now + max(0, cap_ms)), now + cooldown)
        await conn.execute(
            """UPDATE source_gates SET penalty = $2, successes = 0, cooldown_until = $3,
                   next_at = greatest(CASE WHEN $5 THEN least(next_at, $3) ELSE next_at END, $3),
                   rate_limits = rate_limits + 1, updated_at = $4,
                   last_rate_limit_at = CASE WHEN $6 THEN COALESCE(last_rate_limit_at, $4) ELSE $4 END
               WHERE gate = $1""",
            gate,
            penalty,
            until,
            now,
            mended,
            running,  # the limit met when it started its cooldown stays its time (the finish's holds)
        )
        return until - now


async def record_success(pool: asyncpg.Pool, gate: str, *, decay_after: int) -> None:
    """Count a successful request; after ``decay_after`` in a row the ladder restarts.

    Only called while the account has a penalty (callers skip it otherwise), so an
    account that is not being rate limited costs one statement per request, not two.
    """
    await pool.execute(
        f"""UPDATE source_gates
               SET successes = CASE WHEN successes + 1 >= $2 THEN 0 ELSE successes + 1 END,
                   penalty = CASE WHEN successes + 1 >= $2 THEN 0 ELSE penalty END,
                   updated_at = {DB_NOW_MS}
             WHERE gate = $1 AND penalty > 0""",
        gate,
        decay_after,
    )


async def pause(pool: asyncpg.Pool, gate: str, *, pause_ms: int, reason: str) -> int:
    """Pause the gate for ``pause_ms`` (an account its source restricted); returns the pause in ms.

    An existing longer pause is kept. ``reason`` is recorded for operators
    (``curaflow accounts``).
    """
    async with pool.acquire() as conn, conn.transaction():
        row = await _locked_row(conn, gate)
        now = row["now"]
        until = max(row["paused_until"], now + max(0, pause_ms))
        await conn.execute(
            "UPDATE source_gates SET paused_until = $2, pause_reason = $3, updated_at = $4 WHERE gate = $1",
            gate,
            until,
            reason,
            now,
        )
        return int(until - now)


async def resume(pool: asyncpg.Pool, gate: str) -> bool:
    """Lift a pause (an operator checked the account); True when the gate was paused."""
    done = await pool.fetchval(
        f"""UPDATE source_gates SET paused_until = 0, pause_reason = NULL, updated_at = {DB_NOW_MS}
            WHERE gate = $1 AND paused_until > {DB_NOW_MS} RETURNING gate""",
        gate,
    )
    return done is not None


async def read_gate(pool: asyncpg.Pool | asyncpg.Connection, gate: str) -> GateState | None:
    """The gate's row (diagnostics and tests), or None if it has never been used."""
    row = await pool.fetchrow(
        f"""SELECT gate, next_at, cooldown_until, penalty, successes, requests, rate_limits,
                   paused_until, pause_reason, {DB_NOW_MS} AS now
            FROM source_gates WHERE gate = $1""",
        gate,
    )
    return GateState(**dict(row)) if row else None


async def list_gates(pool: asyncpg.Pool | asyncpg.Connection) -> list[GateState]:
    """Every gate row (diagnostics: ``curaflow accounts``)."""
    rows = await pool.fetch(
        f"""SELECT gate, next_at, cooldown_until, penalty, successes, requests, rate_limits,
                   paused_until, pause_reason, {DB_NOW_MS} AS now
            FROM source_gates ORDER BY gate"""
    )
    return [GateState(**dict(r)) for r in rows]


def held(state: GateState, *, cap_ms: int) -> None:
    """Raise what holds a request of the gate now — its pause, its cooldown (at most
    ``cap_ms`` from now, :func:`~curaflow.domain.ratelimit.cooldown_left_ms`) — as
    :meth:`LedgerGate.acquire` does for a slot refused; return when neither runs.

    Raises:
        SourceError: ``account_restricted`` (:func:`~curaflow.sources.gate.paused`) or
            ``rate_limited`` with the cooldown (:func:`~curaflow.sources.gate.cooling_down`).
    """
    if state.paused_until > state.now:
        raise paused(state.paused_until - state.now)
    cooling = cooldown_left_ms(state.cooldown_until, state.now, cap_ms)
    if cooling > 0:
        raise cooling_down(cooling, state.penalty)


@contextlib.contextmanager
def _curaflows(gate: str, what: str) -> Iterator[None]:
    """Raise a ledger error of the block (:data:`~curaflow.ledger.db.LEDGER_ERRORS`) as
    :class:`~curaflow.sources.gate.GateUnavailable` (the error its ``__cause__``).

    The gate runs inside a source's call: what the ledger raises there would otherwise
    reach the source guard as the source's own failure (a pool or statement timeout, a
    connection reset: "the source answered with an error"). One kind, one type, whatever
    asyncpg or the socket raised.
    """
    try:
        yield
    except LEDGER_ERRORS as err:
        raise GateUnavailable(
            clipped_within(
                f"rate gate {gate!r}: the ledger failed to {what} ({type(err).__name__}: {err})", REASON_CHARS
            )
        ) from err


class LedgerGate:
    """A source instance's rate gate in PostgreSQL: the policy of :mod:`curaflow.sources.gate`
    (spacing, cooldown ladder, decay, pause) over the ``source_gates`` row ``key``.

    A ledger error of any of its methods is raised as
    :class:`~curaflow.sources.gate.GateUnavailable` (curaflow's failure, never the source's).

    Args:
        pool: the ledger pool.
        key: the gate row's key: the account's source task queue name.
        min_interval_ms: spacing between two requests.
        base_ms / cap_ms: first step and cap of the cooldown ladder.
        decay_after: consecutive successes that reset the ladder.
        pause_ms: how long a restricted account is paused.
        concurrency: the account's requests that may wait for a slot at once (its source
            activities at once, one request each): bounds the next slot read from the row
            (:func:`reserve`'s ``waiters``).
    """

    def __init__(
        self,
        pool: asyncpg.Pool,
        key: str,
        *,
        min_interval_ms: int,
        base_ms: int = LADDER_BASE_MS,
        cap_ms: int = LADDER_CAP_MS,
        decay_after: int = DECAY_AFTER,
        pause_ms: int = PAUSE_MS,
        concurrency: int = 1,
    ) -> None:
        self.pool = pool
        self.key = key
        self.min_interval_ms = min_interval_ms
        self.base_ms = base_ms
        self.cap_ms = cap_ms
        self.decay_after = decay_after
        self.pause_ms = pause_ms
        self.concurrency = concurrency
        self._penalty = 0
        #: How many rate limits and pauses this gate recorded: a request that waited for
        #: its slot reads the row again before it leaves when it changed meanwhile.
        self._decided = 0

    async def acquire(self) -> None:
        """Take a slot in the ledger and sleep until it comes (see :class:`Gate`).

        A request that waited for its slot while this gate recorded a rate limit or a
        pause (another request's answer, :meth:`rate_limited` / :meth:`restricted`) reads
        the row again before it leaves, and does not leave into the cooldown or the pause
        (:func:`held`; one statement, only then: the account's requests run in this one
        process, the source queue's owner). Until 2026-12-06 it left at its slot: into
        the cooldown, its answer climbing the ladder again, or into a restricted account.
        """
        decided = self._decided
        with _curaflows(self.key, "hand out a slot"):
            slot = await reserve(
                self.pool, self.key, self.min_interval_ms, cap_ms=self.cap_ms, waiters=self.concurrency
            )
        self._penalty = slot.penalty
        if slot.paused_ms > 0:
            raise paused(slot.paused_ms)
        if slot.cooldown_ms > 0:
            raise cooling_down(slot.cooldown_ms, slot.penalty)
        if slot.wait_ms > 0:
            due = time.monotonic() + slot.wait_ms / 1000
            await asyncio.sleep(slot.wait_ms / 1000)
            if self._decided != decided:  # a limit or a pause recorded while this request waited
                with _curaflows(self.key, "read the gate again"):
                    state = await read_gate(self.pool, self.key)
                if state is not None:
                    held(state, cap_ms=self.cap_ms)
            # A late wake-up (a busy event loop) must not shorten the next gap: the next
            # slot is at least an interval after this request really leaves (as MemoryGate).
            if time.monotonic() - due >= LATE_S:
                with _curaflows(self.key, "hold the next slot back"):
                    await hold_back(self.pool, self.key, self.min_interval_ms)

    async def rate_limited(self, retry_after_s: float | None) -> float:
        """Climb the ladder in the ledger; returns the cooldown in seconds."""
        retry_ms = int(retry_after_s * 1000) if retry_after_s else None
        with _curaflows(self.key, "record a rate limit"):
            cooldown_for_ms = await penalize(
                self.pool, self.key, base_ms=self.base_ms, cap_ms=self.cap_ms, retry_after_ms=retry_ms
            )
        self._penalty += 1
        self._decided += 1
        return cooldown_for_ms / 1000

    async def restricted(self) -> float:
        """Pause the account in the ledger for ``pause_ms``; returns the pause in seconds."""
        with _curaflows(self.key, "pause the account"):
            paused_ms = await pause(self.pool, self.key, pause_ms=self.pause_ms, reason="restricted")
        self._decided += 1
        return paused_ms / 1000

    async def succeeded(self) -> None:
        """Count a success in the ledger, only while the account carries a penalty."""
        if self._penalty > 0:
            with _curaflows(self.key, "count a success"):
                await record_success(self.pool, self.key, decay_after=self.decay_after)
