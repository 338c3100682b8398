"""The ``acquire`` activity: ``search`` then ``fetch`` of one cell, in one step.

A cell's source work — find and bind a work (:mod:`activities.search`), then download
it (:mod:`activities.fetch`) — runs as one activity on the source instance's rate-gate queue:
one round trip through Temporal instead of two, half the history events and workflow
activations for the source side of a cell. A work the search half binds is
fetched in the same step: the binding's transaction renews the lease and checks the
job's barrier (:func:`~curaflow.ledger.cells.bind_search`) rather than ending the step
for the fetch half to open it again. The two halves keep their own ledger transitions,
checkpoints and heartbeats, so nothing about resuming changes: a
retried attempt adopts the binding the dead one made (search never re-ranks) and
continues the download from the pages already on disk.

Once the cell bound its work it tells the workflow so (the ``cell_progress`` signal,
best effort) when the download is still running :data:`PROGRESS_SIGNAL_DELAY_S` later:
the ``status`` query, the ``JobStatus`` search attribute and the UI's details then say
``running`` / ``fetching`` while a download runs, as ``GET /jobs/{id}`` does, instead of
waiting for the step's result. A download over before that sends nothing — the step's
result carries the cell a moment later anyway, and the signal would cost the job four
history events (the signal and the workflow task it wakes), a billable action and a
workflow activation for a state nobody could see.

Stops after the search half when the cell ended (``no_candidate``), when another
fallback stage should run (``retry_stage``), or when the job is behind a barrier (a
recorded cancel, its deadline): the workflow then decides.
"""

from __future__ import annotations

import asyncio
import contextlib

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.caller import FOREIGN_CALLER, require_own_job
from activities.deps import ActivityDeps
from activities.errors import barrier_update
from activities.fetch import FetchActivity
from activities.heartbeat import covering_beats, heartbeat_beat_s
from activities.search import SearchActivity
from curaflow.domain.cells import is_terminal
from curaflow.domain.messages import AcquireInput, CellUpdate, FetchInput, SearchInput
from curaflow.domain.models import CellSnapshot
from curaflow.ledger.cells import Barrier
from curaflow.ledger.db import now_ms
from curaflow.ledger.jobs import deadline_of
from curaflow.ledger.records import load_cell
from curaflow.observability.logs import get_logger
from curaflow.outbound import attempt_deadline

log = get_logger("curaflow.acquire")

#: How long the progress signal may take (it is best effort: the ledger already holds
#: the binding, and the step's result carries the cell anyway).
PROGRESS_SIGNAL_TIMEOUT_S = 5.0
#: A download still running this long after the binding is signalled to the workflow
#: (seconds): what Temporal shows lags the ledger by at most this, the granularity of
#: heartbeats (they reach Temporal at most once a second, :mod:`activities.heartbeat`).
PROGRESS_SIGNAL_DELAY_S = 1.0


class AcquireActivity:
    """Holds the worker's :class:`~activities.deps.ActivityDeps` for the ``acquire`` activity."""

    def __init__(self, deps: ActivityDeps) -> None:
        self._deps = deps
        self._search = SearchActivity(deps)
        self._fetch = FetchActivity(deps)

    @activity.defn(name="acquire")
    async def acquire(self, inp: AcquireInput) -> CellUpdate:
        """Search the source for ``inp.target``, bind a work and fetch its artifact.

        Returns:
            The cell afterwards: ``artifact_ready``, terminal, or ``pending`` with
            ``retry_stage`` set (another fallback stage should run); ``cancel_requested``
            / ``deadline_passed`` when the job is behind a barrier.

        Raises:
            ApplicationError: ``foreign_caller`` (non-retryable, nothing done) when the calling
                execution is not the job's own (:func:`activities.caller.require_own_job`).
            ApplicationError: as ``search`` and ``fetch`` (typed by reason code).

        Every source request of the attempt ends by the job's deadline at the latest
        (:func:`~curaflow.outbound.attempt_deadline`; the deadline comes with the step's
        opening, :class:`~curaflow.ledger.cells.StepOpened`). **The deadline owns every failure
        that happens after it passed**: an attempt that fails once the job's deadline has
        passed — a download or a search page the deadline cut, a decode, a ledger write,
        wherever the attempt was — does not raise its failure (it would be taken for the
        source's: ``download_timeout``, "check the network"); it reports the barrier
        (``deadline_passed``), as a step opened behind it does, and the cell's reason is
        the deadline's (:func:`curaflow.domain.verdicts.cell_verdict`).
        """
        require_own_job(inp.job_id)
        # From the first beat: a source step's heartbeat timeout is short (and the budget's own may be shorter).
        async with covering_beats(heartbeat_beat_s(inp.heartbeat_interval_ms / 1000)):
            try:
                return await self._acquire(inp)
            except Exception as err:
                if isinstance(err, ApplicationError) and err.type == FOREIGN_CALLER:
                    raise  # not the job's step: nothing to read, nothing done
                # Read only when the attempt failed: a happy path has it from the step.
                deadline = await deadline_of(self._deps.pool, inp.job_id)
                if deadline is None or now_ms() < deadline:
                    raise
                return await self._behind_deadline(inp, err)

    async def _behind_deadline(self, inp: AcquireInput, err: Exception) -> CellUpdate:
        """The attempt failed after the job's deadline: report the barrier, not the failure."""
        log.info(
            "acquire.failed_after_deadline",
            job_id=inp.job_id,
            target_id=inp.target.target_id,
            error=type(err).__name__,
            detail=str(err)[:300],
        )
        async with self._deps.pool.acquire() as conn:
            cell = await load_cell(conn, inp.job_id, inp.target.target_id)
        if cell is None:
            raise err
        return barrier_update(cell, Barrier.DEADLINE)

    async def _acquire(self, inp: AcquireInput) -> CellUpdate:
        searched = await self._search.run(SearchInput.model_validate(inp.model_dump()), continues=True)
        found = searched.update
        if (
            found.cancel_requested
            or found.deadline_passed
            or found.retry_stage
            or is_terminal(found.cell.state)
            or found.cell.work_id is None
        ):
            return found
        # The download runs in this task (its cancellation is the activity's); the
        # signal waits beside it and is dropped once the download is over.
        progress = asyncio.create_task(self._progress(found.cell, after_s=PROGRESS_SIGNAL_DELAY_S))
        try:
            with attempt_deadline(searched.deadline_at_ms):
                return await self._fetch.run(
                    FetchInput(
                        job_id=inp.job_id,
                        target=inp.target,
                        heartbeat_interval_ms=inp.heartbeat_interval_ms,
                        fallback_stage=inp.fallback_stage,
                        max_fallback_stages=inp.max_fallback_stages,
                    ),
                    opened=searched.opened,
                    store_held=searched.held,
                )
        finally:
            progress.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await progress

    async def _progress(self, cell: CellSnapshot, *, after_s: float = 0.0) -> None:
        """Signal ``cell_progress`` to this step's execution after ``after_s`` seconds; a
        failure is logged, never raised."""
        client = self._deps.client
        if client is None:
            return
        await asyncio.sleep(after_s)
        info = activity.info()
        handle = client.get_workflow_handle(info.workflow_id or "", run_id=info.workflow_run_id)
        try:
            await asyncio.wait_for(handle.signal("cell_progress", cell), PROGRESS_SIGNAL_TIMEOUT_S)
        except Exception as err:  # noqa: BLE001 - progress is advisory; the fetch goes on
            log.warning("acquire.progress_not_signalled", job_id=info.workflow_id, error=type(err).__name__)
