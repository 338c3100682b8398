"""The ``search`` activity: scan the source and bind the first eligible work to the cell.

Runs on the target's source task queue (its source instance's rate gate). It knows the
source only through the :class:`~curaflow.sources.base.Source` protocol. One attempt, one
small step each:

1. :meth:`SearchActivity._open` — opens the step in the ledger (job ``started`` on the
   first step of the job, cell stage ``searching``, the cell's lease); a job behind a
   barrier, or a cell already bound or ended (a resumed attempt never re-ranks), stops
   here — a job that had already ended, whose id another run holds, says so too
   (``CellUpdate.ended_in_another_run``: the asking run only reports the job);
2. :meth:`SearchActivity._prepare` — reads in one statement where the scan resumes (the
   checkpoint of this pass, the works the cell released) and, for a source that keeps
   frontiers, the target's stored frontier (the source's own JSON under its
   :meth:`~curaflow.sources.base.Source.frontier_key`); builds the scan's request and
   ledger hooks;
3. :meth:`SearchActivity._scan` — pages the source from the last checkpoint, persisting
   the checkpoint and heartbeating after every page (a killed worker's retry continues
   with the next page);
4. :meth:`SearchActivity._bind` — binds the first candidate not held by another cell on
   these routes, in the transaction that stores the candidate report and the frontier
   the scan left (a job that dies before binding leaves the frontier as it was), and
   ends the step — or carries it on into the fetch (``acquire``);
5. with nothing to bind, in that same transaction: another fallback pass or the cell's
   end with the reason its tally gives (:func:`activities.unbound.end_unbound`).

Works the ledger remembers against the target — refused for good by one of its routes,
or found unavailable for its source instance by an earlier job — are rejected without a
request (``refused`` / ``unavailable``). A day the source cannot page fully is logged
(``source.day_not_fully_paged``), counted (``curaflow_source_days_not_fully_paged_total``)
and kept in the candidate report. A restricted source instance (``account_restricted``)
is logged (``source.account_restricted``) with what to do, in the source's words.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.caller import claim_of, open_own_step, require_own_job
from activities.deps import ActivityDeps
from activities.errors import barrier_update, permanent, source_failure, source_of
from activities.heartbeat import Heartbeater
from activities.unbound import end_unbound
from curaflow.domain.cells import CellStage, CellState, is_terminal
from curaflow.domain.fallback import pass_bounds
from curaflow.domain.messages import CellUpdate, SearchInput
from curaflow.domain.models import CellSnapshot, SkippedDay
from curaflow.domain.reasons import TerminalReason
from curaflow.ledger import cells as ledger
from curaflow.ledger import frontiers
from curaflow.ledger import remembered as memory
from curaflow.observability import metrics
from curaflow.observability.logs import get_logger
from curaflow.outbound import attempt_deadline
from curaflow.sources.base import ScanRequest, ScanState, Source
from curaflow.sources.errors import SourceError
from curaflow.temporal.job_runs import held_by_another_run

log = get_logger("curaflow.source")


class Searched(NamedTuple):
    """What a search step ended with: the cell update (brief cell, for history) and, while
    the step stays open, the full cell bound by it (``acquire`` goes on to fetch it in the
    same attempt; see :meth:`SearchActivity.run`)."""

    update: CellUpdate
    opened: CellSnapshot | None = None
    deadline_at_ms: int | None = None
    held: bool = False  # the binding recorded this process's store as the cell's holder


@dataclass
class _Plan:
    """What one attempt scans with (built by :meth:`SearchActivity._prepare`).

    Attributes:
        source: the target's source instance.
        request: the scan's bounds and ledger hooks.
        checkpoint: where this pass's scan resumes (None: from the start).
        frontier_key: the key the target's frontier is stored under (None: none kept).
        hooks: the scan's ledger hooks (they count the items of its pages curaflow does
            not read once committed: :meth:`_Hooks.count_invalid`).
    """

    source: Source
    request: ScanRequest
    checkpoint: ScanState | None
    frontier_key: str | None
    hooks: _Hooks


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
            ApplicationError: ``foreign_caller`` (non-retryable, nothing done) when the calling
                execution is not the job's own (:func:`activities.caller.require_own_job`).
            ApplicationError: typed by reason code (``rate_limited`` with a cooldown
                ``next_retry_delay``, ``auth_failed`` non-retryable, ``network_error`` …;
                ``configuration_mismatch``, retryable, before the step opens, when this
                worker does not know the target's account: :func:`~activities.errors.source_of`).
        """
        require_own_job(inp.job_id)
        return (await self.run(inp)).update

    async def run(self, inp: SearchInput, *, continues: bool = False) -> Searched:
        """The search step (see :meth:`search` and the module doc); ``continues``: the
        attempt goes on to fetch.

        With ``continues`` (``acquire``), a cell ``selected`` by the binding (bound by this
        call, or adopted from a concurrent attempt's binding) keeps the step open: the
        binding's transaction renews the lease and checks the job's barrier
        (:func:`~curaflow.ledger.cells.bind_search`) instead of ending the lease, and the
        fetch half opens no step of its own.

        Returns:
            The cell update and, only with ``continues``, a cell ``selected`` by the
            binding and no barrier, the full cell whose step is still open.
        """
        # A source this worker does not know costs this attempt before the step opens:
        # nothing in the ledger changes, the retry may land where it is known.
        source_of(self.deps, inp.target.account)
        ended, opened = await self._open(inp)
        if ended is not None:
            return ended
        lease_ms = inp.heartbeat_interval_ms * 2
        deadline = opened.deadline_at_ms
        # Every source request of the step ends by the job's deadline, read with its opening.
        with attempt_deadline(deadline):
            async with Heartbeater(
                self.deps.pool, inp.job_id, inp.target.target_id, inp.heartbeat_interval_ms / 1000, lease_ms
            ) as hb:
                plan = await self._prepare(inp, hb, opened)
                while True:
                    result = await self._scan(inp, plan)
                    searched = await self._bind(inp, plan, result, carry=continues)
                    plan.hooks.count_invalid(result)  # committed with the binding
                    if searched is not None:
                        return searched._replace(deadline_at_ms=deadline)
                    # Every candidate was bound by concurrent jobs in the meantime: keep paging.
                    plan.checkpoint = result.model_copy(update={"candidates": []})

    async def _open(self, inp: SearchInput) -> tuple[Searched | None, ledger.StepOpened]:
        """Open the step: what it found (the job's deadline, whether its cell has anything
        to resume) and a :class:`Searched` when the attempt goes no further (a barrier, a
        cell already bound or ended), None when it scans.

        Raises:
            ApplicationError: ``internal_error`` when the cell is not in the ledger.
        """
        deps, target = self.deps, inp.target
        claim = claim_of(inp)  # the step's input is the job's, judged in its opening (foreign_caller)
        async with deps.pool.acquire() as conn, conn.transaction():
            opened = await open_own_step(
                conn,
                inp.job_id,
                claim,
                stage=CellStage.SEARCHING,
                attempt=activity.info().attempt,
                lease_ms=inp.heartbeat_interval_ms * 2,
                owner=deps.identity,
            )
        cell, barrier = opened.cell, opened.barrier
        if cell is None:
            raise permanent(
                TerminalReason.INTERNAL_ERROR, f"job {inp.job_id} cell {target.target_id} not in the ledger"
            )
        if barrier is not None:
            update = barrier_update(cell, barrier)
        elif is_terminal(cell.state) or cell.work_id is not None:
            update = CellUpdate(cell=cell)
        else:
            return None, opened
        if opened.ended and await self._held_by_another_run():
            update = update.model_copy(update={"ended_in_another_run": True})
        return Searched(update), opened

    async def _held_by_another_run(self) -> bool:
        """The job ended before this step opened: whether another run of its id holds it
        (this execution is then a run added under an ended job's id; see
        :func:`~curaflow.temporal.job_runs.held_by_another_run`). False without a Temporal
        client (no run to compare)."""
        info = activity.info()
        if self.deps.client is None or not info.workflow_id or not info.workflow_run_id:
            return False
        return await held_by_another_run(self.deps.client, info.workflow_id, info.workflow_run_id)

    async def _prepare(self, inp: SearchInput, hb: Heartbeater, opened: ledger.StepOpened) -> _Plan:
        """The source, where its scan resumes and what it starts from, the scan's request
        (nothing read when there is nothing to resume: :func:`~curaflow.ledger.cells.resume_needed`)."""
        deps, target = self.deps, inp.target
        source = source_of(deps, target.account)
        try:
            key = source.frontier_key(target) if source.policy.keeps_frontier else None
        except SourceError as err:  # the source's own bug (the guard): retried as its failure
            raise _failure(err, inp, source) from err
        resume = (
            await ledger.search_resume(deps.pool, inp.job_id, target.target_id, key)
            if ledger.resume_needed(opened, key)
            else ledger.SearchResume(set(), None)
        )
        saved = resume.checkpoint
        checkpoint = source.restore(saved["scan"]) if saved and saved.get("stage") == inp.fallback_stage else None
        # Pass N may keep base × (N+1) candidates (cap 100), prefetching 5 × (N+1).
        scan_limit, want = pass_bounds(target.scan_limit, inp.fallback_stage)
        hooks = _Hooks(deps, inp, hb, released_unrecognised=resume.unrecognised)
        request = ScanRequest(
            scan_limit=scan_limit,
            want=want,
            unavailable=resume.released,
            known=hooks.known,
            on_skipped_day=hooks.skipped_day,
            on_page=hooks.on_page,
            max_examined=source.policy.max_examined,
            # A resumed scan keeps its place in its checkpoint; a fresh one starts from
            # the stored frontier ({}: none stored yet).
            frontier=(resume.frontier or {}) if key is not None and checkpoint is None else None,
        )
        # The resumed checkpoint's invalid items were counted once it was saved.
        hooks.invalid_counted = _invalid(checkpoint)
        return _Plan(source, request, checkpoint, key, hooks)

    async def _scan(self, inp: SearchInput, plan: _Plan) -> ScanState:
        """Run (or resume) the source's scan.

        Raises:
            ApplicationError: the source's failure, typed by its reason.
        """
        try:
            return await plan.source.scan(inp.target, plan.request, plan.checkpoint)
        except SourceError as err:
            raise _failure(err, inp, plan.source) from err

    async def _bind(self, inp: SearchInput, plan: _Plan, result: ScanState, *, carry: bool) -> Searched | None:
        """Store what the scan found and bind a work, in one transaction; None when the
        scan should go on (every candidate was bound by another job meanwhile)."""
        deps, target = self.deps, inp.target
        policy = plan.source.policy
        async with deps.pool.acquire() as conn, conn.transaction():
            binding = await ledger.bind_search(
                conn,
                inp.job_id,
                target,
                result.candidates,
                result.report,
                carry=(
                    ledger.Carry(inp.heartbeat_interval_ms * 2, deps.identity, deps.store.identity()[0])
                    if carry
                    else None
                ),
            )
            cell = binding.cell
            assert cell is not None
            if plan.frontier_key is not None and result.frontier is not None:
                await frontiers.save_frontier(
                    conn, target.target_id, plan.frontier_key, result.frontier, job_id=inp.job_id
                )
            if cell.state != CellState.PENDING or cell.work_id is not None:
                if binding.opened:
                    return Searched(CellUpdate(cell=cell), opened=cell, held=binding.held)
                return Searched(barrier_update(cell, binding.barrier) if binding.barrier else CellUpdate(cell=cell))
            if not (result.exhausted or not result.candidates or result.capped(policy.max_examined)):
                return None
            update = await end_unbound(
                conn,
                inp.job_id,
                target,
                cell,
                fallback_pass=inp.fallback_stage,
                max_passes=inp.max_fallback_stages,
                max_examined=policy.max_examined,
            )
            return Searched(update)


