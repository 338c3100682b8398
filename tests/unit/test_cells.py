"""The cell state machine (reference §5.2)."""

from __future__ import annotations

import pytest

from curaflow.domain.cells import CellState, IllegalTransition, check_transition, is_terminal, require_transition

S = CellState
ALLOWED = {
    S.PENDING: {S.SELECTED, S.ARTIFACT_READY, S.DELIVERY_PENDING, S.SUBMITTED, S.NO_CANDIDATE, S.DUPLICATE, S.FAILED},
    S.SELECTED: {S.ARTIFACT_READY, S.DELIVERY_PENDING, S.SUBMITTED, S.NO_CANDIDATE, S.DUPLICATE, S.FAILED},
    S.ARTIFACT_READY: {S.DELIVERY_PENDING, S.SUBMITTED, S.DUPLICATE, S.FAILED},
    S.DELIVERY_PENDING: {S.SUBMITTED, S.DUPLICATE, S.FAILED},
    S.SUBMITTED: set(),
    S.NO_CANDIDATE: set(),
    S.DUPLICATE: set(),
    S.FAILED: set(),
}


@pytest.mark.parametrize("current", list(S))
@pytest.mark.parametrize("target", list(S))
def test_every_transition_follows_the_table(current: CellState, target: CellState) -> None:
    verdict = check_transition(current, target)
    if current == target:
        assert verdict is None
    else:
        assert verdict is (target in ALLOWED[current])


def test_terminal_states_are_immutable_and_submitted_never_downgrades() -> None:
    for terminal in (S.SUBMITTED, S.NO_CANDIDATE, S.DUPLICATE, S.FAILED):
        assert is_terminal(terminal)
        for other in S:
            if other != terminal:
                assert check_transition(terminal, other) is False
    with pytest.raises(IllegalTransition):
        require_transition(S.SUBMITTED, S.FAILED)
    assert require_transition(S.PENDING, S.SELECTED) is True
    assert require_transition(S.SELECTED, S.SELECTED) is False


def test_backwards_moves_are_illegal() -> None:
    assert check_transition(S.ARTIFACT_READY, S.SELECTED) is False
    assert check_transition(S.DELIVERY_PENDING, S.PENDING) is False
    assert check_transition(S.ARTIFACT_READY, S.NO_CANDIDATE) is False
