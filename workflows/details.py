"""Markdown shown as a job's current details in the Temporal UI (pure).

The static summary and details (what was asked) are set at start
(:mod:`curaflow.domain.presentation`); these *current* details follow the job: status,
stage, one row per cell (state, stage, the bound work, deliveries per route, reason),
then the business status once the job is terminal.
"""

from __future__ import annotations

from curaflow.domain.messages import JobInput, JobState
from curaflow.domain.models import CellSnapshot

DETAILS_LIMIT = 8000


def _cell_work(cell: CellSnapshot) -> str:
    if cell.work is not None:
        title = cell.work.title.replace("|", "/")[:60]
        label = f"{cell.work_id} {title}".strip()
        return f"[{label}]({cell.work.url})" if cell.work.url else label
    return cell.work_id or ""


def _cell_deliveries(cell: CellSnapshot) -> str:
    return ", ".join(f"{d.route}: {d.status}" for d in cell.deliveries)


def render_details(inp: JobInput, state: JobState) -> str:
    """A short markdown summary: job status and stage, then one row per cell.

    Args:
        inp: the workflow argument (targets, deadline).
        state: the live state.

    Returns:
        Markdown of at most :data:`DETAILS_LIMIT` characters.
    """
    lines = [
        f"**{inp.job_type}** `{inp.job_id}` — status **{state.status}**, stage *{state.stage}*"
        + (" — cancel requested" if state.cancel_requested and state.status not in ("cancelled",) else ""),
        "",
        "| target | state | stage | work | deliveries | reason |",
        "|---|---|---|---|---|---|",
    ]
    for cell in state.cells:
        stage = cell.stage + (f" (fallback {cell.fallback_stage})" if cell.fallback_stage else "")
        lines.append(
            f"| {cell.target_id} | {cell.state} | {stage} | {_cell_work(cell)} | {_cell_deliveries(cell)} "
            f"| {cell.reason or ''} |"
        )
    delivered = [c for c in state.cells if c.state == "submitted" and c.work_id]
    if delivered:
        lines += ["", "delivered: " + ", ".join(f"`{c.work_id}` → {c.target_id}" for c in delivered)]
    if state.business_status:
        lines += ["", f"business status: **{state.business_status}**"]
    return "\n".join(lines)[:DETAILS_LIMIT]
