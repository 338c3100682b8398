"""The event stream of a job: ``GET /jobs/{job_id}/events`` and ``POST /jobs/{job_id}/events/ack``.

Reference §4.5–4.6, with the curaflow extensions of the protocol issue:

* ``after`` (exclusive): an event id of this job; an unknown id (unparsable, of another
  job, beyond the stream) reads from the start — at-least-once delivery. An empty
  ``after`` is refused (400, ``detail.field: after``);
* ``unacked=1|true`` starts after the later of ``after`` and the durable ack cursor (so
  a consumer paging with ``after=<next_after>&unacked=1`` moves on; an ``after`` behind
  the cursor, or unknown, starts at the cursor); ``0|false|""`` is off; anything else →
  400 (``detail.field: unacked``);
* ``limit``: page size, default 200, 1..500 (400 outside, ``detail.field: limit``; it and
  ``wait_ms`` are ASCII decimal digits, :data:`curaflow.api.body.DecimalDigits`);
  ``next_after`` is present only when more events remain;
* ``unacked`` in the page always counts the events after the durable cursor, never
  depending on ``after``; rows of a type outside the protocol's enum are never served
  nor counted (:data:`curaflow.ledger.events.PROTOCOL_EVENT_TYPES`);
* ``wait_ms`` (0..30000, default 0): long poll. When the page would be empty the request
  waits until an event of the job commits — woken by ``LISTEN/NOTIFY`` through the
  process's :class:`~curaflow.ledger.listen.EventNotifier`, never a sleep loop — and
  answers with it, or with an empty page at the timeout. A terminal job answers at once
  (its terminal event is its last). A server that is stopping answers a waiting long
  poll at once with the page it has, without reading it again
  (:meth:`~curaflow.ledger.listen.EventNotifier.release_waiters`);
* identical page reads asked together share one ledger read (:class:`PageReads`): every
  consumer long-polling a job is woken by the same commit at the same moment, and a herd
  reading through one pooled connection each queued past ``api.ledger_timeout_ms`` and
  was answered ``503 ledger_unavailable`` by a ledger that answered all along.

Ack: the body ``{ack_through}`` is validated before the job lookup; the cursor moves
forward only (an unknown or older id is a no-op that still answers 200); ack never
changes the job, the events or their push state.
"""

from __future__ import annotations

import asyncio
import time
from typing import Annotated, Any, Literal

import asyncpg
from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from starlette.exceptions import HTTPException

from curaflow.api.auth import require_token
from curaflow.api.body import DecimalDigits, accepts_json, read_json, single_query_values
from curaflow.api.deps import LedgerPool, NotifierDep, SettingsDep
from curaflow.api.jobs import read_job, storable_id, unknown_job
from curaflow.ledger.db import now_ms
from curaflow.ledger.events import EventPageData, ack_events, parse_event_id, read_events
from curaflow.process.http_methods import addressed_routes, serves_its_address
from curaflow.protocol.errors import invalid_params, required_sentence
from curaflow.protocol.json_text import object_refusal
from curaflow.protocol.models import AckRequest, AckResult, EventPage

events_router = APIRouter(
    dependencies=[Depends(require_token), Depends(single_query_values), Depends(accepts_json)], tags=["events"]
)

DEFAULT_LIMIT = 200
MAX_LIMIT = 500
MAX_WAIT_MS = 30_000
UNACKED_ON = {"1": True, "true": True, "0": False, "false": False, "": False}


#: What makes two page reads the same read: the job, ``after`` as a sequence number, ``unacked``, ``limit``.
PageKey = tuple[str, int | None, bool, int]


