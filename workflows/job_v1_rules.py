"""The rules :mod:`workflows.job_v1` decides with, frozen as they were when core v2 landed.

Executions started before core v2 replay :class:`workflows.job_v1.JobV1`. Whatever that
code computes its commands and published values from (the reason a failed step gives its
cell, the ``JobStatus`` search attribute, the live state of the ``status`` query and the
UI's current details, the options of ``push_events``) is copied here, so a change to the
live rules (:mod:`curaflow.domain.cells`, :mod:`curaflow.domain.projection`,
:mod:`curaflow.domain.reasons`, :mod:`workflows.details`, :mod:`workflows.event_push`) never
changes what an old execution does. ``tests/unit/test_job_v1_frozen.py`` fails when
``job_v1`` (or this module) reaches for a live rule again.

Never edit these rules: they are history. They import only data types (the activities'
wire messages), which evolve compatibly (new fields have defaults). Deleted with
``job_v1`` (docs/operations.md "Upgrading").

Deterministic and sandbox-clean: pure functions over pydantic messages.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from types import MappingProxyType

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from curaflow.domain.messages import CallbackPolicy, JobInput, JobState
    from curaflow.domain.models import CellSnapshot

# ---- cells (curaflow.domain.cells) ----------------------------------------------------

TERMINAL_STATES: frozenset[str] = frozenset({"submitted", "no_candidate", "duplicate", "failed"})
STAGE_ORDER: Mapping[str, int] = MappingProxyType(
    {"queued": 0, "searching": 1, "fetching": 2, "delivering": 3, "done": 4}
)


def is_terminal(state: str) -> bool:
    """True if ``state`` is one of the four terminal cell states."""
    return state in TERMINAL_STATES


# ---- reasons (curaflow.domain.reasons) ------------------------------------------------

#: The reason codes core v1 knew; any other code parses as ``internal_error``.
REASON_CODES: frozenset[str] = frozenset(
    {
        "no_candidate",
        "duplicate_exhausted",
        "filter_exhausted",
        "download_timeout",
        "download_failed",
        "metadata_failed",
        "rate_limited",
        "auth_failed",
        "remote_http_error",
        "delivery_failed",
        "delivery_rejected",
        "telepost_rejected",
        "telegram_failed",
        "delivery_unknown",
        "network_error",
        "execution_timeout",
        "configuration_error",
        "internal_error",
        "queued_too_long",
        "stalled_no_heartbeat",
        "delivery_abandoned",
        "cancelled_by_consumer",
        "execution_terminated",
    }
)
AUTH_FAILED = "auth_failed"
CONFIGURATION_ERROR = "configuration_error"
INTERNAL_ERROR = "internal_error"
DELIVERY_REJECTED = "delivery_rejected"
DELIVERY_UNKNOWN = "delivery_unknown"
DELIVERY_ABANDONED = "delivery_abandoned"
QUEUED_TOO_LONG = "queued_too_long"
STALLED_NO_HEARTBEAT = "stalled_no_heartbeat"
EXPIRY_REASONS: frozenset[str] = frozenset({"queued_too_long", "stalled_no_heartbeat", "execution_timeout"})
CANCEL_REASONS: frozenset[str] = frozenset({"cancelled_by_consumer", "execution_terminated"})


def parse_reason(code: str | None) -> str:
    """``code`` if core v1 knew it, else ``internal_error`` (missing included)."""
    return code if code in REASON_CODES else INTERNAL_ERROR  # type: ignore[return-value]


# ---- job status and stage (curaflow.domain.projection) --------------------------------


def job_status(cells: Sequence[CellSnapshot]) -> str:
    """The job status of the ``status`` query (``queued`` … ``expired``) from the cells.

    Any cell open: ``queued`` while all are ``pending``, else ``running``. All terminal:
    any ``submitted`` → ``succeeded``; a cell stopped on purpose and no system failure →
    ``cancelled``; system failures all for an expiry reason → ``expired``; else ``failed``.
    """
    if not cells:
        return "queued"
    if not all(is_terminal(c.state) for c in cells):
        return "queued" if all(c.state == "pending" for c in cells) else "running"
    if any(c.state == "submitted" for c in cells):
        return "succeeded"
    failed = [c for c in cells if c.state == "failed" and c.reason not in CANCEL_REASONS]
    cancelled = any(c.state == "failed" and c.reason in CANCEL_REASONS for c in cells)
    if cancelled and not failed:
        return "cancelled"
    if failed and all(c.reason in EXPIRY_REASONS for c in failed):
        return "expired"
    return "failed"


def job_stage(cells: Sequence[CellSnapshot], status: str) -> str:
    """The job's progress stage: ``done`` when succeeded, the status word when otherwise
    terminal, else the least advanced stage of the open cells (``queued`` if none)."""
    if status == "succeeded":
        return "done"
    if status in ("failed", "cancelled", "expired"):
        return status
    open_cells = [c for c in cells if not is_terminal(c.state)]
    if not open_cells:
        return "queued"
    return min((c.stage for c in open_cells), key=lambda s: STAGE_ORDER.get(s, 0))


# ---- UI current details (workflows.details) -------------------------------------------

DETAILS_LIMIT = 8000


def _cell_work(cell: CellSnapshot) -> str:
    if cell.work is not None:
        title = cell.work.title.replace("|", "/")[:60]
        label = f"{cell.work_id} {title}".strip()
        return f"[{label}]({cell.work.url})" if cell.work.url else label
    return cell.work_id or ""


def render_details(inp: JobInput, state: JobState) -> str:
    """Markdown of at most :data:`DETAILS_LIMIT` characters: status and stage, one row per
    cell (state, stage, work, deliveries, reason), what was delivered, the business status."""
    lines = [
        f"**{inp.job_type}** `{inp.job_id}` — status **{state.status}**, stage *{state.stage}*"
        + (" — cancel requested" if state.cancel_requested and state.status not in ("cancelled",) else ""),
        "",
        "| target | state | stage | work | deliveries | reason |",
        "|---|---|---|---|---|---|",
    ]
    for cell in state.cells:
        stage = cell.stage + (f" (fallback {cell.fallback_pass})" if cell.fallback_pass else "")
        deliveries = ", ".join(f"{d.route}: {d.status}" for d in cell.deliveries)
        lines.append(
            f"| {cell.target_id} | {cell.state} | {stage} | {_cell_work(cell)} | {deliveries} | {cell.reason or ''} |"
        )
    delivered = [c for c in state.cells if c.state == "submitted" and c.work_id]
    if delivered:
        lines += ["", "delivered: " + ", ".join(f"`{c.work_id}` → {c.target_id}" for c in delivered)]
    if state.business_status:
        lines += ["", f"business status: **{state.business_status}**"]
    return "\n".join(lines)[:DETAILS_LIMIT]


# ---- push_events options (workflows.event_push) -------------------------------------------


def push_options(policy: CallbackPolicy, *, summary: str = "push events") -> workflow.ActivityConfig:
    """``execute_activity`` options of ``push_events``: 1 h start-to-close, a heartbeat
    timeout of the request timeout + 30 s, the policy's backoff, no attempt limit."""
    return workflow.ActivityConfig(
        summary=summary,
        start_to_close_timeout=timedelta(hours=1),
        heartbeat_timeout=timedelta(milliseconds=policy.timeout_ms + 30_000),
        retry_policy=RetryPolicy(
            initial_interval=timedelta(milliseconds=policy.initial_interval_ms),
            backoff_coefficient=2.0,
            maximum_interval=timedelta(milliseconds=max(policy.initial_interval_ms, policy.max_interval_ms)),
            maximum_attempts=0,
        ),
    )
