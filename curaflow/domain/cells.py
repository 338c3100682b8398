"""The cell state machine (DESIGN.md decision 4; reference ``pixivflow-job-system.md`` §5.2).

A cell is one target inside one job. States::

    pending → selected → artifact_ready → delivery_pending → submitted
                                   terminal: submitted | no_candidate | duplicate | failed

Terminal states are immutable and a submitted cell is never downgraded. A same-state
write is a no-op. The only writes outside these transitions are the *provisional
release* (``selected → pending`` for the same work, when a bound candidate turns out
to be unavailable) and the fallback bump (back to ``pending`` for another stage), both
done by :mod:`curaflow.ledger.cells`, never by callers of :func:`check_transition`.

Pure module: imported by workflows through the sandbox pass-through.
"""

from __future__ import annotations

from enum import StrEnum


class CellState(StrEnum):
    """State of one cell (``cells.state``)."""

    PENDING = "pending"
    SELECTED = "selected"
    ARTIFACT_READY = "artifact_ready"
    DELIVERY_PENDING = "delivery_pending"
    SUBMITTED = "submitted"
    NO_CANDIDATE = "no_candidate"
    DUPLICATE = "duplicate"
    FAILED = "failed"


class CellStage(StrEnum):
    """What a non-terminal cell is doing right now (``cells.stage``), for progress display."""

    QUEUED = "queued"
    SEARCHING = "searching"
    FETCHING = "fetching"
    DELIVERING = "delivering"
    DONE = "done"


TERMINAL_STATES: frozenset[CellState] = frozenset(
    {CellState.SUBMITTED, CellState.NO_CANDIDATE, CellState.DUPLICATE, CellState.FAILED}
)

_ALLOWED: dict[CellState, frozenset[CellState]] = {
    CellState.PENDING: frozenset(
        {
            CellState.SELECTED,
            CellState.ARTIFACT_READY,
            CellState.DELIVERY_PENDING,
            CellState.SUBMITTED,
            CellState.NO_CANDIDATE,
            CellState.DUPLICATE,
            CellState.FAILED,
        }
    ),
    CellState.SELECTED: frozenset(
        {
            CellState.ARTIFACT_READY,
            CellState.DELIVERY_PENDING,
            CellState.SUBMITTED,
            CellState.NO_CANDIDATE,
            CellState.DUPLICATE,
            CellState.FAILED,
        }
    ),
    CellState.ARTIFACT_READY: frozenset(
        {CellState.DELIVERY_PENDING, CellState.SUBMITTED, CellState.DUPLICATE, CellState.FAILED}
    ),
    CellState.DELIVERY_PENDING: frozenset({CellState.SUBMITTED, CellState.DUPLICATE, CellState.FAILED}),
}


class IllegalTransition(Exception):
    """Raised by :func:`require_transition` for a transition the FSM forbids."""

    def __init__(self, current: CellState, target: CellState) -> None:
        super().__init__(f"illegal cell transition {current} -> {target}")
        self.current = current
        self.target = target


def is_terminal(state: str) -> bool:
    """Return True if ``state`` is one of the four terminal cell states."""
    return state in TERMINAL_STATES


def check_transition(current: str, target: str) -> bool | None:
    """Decide a transition request.

    Args:
        current: the cell's present state.
        target: the requested state.

    Returns:
        ``True`` if the transition is allowed and changes the state, ``None`` if it is a
        same-state no-op, ``False`` if it is illegal (terminal cells never change; a
        transition may only move forward).
    """
    cur = CellState(current)
    tgt = CellState(target)
    if cur == tgt:
        return None
    if cur in TERMINAL_STATES:
        return False
    return tgt in _ALLOWED[cur]


def require_transition(current: str, target: str) -> bool:
    """Like :func:`check_transition` but raise on an illegal request.

    Returns:
        True when the state changes, False for a same-state no-op.

    Raises:
        IllegalTransition: if the FSM forbids the move.
    """
    verdict = check_transition(current, target)
    if verdict is False:
        raise IllegalTransition(CellState(current), CellState(target))
    return bool(verdict)


def stage_for_state(state: str) -> CellStage:
    """Default progress stage of a cell in ``state`` (used when no activity set one)."""
    return {
        CellState.PENDING: CellStage.QUEUED,
        CellState.SELECTED: CellStage.FETCHING,
        CellState.ARTIFACT_READY: CellStage.DELIVERING,
        CellState.DELIVERY_PENDING: CellStage.DELIVERING,
    }.get(CellState(state), CellStage.DONE)


STAGE_ORDER: dict[str, int] = {
    CellStage.QUEUED: 0,
    CellStage.SEARCHING: 1,
    CellStage.FETCHING: 2,
    CellStage.DELIVERING: 3,
    CellStage.DONE: 4,
}
