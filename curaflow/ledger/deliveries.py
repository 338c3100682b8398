"""Delivery intents: claim one before sending, record what the route answered.

An intent moves ``reserved → sending → delivered | duplicate | failed | unknown`` (or
back to ``reserved`` after a retryable failure). ``sending`` is written and committed
*before* the request leaves, so a retried activity that finds ``sending`` knows the
previous attempt may have reached the route and applies the route's ambiguity policy
instead of re-sending blindly (DESIGN.md decision 6).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import asyncpg

from curaflow.domain.cells import CellStage, CellState, check_transition, is_terminal
from curaflow.domain.models import CellSnapshot
from curaflow.domain.text import clean_optional, clean_text, clipped_within
from curaflow.ledger.cells import Barrier, barrier_of, end_lease, finish_cell, lock_job, sync_job_stage
from curaflow.ledger.db import ANSWER_CHARS, DB_NOW_MS, now_ms
from curaflow.ledger.records import load_cell

CONFIRMED = ("delivered", "duplicate")


@dataclass
class Answered:
    """What an attempt learnt of its send and could not record, the ledger failing
    (kept in its last Temporal heartbeat, :mod:`activities.deliver.recording`): its send
    had ended, nothing of it was out any more.

    Attributes:
        attempt: the intent's ``attempts`` once that attempt claimed it (its send's number).
        key: the intent's idempotency key.
        parts: the parts of a multi-part send confirmed by then (the route's ids; may be
            empty: nothing of the work was posted).
        receipt: the route's confirmation of the whole work (``remote_id``,
            ``remote_ids``, ``remote_status``, ``duplicate``), or None: the send ended
            without one (a part posted and then the ledger failed, or the route answered
            a failure that proves nothing else landed).
    """

    attempt: int
    key: str
    parts: list[Any] | None = None
    receipt: dict[str, Any] | None = None

    @classmethod
    def parse(cls, details: Any) -> Answered | None:
        """The :class:`Answered` in a heartbeat's details (a dict with ``answered``), or None."""
        found = details.get("answered") if isinstance(details, dict) else None
        if not isinstance(found, dict):
            return None
        try:
            receipt = found.get("receipt")
            parts = found.get("parts")
            return cls(
                attempt=int(found["attempt"]),
                key=str(found["key"]),
                parts=list(parts) if isinstance(parts, list) else None,
                receipt=dict(receipt) if isinstance(receipt, dict) else None,
            )
        except (KeyError, TypeError, ValueError):
            return None

    def details(self) -> dict[str, Any]:
        """The heartbeat details that carry it (read back by :meth:`parse`)."""
        return {"answered": {"attempt": self.attempt, "key": self.key, "parts": self.parts, "receipt": self.receipt}}


@dataclass
class SendClaim:
    """Outcome of :func:`claim_send`.

    Attributes:
        decision: ``send`` (go ahead), ``done`` (already confirmed — or confirmed now,
            from the previous attempt's :class:`Answered` receipt), ``ambiguous`` (a
            previous attempt's request may have landed — it was left ``sending``, or it
            was cut while out, ``maybe_delivered`` — and the route does not tolerate a
            re-send), ``cancelled`` (the
            consumer cancelled the job: never send), ``deadline`` (the job's deadline
            passed: never send), ``closed`` (the cell is terminal or has no intent for
            this route), ``paused`` (the route is paused after a refusal streak: send
            nothing, the cell ends ``route_paused``), ``cooling`` (the route waits out a
            global or IP-level rate limit: send nothing now, retry after ``wait_ms``),
            ``awaiting`` (another attempt's send of this intent is out and that attempt is
            live: wait for its answer — claim again within ``wait_ms``, when its lease
            lapses at the latest — never send it twice). Nothing is written for
            ``paused``, ``cooling`` and ``awaiting``.
        idempotency_key: the intent's stable key.
        attempts: sends recorded before this one.
        remote_ids: the parts confirmed by earlier attempts (multi-part routes resume
            after them; see :func:`record_part`).
        wait_ms: how long the pause, the cooldown or the other attempt's lease still lasts (ms).
        pause_reason: why the route is paused (:mod:`curaflow.ledger.route_gates`).
        was_sending: the intent was left ``sending`` by an attempt that may have sent it.
        owner: with ``send``, the attempt written as the send's owner (the claim's
            ``owner``): its beats keep the send live (:func:`curaflow.ledger.cells.heartbeat`).
    """

    decision: Literal["send", "done", "ambiguous", "cancelled", "deadline", "closed", "paused", "cooling", "awaiting"]
    idempotency_key: str | None = None
    attempts: int = 0
    remote_id: str | None = None
    remote_ids: list[Any] | None = None
    wait_ms: int = 0
    pause_reason: str | None = None
    was_sending: bool = False
    owner: str | None = None