class PageReads:
    """Identical reads of a job's event page asked together share one ledger read.

    A read stays open to others asking the same :data:`PageKey` until it holds its pooled
    connection; its statements run after that, so they see every commit made before any
    of its askers asked (a long poll clears its wake-up before it asks: none misses an
    event). A herd of long polls woken by one commit — every consumer of the job, at the
    same moment — takes one connection instead of one each. The read runs as a task of
    its own: an asker that goes away (a client disconnected) cancels nothing of the
    others'. Its failure (the ledger unavailable) is every asker's.

    One per API process (``app.state.page_reads``).
    """

    def __init__(self) -> None:
        self._open: dict[PageKey, asyncio.Future[EventPageData]] = {}
        self._running: set[asyncio.Task[None]] = set()

    @property
    def open(self) -> int:
        """Reads still open to more askers (waiting for a connection)."""
        return len(self._open)

    async def read(self, pool: asyncpg.Pool, key: PageKey) -> EventPageData:
        """The page of ``key`` (job id, ``after`` sequence, ``unacked``, ``limit``), read by
        :func:`~curaflow.ledger.events.read_events` once for all who ask together.

        Raises:
            TimeoutError / asyncpg errors: the ledger did not answer (each asker's 503).
        """
        shared = self._open.get(key)
        if shared is None:
            shared = asyncio.get_running_loop().create_future()
            shared.add_done_callback(_retrieved)
            self._open[key] = shared
            task = asyncio.create_task(self._run(pool, key, shared))
            self._running.add(task)  # a task nobody references may be collected mid-read
            task.add_done_callback(self._running.discard)
        return await asyncio.shield(shared)

    async def _run(self, pool: asyncpg.Pool, key: PageKey, shared: asyncio.Future[EventPageData]) -> None:
        job_id, after_seq, from_ack, limit = key
        try:
            async with pool.acquire() as conn:
                self._close(key, shared)  # its statements start now: later askers read anew
                correlation_id = await conn.fetchval("SELECT correlation_id FROM jobs WHERE job_id = $1", job_id)
                data = await read_events(
                    conn, job_id, after_seq=after_seq, from_ack=from_ack, limit=limit, correlation_id=correlation_id
                )
        except asyncio.CancelledError:  # the process is stopping: so are its askers
            self._close(key, shared)
            shared.cancel()
            raise
        except Exception as err:  # noqa: BLE001 - handed to every asker (their 503, or a 500)
            self._close(key, shared)
            shared.set_exception(err)
            return
        shared.set_result(data)

    def _close(self, key: PageKey, shared: asyncio.Future[EventPageData]) -> None:
        if self._open.get(key) is shared:
            del self._open[key]


def _retrieved(shared: asyncio.Future[EventPageData]) -> None:
    """Mark a shared read's failure seen: all its askers may have gone away."""
    if not shared.cancelled():
        shared.exception()


async def page_reads_of(request: Request) -> PageReads:
    """The process's :class:`PageReads`."""
    reads: PageReads = request.app.state.page_reads
    return reads


PageReadsDep = Annotated[PageReads, Depends(page_reads_of)]


async def _job_exists(pool: asyncpg.Pool, job_id: str) -> bool:
    if not storable_id(job_id):
        return False
    async with pool.acquire() as conn:
        return bool(await conn.fetchval("SELECT EXISTS (SELECT 1 FROM jobs WHERE job_id = $1)", job_id))


