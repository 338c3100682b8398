"""Pushes: job events sent to the consumer's ``callback_url`` (reference §4.7, DESIGN.md decision 9).

One word for the mechanism: a *push* is one event sent to the job's callback URL (the
protocol's name for the destination); ``event_pushes`` holds them.

How it works:

1. **Enqueue.** When a job admitted with a ``callback_url`` gets an event, the same
   transaction freezes the Event JSON into ``event_pushes`` (:mod:`curaflow.ledger.event_pushes`).
   The host was checked against ``api.callback_allowed_hosts`` at admission.
2. **Send.** The ``push_events`` activity (:mod:`activities.push_events`) POSTs the job's
   pending events oldest first, each exactly as frozen, with the headers of
   :func:`push_headers` (``Idempotency-Key: <event_id>``), **signed** as the webhook
   route signs (Standard Webhooks, ``api.callback_secret``: ``webhook-id`` = the event
   id, ``webhook-timestamp``, ``webhook-signature``; :func:`sign_push`), through the
   outbound layer (:mod:`curaflow.outbound`: ``callback_timeout_ms`` is the total time of
   one POST, 16 KiB of the answer are read, the destination is the allow-list's and its
   address is checked when connecting). :func:`classify_answer` decides: 2xx or 409 →
   delivered (but Cloudflare's own 409 page: the receiver never had it); 429, 5xx, Cloudflare's
   own 403 page or challenge page in front of the receiver (it never had the event), a
   redirect (never followed), timeouts and transport errors → retried (the activity fails and
   Temporal retries it with backoff, ``Retry-After`` honoured up to the cap, a 429
   without one waiting :func:`curaflow.domain.ratelimit.retry_delay_ms`'s backoff from
   5 s, never a constant), and so is a host whose name leads at connect time only to
   addresses the guard never connects to (``AddressRefused``: nothing connected; dead at
   once until 2026-12-07); an origin off the allow-list and any other 4xx →
   dead-lettered at once. An
   event is sent at most ``max_attempts`` (8) times, each counted in the ledger when it
   is claimed — whatever way it then ends — then dead-lettered. A dead event never
   blocks the ones after it; a retried one does (events arrive in order).
3. **Who pushes.** ``JobWorkflow`` runs ``push_events`` when the job starts (for
   ``job.accepted``), after every step (``job.started`` / ``job.progress``) and after
   ``finish`` (the terminal event), one at a time; its execution closes once every event
   is delivered or dead. Events written while no workflow serves the job — the
   reconciler or the HTTP cancel converging the ledger, or a workflow that was
   terminated — are found by the **sweeper** (:func:`run_push_sweeper`, in every worker
   process): pending events nobody touched for a while get an ``EventPushWorkflow``
   (id ``push-events:<job_id>``, :func:`push_workflow_id`) running the same activity.

Push never changes the job and never moves the consumer's ack cursor: push and pull are
independent, ``unacked`` still counts a pushed event.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from enum import StrEnum

import asyncpg
from standardwebhooks.webhooks import Webhook
from temporalio.client import Client
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError

import curaflow
from curaflow.config import Settings
from curaflow.domain.execution import PUSH_WORKFLOW
from curaflow.domain.messages import CallbackPolicy, PushInput
from curaflow.domain.presentation import push_summary
from curaflow.ledger.event_pushes import stale_jobs
from curaflow.observability.logs import get_logger
from curaflow.observability.supervision import Supervisor
from curaflow.routes.base import SEND_AGAIN_STATUSES, header_value

log = get_logger("curaflow.jobs.pushes")


class Verdict(StrEnum):
    """What to do with an event after one send."""

    DELIVERED = "delivered"
    RETRY = "retry"
    DEAD = "dead"


def classify_answer(status: int | None, *, never_reached: bool = False) -> Verdict:
    """Classify the answer to one push (``None``: no answer — timeout or transport error).

    The answer is its status line alone: once the status arrived, what the body does (never
    ending, cut mid-way) does not change it (:mod:`activities.push_events`) — but for an
    answer that is not the receiver's at all: ``never_reached`` says Cloudflare, in front of
    the receiver, answered itself that it never handed the request on (its 1xxx page under
    a 409, ``error code: 1001``, or under a 403, ``error code: 1020`` — its edge's block —,
    its challenge page, ``cf-mitigated: challenge``: :func:`curaflow.routes.base.cloudflare_said`,
    the routes' one reading), or that such a page could not be told from the receiver's own
    403 or 409 (its body unread). Such an answer is retried whatever its status — one of the
    event's counted attempts, backed off, dead only once they ran out: until 2026-12-07
    Cloudflare's 409 was the receiver's "already recorded" — the push recorded delivered,
    the consumer never had the event —, and its 403 the receiver's "other 4xx", the event
    dead-lettered at once, never received.

    2xx and 409 ("already recorded") are delivered; every other 4xx is dead-lettered at
    once (the original's rule, reference §4.7: "other 4xx → dead-letter at once") but 429
    and HTTP's own "send it again" (408, 421, 425: :data:`~curaflow.routes.base.SEND_AGAIN_STATUSES`,
    retried since 2026-12-06); everything else — a 5xx, no answer, a redirect (never
    followed) or any status outside 2xx / 4xx / 5xx — is retried: one of the event's
    counted attempts, never the event (the unknown is cheap). Until 2026-12-06 a 1xx or a
    3xx dead-lettered the event at once: a receiver behind a load balancer answering a
    temporary redirect (a maintenance page, a failover) lost every push of that minute.
    """
    if status is None or never_reached:
        return Verdict.RETRY
    if 200 <= status < 300 or status == 409:
        return Verdict.DELIVERED
    if 400 <= status < 500 and status != 429 and status not in SEND_AGAIN_STATUSES:
        return Verdict.DEAD
    return Verdict.RETRY


def push_headers(job_id: str, event_id: str) -> dict[str, str]:
    """Headers of one push (a POST to the callback URL).

    ``Idempotency-Key`` carries the event id (the consumer's dedupe key, stable across
    retries); ``X-Idempotency-Key`` keeps the original's ``job-event:<job_id>:<event_id>``.
    Job ids are percent-encoded where they are not printable ASCII
    (:func:`~curaflow.routes.base.header_value`).
    """
    return {
        "content-type": "application/json",
        "idempotency-key": event_id,
        "x-idempotency-key": header_value(f"job-event:{job_id}:{event_id}"),
        "x-curaflow-delivery": "job-event",
        "x-curaflow-job-id": header_value(job_id),
        "user-agent": f"curaflow/{curaflow.__version__}",
    }


def sign_push(headers: dict[str, str], secret: str, event_id: str, body: str, at: datetime) -> dict[str, str]:
    """``headers`` plus the Standard Webhooks signature of one push (the webhook route's scheme).

    ``webhook-id`` is the event id (stable across retries, like ``Idempotency-Key``),
    ``webhook-timestamp`` the send time (Unix seconds, UTC: each retry is signed again,
    so a receiver's freshness window holds), ``webhook-signature`` ``v1,<base64
    HMAC-SHA256>`` over ``<webhook-id>.<webhook-timestamp>.<body>`` with ``secret``
    (``whsec_<base64>``). A consumer verifies with the ``standardwebhooks`` library:
    ``Webhook(secret).verify(body, headers)``.
    """
    signed = dict(headers)
    signed["webhook-id"] = event_id
    signed["webhook-timestamp"] = str(int(at.timestamp()))
    signed["webhook-signature"] = Webhook(secret).sign(event_id, at, body)
    return signed


#: Prefix of a push run's workflow id. No job id can begin with it: every job id begins
#: with a target or schedule id (``[A-Za-z0-9_-]``, :data:`curaflow.config.ID_PATTERN`)
#: followed by ``@``, and ``:`` is neither.
PUSH_WORKFLOW_PREFIX = "push-events:"


def push_workflow_id(job_id: str) -> str:
    """Workflow id of the sweeper's push run of ``job_id``: ``push-events:<job_id>``.

    It can never be a job's id (:data:`PUSH_WORKFLOW_PREFIX`). It used to be
    ``<job_id>/push-events`` — the id of the job whose idempotency key is the other's key
    plus ``/push-events``: that job's start attached to the push run (``USE_EXISTING``)
    and the job never ran, or a push run was added under that job's id after it ended.
    """
    return f"{PUSH_WORKFLOW_PREFIX}{job_id}"


def sweep_idle_ms(policy: CallbackPolicy) -> int:
    """How long a pending event must be untouched before the sweeper takes it over.

    Longer than the longest gap between two attempts of a live push (a request timeout
    plus the largest backoff), so a push in progress is never doubled.
    """
    return policy.timeout_ms + policy.max_interval_ms + 5_000


async def sweep_once(pool: asyncpg.Pool, client: Client, settings: Settings) -> list[str]:
    """Start an ``EventPushWorkflow`` for every job with stale pending events.

    A job whose push run is still running keeps it: the start is refused
    (``WorkflowIDConflictPolicy.FAIL``, Temporal's ``WorkflowAlreadyStartedError`` naming
    the running run) and logged ``push.sweep_found_running``; a run started is logged
    ``push.sweep_started``, each with the run's id. Until 2026-12-06 the start attached to
    the running run (``USE_EXISTING``: the same outcome) and the SDK's public handle does
    not say which happened, so both were logged ``push.sweep_started``.

    Returns:
        The job ids a push run was started (or found running) for.
    """
    policy = settings.push_policy()
    started: list[str] = []
    for job_id in await stale_jobs(pool, sweep_idle_ms(policy)):
        try:
            handle = await client.start_workflow(
                PUSH_WORKFLOW,
                PushInput(job_id=job_id, policy=policy),
                id=push_workflow_id(job_id),
                task_queue=settings.temporal.task_queue,
                id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
                id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
                execution_timeout=timedelta(hours=24),
                static_summary=push_summary(job_id),
            )
        except WorkflowAlreadyStartedError as running:
            started.append(job_id)
            log.info("push.sweep_found_running", job_id=job_id, run_id=running.run_id)
            continue
        except RPCError as err:
            log.warning("push.sweep_start_failed", job_id=job_id, error=err.message)
            continue
        started.append(job_id)
        log.info("push.sweep_started", job_id=job_id, run_id=handle.result_run_id)
    return started


async def run_push_sweeper(
    pool: asyncpg.Pool,
    client: Client,
    settings: Settings,
    stop: asyncio.Event,
    interval_s: float,
    *,
    supervisor: Supervisor | None = None,
) -> None:
    """Run :func:`sweep_once` every ``interval_s`` seconds until ``stop`` is set.

    A supervised loop named ``push_sweeper`` (:mod:`curaflow.observability.supervision`): any failure
    is logged, counted and retried with backoff; one that does not recover fails the
    process through ``supervisor`` (None: a private supervisor that only logs).
    """
    sup = supervisor or Supervisor(stop)
    await sup.run_every("push_sweeper", interval_s, lambda: sweep_once(pool, client, settings))
