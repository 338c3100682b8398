"""The ``push_events`` activity: POST a job's pending events to its ``callback_url``.

One attempt sends the job's pending events oldest first (:mod:`curaflow.jobs.pushes` has
the rules): each send is claimed in the ledger first (so two attempts never send the
same event at once), the frozen Event JSON is POSTed byte for byte, and the answer is
settled in the ledger before the next event. A retryable failure releases the event
and fails the attempt with an ``ApplicationError`` (type ``callback_failed``) so
Temporal retries after its backoff; an event that used its last attempt, or got a
non-retryable answer, is dead-lettered and the attempt goes on with the next event.

A send is one outbound exchange (:mod:`curaflow.outbound`): its total time is
``callback_timeout_ms``, however slowly the receiver sends its headers or body, and the
activity heartbeats every second while it is out, so a cancel reaches it and a slow
receiver costs exactly one counted attempt, never a heartbeat timeout.

**The answer is the status line.** Its verdict (:func:`curaflow.jobs.pushes.classify_answer`)
and ``Retry-After`` are read from the status and headers; once they are in, the body is
read only to keep the connection (at most :data:`~curaflow.outbound.ANSWER_KEEP_BYTES`),
and a body that never ends or is cut mid-way changes nothing: a receiver that said 200
has the event (before, such an answer was retried as a timeout, sent again up to
``callback_max_attempts`` times and then reported dead-lettered; a 410 so answered was
retried instead of dead-lettered). The body is read for at most :data:`ANSWER_DRAIN_S`:
until 2026-12-07 a body that trickled for ever was read for the push's whole
``callback_timeout_ms`` (30 s by default) after its status had settled the event, so each
such answer held the worker's activity slot, and every later event of the job, that long.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import NamedTuple, TypeVar

import httpx
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.caller import require_own_job
from activities.deliver.recording import RECORD_RETRY_S
from activities.deps import ActivityDeps
from activities.errors import config_mismatch
from activities.heartbeat import CANCEL_PROBE_S
from curaflow.domain.messages import PushInput, PushReport
from curaflow.domain.ratelimit import parse_retry_after, retry_delay_ms
from curaflow.jobs.pushes import Verdict, classify_answer, push_headers, sign_push
from curaflow.ledger.db import LEDGER_ERRORS
from curaflow.ledger.event_pushes import DEAD, DELIVERED, PENDING, ClaimedPush, claim_next, record_push
from curaflow.observability.logs import get_logger
from curaflow.outbound import ANSWER_KEEP_BYTES, AddressRefused, DestinationRefused, Limits, iter_capped
from curaflow.routes.base import CLOUDFLARE_1XXX_NOT_SENT, cloudflare_reads_body, cloudflare_said

log = get_logger("curaflow.jobs.pushes")
LEASE_MARGIN_MS = 10_000
T = TypeVar("T")

#: The longest a push's answer body is read once its status line is in (seconds): the
#: status is the answer, the body is read only so a brief one keeps its connection. A body
#: still arriving after this is left unread (its connection closed), like one longer than
#: :data:`~curaflow.outbound.ANSWER_KEEP_BYTES`.
ANSWER_DRAIN_S = 1.0


class Sent(NamedTuple):
    """What one send learnt (:meth:`PushActivity._send`).

    Attributes:
        status: the answer's status; None when no answer came.
        error: a short description of a failure (no URL), None for a 2xx.
        retry_after: the answer's ``Retry-After``, seconds, or None.
        forced: ``dead`` when the event can never be sent as configured, else None.
        cut: the attempt was cancelled after the answer's status was in: the answer is
            recorded, then the cancel honoured.
        never_reached: the answer is not the receiver's: Cloudflare, in front of it, said
            it never handed the request on (its 1xxx page under a 403 or a 409, its
            challenge page), or such a page's body was not read whole and cannot be told
            from the receiver's own 403 or 409 (the words saying which); None for the
            receiver's own answer.
    """

    status: int | None
    error: str | None
    retry_after: float | None
    forced: Verdict | None
    cut: bool = False
    never_reached: str | None = None

    @property
    def verdict(self) -> Verdict:
        """What the send settles (:func:`curaflow.jobs.pushes.classify_answer`), unless forced."""
        return self.forced or classify_answer(self.status, never_reached=self.never_reached is not None)


class PushActivity:
    """Holds the worker's :class:`~activities.deps.ActivityDeps` for ``push_events``."""

    def __init__(self, deps: ActivityDeps) -> None:
        self.deps = deps

    async def _send(self, push: ClaimedPush, timeout_s: float) -> Sent:
        """POST one event; returns what it learnt (:class:`Sent`).

        The forced verdict is ``dead`` when the event can never be sent as configured
        (the allow-list refuses its origin, no signing secret on this worker). A host
        whose name leads, when connecting, only to addresses the guard never connects to
        (:class:`~curaflow.outbound.AddressRefused`: a DNS sinkhole, a rebinding to
        loopback or the metadata service) is no such verdict: nothing was connected to,
        and the send is one failed attempt, retried as any send that reached no one
        (until 2026-12-07 the event was dead-lettered at once on that one lookup).

        The answer is its status line, but for one that is not the receiver's: a 403 or a 409
        through Cloudflare's edge has its body read (decoded, at most
        :data:`~curaflow.outbound.ANSWER_KEEP_BYTES` for at most :data:`ANSWER_DRAIN_S`:
        :func:`_page`), for Cloudflare's own 1xxx page says the receiver was never reached
        (:func:`curaflow.routes.base.cloudflare_said`, the routes' one reading) —
        :attr:`Sent.never_reached`, a retried attempt, as is its challenge page (known by its
        ``cf-mitigated`` header); a body not read whole cannot tell that page from the
        receiver's own 403 or 409, and is retried too (one attempt; the receiver dedupes by
        ``Idempotency-Key``). Until 2026-12-07 Cloudflare's 409 page was the receiver's
        "already recorded": the push recorded delivered, never received; its 403 page and
        its challenge page the receiver's "other 4xx": the event dead-lettered at once.

        A cancel of the attempt (a heartbeat's answer: the job's end stopped waiting for
        its pushes) that comes once the answer's status is in does not lose that answer:
        the body is left unread and :attr:`Sent.cut` is set, for the caller to record the
        answer before honouring the cancel. Until 2026-12-07 it was lost: the event stayed
        claimed and pending, and was sent again although the receiver had answered.

        Raises:
            asyncio.CancelledError: the attempt was cancelled before any answer came.
        """
        secret = self.deps.settings.api.callback_secret
        if secret is None:  # push_events refuses the attempt first; never the event's verdict
            return Sent(None, "no api.callback_secret on this worker: a push is never sent unsigned", None, None)
        headers = sign_push(
            push_headers(push.job_id, push.event_id),
            secret.get_secret_value(),
            push.event_id,
            push.body,
            datetime.now(UTC),
        )
        client = self.deps.client_for("pushes")
        answer: httpx.Response | None = None
        page: bytes | None = None
        body_error: str | None = None
        cut = False
        try:
            async with _beating():
                request = client.build_request("POST", push.url, content=push.body.encode(), headers=headers)
                async with client.stream(request, Limits(time_s=timeout_s)) as response:
                    answer = response  # the status line and headers are in: they are the answer
                    if cloudflare_reads_body(response.status_code, response.headers):
                        page = await _page(response)  # Cloudflare's own page, or the receiver's answer
                    else:
                        await _drain(response)
        except asyncio.CancelledError:
            if answer is None:
                raise  # no answer: the send's outcome is unknown, the claim lapses
            # The receiver answered before the cancel came: its answer is recorded first
            # (push_events), then the cancel is raised again.
            current = asyncio.current_task()
            if current is not None:
                current.uncancel()
            cut = True
            body_error = "answer body unread: the attempt was cancelled"
        except AddressRefused as err:
            return Sent(None, f"destination refused at connect time: {err}", None, None)
        except DestinationRefused as err:
            return Sent(None, f"destination refused: {err}", None, Verdict.DEAD)
        except Exception as err:  # noqa: BLE001 - any failure to send counts as a failed send
            if answer is None:
                return Sent(None, _failure(err), None, None)
            # The receiver answered; only reading its body failed (it never ended, was cut
            # mid-way): the status stands, the body plays no part in the verdict.
            body_error = f"answer body unread: {_failure(err)}"
        status = answer.status_code
        never_reached = None
        error = None
        if not answer.is_success:
            said = cloudflare_said(httpx.Response(status, headers=_described(answer), content=page or b""))
            error = f"HTTP {status}" if said is None else said.words(status)
            if said is not None and not said.reached:
                never_reached = error = f"{error}: the receiver was never reached"
            elif status in CLOUDFLARE_1XXX_NOT_SENT and page is None and cloudflare_reads_body(status, answer.headers):
                never_reached = error = (
                    f"{error} through Cloudflare, its body not read whole: Cloudflare's own page (the receiver "
                    "never reached) cannot be told from the receiver's answer"
                )
        if error is not None and body_error is not None:
            error = f"{error}; {body_error}"
        retry_after = parse_retry_after(answer.headers.get("retry-after"))
        return Sent(status, error, retry_after, None, cut, never_reached)

    @activity.defn(name="push_events")
    async def push_events(self, inp: PushInput) -> PushReport:
        """Push the job's pending events (see the module doc).

        Returns:
            What this attempt settled (``busy`` when another attempt is sending, or took
            over the event this attempt was sending after its lease lapsed:
            :func:`curaflow.ledger.event_pushes.record_push`).

        Raises:
            ApplicationError: ``foreign_caller`` (non-retryable, nothing done) when the calling
                execution is not the job's own (:func:`activities.caller.require_own_job`).
            ApplicationError: ``configuration_mismatch`` (retryable, nothing claimed) when this
                worker has no ``api.callback_secret``: another worker, or this one once
                configured, sends the events (:func:`activities.errors.config_mismatch`).
            ApplicationError: ``callback_failed`` (retryable) when an event must be
                retried; ``next_retry_delay`` carries the receiver's ``Retry-After``, or
                for a 429 without one the backoff of
                :func:`curaflow.domain.ratelimit.retry_delay_ms` (capped at the policy's
                largest backoff).
        """
        require_own_job(inp.job_id, pushes=True)
        if self.deps.settings.api.callback_secret is None:
            # Nothing claimed: a worker that cannot sign leaves the job's events to one that
            # can (until 2026-12-07 it claimed the next and marked it dead at once).
            raise config_mismatch(
                "setting",
                "api.callback_secret",
                "this worker has no api.callback_secret: a push is never sent unsigned",
            )
        info = activity.info()
        # The attempt's own name for its claims: its run's id too — a run reset or started
        # again under the job's id numbers its activities as the old run did, so without it
        # the new run's attempt took the old one's live claim for its own and sent the event
        # alongside (until 2026-12-06).
        owner = f"{self.deps.identity}:{info.workflow_id}:{info.workflow_run_id}:{info.activity_id}:{info.attempt}"
        policy = inp.policy
        report = PushReport(job_id=inp.job_id)
        while True:
            claim = await _until_written(  # a claim whose COMMIT went unacknowledged is found again
                functools.partial(
                    claim_next,
                    self.deps.pool,
                    inp.job_id,
                    owner,
                    policy.timeout_ms + LEASE_MARGIN_MS,
                    max_attempts=policy.max_attempts,
                ),
                "claim the next event",
            )
            report.dead += claim.dead
            if claim.push is None:
                report.busy = claim.busy
                return report
            push = claim.push
            sent = await self._send(push, policy.timeout_ms / 1000)
            status, error, retry_after = sent.status, sent.error, sent.retry_after
            activity.heartbeat({"event_id": push.event_id, "status": status})
            verdict = sent.verdict
            fields = {"job_id": push.job_id, "event_id": push.event_id, "attempt": push.attempts, "http_status": status}
            settled = DELIVERED if verdict == Verdict.DELIVERED else PENDING
            if verdict == Verdict.DEAD or (settled == PENDING and push.attempts >= policy.max_attempts):
                settled = DEAD
            if settled == DELIVERED:
                error = None
            recorded = await _recorded(
                functools.partial(record_push, self.deps.pool, push, settled, http_status=status, error=error)
            )
            if sent.cut:
                # The attempt was cancelled after the answer came: recorded, now honoured.
                log.info("callback.cancelled_after_answer", outcome=settled if recorded else "claim_lost", **fields)
                raise asyncio.CancelledError()
            if not recorded:
                # This attempt outlived its lease and another claimed the event since: that
                # one settles it (this answer is not recorded); this attempt ends.
                log.warning("callback.claim_lost", outcome=settled, error=error, **fields)
                report.busy = True
                return report
            if settled == DELIVERED:
                report.delivered += 1
                log.info("callback.delivered", **fields)
                continue
            if settled == DEAD:
                report.dead += 1
                log.warning("callback.dead", error=error, **fields)
                continue
            log.info("callback.retry_scheduled", error=error, **fields)
            # A rate limit waits the delay the consumer stated, or — when it stated none —
            # the backoff of curaflow.domain.ratelimit (from 5 s, the event's attempts
            # the step); another failure waits a stated delay, else Temporal's backoff.
            delay = None
            if status == 429 or retry_after is not None:
                stated_ms = retry_after * 1000 if retry_after is not None else None
                wait_ms = retry_delay_ms(push.attempts, stated_ms)
                delay = timedelta(milliseconds=min(wait_ms, policy.max_interval_ms))
            raise ApplicationError(
                f"callback for {push.event_id} failed ({error}); retrying",
                type="callback_failed",
                next_retry_delay=delay,
            )


