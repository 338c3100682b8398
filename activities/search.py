"""The ``search`` activity: scan the source and bind the first eligible work to the cell.

Runs on the target account's source task queue (its rate gate). One attempt:

1. opens the step in the ledger (job ``started`` on the first step of the job, cell
   stage ``searching``, the cell's lease);
2. adopts an existing binding or terminal state (a resumed attempt never re-ranks);
3. pages the source from the last checkpoint, persisting the checkpoint and
   heartbeating after every page (a killed worker's retry continues with the next
   page);
4. binds the first candidate not held by another cell on these routes, in the same
   transaction that stores the candidate report (``pending → selected``);
5. with nothing to bind: another fallback stage (scheduled jobs) or
   ``no_candidate`` with its classified reason.
"""

from __future__ import annotations

from temporalio import activity

from activities.deps import ActivityDeps
from activities.errors import barrier_update, permanent, source_failure
from activities.heartbeat import Heartbeater
from curaflow.domain.cells import CellStage, CellState, is_terminal
from curaflow.domain.messages import CellUpdate, SearchInput
from curaflow.domain.reasons import TerminalReason, no_candidate_reason
from curaflow.ledger import cells as ledger
from curaflow.sources.errors import SourceError
from curaflow.sources.scan import WANT, ScanCheckpoint, scan


class SearchActivity:
    """Holds the worker's :class:`~activities.deps.ActivityDeps` for the ``search`` activity."""

    def __init__(self, deps: ActivityDeps) -> None:
        self.deps = deps

    @activity.defn(name="search")
    async def search(self, inp: SearchInput) -> CellUpdate:
        """Scan the source for ``inp.target`` and bind a work to the cell.

        Args:
            inp: job id, effective target, fallback stage (0-based) and the number of
                stages allowed, heartbeat interval (ms).

        Returns:
            The cell afterwards (``selected``, terminal, or ``pending`` with
            ``retry_stage`` set when another fallback stage should run).

        Raises:
            ApplicationError: typed by reason code (``rate_limited`` with a cooldown
                ``next_retry_delay``, ``auth_failed`` non-retryable, ``network_error`` …).
        """
        deps = self.deps
        target = inp.target
        info = activity.info()
        lease_ms = inp.heartbeat_interval_ms * 2
        async with deps.pool.acquire() as conn, conn.transaction():
            cell, barrier = await ledger.start_step(
                conn,
                inp.job_id,
                target.target_id,
                stage=CellStage.SEARCHING,
                attempt=info.attempt,
                lease_ms=lease_ms,
                owner=deps.identity,
            )
        if cell is None:
            raise permanent(
                TerminalReason.INTERNAL_ERROR, f"job {inp.job_id} cell {target.target_id} not in the ledger"
            )
        if barrier is not None:
            return barrier_update(cell, barrier)
        if is_terminal(cell.state) or cell.work_id is not None:
            return CellUpdate(cell=cell)

        try:
            client = deps.pixiv(target.account)
        except KeyError:
            raise permanent(
                TerminalReason.CONFIGURATION_ERROR, f"pixiv account {target.account!r} is not configured"
            ) from None
        # Stage N may keep base × (N+1) candidates (cap 100), prefetching WANT × (N+1).
        scan_limit = min(100, max(1, target.scan_limit) * (inp.fallback_stage + 1))
        want = min(scan_limit, WANT * (inp.fallback_stage + 1))
        unavailable = await ledger.released_works(deps.pool, inp.job_id, target.target_id)
        saved = await ledger.load_checkpoint(deps.pool, inp.job_id, target.target_id)
        checkpoint = None
        if saved and saved.get("stage") == inp.fallback_stage:
            checkpoint = ScanCheckpoint.model_validate(saved["scan"])
        routes = [r.name for r in target.routes]

        async with Heartbeater(
            deps.pool, inp.job_id, target.target_id, inp.heartbeat_interval_ms / 1000, lease_ms
        ) as hb:

            async def taken(ids: list[str]) -> set[str]:
                return await ledger.taken_works(deps.pool, routes, target.work_type, ids)

            async def on_page(cp: ScanCheckpoint) -> None:
                await ledger.save_checkpoint(
                    deps.pool,
                    inp.job_id,
                    target.target_id,
                    {"stage": inp.fallback_stage, "scan": cp.model_dump(mode="json")},
                )
                hb.update(stage="searching", pages=cp.pages, examined=cp.examined, candidates=len(cp.candidates))

            while True:
                try:
                    result = await scan(
                        client,
                        target,
                        scan_limit=scan_limit,
                        want=want,
                        unavailable=unavailable,
                        taken=taken,
                        on_page=on_page,
                        checkpoint=checkpoint,
                        max_examined=deps.settings.pixiv.max_examined,
                    )
                except SourceError as err:
                    raise source_failure(
                        err, info.attempt, rate_limit_base_s=deps.settings.pixiv.rate_limit_base_ms / 1000
                    ) from err
                async with deps.pool.acquire() as conn, conn.transaction():
                    cell = await ledger.bind_work(conn, inp.job_id, target, result.candidates, result.report)
                    assert cell is not None
                    if cell.state != CellState.PENDING or cell.work_id is not None:
                        await ledger.end_lease(conn, inp.job_id, target.target_id)
                        return CellUpdate(cell=cell)
                if result.exhausted or not result.candidates or result.examined >= deps.settings.pixiv.max_examined:
                    break
                # Every candidate was bound by concurrent jobs in the meantime: keep paging.
                checkpoint = result.model_copy(update={"candidates": []})

        async with deps.pool.acquire() as conn, conn.transaction():
            report = cell.candidate_report or result.report
            reason = no_candidate_reason(report.fetched, report.reasons)
            dead_end = reason == TerminalReason.DUPLICATE_EXHAUSTED
            if inp.fallback_stage + 1 < inp.max_fallback_stages and not dead_end:
                await ledger.set_fallback_stage(conn, inp.job_id, target.target_id, inp.fallback_stage + 1)
                await ledger.end_lease(conn, inp.job_id, target.target_id)
                return CellUpdate(cell=cell, retry_stage=True)
            cell = await ledger.finish_cell(conn, inp.job_id, target.target_id, CellState.NO_CANDIDATE, reason)
            assert cell is not None
            activity.logger.info(
                "candidate_exhaustion",
                extra={
                    "job_id": inp.job_id,
                    "target_id": target.target_id,
                    "stage": inp.fallback_stage,
                    "reason": str(reason),
                    "searched": report.fetched,
                    "duplicates": report.reasons.get("duplicate", 0),
                    "filtered": report.rejected - report.reasons.get("duplicate", 0),
                },
            )
            return CellUpdate(cell=cell)
