"""Temporal activities: all I/O of a job (source, artifact store, routes, ledger).

:func:`build_activities` returns the activity callables a worker registers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from activities.acquire import AcquireActivity
from activities.admit import AdmitActivity
from activities.deliver import DeliverActivity
from activities.deps import ActivityDeps
from activities.fetch import FetchActivity
from activities.finish import FinishActivity
from activities.follow import FollowActivity
from activities.push_events import PushActivity
from activities.scheduled import ScheduledActivity
from activities.search import SearchActivity


def build_activities(deps: ActivityDeps) -> tuple[list[Callable[..., Any]], list[Callable[..., Any]]]:
    """The activities of a worker: ``(main task queue, source task queues)``.

    ``acquire`` (``search`` then ``fetch``: every source request of a source instance)
    runs on the instance's rate-gate queue, with ``search`` and ``fetch`` on their own for
    executions started before core v2; everything else (including the schedule
    trampoline's ``admit_occurrence``, ``occurrence_job_run`` and ``follow_own_job``, and
    ``follow_job``, which other workflows schedule on it) on the main queue. ``fetch`` stays registered on the
    main queue too, for histories scheduled before it moved.
    """
    finish = FinishActivity(deps)
    fetch = FetchActivity(deps).fetch
    scheduled = ScheduledActivity(deps)
    main: list[Callable[..., Any]] = [
        fetch,
        DeliverActivity(deps).deliver,
        finish.finish,
        finish.request_cancel,
        finish.paused_steps,
        finish.ended_elsewhere,
        scheduled.admit_occurrence,
        scheduled.occurrence_job_run,
        scheduled.follow_own_job,
        AdmitActivity(deps).admit,
        PushActivity(deps).push_events,
        FollowActivity(deps).follow_job,
    ]
    source: list[Callable[..., Any]] = [AcquireActivity(deps).acquire, SearchActivity(deps).search, fetch]
    return main, source