async def _recorded(write: Callable[[], Awaitable[bool]]) -> bool:
    """``write()`` (the ledger's record of what a send learnt) to its end — tried again while
    the ledger fails (:func:`_until_written`) —, even when the attempt is cancelled
    meanwhile: the cancel is raised once the write ended. A cancel of the job's end that
    came while an answer was being recorded cancelled the write (until 2026-12-07): the
    event stayed claimed and pending, and was sent again after its lease although the
    receiver had answered.

    Raises:
        asyncio.CancelledError: the attempt was cancelled (after the write ended).
        one of :data:`~curaflow.ledger.db.LEDGER_ERRORS`: the ledger still failed the write
            after the last wait.
    """
    task = asyncio.ensure_future(_until_written(write, "record the receiver's answer"))
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        await asyncio.wait({task})  # bounded by the pool's statement timeouts and RECORD_RETRY_S
        raise


async def _until_written(write: Callable[[], Awaitable[T]], what: str) -> T:
    """``write()`` (one ledger transaction of the push: its claim, its record), tried again
    after each of :data:`~activities.deliver.recording.RECORD_RETRY_S` (6.3 s in all,
    heartbeating) while it fails on the ledger (:data:`~curaflow.ledger.db.LEDGER_ERRORS`) —
    the rule of a delivery's record of its route's answer
    (:func:`activities.deliver.recording.until_recorded`), for a push's writes; ``what``
    names the write in the log.

    The receiver's answer is a fact it gave once. Until 2026-12-07 a ledger that failed its
    record once (a PostgreSQL restart, a connection lost, a bounded wait) failed the attempt:
    the event stayed claimed and pending, and the attempt — counted at its claim
    (:func:`~curaflow.ledger.event_pushes.claim_next`) — was spent on curaflow's database:
    its event sent again, and on its last attempt (every attempt with
    ``callback_max_attempts = 1``) dead-lettered "its last attempt ended without an answer"
    though the receiver had taken it
    (``tests/integration/test_push_claims.py::test_a_receivers_answer_the_ledger_fails_to_record_once_is_recorded``).
    A record whose ``COMMIT`` went through unacknowledged finds the event settled and not
    its claim any more: False, as for a claim another attempt took (nothing written). A
    claim whose ``COMMIT`` went through unacknowledged is found again as the attempt's own,
    counted once (:func:`~curaflow.ledger.event_pushes.claim_next`;
    ``::test_a_claim_whose_commit_was_not_acknowledged_is_the_attempts_own``).
    """
    waits = iter(RECORD_RETRY_S)
    while True:
        try:
            return await write()
        except LEDGER_ERRORS as err:
            wait = next(waits, None)
            if wait is None:
                raise
            info = activity.info()
            log.warning(
                "callback.ledger_retried",
                job_id=info.workflow_id,
                attempt=info.attempt,
                error=type(err).__name__,
                retry_in_s=wait,
                hint=f"the ledger failed to {what}; tried again (curaflow's database, not the receiver)",
            )
            activity.heartbeat()
            await asyncio.sleep(wait)