async def claim_send(
    conn: asyncpg.Connection,
    job_id: str,
    target_id: str,
    route: str,
    *,
    rate_limit_cap_ms: int,
    ambiguous_ok: bool = False,
    opened: CellSnapshot | None = None,
    answered: Answered | None = None,
    owner: str | None = None,
    lease_ms: int = 0,
) -> SendClaim:
    """Decide whether a delivery attempt may send, and mark the intent ``sending``.

    Runs in the caller's transaction with the job row locked, so a consumer cancel
    recorded before it (``jobs.cancel_requested_at``) is always seen: a delivery not
    yet sent is never sent after a cancel, nor after the job's deadline (the ledger's
    barriers, :func:`curaflow.ledger.cells.barrier_sql`).

    **Owner of "may this intent be sent again"**: an intent whose request may have
    landed — left ``sending`` by a dead attempt, or ``maybe_delivered`` (an attempt's
    send was cut while out, or timed out after sending) — is sent again only on a route
    that tolerates it (``ambiguous_ok``); elsewhere the decision is ``ambiguous``, never
    ``send``, whatever stopped the attempt before: the job's cancel or deadline (whose
    barrier ends the cell first), or a cancel that is not the job's — an operator's
    ``temporal activity reset``, a heartbeat timeout, a worker's shutdown — after which
    Temporal runs another attempt (an at-most-once route posted the work twice).

    **Owner of "is another attempt's send of this intent still out"**: a claim writes the
    attempt that sends (``owner``) and how long it is live (``send_until``: the database's
    clock plus ``lease_ms``, extended by that attempt's ledger beats,
    :func:`curaflow.ledger.cells.heartbeat`). An intent ``sending`` from another attempt
    whose lease has not lapsed is ``awaiting``: that send is out, its answer will be
    recorded — neither sent again nor judged ambiguous. This is what a new run of the job
    meets (a client's start that terminated the running one with the same Task, a
    ``temporal workflow reset``): until 2026-12-05 it sent the work a second time while the
    first send was still out. A same-run retry meets a lapsed lease or little of one:
    Temporal retries an attempt that stopped beating only after the heartbeat timeout (two
    intervals; the send lease is longer only for an interval under 8.3 s, where the retry
    waits for its rest — the timed-out attempt may still be recording its answer), and one
    that ended by an exception released its send as it ended (:func:`release_send`).

    The route's gate (:mod:`curaflow.ledger.route_gates`) is read in the statement that
    reads the intent. Its rate-limit cooldown holds at most ``rate_limit_cap_ms`` from
    now, whatever the row says: a cooldown written before the cap existed (a proxy's
    week believed whole) or under a larger cap is **mended** in the same statement (a
    data-modifying CTE that touches the row only then), not only read shorter — read
    shorter and left a week ahead, it would hold another cap at each claim, for the whole
    week. The pause (``paused_until``: a broken route, for ``delivery.route_pause_ms``)
    is no stated delay and is never shortened.

    Args:
        rate_limit_cap_ms: the longest a route-wide rate limit holds the route
            (``delivery.route_rate_limit_cap_ms``).
        ambiguous_ok: the route tolerates re-sending after an unknown outcome (webhooks
            carry a stable idempotency key; ``on_ambiguous = "retry"``).
        opened: the cell as :func:`~curaflow.ledger.cells.start_step` returned it earlier
            in this transaction with no barrier: the job row is locked and judged
            already (its deadline at the step's opening, milliseconds earlier), so
            neither is read again. None: lock and judge here.
        answered: what the previous attempt learnt of its send and could not record (the
            ledger failed: :class:`Answered`, from its last heartbeat). Trusted only for the
            intent it names, still ``sending`` from that very send (``attempts`` equal to
            its ``attempt``: no send was claimed since): a receipt is recorded now
            (:func:`record_delivered`, decision ``done``); parts are written as confirmed,
            and the intent is no request that may have landed — its send had ended — so it
            is resumed after them, never ``ambiguous`` for it. Anything else of it is
            ignored (the rule above holds).
        owner: the claiming attempt (``<run id>:<activity id>:<attempt>:<nonce>``,
            :func:`activities.deliver.activity.attempt_owner`); None (ledger tests, callers
            of before): no attempt is named and no other one is waited for.
        lease_ms: how long the claimed send is live without a beat of its attempt (the
            database's clock): :func:`activities.deliver.recording.send_lease_ms` — the
            heartbeat timeout, never shorter than the recording of the send's answer.
    """
    if opened is None:
        job = await lock_job(conn, job_id)
        if job is None:
            return SendClaim("closed")
        cell = await conn.fetchrow(
            "SELECT state, stage FROM cells WHERE job_id = $1 AND target_id = $2 FOR UPDATE", job_id, target_id
        )
        if cell is None:
            return SendClaim("closed")
        state, stage, barrier = cell["state"], cell["stage"], barrier_of(job)
    else:
        state, stage, barrier = opened.state, opened.stage, None
    # The route's gate (curaflow.ledger.route_gates) is read in the same statement: a
    # route that never failed has no row and costs nothing more. Its cooldown is read at
    # most the cap ahead, and a row further ahead is mended by `mend` (which writes
    # nothing, and takes no lock, unless the row is beyond the cap; the outer query reads
    # the row as it was, hence the LEAST).
    intent = await conn.fetchrow(
        f"""WITH clock AS (SELECT {DB_NOW_MS} AS now),
           mend AS (
               UPDATE route_gates SET cooldown_until = clock.now + $4, updated_at = clock.now FROM clock
               WHERE route = $3 AND cooldown_until > clock.now + $4)
           SELECT d.idempotency_key, d.status, d.attempts, d.remote_id, d.remote_ids, d.maybe_delivered,
                   d.send_owner, GREATEST(0, COALESCE(d.send_until, 0) - clock.now) AS send_left_ms,
                   GREATEST(0, COALESCE(g.paused_until, 0) - clock.now) AS paused_ms, g.pause_reason,
                   LEAST(GREATEST(0, COALESCE(g.cooldown_until, 0) - clock.now), $4) AS cooldown_ms
            FROM clock, delivery_intents d LEFT JOIN route_gates g ON g.route = d.route
            WHERE d.job_id = $1 AND d.target_id = $2 AND d.route = $3 AND d.status <> 'released'
            ORDER BY d.id DESC LIMIT 1 FOR UPDATE OF d""",
        job_id,
        target_id,
        route,
        max(0, rate_limit_cap_ms),
    )
    if intent is None:
        return SendClaim("closed")
    key, status, attempts = intent["idempotency_key"], intent["status"], intent["attempts"]
    if status in CONFIRMED:
        return SendClaim("done", key, attempts, intent["remote_id"])
    if is_terminal(state) or status in ("failed", "unknown"):
        return SendClaim("closed", key, attempts)
    settled = answered is not None and status == "sending" and answered.key == key and answered.attempt == attempts
    if settled and answered is not None and answered.receipt is not None:
        # The route confirmed the work; the ledger failed to record it then. A fact, recorded
        # whatever barrier came since (decision 7: a delivery that landed stays delivered).
        receipt = answered.receipt
        await record_delivered(
            conn,
            job_id,
            target_id,
            key,
            duplicate=bool(receipt.get("duplicate")),
            remote_id=receipt.get("remote_id"),
            remote_ids=receipt.get("remote_ids") or None,
            remote_status=receipt.get("remote_status"),
        )
        return SendClaim("done", key, attempts, receipt.get("remote_id"))
    parts = answered.parts if settled and answered is not None and answered.parts else None
    if parts is not None:
        # Confirmed by the route, not recorded then: written now, whatever comes next.
        await record_part(conn, key, parts)
    if barrier == Barrier.CANCELLED:
        return SendClaim("cancelled", key, attempts)
    if barrier == Barrier.DEADLINE:
        return SendClaim("deadline", key, attempts)
    was_sending = status == "sending" and not settled
    if was_sending and owner is not None and intent["send_owner"] not in (None, owner) and intent["send_left_ms"] > 0:
        # Another attempt's send is out and that attempt still beats: its answer decides.
        return SendClaim("awaiting", key, attempts, wait_ms=int(intent["send_left_ms"]))
    if (was_sending or intent["maybe_delivered"]) and not ambiguous_ok:
        return SendClaim("ambiguous", key, attempts)
    if intent["paused_ms"] > 0:
        return SendClaim(
            "paused",
            key,
            attempts,
            wait_ms=int(intent["paused_ms"]),
            pause_reason=intent["pause_reason"],
            was_sending=was_sending,
        )
    if intent["cooldown_ms"] > 0:
        return SendClaim("cooling", key, attempts, wait_ms=int(intent["cooldown_ms"]), was_sending=was_sending)
    pending = bool(check_transition(state, CellState.DELIVERY_PENDING))
    # One statement: the intent `sending` and, when the FSM allows it, the cell
    # `delivery_pending` (two rows this transaction holds; neither update reads the other).
    await conn.execute(
        f"""WITH intent AS (
               UPDATE delivery_intents SET status = 'sending', attempts = attempts + 1, sent_at = $4,
                      updated_at = $4, maybe_delivered = maybe_delivered OR (status = 'sending' AND NOT $6),
                      send_owner = $7, send_until = CASE WHEN $7::text IS NULL THEN NULL ELSE {DB_NOW_MS} + $8 END
               WHERE idempotency_key = $3)
           UPDATE cells SET state = 'delivery_pending', stage = 'delivering', updated_at = $4
           WHERE job_id = $1 AND target_id = $2 AND $5""",
        job_id,
        target_id,
        key,
        now_ms(),
        pending,
        settled,
        owner,
        max(0, lease_ms),
    )
    if pending and stage != CellStage.DELIVERING:  # the job-level stage moves only with the cell's
        await sync_job_stage(conn, job_id)
    remote_ids = parts or (intent["remote_ids"] if isinstance(intent["remote_ids"], list) else None)
    return SendClaim("send", key, attempts, remote_ids=remote_ids, owner=owner)


