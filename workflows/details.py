"""Markdown shown as a job's current details in the Temporal UI (pure).

The static summary and details (what was asked) are set at start
(:mod:`curaflow.domain.presentation`); these *current* details follow the job: status,
stage, then for each cell a line with its target and state followed by a bullet list of
its fields (stage, the bound work, deliveries per route, reason), then the business
status once the job is terminal — or, while it is open, where its outcome is read should
the execution be closed without the workflow (:func:`open_note`).

Top-level bullet lists, not a table nor nested lists: the Temporal UI 2.54.1 (the version
the embedded dev server ships and ``tests/ui`` drives, and the one ``docker-compose.yml``
pins) renders user markdown without table support — a table's cells ran together
(``demo submitteddone``) — and joins the lines of a nested list into one.

Untrusted text — a work's title (the source's), a job id (the consumer's key) — shows as
text: :func:`~curaflow.domain.text.markdown_text` / :func:`~curaflow.domain.text.markdown_code`.

The text is shown through ``workflow.set_current_details``, which issues no command:
changing it never affects the replay of a running execution.
"""

from __future__ import annotations

from curaflow.domain.messages import JobInput, JobState
from curaflow.domain.models import CellSnapshot
from curaflow.domain.text import markdown_code, markdown_text

DETAILS_LIMIT = 8000


#: The characters of a work's title the details show.
TITLE_LIMIT = 60
#: Characters that would end or break a link's destination, percent-encoded (the source
#: names the URL; Pixiv's never holds them).
_URL_ESCAPES = {ord(c): f"%{ord(c):02X}" for c in ' \t\n\r()<>\\`"'}


def _cell_work(cell: CellSnapshot) -> str:
    if cell.work is not None:
        # The source's text: shown as text on the bullet's one line (markdown_text), never
        # markup of its own — a line break in a title added lines (a forged cell), a
        # backtick, an asterisk or HTML changed what followed, a trailing backslash broke the link.
        title = markdown_text(cell.work.title.replace("|", "/").replace("[", "(").replace("]", ")"), TITLE_LIMIT)
        label = f"{cell.work_id} {title}".strip()
        if label.endswith("\\"):
            # an escaped backslash right before the link's ] breaks the link in the Temporal
            # UI's renderer (2.54.1; CommonMark reads it): a space keeps them apart
            label += " "
        return f"[{label}]({cell.work.url.translate(_URL_ESCAPES)})" if cell.work.url else label
    return cell.work_id or ""


def _cell_deliveries(cell: CellSnapshot) -> str:
    return ", ".join(f"{d.route}: {d.status}" for d in cell.deliveries)


def _cell_block(cell: CellSnapshot) -> list[str]:
    """The cell's line (target and state), then one top-level bullet per known field.

    Top-level lists only: UI 2.54.1 runs the lines of a nested list together.
    """
    stage = cell.stage + (f" (fallback {cell.fallback_pass})" if cell.fallback_pass else "")
    lines = [f"**{cell.target_id}**: {cell.state}", "", f"- stage: {stage}"]
    work = _cell_work(cell)
    if work:
        lines.append(f"- work: {work}")
    deliveries = _cell_deliveries(cell)
    if deliveries:
        lines.append(f"- deliveries: {deliveries}")
    if cell.reason:
        lines.append(f"- reason: {cell.reason}")
    return [*lines, ""]


def open_note(job_id: str) -> str:
    """The line under an open job's details: they are the workflow's, and a closed
    execution (terminated, timed out, reset) runs no code to change them; the job's
    outcome is then the ledger's (docs/temporal.md, "When Temporal closed the execution")."""
    return (
        f"_Live while this execution runs. Terminated or timed out, it stays as it stopped: "
        f"the job's outcome is {markdown_code(f'curaflow status {job_id}')} ({markdown_code(f'GET /jobs/{job_id}')})._"
    )


def render_details(inp: JobInput, state: JobState) -> str:
    """Markdown: the job's status and stage, then per cell its state and a bullet list of its fields.

    Args:
        inp: the workflow argument (targets, deadline).
        state: the live state.

    Returns:
        Markdown of at most :data:`DETAILS_LIMIT` characters; cells that do not fit are
        summarised as ``… N more cells``.
    """
    head = [
        f"**{inp.job_type}** {markdown_code(inp.job_id)} — status **{state.status}**, stage *{state.stage}*"
        + (" — cancel requested" if state.cancel_requested and state.status not in ("cancelled",) else ""),
        "",
    ]
    tail: list[str] = []
    delivered = [c for c in state.cells if c.state == "submitted" and c.work_id]
    if delivered:
        tail += ["", "delivered: " + ", ".join(f"`{c.work_id}` → {c.target_id}" for c in delivered)]
    if state.business_status:
        tail += ["", f"business status: **{state.business_status}**"]
    else:
        tail += ["", open_note(inp.job_id)]
    budget = DETAILS_LIMIT - len("\n".join(head + tail)) - 40
    body: list[str] = []
    used = 0
    for n, cell in enumerate(state.cells):
        block = _cell_block(cell)
        size = sum(len(line) + 1 for line in block)
        if used + size > budget:
            body.append(f"… {len(state.cells) - n} more cells")
            break
        body += block
        used += size
    while body and not body[-1]:
        body.pop()
    return "\n".join(head + body + tail)[:DETAILS_LIMIT]
