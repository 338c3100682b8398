"""What a route or the source told us about a work, remembered across jobs.

* **Refusals** (``route_refusals``): a route refused a work for good (``delivery_rejected``:
  a webhook's 4xx, Telegram's "Bad Request", Discord's 400, a directory that cannot hold
  it). The refusal is kept per (route, work): every later scan of a target with that
  route rejects the work as ``refused``, so the next job picks another work instead of
  sending the same one again. It stays until an operator clears it
  (``curaflow refusals clear ROUTE WORK_ID``, or :func:`clear_refusals`).
  Only an answer the route recognises as the work's is such a refusal.
* **Holds** (``route_refusals`` rows with ``until``): a route refused the *request*
  (``route_refused``: its destination, rights or limits, or an answer curaflow does not
  know). The work is not used up, but it is held back from that route until ``until``
  (:func:`hold_work`: ``delivery.route_hold_ms``, twice as long for each hold in a row,
  at most :data:`HOLD_CAP_MS`), so the next job tries another work instead of sending the
  same one first for ever; then it is offered again. ``curaflow routes resume`` and
  ``curaflow refusals clear`` lift holds at once, and a route paused for a refusal streak
  lifts the holds and refusals the streak recorded
  (:func:`curaflow.ledger.route_gates.count_refusal`).
* **Unavailable works** (``unavailable_works``): a work found unavailable when fetched
  (image 403/404/410, deleted, "restricted" detail), per source instance (a Pixiv account,
  a ``[sources.<name>]`` entry) — keyed like its rate gate, by its source task queue
  (``gate``) — until its ``unavailable_ttl_ms`` later (its ``unrecognised_hold_ms`` for an answer not
  recognised as the work's: an image's bare 403, an image's 404/410 the work's detail does
  not confirm (:mod:`curaflow.sources.corroboration`), a page that is no image —
  ``SourcePolicy.memory_ms``); later scans of the account reject it as
  ``unavailable`` without requesting it. Restricted placeholders need no memory: the
  listing itself shows them, at no cost.

Times are epoch milliseconds (UTC, :func:`~curaflow.ledger.db.now_ms`). Text from third
parties is cleaned before it is stored.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

import asyncpg

from curaflow.domain.text import clean_text, clipped_within
from curaflow.ledger.cells import IN_FLIGHT_INTENT_STATES, LIVE_INTENT_STATES
from curaflow.ledger.db import ANSWER_CHARS, REASON_CHARS, now_ms

#: Longest hold of a work on a route (ms): 24 h.
HOLD_CAP_MS = 86_400_000


@dataclass
class Refusal:
    """A ``route_refusals`` row (``until``: None for a refusal of the work for good, else
    the end of a hold, epoch ms; ``holds``: holds in a row)."""

    route: str
    work_type: str
    work_id: str
    reason: str
    error: str | None
    job_id: str | None
    target_id: str | None
    refused_at: int
    until: int | None = None
    holds: int = 0


@dataclass
class Unavailable:
    """An ``unavailable_works`` row (``gate``: the account's source task queue; ``until``:
    when it is forgotten; ``held``: only held back, on an answer not recognised as the
    work's)."""

    gate: str
    work_type: str
    work_id: str
    why: str | None
    job_id: str | None
    seen_at: int
    until: int
    held: bool = False


async def known_works(
    conn: asyncpg.Connection | asyncpg.Pool,
    *,
    routes: list[str],
    gate: str,
    work_type: str,
    work_ids: list[str],
    now: int | None = None,
    released_unrecognised: Collection[str] = (),
) -> dict[str, str]:
    """Works of ``work_ids`` the ledger rules out for a target, with the reason word.

    One statement for a page of the scan (the scan asks it for every page): live intents, refusals and
    unavailable works together.

    Args:
        routes: the target's routes: a live intent (``duplicate`` when one of them is
            final — ``delivered``, ``duplicate``, ``unknown`` —, else ``in_flight``: only
            ``reserved`` / ``sending`` by another open job, which may still release it), a
            refusal (``refused``) or a hold not yet over (``held``) on any of them rejects
            the work.
        gate: the target's account's gate key, its source task queue (unavailability
            is per account).
        now: the current time in epoch ms (default: now).
        released_unrecognised: works the scanning cell itself released on an answer not
            recognised as theirs (:func:`~curaflow.ledger.cells.search_resume`): told
            ``unrecognised`` like a work the account holds back, also once no hold is
            left (the account's ``unrecognised_hold_ms = 0``, or a hold over before the cell's next
            pass) — what the cell met was the source's answer, not the work's fault.

    Returns:
        work id → ``duplicate`` | ``in_flight`` (held by another open job on a route, not
        delivered: a verdict that does not last, so a scan frontier never passes it for
        good — the job may release it) | ``refused`` | ``held`` | ``unavailable`` | ``unusable``
        (remembered unavailable for what the source sent, :func:`remember_unavailable`) |
        ``unrecognised`` (held back by the account, or released by the scanning cell, on
        an answer not recognised as the work's: the source's answer, a verdict that does
        not last); when several hold, the first of that order wins (reference §1.1: a
        work held on a route is a duplicate — ``in_flight`` counts as one for the cell's
        verdict, :func:`curaflow.domain.verdicts.no_candidate_verdict`).
    """
    if not work_ids:
        return {}
    rows = await conn.fetch(
        """SELECT DISTINCT work_id, CASE WHEN status = ANY($7::text[]) THEN 1 ELSE 0 END AS rank
           FROM delivery_intents
           WHERE route = ANY($1::text[]) AND work_type = $3 AND work_id = ANY($4::text[])
             AND status = ANY($6::text[])
           UNION ALL
           SELECT work_id, CASE WHEN until IS NULL THEN 2 ELSE 3 END FROM route_refusals
           WHERE route = ANY($1::text[]) AND work_type = $3 AND work_id = ANY($4::text[])
             AND (until IS NULL OR until > $5)
           UNION ALL
           SELECT work_id, CASE WHEN held THEN 6 WHEN unusable THEN 5 ELSE 4 END FROM unavailable_works
           WHERE gate = $2 AND work_type = $3 AND work_id = ANY($4::text[]) AND until > $5""",
        routes,
        gate,
        work_type,
        work_ids,
        now if now is not None else now_ms(),
        list(LIVE_INTENT_STATES),
        list(IN_FLIGHT_INTENT_STATES),
    )
    best: dict[str, int] = {}
    for row in rows:
        best[row["work_id"]] = min(row["rank"], best.get(row["work_id"], len(_REASONS)))
    for work_id in set(work_ids).intersection(released_unrecognised):  # ranked as the account's hold of it
        best[work_id] = min(_UNRECOGNISED, best.get(work_id, len(_REASONS)))
    return {work_id: _REASONS[rank] for work_id, rank in best.items()}


#: :func:`known_works`' reason words by rank (lower wins).
_REASONS = ("duplicate", "in_flight", "refused", "held", "unavailable", "unusable", "unrecognised")
_UNRECOGNISED = _REASONS.index("unrecognised")


async def remember_refusal(
    conn: asyncpg.Connection,
    *,
    route: str,
    work_type: str,
    work_id: str,
    reason: str,
    error: str,
    job_id: str,
    target_id: str,
) -> None:
    """Remember that ``route`` refused ``work_id`` for good (the latest refusal wins; a
    hold of the work becomes a refusal)."""
    await conn.execute(
        """INSERT INTO route_refusals (route, work_type, work_id, reason, error, job_id, target_id, refused_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
           ON CONFLICT (route, work_type, work_id) DO UPDATE
             SET reason = EXCLUDED.reason, error = EXCLUDED.error, job_id = EXCLUDED.job_id,
                 target_id = EXCLUDED.target_id, refused_at = EXCLUDED.refused_at, until = NULL, holds = 0""",
        route,
        work_type,
        work_id,
        reason,
        clipped_within(clean_text(error), ANSWER_CHARS),
        job_id,
        target_id,
        now_ms(),
    )


async def hold_work(
    conn: asyncpg.Connection,
    *,
    route: str,
    work_type: str,
    work_id: str,
    reason: str,
    error: str,
    job_id: str,
    target_id: str,
    hold_ms: int,
) -> int:
    """Hold ``work_id`` back from ``route`` after the route refused the request (the
    module doc's holds): ``hold_ms`` for its first hold, twice as long for each hold in a
    row, at most :data:`HOLD_CAP_MS` (0: no hold). A work refused for good stays refused.

    Returns:
        The hold's end, epoch ms (0 when nothing was held).
    """
    if hold_ms <= 0:
        return 0
    now = now_ms()
    until = await conn.fetchval(
        """INSERT INTO route_refusals (route, work_type, work_id, reason, error, job_id, target_id, refused_at,
                                      until, holds)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8 + LEAST($9::bigint, $10::bigint), 1)
           ON CONFLICT (route, work_type, work_id) DO UPDATE
             SET reason = EXCLUDED.reason, error = EXCLUDED.error, job_id = EXCLUDED.job_id,
                 target_id = EXCLUDED.target_id, refused_at = EXCLUDED.refused_at,
                 holds = route_refusals.holds + 1,
                 until = EXCLUDED.refused_at
                         + LEAST($10::bigint, $9::bigint * (2 ^ LEAST(route_refusals.holds, 30))::bigint)
             WHERE route_refusals.until IS NOT NULL
           RETURNING until""",
        route,
        work_type,
        work_id,
        reason,
        clipped_within(clean_text(error), ANSWER_CHARS),
        job_id,
        target_id,
        now,
        hold_ms,
        HOLD_CAP_MS,
    )
    return int(until or 0)


async def remember_unavailable(
    conn: asyncpg.Connection,
    *,
    gate: str,
    work_type: str,
    work_id: str,
    why: str,
    job_id: str,
    ttl_ms: int,
    unusable: bool = False,
    held: bool = False,
) -> bool:
    """Remember that ``work_id`` was unavailable to the account of ``gate`` for ``ttl_ms`` (0: not at all).

    A row already there keeps the later ``until``. A hold never replaces a live verdict
    about the work itself (its reason, whether it is ``unusable``, that it lasts): it is
    dropped then; anything else replaces what the row says.

    Args:
        unusable: the work is unusable as the source sent it (its kind is one of
            :data:`curaflow.domain.tally.SOURCE_ANSWER_KINDS`): later scans count it
            ``unusable``.
        held: the answer was not recognised as the work's
            (:attr:`~curaflow.sources.errors.WorkUnavailable.recognised`): later scans
            are told ``unrecognised``, a verdict that does not last (a scan frontier does
            not move past it for good).

    Returns:
        Whether the row was written (inserted, or what it says replaced): False for
        ``ttl_ms`` 0 and for a hold dropped before a live verdict about the work — from
        the statement's own result, in the caller's transaction (true once it commits).
    """
    if ttl_ms <= 0:
        return False
    now = now_ms()
    status = await conn.execute(
        """INSERT INTO unavailable_works (gate, work_type, work_id, why, job_id, seen_at, until, unusable, held)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
           ON CONFLICT (gate, work_type, work_id) DO UPDATE
             SET why = EXCLUDED.why, job_id = EXCLUDED.job_id, seen_at = EXCLUDED.seen_at,
                 until = greatest(unavailable_works.until, EXCLUDED.until), unusable = EXCLUDED.unusable,
                 held = EXCLUDED.held
             WHERE NOT EXCLUDED.held OR unavailable_works.held OR unavailable_works.until <= EXCLUDED.seen_at""",
        gate,
        work_type,
        work_id,
        clipped_within(clean_text(why), REASON_CHARS),
        job_id,
        now,
        now + ttl_ms,
        unusable,
        held,
    )
    return str(status).rsplit(" ", 1)[-1] != "0"  # "INSERT 0 <rows>": 0 when the update's WHERE dropped it


async def list_refusals(conn: asyncpg.Connection | asyncpg.Pool, route: str | None = None) -> list[Refusal]:
    """Every remembered refusal (of ``route`` when given), newest first."""
    rows = await conn.fetch(
        """SELECT route, work_type, work_id, reason, error, job_id, target_id, refused_at, until, holds
           FROM route_refusals
           WHERE $1::text IS NULL OR route = $1 ORDER BY refused_at DESC, route, work_id""",
        route,
    )
    return [Refusal(**dict(r)) for r in rows]


async def clear_refusals(
    conn: asyncpg.Connection | asyncpg.Pool,
    *,
    route: str,
    work_id: str | None = None,
    work_type: str | None = None,
    holds_only: bool = False,
) -> int:
    """Forget refusals and holds of ``route`` (one work, or all when ``work_id`` is None;
    only holds with ``holds_only``); returns how many.

    Every target's scan frontier is forgotten with them when a refusal for good was
    cleared: a frontier passes over works it saw refused (:mod:`curaflow.sources.frontier`;
    a hold is not lasting, so the frontier never passed over it).
    """
    rows = await conn.fetch(
        """WITH cleared AS (
             DELETE FROM route_refusals WHERE route = $1 AND ($2::text IS NULL OR work_id = $2)
               AND ($3::text IS NULL OR work_type = $3) AND (NOT $4 OR until IS NOT NULL)
             RETURNING work_id, until),
           frontiers AS (DELETE FROM scan_frontiers WHERE EXISTS (SELECT 1 FROM cleared WHERE until IS NULL))
           SELECT work_id FROM cleared""",
        route,
        work_id,
        work_type,
        holds_only,
    )
    return len(rows)


async def list_unavailable(conn: asyncpg.Connection | asyncpg.Pool, *, now: int | None = None) -> list[Unavailable]:
    """Works remembered as unavailable and not yet forgotten, newest first."""
    rows = await conn.fetch(
        """SELECT gate, work_type, work_id, why, job_id, seen_at, until, held FROM unavailable_works
           WHERE until > $1 ORDER BY seen_at DESC, work_id""",
        now if now is not None else now_ms(),
    )
    return [Unavailable(**dict(r)) for r in rows]


async def clear_unavailable(
    conn: asyncpg.Connection | asyncpg.Pool,
    *,
    work_id: str | None = None,
    gate: str | None = None,
    held_only: bool = False,
) -> int:
    """Forget unavailable works (one work and/or one account's gate; all when both are None;
    only the works held back on an answer not recognised as theirs with ``held_only``).

    Every target's scan frontier is forgotten with them when a lasting verdict was
    cleared, as with :func:`clear_refusals`; a hold never let a frontier pass a work.
    """
    rows = await conn.fetch(
        """WITH cleared AS (
             DELETE FROM unavailable_works WHERE ($1::text IS NULL OR work_id = $1)
               AND ($2::text IS NULL OR gate = $2) AND (held OR NOT $3) RETURNING work_id, held),
           frontiers AS (DELETE FROM scan_frontiers WHERE EXISTS (SELECT 1 FROM cleared WHERE NOT held))
           SELECT work_id FROM cleared""",
        work_id,
        gate,
        held_only,
    )
    return len(rows)