async def release_send(conn: asyncpg.Connection | asyncpg.Pool, idempotency_key: str, owner: str) -> None:
    """The attempt ``owner`` ended with its claimed send of ``idempotency_key`` still
    ``sending`` (its answer not recorded: the ledger failed, a cancel came between the claim
    and the send): nothing of it is out any more, so its lease ends now (own statement;
    nothing is written unless the intent is still ``sending`` under ``owner``).

    The intent stays ``sending``: a later claim finds a send that may have landed and
    decides by that rule at once (:func:`claim_send`) — it waited for the ended attempt's
    lease before (up to the send lease) for an answer no one would record. One try: a
    release the ledger fails too leaves the lease to lapse (DESIGN.md "The send lease lives
    as long as its send's answer is unrecorded": the wait decides nothing differently).
    Called by the send's heartbeater at an exit by an exception
    (:class:`activities.heartbeat.Heartbeater`).
    """
    await conn.execute(
        """UPDATE delivery_intents SET send_until = NULL
           WHERE idempotency_key = $1 AND status = 'sending' AND send_owner = $2 AND send_until IS NOT NULL""",
        idempotency_key,
        owner,
    )


async def record_part(conn: asyncpg.Connection | asyncpg.Pool, idempotency_key: str, parts: list[Any]) -> None:
    """Record the parts of an in-flight delivery confirmed so far (own statement).

    A route that sends one work as several requests (album chunks, several messages)
    calls this after each confirmed part, before the next one leaves; a later attempt
    reads them back through :func:`claim_send` and resumes at the first unconfirmed
    part. Only an intent still ``sending`` is updated.
    """
    await conn.execute(
        """UPDATE delivery_intents SET remote_ids = $2, updated_at = $3
           WHERE idempotency_key = $1 AND status = 'sending'""",
        idempotency_key,
        parts,
        now_ms(),
    )


