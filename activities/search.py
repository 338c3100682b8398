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
5. with nothing to bind: another fallback stage only when it is wider than this pass
   (:func:`~curaflow.domain.fallback.another_pass`: never after a pass that exhausted
   the source), else ``no_candidate`` at once with its classified reason.

A fresh scan starts from the target's scan frontier for its fingerprint
(:mod:`curaflow.sources.frontier`, stored by :mod:`curaflow.ledger.frontiers`), and the
frontier it leaves is written with its candidate report.

Works the ledger remembers against the target — refused for good by one of its routes,
or found unavailable for its account by an earlier job — are rejected without a request
(``refused`` / ``unavailable``). A day the source cannot page fully is logged
(``source.day_not_fully_paged``), counted (``curaflow_source_days_not_fully_paged_total``)
and kept in the candidate report. A restricted account (``account_restricted``) is logged
(``source.account_restricted``) with what to do.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import NamedTuple

from temporalio import activity

from activities.deps import ActivityDeps
from activities.errors import barrier_update, permanent, source_failure, source_of
from activities.heartbeat import Heartbeater
from curaflow.domain.cells import CellStage, CellState, is_terminal
from curaflow.domain.fallback import another_pass, pass_bounds
from curaflow.domain.messages import CellUpdate, SearchInput
from curaflow.domain.models import CellSnapshot, SkippedDay
from curaflow.domain.reasons import TerminalReason
from curaflow.domain.verdicts import no_candidate_verdict
from curaflow.ledger import cells as ledger
from curaflow.ledger import frontiers
from curaflow.ledger import remembered as memory
from curaflow.observability import metrics
from curaflow.observability.logs import get_logger
from curaflow.outbound import attempt_deadline
from curaflow.sources import frontier as fr
from curaflow.sources.base import ScanRequest, ScanState
from curaflow.sources.errors import SourceError

log = get_logger("curaflow.source")


