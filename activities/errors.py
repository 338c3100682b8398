"""Turn source and route failures into Temporal ``ApplicationError`` s typed by reason code.

Retries belong to Temporal (DESIGN.md decision 5): an activity raises
``ApplicationError(type=<reason code>)``; permanent failures are ``non_retryable``; every
delay is :mod:`curaflow.domain.ratelimit`'s, expressed as ``next_retry_delay``: a source
rate limit waits the account's cooldown ladder (60 s doubling per attempt up to 15 min, a
``Retry-After`` as the floor up to the cap — reference ``pixiv-and-delivery-apis.md`` §2.5); a route's
rate limit waits the delay the receiver stated, exactly, or the backoff of a limit that
stated none (``retry_delay_ms``, counted per route by
:func:`curaflow.ledger.route_gates.rate_limited`).
"""

from __future__ import annotations

import errno
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Literal

from temporalio import activity
from temporalio.client import Client
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError

from curaflow.config.delivery import ROUTE_RATE_LIMIT_CAP_MS
from curaflow.domain.messages import CellUpdate
from curaflow.domain.models import CellSnapshot
from curaflow.domain.ratelimit import cooldown_ms, stated_wait_ms
from curaflow.domain.reasons import TerminalReason
from curaflow.ledger.cells import Barrier
from curaflow.observability import metrics
from curaflow.observability.logs import get_logger
from curaflow.routes.base import RouteError
from curaflow.sources.base import Source, SourcePolicy
from curaflow.sources.errors import SourceError
from curaflow.sources.registry import UnsupportedSource

if TYPE_CHECKING:
    from activities.deps import ActivityDeps

log = get_logger("curaflow.activities")


def source_failure(err: SourceError, attempt: int, *, policy: SourcePolicy | None = None) -> ApplicationError:
    """The ``ApplicationError`` for a failed source call on attempt ``attempt``.

    A rate limit waits the cooldown the account's gate decided (``err.cooldown_s``: its
    ladder across every job of the account, persisted in the ledger); without a gate
    the ladder climbs with the activity's attempt number instead, from the instance's
    ``policy`` (its ladder's base and cap, as its gate's; default: the ladder's defaults).
    """
    delay = None
    if err.reason == TerminalReason.RATE_LIMITED:
        if err.cooldown_s is not None:
            delay = timedelta(seconds=max(0.001, err.cooldown_s))
        else:
            retry_ms = err.retry_after_s * 1000 if err.retry_after_s else None
            ladder = policy or SourcePolicy()
            base_ms, cap_ms = int(ladder.rate_limit_base_s * 1000), int(ladder.rate_limit_cap_s * 1000)
            delay = timedelta(milliseconds=cooldown_ms(attempt, retry_ms, base_ms=base_ms, cap_ms=cap_ms))
    return ApplicationError(
        str(err),
        type=str(err.reason),
        non_retryable=not err.retryable,
        next_retry_delay=delay,
    )


def route_failure(
    err: RouteError, delay_ms: int | None = None, *, cap_ms: int = ROUTE_RATE_LIMIT_CAP_MS
) -> ApplicationError:
    """The ``ApplicationError`` for a failed delivery attempt.

    Args:
        delay_ms: the wait before the next attempt for a rate limit
            (:func:`curaflow.ledger.route_gates.rate_limited`); else the delay the
            receiver stated (a ``Retry-After`` on a 5xx; at least a second, at most
            ``cap_ms``: :func:`~curaflow.domain.ratelimit.stated_wait_ms`), else
            Temporal's backoff.
        cap_ms: the longest a receiver's stated unavailability is waited
            (``delivery.route_rate_limit_cap_ms``, which the deliver step passes; its
            default here). Until 2026-12-07 it was waited as stated, up to a week.
    """
    if delay_ms is None:  # a 5xx's stated wait, at least a second, at most the cap (stated_wait_ms)
        delay_ms = stated_wait_ms(err.retry_after_s * 1000 if err.retry_after_s else None, cap_ms)
    delay = timedelta(milliseconds=delay_ms) if delay_ms is not None else None
    return ApplicationError(str(err), type=str(err.reason), non_retryable=err.permanent, next_retry_delay=delay)


def permanent(reason: TerminalReason | str, message: str) -> ApplicationError:
    """A non-retryable ``ApplicationError`` of type ``reason``."""
    return ApplicationError(message, type=str(reason), non_retryable=True)


#: ``errno`` values of a full artifact disk (no space, quota exceeded).
DISK_FULL = frozenset({errno.ENOSPC, errno.EDQUOT})


