"""How a job presents itself in the Temporal UI: search attributes, summary, details (pure).

Shared by :func:`curaflow.temporal.connection.start_job_workflow` (protocol and CLI jobs) and the
schedule trampoline (:mod:`workflows.scheduled`), so every job looks the same in the UI:

* search attributes ``JobStatus`` (kept current by the workflow), ``JobType``,
  ``TargetIds``, ``ScheduleId`` (scheduled jobs), filterable in the UI's query box
  (``JobStatus = "running"``);
* a static summary — what was asked — shown as the execution's title;
* static details — trigger, plan, deadline — shown under it. The *current* details
  (cells, stage, delivered work) are rendered by :func:`workflows.details.render_details`.

The UI renders the summary and the details as markdown (a link there is live, an image is
fetched by the operator's browser, HTML is rendered), so every value they show — a Task's
key, tags, target and correlation id (the consumer's), a target's tags and ids, a route's
name (the configuration's) — goes through :func:`~curaflow.domain.text.markdown_text` or
:func:`~curaflow.domain.text.markdown_code` and shows as text; only curaflow's own words are
markup. Until 2026-12-07 they went in as they were: a Task tagged
``![x](http://internal/…)`` had every operator who opened the job fetch that address.
A workflow that starts a job (the schedule's trampoline, ``workflows.callers.run_job``)
asks ``workflow.patched("escaped-start-metadata")`` where this changes its start
(:mod:`workflows.presentation_frozen` keeps the text before it).

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
    JOB_WORKFLOWS,
    SCHEDULE_ID,
    SCHEDULED_START_TIME,
    TARGET_IDS,
)
from curaflow.domain.messages import JobInput
from curaflow.domain.text import markdown_code, markdown_text

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
    "occurrence_summary",
    "push_summary",
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


def _job_type(job_type: str) -> str:
    """A job type as the summary shows it: a type curaflow runs as is (its ``_`` is inside a
    word: no emphasis), any other text as text."""
    return job_type if job_type in JOB_WORKFLOWS else markdown_text(job_type)


def _query_words(inp: JobInput) -> str:
    parts = []
    for t in inp.targets:
        q = t.query
        if q.mode == "ranking":
            parts.append(f"{markdown_text(t.target_id)}: ranking {markdown_text(q.ranking_mode)}")
        else:
            joiner = " OR " if q.relation == "or" else " AND "
            words = joiner.join(markdown_text(tag) for tag in q.tags)
            parts.append(f"{markdown_text(t.target_id)}: {words or '(no tags)'}")
    return "; ".join(parts)


def job_summary(inp: JobInput) -> str:
    """One line of markdown: what was asked, e.g. ``candidate_search (schedule nightly) — demo: オリジナル``.

    Every value (schedule id, target ids, tags, ranking mode) shows as text
    (:func:`~curaflow.domain.text.markdown_text`); at most :data:`SUMMARY_LIMIT` characters.
    """
    origin = f"schedule {markdown_text(inp.schedule_id)}" if inp.schedule_id else inp.trigger
    text = f"{_job_type(inp.job_type)} ({origin}) — {_query_words(inp)}"
    return text[:SUMMARY_LIMIT]


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def job_static_details(inp: JobInput) -> str:
    """Markdown shown under the summary: trigger, plan, deadline, targets and their routes.

    Ids are code spans (:func:`~curaflow.domain.text.markdown_code`: whatever they hold),
    route names and kinds text (:func:`~curaflow.domain.text.markdown_text`).
    """
    lines = [
        f"**trigger** {inp.trigger} · **plan** {markdown_code(inp.plan_id)}"
        + (f" · **schedule** {markdown_code(inp.schedule_id)}" if inp.schedule_id else ""),
        f"**created** {_iso(inp.created_at_ms)} · **deadline** {_iso(inp.deadline_at_ms)}"
        + (f" · **fallback passes** {inp.max_fallback_stages}" if inp.max_fallback_stages > 1 else ""),
        "",
    ]
    for t in inp.targets:
        routes = ", ".join(f"{markdown_text(r.name)} ({markdown_text(r.kind)})" for r in t.routes) or "-"
        lines.append(f"- {markdown_code(t.target_id)} → {routes}; scan ≤ {t.scan_limit} works")
    return "\n".join(lines)


def task_summary(task: dict[str, Any], job_id: str) -> str:
    """The summary a Temporal client's start sets before admission (it knows the Task, not
    the configured target), e.g. ``candidate_search (temporal) — demo: オリジナル``: one
    line of markdown whose values — the target and tags the consumer sent — show as text
    (:func:`~curaflow.domain.text.markdown_text`); at most :data:`SUMMARY_LIMIT` characters.

    Args:
        task: the Task as JSON (not validated here: a refused Task never becomes a job).
        job_id: the job id (``<target_id>@manual-<key>``): names the target when the Task
            does not.
    """
    params: dict[str, Any] = task["params"] if isinstance(task.get("params"), dict) else {}
    target = markdown_text(str(params.get("target_id") or job_id.split("@", 1)[0]))
    query: dict[str, Any] = params["query"] if isinstance(params.get("query"), dict) else {}
    tags = [str(t) for t in query.get("tags", [])] if isinstance(query.get("tags"), list) else []
    joiner = " OR " if query.get("expand") and len(tags) > 1 else " AND "
    words = joiner.join(markdown_text(tag) for tag in tags) if tags else "the target's query"
    job_type = _job_type(str(task.get("job_type") or "candidate_search"))
    return f"{job_type} (temporal) — {target}: {words}"[:SUMMARY_LIMIT]


def task_static_details(task: dict[str, Any], job_id: str) -> str:
    """Markdown under the summary of a Temporal client's start: trigger, key, deadline asked.

    The job id, the idempotency key and the correlation id — the consumer's, any character
    but controls — are each one code span (:func:`~curaflow.domain.text.markdown_code`: a
    backtick in them ends nothing); the deadline asked shows as text.
    """
    lines = [
        f"**trigger** temporal · **job** {markdown_code(job_id)}"
        f" · **idempotency key** {markdown_code(str(task.get('idempotency_key')))}"
    ]
    extra = []
    if task.get("correlation_id"):
        extra.append(f"**correlation id** {markdown_code(str(task['correlation_id']))}")
    if task.get("deadline_ms"):
        extra.append(f"**deadline** {markdown_text(str(task['deadline_ms']))} ms after admission")
    if task.get("callback_url"):
        extra.append("**callback** set")
    if extra:
        lines.append(" · ".join(extra))
    return "\n".join(lines)


def occurrence_summary(plan_id: str, cron: list[str], timezone: str) -> str:
    """The static summary a plan's Temporal Schedule gives each occurrence's trampoline, e.g.
    ``occurrence of plan nightly (0 3 * * * Asia/Tokyo)``: one line of markdown whose values —
    the plan's id, cron strings and time zone (the configuration's) — show as text
    (:func:`~curaflow.domain.text.markdown_text`; until 2026-12-07 a plan ``_daily_`` showed
    as an emphasised *daily*); at most :data:`SUMMARY_LIMIT` characters.

    Args:
        plan_id: the plan's id (= the schedule's id).
        cron: its cron strings, in the configuration's order.
        timezone: its IANA time zone.
    """
    crons = ", ".join(markdown_text(expression) for expression in cron)
    return f"occurrence of plan {markdown_text(plan_id)} ({crons} {markdown_text(timezone)})"[:SUMMARY_LIMIT]


def push_summary(job_id: str) -> str:
    """The static summary of a job's ``EventPushWorkflow`` started by the push sweeper:
    ``push events of `<job id>``` (markdown; the job id — the consumer's key — one code span)."""
    return f"push events of {markdown_code(job_id)}"