class Searched(NamedTuple):
    """What a search step ended with: the cell update (brief cell, for history) and, while
    the step stays open, the full cell bound by it (``acquire`` goes on to fetch it in the
    same attempt; see :meth:`SearchActivity.run`), with the job's deadline (epoch ms, UTC)
    the step read when it opened (it bounds the fetch's requests too)."""

    update: CellUpdate
    opened: CellSnapshot | None = None
    deadline_at_ms: int | None = None


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
        return (await self.run(inp)).update

    async def run(self, inp: SearchInput, *, continues: bool = False) -> Searched:
        """The search step (see :meth:`search`); ``continues``: the attempt goes on to fetch.

        With ``continues`` (``acquire``), a cell ``selected`` by the binding (bound by this
        call, or adopted from a concurrent attempt's binding) keeps the step open:
        the binding's transaction renews the lease and checks the job's barrier
        (:func:`~curaflow.ledger.cells.bind_and_continue`) instead of ending the lease,
        and the fetch half opens no step of its own.

        Every source request of the step ends by the job's deadline at the latest
        (:func:`~curaflow.outbound.attempt_deadline`), read with the step's opening.

        Returns:
            The cell update and, only with ``continues``, a cell ``selected`` by the
            binding and no barrier, the full cell whose step is still open.
        """
        deps = self.deps
        target = inp.target
        info = activity.info()
        lease_ms = inp.heartbeat_interval_ms * 2
        async with deps.pool.acquire() as conn, conn.transaction():
            opened = await ledger.start_step(
                conn,
                inp.job_id,
                target.target_id,
                stage=CellStage.SEARCHING,
                attempt=info.attempt,
                lease_ms=lease_ms,
                owner=deps.identity,
            )
        cell, barrier, deadline = opened.cell, opened.barrier, opened.deadline_at_ms
        if cell is None:
            raise permanent(
                TerminalReason.INTERNAL_ERROR, f"job {inp.job_id} cell {target.target_id} not in the ledger"
            )
        if barrier is not None:
            return Searched(barrier_update(cell, barrier))
        if is_terminal(cell.state) or cell.work_id is not None:
            return Searched(CellUpdate(cell=cell))
        with attempt_deadline(deadline):
            searched = await self._scan(
                inp, cell, continues=continues, lease_ms=lease_ms, resume=ledger.resume_needed(opened)
            )
        return searched._replace(deadline_at_ms=deadline)

    async def _scan(
        self, inp: SearchInput, cell: CellSnapshot, *, continues: bool, lease_ms: int, resume: bool
    ) -> Searched:
        """Page the source and bind (steps 3–5 of the module doc) in an opened step;
        ``resume``: the cell has released works or a checkpoint to read first."""
        deps = self.deps
        target = inp.target
        info = activity.info()
        source = source_of(deps, target.account)
        policy = source.policy
        # Pass N may keep base × (N+1) candidates (cap 100), prefetching 5 × (N+1).
        scan_limit, want = pass_bounds(target.scan_limit, inp.fallback_stage)
        unavailable, saved = (
            await ledger.search_resume(deps.pool, inp.job_id, target.target_id) if resume else (set(), None)
        )
        checkpoint = None
        if saved and saved.get("stage") == inp.fallback_stage:
            checkpoint = source.restore(saved["scan"])
        routes = [r.name for r in target.routes]
        fingerprint = fr.fingerprint(target) if policy.keeps_frontier and fr.applies(target) else None
        frontier = None
        if fingerprint is not None and checkpoint is None:
            frontier = await frontiers.load_frontier(deps.pool, target.target_id, fingerprint) or fr.Frontier(
                sort=target.query.sort
            )
        settled = (datetime.now(UTC) - timedelta(days=fr.SETTLE_DAYS)).date().isoformat()

        async with Heartbeater(
            deps.pool, inp.job_id, target.target_id, inp.heartbeat_interval_ms / 1000, lease_ms
        ) as hb:

            async def known(ids: list[str]) -> dict[str, str]:
                return await memory.known_works(
                    deps.pool,
                    routes=routes,
                    gate=deps.settings.source_task_queue(target.account),
                    work_type=target.work_type,
                    work_ids=ids,
                )

            def skipped_day(day: SkippedDay) -> None:
                metrics.record_skipped_day(target.account)
                log.warning(
                    "source.day_not_fully_paged",
                    job_id=inp.job_id,
                    target_id=target.target_id,
                    account=target.account,
                    day=day.day,
                    reached=day.reached,
                    hint="the source holds more works of this day than it can page; narrow the target's "
                    "query (more tags, a shorter duration or a date range)",
                )

            async def on_page(cp: ScanState) -> None:
                await ledger.save_checkpoint(
                    deps.pool,
                    inp.job_id,
                    target.target_id,
                    {"stage": inp.fallback_stage, "scan": cp.model_dump(mode="json")},
                )
                hb.update(stage="searching", pages=cp.pages, examined=cp.examined, candidates=len(cp.candidates))

            while True:
                try:
                    request = ScanRequest(
                        scan_limit=scan_limit,
                        want=want,
                        unavailable=unavailable,
                        known=known,
                        on_skipped_day=skipped_day,
                        on_page=on_page,
                        max_examined=policy.max_examined,
                        frontier=frontier,
                        settled_before=settled,
                    )
                    result = await source.scan(target, request, checkpoint)
                except SourceError as err:
                    if err.reason == TerminalReason.ACCOUNT_RESTRICTED:
                        _restricted(err, inp.job_id, target.target_id, target.account)
                    raise source_failure(err, info.attempt, rate_limit_base_s=policy.rate_limit_base_s) from err
                async with deps.pool.acquire() as conn, conn.transaction():
                    barrier = None
                    if continues:
                        renew = ledger.Renewal(lease_ms, deps.identity)
                        bound, barrier = await ledger.bind_and_continue(
                            conn, inp.job_id, target, result.candidates, result.report, renew
                        )
                    else:
                        bound = await ledger.bind_work(conn, inp.job_id, target, result.candidates, result.report)
                    assert bound is not None
                    cell = bound
                    if fingerprint is not None and result.frontier is not None:
                        await frontiers.save_frontier(
                            conn, target.target_id, fingerprint, result.frontier, job_id=inp.job_id
                        )
                    if cell.state != CellState.PENDING or cell.work_id is not None:
                        if continues and cell.state == CellState.SELECTED and barrier is None:
                            return Searched(CellUpdate(cell=cell), opened=cell)
                        await ledger.end_lease(conn, inp.job_id, target.target_id)
                        return Searched(barrier_update(cell, barrier) if barrier else CellUpdate(cell=cell))
                if result.exhausted or not result.candidates or result.examined >= policy.max_examined:
                    break
                # Every candidate was bound by concurrent jobs in the meantime: keep paging.
                checkpoint = result.model_copy(update={"candidates": []})

        async with deps.pool.acquire() as conn, conn.transaction():
            report = cell.candidate_report or result.report
            reason = no_candidate_verdict(report, max_examined=policy.max_examined)
            if another_pass(
                fallback_pass=inp.fallback_stage,
                max_passes=inp.max_fallback_stages,
                scan_limit=target.scan_limit,
                report=report,
                max_examined=policy.max_examined,
            ):
                await ledger.set_fallback_pass(conn, inp.job_id, target.target_id, inp.fallback_stage + 1)
                await ledger.end_lease(conn, inp.job_id, target.target_id)
                return Searched(CellUpdate(cell=cell, retry_stage=True))
            ended = await ledger.finish_cell(conn, inp.job_id, target.target_id, CellState.NO_CANDIDATE, reason)
            assert ended is not None
            cell = ended
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
                    "exhausted": report.exhausted,
                },
            )
            return Searched(CellUpdate(cell=cell))


def _restricted(err: SourceError, job_id: str, target_id: str, account: str) -> None:
    """Log (and count) a restricted account; once per answer of Pixiv, not per paused request."""
    if err.status is None:
        return  # the account was already paused: no request left
    metrics.record_account_paused(account)
    log.error(
        "source.account_restricted",
        job_id=job_id,
        target_id=target_id,
        account=account,
        detail=str(err),
        hint="Pixiv answered 'Your access is currently restricted.': the account's requests are paused "
        "(pixiv.restriction_pause_ms). Sign in at pixiv.net with this account to read the notice, or move "
        "the target to another account; lift the pause with `curaflow accounts resume ACCOUNT`.",
    )