@events_router.get(
    "/jobs/{job_id:path}/events",
    operation_id="list_events",
    response_model=EventPage,
    response_model_exclude_unset=True,
)
async def list_events(
    request: Request,
    job_id: str,
    pool: LedgerPool,
    notifier: NotifierDep,
    reads: PageReadsDep,
    after: Annotated[str | None, Query(min_length=1, description="Exclusive cursor: an event_id of this job.")] = None,
    unacked: Annotated[
        Literal["1", "0", "true", "false", ""] | None,
        Query(description="1|true: start after the later of `after` and the durable ack cursor."),
    ] = None,
    # DecimalDigits after Query: the published schema keeps ``minimum`` / ``maximum``.
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT, description="Page size."), DecimalDigits] = DEFAULT_LIMIT,
    wait_ms: Annotated[
        int,
        Query(ge=0, le=MAX_WAIT_MS, description="Long poll: wait up to this long (ms) for a new event."),
        DecimalDigits,
    ] = 0,
) -> Response:
    """A page of the job's events in ascending order (see the module doc).

    The page is answered as built, not re-validated through ``EventPage``: each event is
    the JSON frozen when it was written, and a page of 200 events through the model costs
    more than the rest of the request (the schema tests check the shape instead).
    """
    if not serves_its_address(request.app.router, request.scope):
        if not addressed_routes(request.app.router, request.scope):
            raise HTTPException(404)  # /jobs%2Fa/events: no route's address
        return JSONResponse(await read_job(pool, job_id + "/events"))  # the job ``…/events`` itself
    request.state.log_fields = {"job_id": job_id}
    if not await _job_exists(pool, job_id):
        raise unknown_job()
    from_ack = UNACKED_ON[unacked or ""]
    after_seq = parse_event_id(job_id, after)
    deadline = time.monotonic() + wait_ms / 1000
    with notifier.watch(job_id) as woken:
        while True:
            woken.clear()  # before reading: a commit after this read wakes the wait below
            page = await reads.read(pool, (job_id, after_seq, from_ack, limit))
            remaining = deadline - time.monotonic()
            # A stopping server answers what it has (notifier.release_waiters): the consumer
            # polls again, from another process, instead of holding the shutdown.
            if page.events or page.completed or remaining <= 0 or notifier.closing:
                break
            try:
                await asyncio.wait_for(woken.wait(), timeout=remaining)
            except TimeoutError:
                deadline = 0.0  # read once more, then answer (possibly an empty page)
            if notifier.closing:
                # Released by the stop with every other poll of every job: the page it has
                # (empty), not a read each — that herd was answered 503 ledger_unavailable.
                break
    body: dict[str, Any] = {
        "job_id": job_id,
        "events": page.events,
        "unacked": page.unacked,
        "server_time": now_ms(),
    }
    if page.more and page.events:
        body["next_after"] = page.events[-1]["event_id"]
    request.state.log_fields = {"job_id": job_id, "events": len(page.events), "unacked": page.unacked}
    return JSONResponse(body)


async def ack_body(request: Request, settings: SettingsDep) -> AckRequest:
    """The ack body ``{ack_through}`` (:class:`~curaflow.protocol.models.AckRequest`).

    Raises:
        ProtocolError: 413 / 408 / 400 from :func:`~curaflow.api.body.read_json`; 400
            ``not_an_object`` for a body that is no object
            (:func:`~curaflow.protocol.json_text.object_refusal`, as ``POST /jobs`` answers
            it); 400 ``invalid_params`` with ``detail.field: ack_through`` for a bad value
            (reference §4.6) — "ack_through is required" when it is absent or ``null``.
            2026-12-07: a body that was no object named ``ack_through``, and an absent one
            was told the rule of a value.
    """
    body = await read_json(request, settings.api.max_body_bytes, settings.api.body_timeout_ms)
    not_an_object = object_refusal(body)
    if not_an_object is not None:
        raise not_an_object
    if body.get("ack_through") is None:
        raise invalid_params(required_sentence("ack_through"), field="ack_through")
    try:
        return AckRequest.model_validate(body)
    except ValidationError:
        raise invalid_params("ack_through must be a non-empty event_id", field="ack_through") from None


@events_router.post(
    "/jobs/{job_id:path}/events/ack",
    operation_id="ack_events",
    response_model=AckResult,
    response_model_exclude_unset=True,
)
async def ack(request: Request, job_id: str, pool: LedgerPool, settings: SettingsDep) -> dict[str, Any]:
    """Move the job's durable ack cursor forward to ``ack_through`` (see the module doc)."""
    if not serves_its_address(request.app.router, request.scope):
        raise HTTPException(405)  # POST /jobs/{id} or …/events with an encoded suffix
    request.state.log_fields = {"job_id": job_id}
    body = await ack_body(request, settings)  # after the suffix check: a wrong address reads no body
    if not await _job_exists(pool, job_id):
        raise unknown_job()
    async with pool.acquire() as conn:
        acked, unacked = await ack_events(conn, job_id, parse_event_id(job_id, body.ack_through))
    request.state.log_fields = {"job_id": job_id, "acked": acked, "unacked": unacked}
    return {"job_id": job_id, "acked": acked, "unacked": unacked, "server_time": now_ms()}
