"""Project a ledger job (:class:`~curaflow.domain.models.JobRecord`) onto the protocol ``Job``.

Field rules follow reference §1.3 with the curaflow extensions of the protocol issue:

* ``status`` / ``progress.stage``: :mod:`curaflow.domain.projection` (shared with the
  workflow's ``status`` query), with one curaflow rule on top: a terminal status is
  shown only once the job's finish committed (``jobs.completed_at``), in the same
  transaction as the outcome record and the terminal event. Between the last cell's
  verdict and that commit the job is ``running`` at stage ``finishing``, so a consumer
  that sees a terminal status always finds the terminal event last in the stream;
* ``started_at``, ``heartbeat_at``, ``deadline_at``, ``lease_expires_at`` and ``attempt``
  are always present, possibly ``null``; ``idempotency_key`` / ``correlation_id`` are
  omitted when empty;
* ``lease_active``: an activity attempt of this job is running and heartbeating
  (a cell lease that had not expired when the ledger read the job — judged on the
  database's clock, :attr:`JobRecord.lease_until`, whatever the reading process's clock
  says) and the job is not terminal;
* ``attempt``: the Temporal attempt number of the latest activity attempt (0 before any);
* ``result`` (succeeded only): every submitted cell's delivered work with ``url``,
  ``tags`` — its recall basis, the seeds of the query the cell ran (:func:`recall_basis`)
  — and ``assets``, plus ``scanned`` and ``filtered``;
* ``error`` (failed / cancelled / expired only): ``{code, message, retryable,
  detail.internal_code, detail.owner}`` from the representative cell's terminal reason
  (``owner``: who caused the failure — ``work``, ``route``, ``source``, ``account``,
  ``curaflow`` or ``operator`` —, absent for a cancel or a job with no new work); ``message`` is
  the business sentence, never an internal error name;
* deliveries, whatever the terminal status (DESIGN.md decision 13): every delivery of
  the job's bound works as ``{target_id, route, work_id, status, remote_id}``
  (:class:`~curaflow.domain.models.DeliveryReport`) in ``result.deliveries`` of a
  succeeded job and in ``error.detail.deliveries`` of any other terminal job — a
  cancelled job whose webhook got the work says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote

from curaflow.domain.cells import CellState
from curaflow.domain.models import CellSnapshot, JobRecord
from curaflow.domain.outcome import job_deliveries
from curaflow.domain.projection import (
    TERMINAL_JOB_STATUSES,
    JobStatus,
    job_stage,
    job_status,
    representative_cell,
)
from curaflow.domain.reasons import protocol_code_for, reason_info, user_message
from curaflow.protocol.errors import error_body

FILTERED_REASONS = {"duplicate", "excluded", "invalid", "unavailable", "other"}
#: characters a URL path segment may carry unencoded (RFC 3986 ``pchar``).
PATH_SAFE = "@:!$&'()*+,;=-._~"


def job_path(job_id: str) -> str:
    """The job's path ``/jobs/<job_id>``, the id percent-encoded as one path segment.

    Ordinary ids (``demo@manual-key``) are unchanged; a ``/``, ``?``, ``#``, ``%``, space
    or non-ASCII character of the idempotency key is encoded. An id of dots only (``.``,
    ``..``) has its dots encoded (``%2E``): unencoded it is a dot-segment an HTTP client
    removes, and ``/jobs/./events`` asked for a job named ``events``, ``/jobs/..`` for
    ``/`` (until 2026-12-06); the server decodes the segment back to the id.
    """
    if job_id and not job_id.strip("."):
        return "/jobs/" + "%2E" * len(job_id)
    return f"/jobs/{quote(job_id, safe=PATH_SAFE)}"


def recall_basis(query: Mapping[str, Any] | None, work_tags: Sequence[str]) -> list[dict[str, Any]]:
    """A candidate's ``tags`` (``$defs/MatchedTag``): why the source answered the work — the
    seed tags of the query its cell ran, each ``{tag, source: "seed", weight: 1.0}``.

    Protocol v1, ``Candidate.tags``: "the producer must expose its recall basis", and with
    ``expand`` "the recall basis MUST still be reported". The one owner of that rule:

    * a tag search with ``relation`` ``and`` (the default, and a Task's query unless
      ``expand`` with several tags): every seed — the source answered only works that
      match each one;
    * ``or``: the seeds the work matches as the search matched (``search_target``:
      ``partial_match_for_tags`` — the default — a seed inside one of the work's tags,
      ``exact_match_for_tags`` a whole tag, both ignoring case); when none does (the source
      matched a translated tag name or, for ``title_and_caption``, the text, which the work
      does not carry here), every seed: one of them recalled it;
    * a ranking (``mode: ranking``) or no query: none — no tag recalled the work.

    Never the work's other tags (until 2026-12-06 a Task that only named
    ``params.target_id`` reported every tag of the work as a matched seed, and a seed the
    source matched inside a tag — ``風`` in ``風景`` — reported no basis).

    Args:
        query: the cell's query (``TargetSpec.query`` as JSON: ``tags``, ``relation``,
            ``search_target``, ``mode``), or None.
        work_tags: the work's tags as the source gave them.

    Returns:
        The MatchedTag objects, in the query's order, each seed once.
    """
    if not query or query.get("mode", "search") != "search":
        return []
    seeds = list(dict.fromkeys(str(t) for t in query.get("tags") or [] if str(t).strip()))
    if query.get("relation") == "or" and len(seeds) > 1:
        names = [t.lower() for t in work_tags]
        exact = query.get("search_target") == "exact_match_for_tags"

        def matches(seed: str) -> bool:
            word = seed.lower()
            return word in names if exact else any(word in name for name in names)

        seeds = [s for s in seeds if matches(s)] or seeds
    return [{"tag": t, "source": "seed", "weight": 1.0} for t in seeds]


def _candidate(cell: CellSnapshot, query: Mapping[str, Any] | None) -> dict[str, Any]:
    work = cell.work
    work_id = cell.work_id or (work.work_id if work else "")
    candidate: dict[str, Any] = {
        "candidate_id": work_id,
        "platform": "pixiv",
        "work_id": work_id,
        "work_type": cell.work_type or (work.work_type if work else "unknown"),
    }
    if work is not None:
        if work.url:
            candidate["url"] = work.url
        candidate["tags"] = recall_basis(query, work.tags)
        if work.title:
            candidate["metadata"] = {"title": work.title, "author": work.author}
    assets = []
    if cell.artifact is not None:
        for f in cell.artifact.files:
            asset: dict[str, Any] = {
                "asset_id": f"{work_id}_p{f.page}",
                "type": "image",
                "role": "primary" if f.page == 0 else "preview",
                "source": "pixiv",
                "quality": "unknown",
                "mime": f.mime,
                "bytes": f.bytes,
                "locator": {"kind": "path", "value": f.path},
            }
            if f.width is not None:
                asset["width"] = f.width
            if f.height is not None:
                asset["height"] = f.height
            if f.sha256:
                asset["hash"] = f"sha256:{f.sha256}"
            assets.append(asset)
    candidate["assets"] = assets
    return candidate


def project_result(record: JobRecord) -> dict[str, Any]:
    """``Result_CandidateSearch`` of a succeeded job (every submitted cell's work)."""
    params = record.params or {}
    task_query = params.get("query") if isinstance(params, dict) else None
    candidates = []
    scanned = 0
    filtered: list[dict[str, str]] = []
    for cell in record.cells:
        report = cell.candidate_report
        if report is not None:
            scanned += report.fetched
            for item in report.filtered:
                reason = item.get("reason", "other")
                filtered.append(
                    {
                        "work_id": item.get("work_id", ""),
                        "reason": reason if reason in FILTERED_REASONS else "other",
                    }
                )
        if cell.state == CellState.SUBMITTED:
            # the query the cell ran; a record read without it: the Task's (AND, as admitted)
            query = record.queries.get(cell.target_id)
            if not isinstance(query, dict):
                query = task_query if isinstance(task_query, dict) else None
            candidates.append(_candidate(cell, query))
    if not scanned:
        scanned = len(candidates)
    deliveries = [d.model_dump() for d in job_deliveries(record.cells)]
    return {"candidates": candidates, "scanned": scanned, "filtered": filtered, "deliveries": deliveries}


def project_error(record: JobRecord, status: str) -> dict[str, Any] | None:
    """Protocol ``Error`` of a failed / cancelled / expired job, else None."""
    if status not in (JobStatus.FAILED, JobStatus.CANCELLED, JobStatus.EXPIRED):
        return None
    cell = representative_cell(record.cells, status)
    reason = cell.reason if cell else None
    if cell is not None and reason is None and cell.state == CellState.NO_CANDIDATE:
        reason = "no_candidate"
    code = protocol_code_for(reason)
    message = (cell.reason_message if cell else None) or user_message(reason)
    detail: dict[str, Any] = {"internal_code": reason or "internal_error"}
    owner = reason_info(reason).owner
    if owner is not None:  # who must act: the work, the route, the source, the account, curaflow, an operator
        detail["owner"] = str(owner)
    if cell is not None and cell.held_by is not None:
        # What held the cell when the job ended: the route whose receiver's wait outlasted it.
        detail["held_by"] = cell.held_by.model_dump()
    if record.business_status and (len(record.cells) > 1 or any(c.landed() for c in record.cells)):
        detail["business_status"] = record.business_status
    detail["deliveries"] = [d.model_dump() for d in job_deliveries(record.cells)]
    return error_body(code, message, detail=detail)


def project_job(record: JobRecord) -> dict[str, Any]:
    """Build the protocol ``Job`` dict (``$defs/Job``) of ``record``.

    Args:
        record: the ledger job with its cells; its ``lease_until`` is a lease live at the
            read (``lease_active``), judged by the ledger on the database's clock.

    Returns:
        A JSON-ready dict that validates against ``$defs/Job``.
    """
    status = job_status(record.cells)
    if not record.cells:
        status = JobStatus.QUEUED
    finishing = status in TERMINAL_JOB_STATUSES and record.completed_at is None
    if finishing:
        status = JobStatus.RUNNING  # every cell has its verdict; the finish has not committed
    terminal = status in TERMINAL_JOB_STATUSES
    updated_at = max([record.updated_at, *(c.updated_at for c in record.cells)])
    job: dict[str, Any] = {
        "protocol_version": "1",
        "job_id": record.job_id,
        "job_type": record.job_type,
        "status": status.value,
    }
    if record.idempotency_key:
        job["idempotency_key"] = record.idempotency_key
    if record.correlation_id:
        job["correlation_id"] = record.correlation_id
    job["created_at"] = record.created_at
    job["updated_at"] = updated_at
    job["started_at"] = record.started_at
    job["heartbeat_at"] = record.heartbeat_at
    job["deadline_at"] = record.deadline_at
    lease_active = not terminal and record.lease_until is not None
    job["lease_active"] = lease_active
    job["lease_expires_at"] = record.lease_until if lease_active else None
    job["attempt"] = record.attempt
    stage = "finishing" if finishing else job_stage(record.cells, status)
    if not terminal and record.cancel_requested_at is not None:
        stage = "cancelling"
    job["progress"] = {"stage": stage, "at": updated_at}
    job["events_url"] = f"{job_path(record.job_id)}/events"
    if status == JobStatus.SUCCEEDED:
        job["result"] = project_result(record)
    error = project_error(record, status)
    if error is not None:
        job["error"] = error
    return job