def storage_failure(err: OSError) -> ApplicationError | None:
    """What an OS error of the artifact store's own disk ends a step with, or None: the one
    owner of that classification for every step that writes into the store — the fetch
    (a page, an animation) and a delivery restoring the ledger's copy into its transfer
    folder (DESIGN.md "Owners of decisions").

    A full disk (:data:`DISK_FULL`: ``ENOSPC``, ``EDQUOT``) is ``storage_full`` at once
    (owner ``curaflow``, not retried: no retry within the job frees the disk); any other
    is None — the caller raises it as it came, curaflow's, retried
    (:func:`~curaflow.sources.decoding.machine_error`). Until 2026-12-07 a delivery's
    restore let a full disk out as it came: retried on every delivery attempt, then
    ``internal_error`` ("read the worker's log"), where the fetch said ``storage_full``.
    """
    if err.errno not in DISK_FULL:
        return None
    return permanent(TerminalReason.STORAGE_FULL, f"artifact store: {err.strerror or 'no space left on device'}")


def barrier_update(cell: CellSnapshot, barrier: Barrier) -> CellUpdate:
    """The result of a step that found its job behind a barrier and went no further: the
    workflow takes the cancel path (``cancel_requested``) or stops at the deadline
    (``deadline_passed``). Found when the step opened, nothing was done; found when an
    ``acquire`` carried its step on from the binding (``cells.bind_search``), the cell
    stays ``selected`` and the job's finish releases the work."""
    return CellUpdate(
        cell=cell, cancel_requested=barrier == Barrier.CANCELLED, deadline_passed=barrier == Barrier.DEADLINE
    )


def source_of(deps: ActivityDeps, name: str) -> Source:
    """The source instance ``name`` of a target (``TargetSpec.account``).

    Raises:
        ApplicationError: ``configuration_mismatch`` (retryable, :func:`config_mismatch`)
            when no source of that name is configured on this worker, or its kind is not
            registered here: the job was admitted by a process that knows it, so another
            worker — or this one, restarted with the same configuration — can run the step.
    """
    try:
        return deps.source(name)
    except KeyError:
        raise config_mismatch(
            "source",
            name,
            f"source {name!r} is not configured on this worker (no [sources] entry and no [pixiv] account "
            "of that name)",
        ) from None
    except UnsupportedSource as err:
        raise config_mismatch("source", name, f"source {name!r}: {err}") from None


@dataclass(frozen=True)
class NextAttempt:
    """When the step's next attempt comes, as its own retry policy says (Temporal's).

    Attributes:
        delay_ms: the wait before it (``initial_interval × backoff_coefficient^(attempt−1)``,
            at most ``maximum_interval`` — Temporal's backoff, read from the policy the
            workflow scheduled the step with); None when the attempt carries no policy.
        last: this attempt is the step's last (``maximum_attempts`` reached): no next one.
    """

    delay_ms: int | None
    last: bool


def next_attempt() -> NextAttempt:
    """The running attempt's :class:`NextAttempt`, from ``activity.info()``'s retry policy.

    At any attempt number: past the point where the backoff's power is no float (attempt
    1 026 at Temporal's coefficient 2 — an operator's unlimited budget, ``temporal activity
    update-options --retry-maximum-attempts 0``, a large configured one, or a steep
    ``--retry-backoff-coefficient``) the wait is the ceiling, as Temporal's own; until
    2026-12-06 the power raised ``OverflowError`` and a worker that did not know the route
    failed the attempt with it, the mismatch neither counted nor logged.
    """
    info = activity.info()
    policy = info.retry_policy
    if policy is None:
        return NextAttempt(None, False)
    last = 0 < policy.maximum_attempts <= info.attempt
    initial_ms = policy.initial_interval.total_seconds() * 1000
    ceiling = policy.maximum_interval or policy.initial_interval * 100  # Temporal's default ceiling
    ceiling_ms = ceiling.total_seconds() * 1000
    try:
        delay = initial_ms * policy.backoff_coefficient ** max(0, info.attempt - 1)
    except OverflowError:
        delay = ceiling_ms
    return NextAttempt(max(1, int(min(delay, ceiling_ms))), last)


#: The budget of an attempt whose retry policy Temporal holds as unlimited (``maximum_attempts`` 0).
UNLIMITED_ATTEMPTS = 2**31 - 1

#: How long an attempt asks Temporal for the retry policy it holds now before it keeps the
#: one it started with (:func:`attempts_granted`), seconds.
HELD_POLICY_ASK_S = 5.0


