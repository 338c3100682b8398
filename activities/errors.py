"""Turn source and route failures into Temporal ``ApplicationError`` s typed by reason code.

Retries belong to Temporal (DESIGN.md decision 5): an activity raises
``ApplicationError(type=<reason code>)``; permanent failures are ``non_retryable``; a
source rate limit becomes a cooldown ladder expressed as ``next_retry_delay`` (60 s
doubling per attempt up to 15 min, a ``Retry-After`` as the floor — reference
``pixiv-and-delivery-apis.md`` §2.5); a route's ``retry_after`` is honoured exactly.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from temporalio.exceptions import ApplicationError

from curaflow.domain.messages import CellUpdate
from curaflow.domain.models import CellSnapshot
from curaflow.domain.reasons import TerminalReason
from curaflow.ledger.cells import Barrier
from curaflow.routes.base import RouteError
from curaflow.sources.base import Source
from curaflow.sources.errors import SourceError
from curaflow.sources.registry import UnsupportedSource

if TYPE_CHECKING:
    from activities.deps import ActivityDeps

RATE_LIMIT_BASE_S = 60.0
RATE_LIMIT_CAP_S = 900.0


def cooldown_s(attempt: int, retry_after_s: float | None, base_s: float = RATE_LIMIT_BASE_S) -> float:
    """Cooldown before the next attempt after the ``attempt``-th rate limit, in seconds."""
    ladder = min(RATE_LIMIT_CAP_S, base_s * (2 ** max(0, attempt - 1)))
    return max(ladder, retry_after_s or 0.0)


def source_failure(err: SourceError, attempt: int, *, rate_limit_base_s: float = RATE_LIMIT_BASE_S) -> ApplicationError:
    """The ``ApplicationError`` for a failed source call on attempt ``attempt``.

    A rate limit waits the cooldown the account's gate decided (``err.cooldown_s``: its
    ladder across every job of the account, persisted in the ledger); without a gate
    the ladder climbs with the activity's attempt number instead.
    """
    delay = None
    if err.reason == TerminalReason.RATE_LIMITED:
        if err.cooldown_s is not None:
            delay = timedelta(seconds=max(0.001, err.cooldown_s))
        else:
            delay = timedelta(seconds=cooldown_s(attempt, err.retry_after_s, rate_limit_base_s))
    return ApplicationError(
        str(err),
        type=str(err.reason),
        non_retryable=not err.retryable,
        next_retry_delay=delay,
    )


def route_failure(err: RouteError) -> ApplicationError:
    """The ``ApplicationError`` for a failed delivery attempt."""
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