async def record_delivered(
    conn: asyncpg.Connection,
    job_id: str,
    target_id: str,
    idempotency_key: str,
    *,
    duplicate: bool = False,
    remote_id: str | None = None,
    remote_ids: list[Any] | None = None,
    remote_status: str | None = None,
) -> Any:
    """Record a confirmed delivery; the cell becomes ``submitted`` once every route confirmed.

    A cell whose every intent is ``duplicate`` becomes ``duplicate`` (reason
    ``duplicate_exhausted``). ``remote_id`` / ``remote_status`` come from the destination
    and are cleaned before storage. The sending attempt ends with it: the cell's lease is
    released (:func:`~curaflow.ledger.cells.end_lease`: kept while another route of the
    cell is ``sending``). A delivery also ends the route's refusal streak and rate-limit
    steps and the work's hold on the route (:mod:`curaflow.ledger.route_gates`,
    :func:`curaflow.ledger.remembered.hold_work`), in the same statement: they only
    touch rows that exist. Returns the cell snapshot afterwards.

    **A receipt that comes after its cell ended** (the intent already closed: ``unknown``,
    ``failed`` or ``released`` — another route of the cell failed for good meanwhile, or an
    operator paused and then reset the step while its send was out and the next attempt
    ended the cell ``delivery_unknown``) records what landed: the intent ``delivered``
    with the route's ids, its ``last_error`` saying it came after the cell's end, so
    ``GET /jobs/{id}`` lists the route as having the work. The cell's verdict, the job's
    outcome record and its terminal event were written once, on what the ledger knew then
    (decision 13), and stay (DESIGN.md "A receipt that comes after its cell ended").
    """
    # One statement (curaflow_record_delivered, migration 0056): lock the job row, then
    # record this intent and read the statuses of the cell's live intents as they are
    # afterwards; the job row's stage facts come back for finish_cell.
    job = await conn.fetchrow(
        """SELECT o_job_found AS found, o_last_stage AS last_stage, o_cells AS cells, o_statuses AS statuses
           FROM curaflow_record_delivered($1, $2, $3, $4, $5, $6, $7, $8)""",
        job_id,
        target_id,
        idempotency_key,
        "duplicate" if duplicate else "delivered",
        clean_optional(remote_id),
        remote_ids,
        clean_optional(remote_status),
        now_ms(),
    )
    assert job is not None
    statuses = list(job["statuses"])
    locked = job if job["found"] else True
    # The sending attempt ends here: a beat it sent while its request was out may have
    # leased the cell again after the cell ended (another route failed for good).
    if statuses and all(s in CONFIRMED for s in statuses):
        duplicate_only = all(s == "duplicate" for s in statuses)
        return await finish_cell(
            conn,
            job_id,
            target_id,
            CellState.DUPLICATE if duplicate_only else CellState.SUBMITTED,
            "duplicate_exhausted" if duplicate_only else None,
            locked=locked,
            end_attempt=True,
        )
    await end_lease(conn, job_id, target_id)
    return await load_cell(conn, job_id, target_id)


