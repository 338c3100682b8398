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

from datetime import timedelta
from typing import TYPE_CHECKING

from temporalio.exceptions import ApplicationError

from curaflow.domain.messages import CellUpdate
from curaflow.domain.models import CellSnapshot
from curaflow.domain.ratelimit import cooldown_ms
from curaflow.domain.reasons import TerminalReason
from curaflow.ledger.cells import Barrier
from curaflow.routes.base import RouteError
from curaflow.sources.base import Source, SourcePolicy
from curaflow.sources.errors import SourceError
from curaflow.sources.registry import UnsupportedSource

if TYPE_CHECKING:
    from activities.deps import ActivityDeps


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


def route_failure(err: RouteError, delay_ms: int | None = None) -> ApplicationError:
    """The ``ApplicationError`` for a failed delivery attempt.

    Args:
        delay_ms: the wait before the next attempt for a rate limit
            (:func:`curaflow.ledger.route_gates.rate_limited`); else the delay the
            receiver stated (a ``Retry-After`` on a 5xx), else Temporal's backoff.
    """
    if delay_ms is not None:
        delay: timedelta | None = timedelta(milliseconds=delay_ms)
    else:
        delay = timedelta(seconds=err.retry_after_s) if err.retry_after_s else None
    return ApplicationError(str(err), type=str(err.reason), non_retryable=err.permanent, next_retry_delay=delay)


def permanent(reason: TerminalReason | str, message: str) -> ApplicationError:
    """A non-retryable ``ApplicationError`` of type ``reason``."""
    return ApplicationError(message, type=str(reason), non_retryable=True)


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
        ApplicationError: ``configuration_error`` (not retryable) when no source of that
            name is configured on this worker, or its kind is not registered here.
    """
    try:
        return deps.source(name)
    except KeyError:
        raise permanent(
            TerminalReason.CONFIGURATION_ERROR,
            f"source {name!r} is not configured (no [sources] entry and no [pixiv] account of that name)",
        ) from None
    except UnsupportedSource as err:
        raise permanent(TerminalReason.CONFIGURATION_ERROR, f"source {name!r}: {err}") from None
