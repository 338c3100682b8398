"""Can the frozen core v1 orchestration (``workflows/job_v1.py``) be retired?

An execution of ``JobWorkflow`` replays ``job_v1`` when its history holds neither a
``core-v2`` nor a ``core-v3`` patch marker (``workflow.patched``, recorded by the first
workflow task of every execution started on core v2 or later: ``core-v2`` alone before
core v3, ``core-v3`` alone since). ``job_v1`` — and the ``search`` / ``fetch``
activity registrations only it calls — may be deleted once no such execution can be
replayed again: none is open, and none closed is still within the namespace's retention
(a query on a closed execution, ``temporal workflow reset`` or the UI's stack trace
replay it). docs/operations.md "Upgrading" gives the procedure.

Shapes: times are timezone-aware UTC ``datetime``; the visibility query is Temporal's
List Filter syntax.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime

from temporalio.api.history.v1 import History
from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest
from temporalio.client import Client, WorkflowHistory

from curaflow.temporal.connection import SEARCH_ATTRIBUTES

#: The ``workflow.patched`` ids of which a core v2 (or later) execution records one.
CORE_PATCHES = frozenset({"core-v2", "core-v3"})
#: The marker name the SDK records for ``workflow.patched``.
PATCH_MARKER = "core_patch"


def legacy_query(*, started_before: datetime | None = None, include_closed: bool = False) -> str:
    """The visibility query of the ``JobWorkflow`` executions that may predate core v2.

    Args:
        started_before: when the first worker with core v2 served the task queue (UTC);
            executions started after it cannot be core v1. None: every start time.
        include_closed: also closed executions (still within retention).

    Returns:
        e.g. ``WorkflowType = 'JobWorkflow' AND ExecutionStatus = 'Running' AND
        StartTime < '2026-12-01T18:00:00Z'`` — usable as is with ``temporal workflow list
        --query`` / ``temporal workflow count --query``.
    """
    parts = ["WorkflowType = 'JobWorkflow'"]
    if not include_closed:
        parts.append("ExecutionStatus = 'Running'")
    if started_before is not None:
        parts.append(f"StartTime < '{started_before.strftime('%Y-%m-%dT%H:%M:%SZ')}'")
    return " AND ".join(parts)


def history_patches(history: History) -> set[str]:
    """The ``workflow.patched`` ids recorded in ``history`` (its ``core_patch`` markers)."""
    found: set[str] = set()
    for event in history.events:
        if not event.HasField("marker_recorded_event_attributes"):
            continue
        marker = event.marker_recorded_event_attributes
        if marker.marker_name != PATCH_MARKER or "patch-data" not in marker.details:
            continue
        for payload in marker.details["patch-data"].payloads:
            patch = json.loads(payload.data)
            if isinstance(patch, dict) and isinstance(patch.get("id"), str):
                found.add(patch["id"])
    return found


def replays_core_v1(history: History) -> bool:
    """True unless ``history`` proves core v2 or later: it holds no ``core-v2`` or ``core-v3`` marker.

    Conservative: an execution started on core v2 whose first workflow task has not yet
    completed (seconds after its start) also counts, until its marker is recorded.
    """
    return not (CORE_PATCHES & history_patches(history))


@dataclass(frozen=True)
class LegacyExecution:
    """One ``JobWorkflow`` execution that may replay ``job_v1``."""

    workflow_id: str
    run_id: str
    status: str  # Temporal's execution status name, e.g. ``RUNNING``, ``COMPLETED``
    start_time: datetime  # UTC


class ListingCut(Exception):
    """The visibility list held more executions than :func:`legacy_executions` examines:
    what it found is no answer for the namespace ("none left" would be said of part of it).

    Attributes:
        examined: how many listed executions were examined (the limit).
        found: those of them that may replay ``job_v1``.
    """

    def __init__(self, examined: int, found: list[LegacyExecution]) -> None:
        super().__init__(f"more than {examined} executions listed; examined {examined}")
        self.examined = examined
        self.found = found


async def legacy_executions(
    client: Client, *, started_before: datetime | None = None, include_closed: bool = False, limit: int = 10_000
) -> list[LegacyExecution]:
    """The executions of :func:`legacy_query` whose history holds no ``core-v2`` or ``core-v3`` marker.

    Reads each listed execution's history (one ``GetWorkflowExecutionHistory`` per
    execution): bound the list with ``started_before`` on a busy namespace.

    Args:
        client: connected to the jobs' namespace.
        started_before / include_closed: see :func:`legacy_query`.
        limit: at most this many listed executions are examined.

    Raises:
        ListingCut: the list held more than ``limit`` executions (one more is listed to
            know it): the rest were not examined, so no answer is given (until 2026-12-05
            the listing stopped at the limit silently and a namespace of more executions
            could be said to have none left).
        temporalio.service.RPCError: the list or a history read failed.
    """
    found: list[LegacyExecution] = []
    examined = 0
    query = legacy_query(started_before=started_before, include_closed=include_closed)
    async for execution in client.list_workflows(query, limit=limit + 1):
        if examined == limit:
            raise ListingCut(examined, found)
        examined += 1
        handle = client.get_workflow_handle(execution.id, run_id=execution.run_id)
        history: WorkflowHistory = await handle.fetch_history()
        if replays_core_v1(History(events=history.events)):
            status = execution.status.name if execution.status is not None else "UNKNOWN"
            found.append(LegacyExecution(execution.id, execution.run_id, status, execution.start_time))
    return found


async def missing_search_attributes(client: Client) -> list[str]:
    """curaflow's search attributes the client's namespace does not list (sorted).

    Every curaflow worker registers them in its namespace at start
    (:func:`curaflow.temporal.namespace.ensure_search_attributes`): a namespace that
    lacks one never ran curaflow's jobs, and an empty list of executions there says
    nothing about the jobs' namespace (``TEMPORAL_NAMESPACE`` mistyped, the cluster's
    ``default``).

    Raises:
        temporalio.service.RPCError: the namespace does not exist, or the request was refused.
    """
    answer = await client.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace=client.namespace)
    )
    return sorted(name for name in SEARCH_ATTRIBUTES if name not in answer.custom_attributes)
