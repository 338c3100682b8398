"""Cell transitions in the ledger, each in the caller's transaction with its effect.

Lock order everywhere: the job row first (``SELECT … FOR UPDATE``), then cell and intent
rows. Every function here expects a connection inside a transaction unless its doc says
otherwise. Transitions go through the FSM of :mod:`curaflow.domain.cells`: a terminal
cell never changes and a submitted cell is never downgraded; an illegal request leaves
the row untouched and returns the cell as it is.

One concern per module, every name imported from here:
:mod:`~curaflow.ledger.cells.barriers` (the job row's lock and its barrier),
:mod:`~curaflow.ledger.cells.stage` (the job-level stage and ``job.progress``),
:mod:`~curaflow.ledger.cells.steps` (opening an attempt, carrying it on),
:mod:`~curaflow.ledger.cells.leases` (a cell's lease: beats, release),
:mod:`~curaflow.ledger.cells.resume` (where a search resumes),
:mod:`~curaflow.ledger.cells.reservations` (a work reserved on every route, the intents' keys),
:mod:`~curaflow.ledger.cells.binding` (binding a work, the search step's binding, rebinding),
:mod:`~curaflow.ledger.cells.transitions` (``artifact_ready``, terminal states, the fallback
pass) and :mod:`~curaflow.ledger.cells.rows` (what they share of a cell row).
"""

from __future__ import annotations

from curaflow.ledger.cells.barriers import Barrier, barrier_of, barrier_sql, lock_job
from curaflow.ledger.cells.binding import (
    SPARE_CANDIDATES,
    Binding,
    Carry,
    Renewal,
    bind_search,
    bind_work,
    rebind_next,
)
from curaflow.ledger.cells.leases import end_lease, heartbeat
from curaflow.ledger.cells.reservations import IN_FLIGHT_INTENT_STATES, LIVE_INTENT_STATES, intent_key
from curaflow.ledger.cells.resume import SearchResume, resume_needed, save_checkpoint, search_resume
from curaflow.ledger.cells.stage import StageFacts, sole_cell_stage, sync_job_stage
from curaflow.ledger.cells.steps import StepClaim, StepOpened, claim_matches_sql, continue_step, start_step
from curaflow.ledger.cells.transitions import artifact_ready, finish_cell, set_fallback_pass

__all__ = [
    "IN_FLIGHT_INTENT_STATES",
    "LIVE_INTENT_STATES",
    "SPARE_CANDIDATES",
    "Barrier",
    "Binding",
    "Carry",
    "Renewal",
    "SearchResume",
    "StageFacts",
    "StepClaim",
    "StepOpened",
    "artifact_ready",
    "barrier_of",
    "barrier_sql",
    "bind_search",
    "bind_work",
    "claim_matches_sql",
    "continue_step",
    "end_lease",
    "finish_cell",
    "heartbeat",
    "intent_key",
    "lock_job",
    "rebind_next",
    "resume_needed",
    "save_checkpoint",
    "search_resume",
    "set_fallback_pass",
    "sole_cell_stage",
    "start_step",
    "sync_job_stage",
]
