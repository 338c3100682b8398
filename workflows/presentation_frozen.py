"""The static summary and details a workflow gave the job it started, frozen as they were
before ``escaped-start-metadata`` (2026-12-07).

The schedule's trampoline (:mod:`workflows.scheduled`) and ``run_job``
(:mod:`workflows.callers`) start a job as a child; its summary and details are part of that
command. Since the patch they show every value as text
(:mod:`curaflow.domain.presentation`); an execution that started before it keeps starting
its child with these — the values as they were, markup and all — so its history replays
(``tests/histories/*_before_escaped_metadata.json``).

Never edit these functions: they are history. Deleted once no execution started before the
patch can be open (``workflow.deprecate_patch``, docs/operations.md "Upgrading").

Pure module: imported by workflows through the sandbox pass-through.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from curaflow.domain.messages import JobInput

#: ``workflow.patched`` id: a started job's static summary and details show their values as
#: text. Asked only where the text differs from the frozen one (a value holding markdown).
ESCAPED_METADATA = "escaped-start-metadata"

SUMMARY_LIMIT = 400


def _query_words(inp: JobInput) -> str:
    parts = []
    for t in inp.targets:
        q = t.query
        if q.mode == "ranking":
            parts.append(f"{t.target_id}: ranking {q.ranking_mode}")
        else:
            joiner = " OR " if q.relation == "or" else " AND "
            parts.append(f"{t.target_id}: {joiner.join(q.tags) or '(no tags)'}")
    return "; ".join(parts)


def job_summary(inp: JobInput) -> str:
    """The summary before the patch: the values as they are."""
    origin = f"schedule {inp.schedule_id}" if inp.schedule_id else inp.trigger
    text = f"{inp.job_type} ({origin}) — {_query_words(inp)}"
    return text[:SUMMARY_LIMIT]


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def job_static_details(inp: JobInput) -> str:
    """The details before the patch: ids in single backticks, names as they are."""
    lines = [
        f"**trigger** {inp.trigger} · **plan** `{inp.plan_id}`"
        + (f" · **schedule** `{inp.schedule_id}`" if inp.schedule_id else ""),
        f"**created** {_iso(inp.created_at_ms)} · **deadline** {_iso(inp.deadline_at_ms)}"
        + (f" · **fallback passes** {inp.max_fallback_stages}" if inp.max_fallback_stages > 1 else ""),
        "",
    ]
    for t in inp.targets:
        routes = ", ".join(f"{r.name} ({r.kind})" for r in t.routes) or "-"
        lines.append(f"- `{t.target_id}` → {routes}; scan ≤ {t.scan_limit} works")
    return "\n".join(lines)


def task_summary(task: dict[str, Any], job_id: str) -> str:
    """A Temporal client's summary before the patch: the Task's target and tags as they are."""
    params: dict[str, Any] = task["params"] if isinstance(task.get("params"), dict) else {}
    target = str(params.get("target_id") or job_id.split("@", 1)[0])
    query: dict[str, Any] = params["query"] if isinstance(params.get("query"), dict) else {}
    tags = [str(t) for t in query.get("tags", [])] if isinstance(query.get("tags"), list) else []
    joiner = " OR " if query.get("expand") and len(tags) > 1 else " AND "
    words = joiner.join(tags) if tags else "the target's query"
    return f"{task.get('job_type') or 'candidate_search'} (temporal) — {target}: {words}"[:SUMMARY_LIMIT]


def task_static_details(task: dict[str, Any], job_id: str) -> str:
    """A Temporal client's details before the patch: keys in single backticks."""
    lines = [f"**trigger** temporal · **job** `{job_id}` · **idempotency key** `{task.get('idempotency_key')}`"]
    extra = []
    if task.get("correlation_id"):
        extra.append(f"**correlation id** `{task['correlation_id']}`")
    if task.get("deadline_ms"):
        extra.append(f"**deadline** {task['deadline_ms']} ms after admission")
    if task.get("callback_url"):
        extra.append("**callback** set")
    if extra:
        lines.append(" · ".join(extra))
    return "\n".join(lines)