def _failure(err: Exception) -> str:
    """A short description of a failed exchange (no URL: it is the consumer's)."""
    if isinstance(err, httpx.TimeoutException):
        return f"timeout: {err}"
    if isinstance(err, httpx.HTTPError):
        return f"transport: {type(err).__name__}"
    return f"unsendable: {type(err).__name__}"


async def _drain(response: httpx.Response) -> None:
    """Read up to :data:`~curaflow.outbound.ANSWER_KEEP_BYTES` of a push's answer for at
    most :data:`ANSWER_DRAIN_S`, so a receiver that answers briefly keeps its connection
    for the next push; a longer or slower body is left unread (its connection is closed
    when the response is). Raises what reading raises."""
    read = 0
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(ANSWER_DRAIN_S):
            async for chunk in response.aiter_raw():
                read += len(chunk)
                if read > ANSWER_KEEP_BYTES:
                    return


def _described(answer: httpx.Response) -> list[tuple[bytes, bytes]]:
    """``answer``'s header bytes but those describing its body as it came (its coding,
    framing and length): what goes with the body :func:`_page` decoded."""
    return [(k, v) for k, v in answer.headers.raw if k.lower() not in _FRAMING]


#: Headers describing a body as it came over the wire (:func:`_described`).
_FRAMING = (b"content-encoding", b"transfer-encoding", b"content-length")


