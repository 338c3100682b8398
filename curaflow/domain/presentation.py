"""How a job presents itself in the Temporal UI: search attributes, summary, details (pure).

Shared by :func:`curaflow.temporal.connection.start_job_workflow` (protocol and CLI jobs) and the
schedule trampoline (:mod:`workflows.scheduled`), so every job looks the same in the UI:

* search attributes ``JobStatus`` (kept current by the workflow), ``JobType``,
  ``TargetIds``, ``ScheduleId`` (scheduled jobs), filterable in the UI's query box
  (``JobStatus = "running"``);
* a static summary — what was asked — shown as the execution's title;
* static details — trigger, plan, deadline — shown under it. The *current* details
  (cells, stage, delivered work) are rendered by :func:`workflows.details.render_details`.

Pure module: imported by workflows through the sandbox pass-through.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from temporalio.common import SearchAttributePair, TypedSearchAttributes

from curaflow.domain.execution import (
    BUSINESS_STATUS,
    JOB_STATUS,
    JOB_TYPE,
    SCHEDULE_ID,
    SCHEDULED_START_TIME,
    TARGET_IDS,
)
from curaflow.domain.messages import JobInput

__all__ = [  # the keys are defined in curaflow.domain.execution; re-exported for the workflows
    "BUSINESS_STATUS",
    "JOB_STATUS",
    "JOB_TYPE",
    "SCHEDULED_START_TIME",
    "SCHEDULE_ID",
    "TARGET_IDS",
    "job_search_attributes",
    "job_static_details",
    "job_summary",
    "listed_target_ids",
    "task_static_details",
    "task_summary",
]

SUMMARY_LIMIT = 400
#: The most bytes of ``TargetIds`` (its value as the server measures it: the compact JSON
#: list): Temporal's limit on one search attribute value (``limit.searchAttributesSizeOfValue``,
#: 2 KiB by default). Over it the server refuses the start — a child's start terminates the
#: schedule's trampoline (``BadStartChildExecutionAttributes``).
TARGET_IDS_MAX_BYTES = 2048


def listed_target_ids(target_ids: list[str], limit: int = TARGET_IDS_MAX_BYTES) -> list[str]:
    """The ``TargetIds`` of a job of ``target_ids``: all of them when their compact JSON list
    is at most ``limit`` bytes, else the longest first run of them that is (2026-12-06:
    40 targets of 64-character ids, 2 681 bytes, had every start of the job refused and
    every occurrence of its plan's trampoline terminated). The static details name every
    target; the ledger holds them.
    """
    size = 2  # the brackets
    listed: list[str] = []
    for tid in target_ids:
        size += len(json.dumps(tid, ensure_ascii=False).encode()) + (1 if listed else 0)
        if size > limit:
            break
        listed.append(tid)
    return listed


def job_search_attributes(inp: JobInput, status: str = "queued") -> TypedSearchAttributes:
    """The search attributes a job's workflow starts with; ``TargetIds`` as many of its
    targets as Temporal takes (:func:`listed_target_ids`)."""
    pairs: list[SearchAttributePair[Any]] = [
        SearchAttributePair(JOB_STATUS, status),
        SearchAttributePair(JOB_TYPE, inp.job_type),
        SearchAttributePair(TARGET_IDS, listed_target_ids([t.target_id for t in inp.targets])),
    ]
    if inp.schedule_id:
        pairs.append(SearchAttributePair(SCHEDULE_ID, inp.schedule_id))
    return TypedSearchAttributes(pairs)


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
    """One line: what was asked, e.g. ``candidate_search (schedule nightly) — demo: オリジナル``."""
    origin = f"schedule {inp.schedule_id}" if inp.schedule_id else inp.trigger
    text = f"{inp.job_type} ({origin}) — {_query_words(inp)}"
    return text[:SUMMARY_LIMIT]


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def job_static_details(inp: JobInput) -> str:
    """Markdown shown under the summary: trigger, plan, deadline, targets and their routes."""
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
    """The summary a Temporal client's start sets before admission (it knows the Task, not
    the configured target), e.g. ``candidate_search (temporal) — demo: オリジナル``.

    Args:
        task: the Task as JSON (not validated here: a refused Task never becomes a job).
        job_id: the job id (``<target_id>@manual-<key>``): names the target when the Task
            does not.
    """
    params: dict[str, Any] = task["params"] if isinstance(task.get("params"), dict) else {}
    target = str(params.get("target_id") or job_id.split("@", 1)[0])
    query: dict[str, Any] = params["query"] if isinstance(params.get("query"), dict) else {}
    tags = [str(t) for t in query.get("tags", [])] if isinstance(query.get("tags"), list) else []
    joiner = " OR " if query.get("expand") and len(tags) > 1 else " AND "
    words = joiner.join(tags) if tags else "the target's query"
    return f"{task.get('job_type') or 'candidate_search'} (temporal) — {target}: {words}"[:SUMMARY_LIMIT]


def task_static_details(task: dict[str, Any], job_id: str) -> str:
    """Markdown under the summary of a Temporal client's start: trigger, key, deadline asked."""
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
