"""The one decider of a cell's terminal reason, of step retryability and of attempt budgets.

DESIGN.md decision 13 ("one owner per decision"). Everything that can end a cell hands
its *facts* to this module and applies the answer; nothing else maps failures to reasons:

* the workflow records what it saw of a failed step as a :class:`StepFailure` (raw facts
  from Temporal: the failure kind, the ``ApplicationError`` type, the timeout type, the
  retry state) and, when it finishes, why it is finishing (:class:`FinishCause`);
* the reconciler, for jobs no workflow can finish, only knows a cause (the execution was
  terminated, never started, lost its worker…);
* the ``finish`` step (:mod:`curaflow.ledger.finish`) calls :func:`cell_verdict` with
  those facts plus what the ledger knows of the cell (its stage, a recorded consumer
  cancel) and writes the answer, never rewriting it;
* the ``deliver`` activity asks :func:`delivery_verdict` what a failed send means for
  the intent and the cell;
* the ``search`` and ``fetch`` activities ask :func:`no_candidate_verdict` why a cell that
  bound nothing ends (a scan cap is not exhaustion).

Retryability of an activity failure comes from the reason catalogue
(:data:`curaflow.domain.reasons.REASONS`): :data:`NON_RETRYABLE_TYPES`.

**Attribution before judgement**: every failure arrives here as a reason code,
and the catalogue names the reason's one owner (:class:`~curaflow.domain.reasons.Owner`:
work, route, source, account, curaflow, operator; :func:`owner_of`). The verdicts are judged from
that owner: only a failure owned by the *work* refuses the work for good on a route; a
*route*-owned failure ends the cell (alertable) and leaves the work free for a later job;
a final failure after part of the work was posted is *partial*. Routes and the source
only classify an answer into a reason; they never decide what it means.

Each question has its module — :mod:`~curaflow.domain.verdicts.failures` (a failed step),
:mod:`~curaflow.domain.verdicts.finish` (a cell open when its job finishes),
:mod:`~curaflow.domain.verdicts.delivery` (a failed send),
:mod:`~curaflow.domain.verdicts.no_candidate` (a cell that bound nothing) and
:mod:`~curaflow.domain.verdicts.budgets` (a job no workflow finished) — and every name
is imported from here.

Pure modules: imported by workflows through the sandbox pass-through. Table-tested in
``tests/unit/test_verdicts.py``.
"""

from __future__ import annotations

from curaflow.domain.verdicts.budgets import PendingStep, budget_cause, step_alive
from curaflow.domain.verdicts.delivery import REFUSAL_REASONS, DeliveryVerdict, delivery_verdict
from curaflow.domain.verdicts.failures import (
    BUDGET_REASONS,
    EXHAUSTION_REASONS,
    NON_RETRYABLE_TYPES,
    FailureKind,
    Step,
    StepFailure,
    attempt_budget,
    ended_by_deadline,
    failure_reason,
    operator_changed_options,
    owner_of,
)
from curaflow.domain.verdicts.finish import (
    CAUSE_REASONS,
    STOPPED_REASONS,
    WORKFLOW_CAUSES,
    FinishCause,
    cancel_stopped,
    cell_verdict,
    waits_for_sends,
)
from curaflow.domain.verdicts.no_candidate import no_candidate_state, no_candidate_verdict

__all__ = [
    "BUDGET_REASONS",
    "CAUSE_REASONS",
    "EXHAUSTION_REASONS",
    "NON_RETRYABLE_TYPES",
    "REFUSAL_REASONS",
    "STOPPED_REASONS",
    "WORKFLOW_CAUSES",
    "DeliveryVerdict",
    "FailureKind",
    "FinishCause",
    "PendingStep",
    "Step",
    "StepFailure",
    "attempt_budget",
    "budget_cause",
    "cancel_stopped",
    "cell_verdict",
    "delivery_verdict",
    "ended_by_deadline",
    "failure_reason",
    "no_candidate_state",
    "no_candidate_verdict",
    "operator_changed_options",
    "owner_of",
    "step_alive",
    "waits_for_sends",
]