class AlreadyRecorded(Exception):
    """:func:`record_failed` with ``send``: the intent is no longer ``sending`` from that
    send — its answer is recorded already (a transaction that committed and whose
    acknowledgement was lost, tried again: :func:`activities.deliver.recording.until_recorded`),
    or something since took the intent from it (the job's finish, a later attempt's
    claim). Nothing was written; the caller's transaction may go on."""

    def __init__(self, idempotency_key: str, send: int) -> None:
        super().__init__(f"intent {idempotency_key}: the answer of send {send} is recorded already")
        self.idempotency_key = idempotency_key
        self.send = send


async def record_failed(
    conn: asyncpg.Connection,
    job_id: str,
    target_id: str,
    idempotency_key: str,
    *,
    reason: str,
    error: str,
    permanent: bool,
    unknown: bool = False,
    ambiguous: bool = False,
    send: int | None = None,
    unavailable_ms: int | None = None,
) -> Any:
    """Record a failed attempt; the attempt ends with it (the cell's lease is released as
    in :func:`record_delivered`).

    Args:
        reason: the cell's terminal reason if the failure is permanent.
        error: diagnostic text (kept on the intent, never shown to users).
        permanent: the route refused for good: intent ``failed`` and the cell ``failed``.
            Otherwise the intent returns to ``reserved`` for the next attempt.
        unknown: the request may have landed (ambiguous outcome under the ``fail``
            policy): intent ``unknown`` (it keeps blocking the work on this route) and the
            cell ``failed``.
        ambiguous: this attempt's request may have landed (a timeout after sending). It
            is remembered on the intent (``maybe_delivered``): if the delivery later fails
            for good, the intent ends ``unknown``, not ``failed``, so the work is never
            delivered to this route by another job.
        send: the send whose answer this is (its number: the intent's ``attempts`` once its
            attempt claimed it, :attr:`curaflow.routes.base.DeliveryRequest.attempt`), or
            None (no send: a claim that sends nothing). **Owner of "one send, one
            recording"** (2026-12-05): with ``send`` the statement is a compare-and-set —
            it writes only while the intent is ``sending`` from that very send — so a
            recording tried again after its commit's acknowledgement was lost writes
            nothing, and the caller counts nothing for the route (its rate-limit step,
            its refusal streak, the work's refusal or hold) a second time.
        unavailable_ms: the wait the receiver asked of this send while it is unavailable
            (a 5xx with a ``Retry-After``, ms; the next attempt waits it:
            :func:`activities.errors.route_failure`), remembered in the same statement
            (``held_until`` = now + it on the database clock, ``held_kind``
            ``unavailable``) for the job's finish to name
            (:func:`curaflow.domain.holds.held_by`) — no statement added. None: no such
            wait; any earlier one is cleared (a rate limit's is written after this, by
            :func:`hold_intent`).

    Raises:
        AlreadyRecorded: with ``send``, when the intent is not ``sending`` from it
            (nothing written).
    """
    job = await lock_job(conn, job_id)
    status = "unknown" if unknown else ("failed" if permanent else "reserved")
    written = await conn.fetchval(
        f"""UPDATE delivery_intents
           SET maybe_delivered = maybe_delivered OR $5,
               status = CASE WHEN $2 = 'failed' AND (maybe_delivered OR $5) THEN 'unknown' ELSE $2 END,
               last_error = $3, updated_at = $4,
               held_until = {DB_NOW_MS} + $7::bigint,
               held_kind = CASE WHEN $7::bigint IS NULL THEN NULL ELSE 'unavailable' END
           WHERE idempotency_key = $1 AND status NOT IN ('delivered', 'duplicate')
             AND ($6::int IS NULL OR (status = 'sending' AND attempts = $6))
           RETURNING true""",
        idempotency_key,
        status,
        clipped_within(clean_text(error), ANSWER_CHARS),
        now_ms(),
        ambiguous,
        send,
        max(0, int(unavailable_ms)) if unavailable_ms is not None and not (permanent or unknown) else None,
    )
    if send is not None and not written:
        raise AlreadyRecorded(idempotency_key, send)
    # The attempt ends here, as in record_delivered.
    if permanent or unknown:
        locked = job if job is not None else True
        return await finish_cell(conn, job_id, target_id, CellState.FAILED, reason, locked=locked, end_attempt=True)
    await end_lease(conn, job_id, target_id)
    return await load_cell(conn, job_id, target_id)