class _Hooks:
    """The ledger hooks of one attempt's scan: what the ledger rules out, a day the source
    cannot page fully, the checkpoint after a page."""

    def __init__(
        self,
        deps: ActivityDeps,
        inp: SearchInput,
        hb: Heartbeater,
        *,
        released_unrecognised: frozenset[str] = frozenset(),
    ) -> None:
        self._deps = deps
        self._inp = inp
        self._hb = hb
        self._routes = [r.name for r in inp.target.routes]
        self._released_unrecognised = released_unrecognised
        self.invalid_counted = 0

    async def known(self, ids: list[str]) -> dict[str, str]:
        """The works of ``ids`` the ledger rules out for this target, by reason word (a work
        this cell released on an answer not recognised as its own: ``unrecognised``)."""
        target = self._inp.target
        return await memory.known_works(
            self._deps.pool,
            routes=self._routes,
            gate=self._deps.settings.source_task_queue(target.account),
            work_type=target.work_type,
            work_ids=ids,
            released_unrecognised=self._released_unrecognised,
        )

    def skipped_day(self, day: SkippedDay) -> None:
        """Log and count a day the source holds more works of than it can page."""
        target = self._inp.target
        metrics.record_skipped_day(target.account)
        log.warning(
            "source.day_not_fully_paged",
            job_id=self._inp.job_id,
            target_id=target.target_id,
            account=target.account,
            day=day.day,
            reached=day.reached,
            hint="the source holds more works of this day than it can page; narrow the target's "
            "query (more tags, a shorter duration or a date range)",
        )

    async def on_page(self, cp: ScanState) -> None:
        """Persist the checkpoint (with the pass it belongs to) and report progress."""
        inp = self._inp
        await ledger.save_checkpoint(
            self._deps.pool,
            inp.job_id,
            inp.target.target_id,
            {"stage": inp.fallback_stage, "scan": cp.model_dump(mode="json")},
        )
        self._hb.update(stage="searching", pages=cp.pages, examined=cp.examined, candidates=len(cp.candidates))
        self.count_invalid(cp)  # committed with the checkpoint

    def count_invalid(self, cp: ScanState) -> None:
        """Count the items of the scan's pages in a shape curaflow does not read (its
        ``invalid`` rejections, :func:`~curaflow.observability.metrics.record_invalid_listed`)
        not counted yet — called once ``cp`` is committed (a checkpoint saved, the result
        bound): an attempt retried from the last checkpoint reads the pages after it
        again, and counts them then, once. Until 2026-12-05 they fed the cell's tally only
        (a renamed field on every item showed as jobs ending ``source_unusable``)."""
        total = _invalid(cp)
        if total > self.invalid_counted:
            metrics.record_invalid_listed(self._inp.target.account, total - self.invalid_counted)
        self.invalid_counted = max(self.invalid_counted, total)


def _invalid(cp: ScanState | None) -> int:
    """The scan's ``invalid`` rejections so far (0: no scan)."""
    return cp.report.reasons.get("invalid", 0) if cp is not None else 0


def _failure(err: SourceError, inp: SearchInput, source: Source) -> ApplicationError:
    """The activity's failure for the source's ``err`` (a restricted instance logged first)."""
    if err.reason == TerminalReason.ACCOUNT_RESTRICTED:
        _restricted(err, inp.job_id, inp.target.target_id, inp.target.account)
    return source_failure(err, activity.info().attempt, policy=source.policy)


def _restricted(err: SourceError, job_id: str, target_id: str, account: str) -> None:
    """Log (and count) a restricted source instance: once per answer of the source, not per
    request its paused gate refused (those carry no status)."""
    if err.status is None:
        return  # the instance was already paused: no request left
    metrics.record_account_paused(account)
    log.error(
        "source.account_restricted",
        job_id=job_id,
        target_id=target_id,
        account=account,
        detail=str(err),
        hint=err.hint
        or "the source restricted this instance's access: its requests are paused; move the target to another "
        "instance, and lift the pause with `curaflow accounts resume NAME` once the source allows it.",
    )
