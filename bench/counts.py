"""Load-independent counts of a job's cost in Temporal, from its event history (pure).

What a job costs Temporal does not depend on how busy the machine is: the events of its
history, the workflow tasks, signals, search-attribute upserts, markers and timers, and
the *billable actions* Temporal Cloud charges for them. :func:`history_counts` reads them
from one history in its JSON form (``WorkflowHistory.to_json_dict()``, the format of
``tests/histories/*.json``); :func:`mean_counts` averages them over the jobs of a run.

**Counting rule of billable actions** (Temporal Cloud's "Actions" page, as of
December 2026; what the history shows of it):

* the start: ``WORKFLOW_EXECUTION_STARTED`` — 1 (search attributes given at the start
  are not billed);
* an update accepted (update-with-start's update, the ``admission`` update) — 1 each;
* an activity scheduled — 1 each, plus 1 per retry (``ACTIVITY_TASK_STARTED``'s
  ``attempt`` − 1);
* a timer started — 1 each;
* a signal received — 1 each;
* an ``UpsertSearchAttributes`` command — 1 each, **except** one that only sets
  ``TemporalChangeVersion`` (the SDK's own upsert with a patch marker: exempt);
* markers: all ``RecordMarker`` commands of one workflow task — local activities and
  patch markers alike — count as **one** action per workflow task (the page bills "all
  RecordMarkers from each Workflow Task as one action"; the Temporal server's ``action``
  metric counts a patch marker's task the same way, ``command_BatchMarkers``), plus one
  per local-activity retry (``meteringMetadata.nonfirstLocalActivityExecutionAttempts``);
* not in the history, so not counted here: activity heartbeats that reach the server
  (throttled to one per 80 % of the heartbeat timeout by the SDK; curaflow sends at most
  one a second) and queries (the UI's, the ``status`` query). The benchmark reads those
  from the Temporal server's ``action`` metric instead.

Workflow tasks themselves are not billed; they cost the Temporal server CPU and the
worker an activation each, so they are counted too.
"""

from __future__ import annotations

import base64
import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

#: Marker names the Python SDK (its core) records.
PATCH_MARKER = "core_patch"
LOCAL_ACTIVITY_MARKER = "core_local_activity"
#: The search attribute the SDK upserts with every new patch marker.
CHANGE_VERSION = "TemporalChangeVersion"

_PREFIX = "EVENT_TYPE_"


@dataclass
class JobCounts:
    """What one job's history holds (or, from :func:`mean_counts`, the mean over many).

    Attributes:
        events: every history event.
        by_type: events by type (``EVENT_TYPE_`` prefix removed, e.g. ``MARKER_RECORDED``).
        workflow_tasks: workflow tasks completed.
        activities: activity tasks scheduled (``attempts``: every attempt, retries included).
        signals / updates / timers: signals received, updates accepted, timers started.
        upserts: ``UpsertWorkflowSearchAttributes`` events; ``change_version_upserts``: of
            which only set ``TemporalChangeVersion`` (the SDK's, with a patch marker).
        patch_markers / local_activity_markers: markers by kind.
        patches: the ids of the patch markers (one job: its patches; a mean: empty).
        actions: billable actions by the counting rule (module doc); ``actions_by_kind``
            the same by kind.
    """

    events: float = 0
    by_type: dict[str, float] = field(default_factory=dict)
    workflow_tasks: float = 0
    activities: float = 0
    activity_attempts: float = 0
    signals: float = 0
    updates: float = 0
    timers: float = 0
    upserts: float = 0
    change_version_upserts: float = 0
    patch_markers: float = 0
    local_activity_markers: float = 0
    patches: list[str] = field(default_factory=list)
    actions: float = 0
    actions_by_kind: dict[str, float] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        """The counts as a JSON-able dict (rounded to 0.01), for the benchmark's report."""

        def r(v: float) -> float:
            return round(v, 2)

        return {
            "events": r(self.events),
            "workflow_tasks": r(self.workflow_tasks),
            "activities": r(self.activities),
            "activity_attempts": r(self.activity_attempts),
            "signals": r(self.signals),
            "updates": r(self.updates),
            "timers": r(self.timers),
            "upserts": r(self.upserts),
            "change_version_upserts": r(self.change_version_upserts),
            "patch_markers": r(self.patch_markers),
            "local_activity_markers": r(self.local_activity_markers),
            "billable_actions": r(self.actions),
            "actions_by_kind": {k: r(v) for k, v in sorted(self.actions_by_kind.items())},
            "events_by_type": {k: r(v) for k, v in sorted(self.by_type.items())},
        }


def _attributes(event: Mapping[str, Any]) -> Mapping[str, Any]:
    for key, value in event.items():
        if key.endswith("EventAttributes") and isinstance(value, Mapping):
            return value
    return {}


def _patch_id(attributes: Mapping[str, Any]) -> str:
    payloads = attributes.get("details", {}).get("patch-data", {}).get("payloads", [])
    if not payloads:
        return ""
    try:
        return str(json.loads(base64.b64decode(payloads[0]["data"]))["id"])
    except (KeyError, ValueError, TypeError):
        return ""


