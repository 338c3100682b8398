"""A route's gate in the ledger (table ``route_gates``, one row per route): its refusal
streak, its pause and its rate-limit cooldown. The one owner of "is this route broken".

* **Refusal streak** (:func:`count_refusal`): a route that refuses several *different*
  works in a row with the same answer (:func:`curaflow.routes.base.answer_key`: status and
  words) is broken, not its works — a topic that no longer exists, a token revoked, a
  receiver answering 422 to everything. At the ``threshold``-th such work
  (``delivery.refusal_streak``, 3) the route is **paused** for ``pause_ms``
  (``delivery.route_pause_ms``) and the refusals and holds the streak recorded are lifted
  (:mod:`curaflow.ledger.remembered`): no work is lost to a misconfigured destination.
  Another answer starts a new streak; a confirmed delivery on the route ends it (in the
  statement that records the delivery, :func:`curaflow.ledger.deliveries.record_delivered`).
  An answer saying the route's destination is gone for good, whatever the work (a
  webhook's 410 Gone: ``RouteError.pauses_route``), pauses the route at once (``at_once``,
  2026-12-07): no streak to wait for.
* **Pause**: while ``paused_until`` lies ahead, a deliver attempt on the route sends
  nothing and ends its cell ``route_paused`` at once
  (:func:`curaflow.ledger.deliveries.claim_send` reads the gate in the statement that
  reads the intent); :func:`resume` (``curaflow routes resume``) lifts it, and the route's
  holds with it.
* **Rate limits** (:func:`rate_limited`): every rate limit of the route climbs
  ``rate_limits``, the step of :func:`curaflow.domain.ratelimit.retry_delay_ms` (the
  receiver's stated delay exactly, else a backoff from 5 s), reset by a confirmed
  delivery; a *global or IP-level* limit (Discord's ``global``, Cloudflare's block) also
  sets ``cooldown_until``: every send of the route waits it out (``claim_send`` answers
  ``cooling``), at most ``delivery.route_rate_limit_cap_ms`` — a setting of its own, not
  the pause's (``delivery.route_pause_ms``): how long a broken route rests and how long a
  ban stated by a third party is believed are two decisions. The cap bounds what is
  read as well as what is written: a cooldown further ahead in the row (written before
  the cap, or under a larger one) holds at most the cap from the claim that reads it,
  which mends the row; a pause is never shortened (it is the operator's setting, not a
  third party's word).

A row is written only when a send fails (and reset when one succeeds after a failure), so
a route that delivers costs nothing here. Times are epoch milliseconds on the database
clock (:data:`~curaflow.ledger.db.DB_NOW_MS`), as the accounts' gates.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import asyncpg

from curaflow.domain.ratelimit import retry_delay_ms
from curaflow.domain.text import clean_text, clipped_within
from curaflow.ledger.db import DB_NOW_MS, REASON_CHARS


@dataclass
class RouteGate:
    """A ``route_gates`` row (times in epoch ms, database clock; ``now`` when it was read).

    Attributes:
        streak_works: the works of the current streak, ``[work_type, work_id]`` each, in
            the order they were refused.
    """

    route: str
    paused_until: int = 0
    pause_reason: str | None = None
    pauses: int = 0
    cooldown_until: int = 0
    rate_limits: int = 0
    streak_answer: str | None = None
    streak_works: list[list[str]] = field(default_factory=list)
    now: int = 0

    @property
    def paused_ms(self) -> int:
        """How long the pause still lasts (0: not paused)."""
        return max(0, self.paused_until - self.now)

    @property
    def cooldown_ms(self) -> int:
        """How long the cooldown still lasts (0: not cooling down)."""
        return max(0, self.cooldown_until - self.now)


@dataclass
class Pause:
    """What :func:`count_refusal` did when the streak paused the route.

    Attributes:
        until: the pause's end (epoch ms, database clock).
        works: the works of the streak (``[work_type, work_id]``).
        restored: how many refusals and holds of those works were lifted.
        reason: the pause's reason as stored (the answer and the count).
    """

    until: int
    works: list[list[str]]
    restored: int
    reason: str


_COLUMNS = (
    "route, paused_until, pause_reason, pauses, cooldown_until, rate_limits, streak_answer, streak_works, "
    f"{DB_NOW_MS} AS now"
)


def _gate(row: Any) -> RouteGate:
    works = row["streak_works"]
    if isinstance(works, str):
        works = json.loads(works)
    return RouteGate(**{**dict(row), "streak_works": [list(w) for w in works or []]})


async def _locked(conn: asyncpg.Connection, route: str) -> RouteGate:
    """The route's row, created if absent, locked for the caller's transaction (one
    statement: the upsert's row lock serialises the route's concurrent failures)."""
    row = await conn.fetchrow(
        f"""INSERT INTO route_gates AS g (route) VALUES ($1)
            ON CONFLICT (route) DO UPDATE SET route = g.route
            RETURNING {_COLUMNS}""",
        route,
    )
    return _gate(row)


async def count_refusal(
    conn: asyncpg.Connection,
    *,
    route: str,
    work_type: str,
    work_id: str,
    answer: str,
    threshold: int,
    pause_ms: int,
    at_once: bool = False,
) -> Pause | None:
    """Count a final refusal of ``work_id`` by ``route`` with ``answer`` in the route's
    streak (module doc), in the caller's transaction — after the refusal or hold of the
    work was recorded, so the pause lifts it too. An answer that may follow a post and
    ended the work ``delivery_unknown`` on an at-most-once route is counted alike
    (:mod:`activities.deliver.recording`): nothing of it is lifted (the work may be at
    the route), but the pause stops the next works being blocked the same way.

    Args:
        answer: the receiver's answer, keyed (:attr:`curaflow.routes.base.RouteError.answer`).
        threshold: different works refused in a row with that answer that pause the route
            (≥ 2).
        pause_ms: how long the pause lasts.
        at_once: the answer says the route's destination is gone for good whatever the
            work (:attr:`curaflow.routes.base.RouteError.pauses_route`: a webhook's 410
            Gone): the route is paused at this refusal, its work's hold lifted, without
            waiting for ``threshold`` works (2026-12-07).

    Returns:
        The :class:`Pause` when this refusal paused the route, else None (also when the
        route was already paused: one pause, one page).
    """
    gate = await _locked(conn, route)
    work = [work_type, work_id]
    works = gate.streak_works if gate.streak_answer == answer else []
    if work not in works:
        works = [*works, work]
    if at_once:
        works = [work]
    if (len(works) < max(2, threshold) and not at_once) or gate.paused_ms > 0:
        await conn.execute(
            f"""UPDATE route_gates SET streak_answer = $2, streak_works = $3::jsonb, updated_at = {DB_NOW_MS}
                WHERE route = $1""",
            route,
            answer,
            works,
        )
        return None
    said = (
        f"the receiver says its endpoint is gone: {answer}"
        if at_once
        else f"{len(works)} different works refused in a row with the same answer: {answer}"
    )
    reason = clipped_within(clean_text(said), REASON_CHARS)
    until = gate.now + max(0, pause_ms)
    await conn.execute(
        f"""UPDATE route_gates SET paused_until = $2, pause_reason = $3, pauses = pauses + 1,
                   streak_answer = NULL, streak_works = '[]'::jsonb, updated_at = {DB_NOW_MS}
            WHERE route = $1""",
        route,
        until,
        reason,
    )
    restored = await conn.fetch(
        """WITH works AS (SELECT w->>0 AS work_type, w->>1 AS work_id FROM jsonb_array_elements($2::jsonb) AS w),
           lifted AS (
             DELETE FROM route_refusals r USING works
             WHERE r.route = $1 AND r.work_type = works.work_type AND r.work_id = works.work_id
             RETURNING r.until),
           frontiers AS (DELETE FROM scan_frontiers WHERE EXISTS (SELECT 1 FROM lifted WHERE until IS NULL))
           SELECT count(*) AS n FROM lifted""",
        route,
        works,
    )
    return Pause(until=until, works=works, restored=int(restored[0]["n"]), reason=reason)


async def rate_limited(
    conn: asyncpg.Connection, *, route: str, stated_ms: float | None, route_wide: bool, cap_ms: int
) -> int:
    """Count a rate limit of ``route`` in the caller's transaction; returns the wait
    before the next attempt in ms (:func:`~curaflow.domain.ratelimit.retry_delay_ms`: the
    stated delay, else the backoff at the route's step). A ``route_wide`` limit makes
    the whole route wait it (``cooldown_until``) — it and the send's own wait at most
    ``cap_ms`` (``delivery.route_rate_limit_cap_ms``, 1 h): a route-wide delay stated
    beyond it (a week in a proxy's ``Retry-After``) would hold every send of the route,
    each job of its targets expiring meanwhile; past the cap a send costs one more
    attempt, answered again. A limit of one send (a Telegram flood wait of hours) is
    waited as stated: it holds that send only. A route-wide limit answered while the
    route cools down is the limit that started the cooldown (no send leaves meanwhile):
    it keeps the step ("One rate limit, one step"). A cooldown already in the row beyond
    ``cap_ms`` from now is written back at most that far (as
    :func:`curaflow.ledger.deliveries.claim_send` reads it)."""
    gate = await _locked(conn, route)
    # One route-wide limit, one step: no send of the route leaves while it cools down
    # (claim_send), so a route-wide limit answered meanwhile came to a send out before the
    # cooldown began — the limit that started it, answered to every send out together. Its
    # step is kept (the cooldown floored by its own delay below); one met after the
    # cooldown ended climbs. Until 2026-12-07 each answer climbed: eight sends out when a
    # receiver's 429 came cooled the whole route 640 s instead of 5 s.
    cooling = route_wide and gate.cooldown_until > gate.now
    step = max(1, gate.rate_limits) if cooling else gate.rate_limits + 1
    delay = retry_delay_ms(step, stated_ms)
    cap = max(0, cap_ms)
    if route_wide:
        delay = min(delay, cap)
    # A cooldown in the row further ahead than the cap (written before it, or under a
    # larger one) is kept only up to the cap from now, as claim_send reads it.
    kept = min(gate.cooldown_until, gate.now + cap)
    cooldown = max(kept, gate.now + delay) if route_wide else kept
    await conn.execute(
        f"""UPDATE route_gates SET rate_limits = $2, cooldown_until = $3, updated_at = {DB_NOW_MS}
            WHERE route = $1""",
        route,
        step,
        cooldown,
    )
    return delay


async def counted_delay(
    conn: asyncpg.Connection, *, route: str, stated_ms: float | None, route_wide: bool, cap_ms: int
) -> int:
    """The wait :func:`rate_limited` returned for the route's last counted rate limit (its
    step as the row stands; nothing written): what a recording tried again after its
    commit's acknowledgement was lost answers, the limit counted once
    (:class:`curaflow.ledger.deliveries.AlreadyRecorded`). Milliseconds."""
    gate = await read_gate(conn, route)
    delay = retry_delay_ms(max(1, gate.rate_limits if gate is not None else 0), stated_ms)
    return min(delay, max(0, cap_ms)) if route_wide else delay


async def read_gate(conn: asyncpg.Connection | asyncpg.Pool, route: str) -> RouteGate | None:
    """The route's row (diagnostics, ``curaflow routes``), or None when it never failed."""
    row = await conn.fetchrow(f"SELECT {_COLUMNS} FROM route_gates WHERE route = $1", route)
    return _gate(row) if row else None


async def list_gates(conn: asyncpg.Connection | asyncpg.Pool) -> list[RouteGate]:
    """Every route's row, by route name."""
    return [_gate(r) for r in await conn.fetch(f"SELECT {_COLUMNS} FROM route_gates ORDER BY route")]


async def resume(pool: asyncpg.Pool, route: str) -> tuple[bool, int]:
    """Lift the route's pause and cooldown, end its streak and lift its holds (an operator
    fixed the route): ``(it was paused or cooling down, holds lifted)``."""
    async with pool.acquire() as conn, conn.transaction():
        was = await conn.fetchval(
            f"""UPDATE route_gates SET paused_until = 0, pause_reason = NULL, cooldown_until = 0, rate_limits = 0,
                       streak_answer = NULL, streak_works = '[]'::jsonb, updated_at = {DB_NOW_MS}
                WHERE route = $1
                RETURNING (SELECT paused_until > {DB_NOW_MS} OR cooldown_until > {DB_NOW_MS}
                           FROM route_gates WHERE route = $1)""",
            route,
        )
        holds = await conn.fetch(
            "DELETE FROM route_refusals WHERE route = $1 AND until IS NOT NULL RETURNING work_id", route
        )
    return bool(was), len(holds)