async def hold_intent(conn: asyncpg.Connection, idempotency_key: str, delay_ms: int) -> None:
    """Remember when the intent's next attempt may leave after its receiver rate-limited
    the send (``held_until``: now + ``delay_ms`` on the database clock, ``held_kind``
    ``rate_limited``), in the caller's transaction — after :func:`record_failed`, which
    clears it for any other failure (and writes a receiver's ``unavailable`` wait itself).
    Only the job's finish reads it, to say what held a cell it ends
    (:func:`curaflow.domain.holds.held_by`). Written on a rate-limited failure of this
    send alone (a route-wide limit is the route's ``cooldown_until``, which the finish
    reads as ``cooling``): a delivery costs nothing more."""
    await conn.execute(
        f"""UPDATE delivery_intents SET held_until = {DB_NOW_MS} + $2, held_kind = 'rate_limited'
            WHERE idempotency_key = $1 AND status NOT IN ('delivered', 'duplicate')""",
        idempotency_key,
        max(0, int(delay_ms)),
    )


async def hold_unknown_route(
    conn: asyncpg.Connection | asyncpg.Pool, job_id: str, target_id: str, route: str, delay_ms: int
) -> None:
    """Remember when the next attempt of a cell's send on ``route`` is due after an attempt
    that met a worker not knowing the route (``held_until``: now + ``delay_ms`` on the
    database clock, ``held_kind`` ``configuration``), on the cell's ``reserved`` intents of
    that route only — nothing is claimed, no state changes, an intent whose request may be
    out (``sending``) is left as it is. Only the job's finish reads it, to name what held a
    cell its deadline ended (:func:`curaflow.domain.holds.held_by`, a hold of owner
    ``curaflow``); the next attempt's own failure replaces it (:func:`record_failed`). One
    statement, on the mismatch path only (:func:`activities.errors.config_mismatch`)."""
    await conn.execute(
        f"""UPDATE delivery_intents SET held_until = {DB_NOW_MS} + $4, held_kind = 'configuration'
            WHERE job_id = $1 AND target_id = $2 AND route = $3 AND status = 'reserved'""",
        job_id,
        target_id,
        route,
        max(0, int(delay_ms)),
    )