def history_counts(events: Sequence[Mapping[str, Any]]) -> JobCounts:
    """Count one job's history (module doc).

    Args:
        events: the history's events in JSON form (``eventType`` as
            ``EVENT_TYPE_…`` names, attributes under ``…EventAttributes``).

    Returns:
        The job's :class:`JobCounts`.
    """
    counts = JobCounts(events=len(events))
    by_type: Counter[str] = Counter()
    actions: Counter[str] = Counter()
    marker_tasks: set[str] = set()
    for event in events:
        kind = str(event.get("eventType", "")).removeprefix(_PREFIX)
        by_type[kind] += 1
        attrs = _attributes(event)
        if kind == "WORKFLOW_EXECUTION_STARTED":
            actions["start"] += 1
        elif kind == "WORKFLOW_TASK_COMPLETED":
            counts.workflow_tasks += 1
            retries = attrs.get("meteringMetadata", {}).get("nonfirstLocalActivityExecutionAttempts", 0)
            actions["local_activity_retry"] += int(retries or 0)
        elif kind == "ACTIVITY_TASK_SCHEDULED":
            counts.activities += 1
            actions["activity"] += 1
        elif kind == "ACTIVITY_TASK_STARTED":
            attempt = int(attrs.get("attempt", 1) or 1)
            counts.activity_attempts += attempt
            actions["activity_retry"] += attempt - 1
        elif kind == "TIMER_STARTED":
            counts.timers += 1
            actions["timer"] += 1
        elif kind == "WORKFLOW_EXECUTION_SIGNALED":
            counts.signals += 1
            actions["signal"] += 1
        elif kind == "WORKFLOW_EXECUTION_UPDATE_ACCEPTED":
            counts.updates += 1
            actions["update"] += 1
        elif kind == "UPSERT_WORKFLOW_SEARCH_ATTRIBUTES":
            counts.upserts += 1
            fields = attrs.get("searchAttributes", {}).get("indexedFields", {})
            if set(fields) == {CHANGE_VERSION}:
                counts.change_version_upserts += 1
            else:
                actions["upsert"] += 1
        elif kind == "MARKER_RECORDED":
            if attrs.get("markerName") == PATCH_MARKER:
                counts.patch_markers += 1
                counts.patches.append(_patch_id(attrs))
            elif attrs.get("markerName") == LOCAL_ACTIVITY_MARKER:
                counts.local_activity_markers += 1
            task = str(attrs.get("workflowTaskCompletedEventId", event.get("eventId")))
            if task not in marker_tasks:
                marker_tasks.add(task)
                actions["markers"] += 1
    counts.by_type = dict(by_type)
    counts.actions_by_kind = {k: v for k, v in actions.items() if v}
    counts.actions = sum(actions.values())
    return counts


def mean_counts(jobs: Iterable[JobCounts]) -> JobCounts:
    """The mean of each count over ``jobs`` (an empty iterable gives all zeros)."""
    jobs = list(jobs)
    n = len(jobs) or 1
    mean = JobCounts()
    scalar = [
        "events",
        "workflow_tasks",
        "activities",
        "activity_attempts",
        "signals",
        "updates",
        "timers",
        "upserts",
        "change_version_upserts",
        "patch_markers",
        "local_activity_markers",
        "actions",
    ]
    for name in scalar:
        setattr(mean, name, sum(getattr(j, name) for j in jobs) / n)
    for name in ("by_type", "actions_by_kind"):
        total: Counter[str] = Counter()
        for j in jobs:
            total.update(getattr(j, name))
        setattr(mean, name, {k: v / n for k, v in total.items()})
    return mean


def parse_metrics(text: str, name: str) -> dict[str, float]:
    """The samples of one counter in a Prometheus text exposition, by their label set.

    Args:
        text: the ``/metrics`` body.
        name: the metric family (``action``, ``curaflow_ledger_statements_total``).

    Returns:
        ``{'label="value",…': sample}``; ``""`` for a sample without labels.
    """
    samples: dict[str, float] = {}
    for line in text.splitlines():
        if not line.startswith(name) or line.startswith("#"):
            continue
        head, _, value = line.rpartition(" ")
        metric, brace, labels = head.partition("{")
        if metric != name:
            continue
        try:
            samples[labels.rstrip("}") if brace else ""] = float(value)
        except ValueError:
            continue
    return samples


def label_value(labels: str, key: str) -> str:
    """The value of label ``key`` in a rendered label set (``a="1",b="2"``); ``""`` if absent."""
    for part in labels.split('",'):
        k, _, v = part.partition('="')
        if k.strip() == key:
            return v.rstrip('"')
    return ""


def delta(after: Mapping[str, float], before: Mapping[str, float]) -> dict[str, float]:
    """``after − before`` per label set (counters; a set new in ``after`` counts from 0)."""
    return {k: v - before.get(k, 0.0) for k, v in after.items() if v - before.get(k, 0.0)}