async def attempts_granted(scheduled: int, client: Client | None) -> int:
    """The attempt budget the running attempt is judged against ("is this the last?").

    The larger of ``scheduled`` (the ``maximum_attempts`` the workflow scheduled the step
    with, carried in the step's input) and the maximum of the retry policy Temporal holds
    for the step: an operator's ``temporal activity update-options --retry-maximum-attempts
    N`` raises it, and the step must then use the attempts granted rather than end its cell
    on the scheduled last one; 0 — unlimited, as Temporal reads it — gives
    :data:`UNLIMITED_ATTEMPTS` (the job's deadline still bounds the step). A *lowered*
    maximum is not followed here: Temporal stops retrying after the attempt, and the
    workflow names that cut ``step_options_changed``, owner the operator
    (:func:`curaflow.domain.verdicts.failures.operator_changed_options`).

    The policy held *now*, not the one the attempt started with
    (``activity.info().retry_policy``, a copy taken at its start): a raise while the
    scheduled last attempt runs — waiting for a slow route's answer — is Temporal's retry
    (until 2026-12-06 that attempt ended the cell ``delivery_abandoned``). Temporal is
    asked (:func:`held_maximum_attempts`) only when the answer can matter: from the
    scheduled last attempt on (below it the budget is at least ``scheduled`` either way);
    no answer keeps the policy the attempt started with.
    """
    info = activity.info()
    held: int | None = None
    if info.attempt >= scheduled:
        held = await held_maximum_attempts(client)
    if held is None:
        if info.retry_policy is None:
            return scheduled
        held = info.retry_policy.maximum_attempts
    if held == 0:
        return UNLIMITED_ATTEMPTS
    return max(scheduled, held)


async def held_maximum_attempts(client: Client | None) -> int | None:
    """The ``maximum_attempts`` of the retry policy Temporal holds now for the running
    step (0: unlimited), as an operator's ``temporal activity update-options`` left it.

    One describe of the attempt's run (at most :data:`HELD_POLICY_ASK_S`), read from its
    pending activity of this attempt's id. None — the unknown keeps what the attempt
    started with — when there is no client, Temporal does not answer in time or at all,
    or the run holds no such pending activity (a standalone activity, an attempt whose
    run is gone).
    """
    info = activity.info()
    if client is None or info.workflow_id is None:
        return None
    try:
        described = await client.get_workflow_handle(info.workflow_id, run_id=info.workflow_run_id).describe(
            rpc_timeout=timedelta(seconds=HELD_POLICY_ASK_S)
        )
    except (TimeoutError, RPCError) as err:
        log.warning("attempt.policy_unknown", job_id=info.workflow_id, attempt=info.attempt, error=type(err).__name__)
        return None
    for pending in described.raw_description.pending_activities:
        if pending.activity_id == info.activity_id:
            return int(pending.maximum_attempts)
    return None


def config_mismatch(kind: Literal["route", "source", "setting"], name: str, detail: str) -> ApplicationError:
    """The failure of an attempt whose worker does not know the route or the source account
    ``name`` the job names (``kind``): not configured in this process, or its kind not
    registered here — or lacks the setting ``name`` the step needs (``kind`` ``setting``:
    ``api.callback_secret``, without which no push is signed; since 2026-12-07).

    The job was admitted by a process that knows it (admission resolves a target's routes
    and account from its configuration), so the processes' configurations differ — as they
    do for a while in every rolling change. The unknown is cheap: this costs **one attempt**
    of the step, never the cell — a retryable ``configuration_mismatch`` (the reason
    catalogue owns that, :data:`curaflow.domain.verdicts.NON_RETRYABLE_TYPES` does not list
    it), waited with the step's own backoff (:func:`next_attempt`, made explicit so the
    report can say when it was due) so that Temporal hands the retry to whichever worker
    polls then. Counted in ``curaflow_config_mismatch_total{kind, name}`` and
    ``curaflow_config_mismatch_last_seconds`` (alert ``CuraflowConfigurationMismatch``)
    and logged ``config.mismatch`` with the job and the attempt. The caller raises it
    before the step touches the ledger (nothing claimed, no lease taken).
    """
    info = activity.info()
    nxt = next_attempt()
    metrics.record_config_mismatch(kind, name, time.time())
    log.error(
        "config.mismatch",
        kind=kind,
        name=name,
        job_id=info.workflow_id,
        activity=info.activity_type,
        attempt=info.attempt,
        last_attempt=nxt.last,
        retry_in_s=None if nxt.delay_ms is None else round(nxt.delay_ms / 1000, 3),
        error=detail,
        hint=(
            f"this worker has no {name}, which the step needs"
            if kind == "setting"
            else f"this worker does not know {kind} {name!r}, which the job names"
        )
        + ": the processes' configurations differ (a rolling change not finished?); the attempt is retried, on "
        "any worker — give every worker and the API the same configuration",
    )
    return ApplicationError(
        f"{detail}; the processes' configurations differ: retried (one attempt used)",
        type=str(TerminalReason.CONFIGURATION_MISMATCH),
        non_retryable=False,
        next_retry_delay=None if nxt.delay_ms is None else timedelta(milliseconds=nxt.delay_ms),
    )