async def _page(response: httpx.Response) -> bytes | None:
    """The body of an answer that may be Cloudflare's own page (:func:`~curaflow.routes.base.cloudflare_reads_body`),
    decoded (its ``Content-Encoding`` undone a bounded step at a time,
    :func:`~curaflow.outbound.iter_capped`): whole, or its first
    :data:`~curaflow.outbound.ANSWER_KEEP_BYTES` (Cloudflare's page states its code near its
    start); None when it did not come that far within :data:`ANSWER_DRAIN_S`. Raises what
    reading raises."""
    kept = bytearray()
    try:
        async with asyncio.timeout(ANSWER_DRAIN_S):
            async for chunk in iter_capped(response, None):
                kept += chunk
                if len(kept) >= ANSWER_KEEP_BYTES:
                    return bytes(kept[:ANSWER_KEEP_BYTES])
    except TimeoutError:
        return None
    return bytes(kept)


@contextlib.asynccontextmanager
async def _beating() -> AsyncIterator[None]:
    """Heartbeat every :data:`~activities.heartbeat.CANCEL_PROBE_S` while a push is out:
    a cancel rides on a heartbeat's answer, and a slow receiver must never cost a
    heartbeat timeout (an attempt that ends without settling its event)."""

    async def beat() -> None:
        while True:
            await asyncio.sleep(CANCEL_PROBE_S)
            activity.heartbeat()

    task = asyncio.create_task(beat())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
