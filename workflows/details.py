"""Markdown shown as a job's current details in the Temporal UI (pure)."""

from __future__ import annotations

from curaflow.domain.messages import JobInput, JobState


def render_details(inp: JobInput, state: JobState) -> str:
    """A short markdown summary: job status and stage, then one row per cell.

    Args:
        inp: the workflow argument (targets, deadline).
        state: the live state.
    """
    lines = [
        f"**{inp.job_type}** `{inp.job_id}` — status **{state.status}**, stage *{state.stage}*",
        "",
        "| target | state | stage | work | reason |",
        "|---|---|---|---|---|",
    ]
    for cell in state.cells:
        work = f"[{cell.work_id}]({cell.work.url})" if cell.work and cell.work.url else (cell.work_id or "")
        lines.append(f"| {cell.target_id} | {cell.state} | {cell.stage} | {work} | {cell.reason or ''} |")
    if state.business_status:
        lines += ["", f"business status: **{state.business_status}**"]
    return "\n".join(lines)
