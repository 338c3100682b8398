"""The ``fetch`` activity: download the bound work's artifact (``selected → artifact_ready``).

Every page of the work is streamed to the artifact store and recorded complete only
after its full length is on disk; pages already complete from a previous attempt are
kept, so a resumed attempt continues where the dead one stopped. A work that turns out
to be unavailable (image 403/404; any failure that is the work's own: an unusable URL or
animation, a page over the decode budget or undecodable —
:class:`~curaflow.sources.errors.UnavailableKind`, counted by kind in the candidate
report) is released, remembered for the source instance (its ``unavailable_ttl_ms``:
later jobs skip it without a request; ``unrecognised_hold_ms`` for an answer not
recognised as the work's — a file's 404/410 is the work's only once the source's detail
of the work says it is gone, asked here and only here:
:func:`~curaflow.sources.corroboration.corroborated`) and the next
stored candidate is bound (provisional release, reference §1.1); a work unusable as the
source sent it (:data:`~curaflow.domain.tally.SOURCE_ANSWER_KINDS`: an image URL it may
not request, a page that is no image, no file listed) is remembered as such, counted
``unusable`` by later scans. When none is left the cell ends with the reason its tally
gives (``no_candidate`` …, or ``source_unusable`` when every work ruled out was
unusable) — or, in a scheduled job, goes back to a wider ``search``
when :func:`~curaflow.domain.fallback.another_pass` allows it (the released works stay
excluded for this cell).

A full artifact disk (``ENOSPC``, ``EDQUOT``) ends the cell at once with its own reason,
``storage_full`` (curaflow's, not retried: no retry within the job frees the disk).
Any other refusal of the machine while a page or an animation is written or checked (an
I/O error, too many open files: :func:`~curaflow.sources.decoding.machine_error`) is
raised as it came and retried — curaflow's, never the work's nor the source's.

A page is recorded complete only once it decodes fully (:mod:`curaflow.artifacts`): a
download cut short inside valid framing fails the attempt (``download_failed``,
retried) instead of being delivered. The complete artifact is then copied into the
ledger (:mod:`curaflow.ledger.artifacts`) before the cell is recorded ``artifact_ready``,
so a deliver attempt on any worker process can deliver it: no disk is shared.

Runs on the source instance's task queue: image downloads pass its rate gate.
"""

from __future__ import annotations

import errno

from temporalio import activity

from activities.caller import require_own_job
from activities.deps import ActivityDeps
from activities.errors import barrier_update, permanent, source_failure, source_of
from activities.heartbeat import Heartbeater
from activities.unbound import end_unbound
from curaflow.domain.cells import CellStage, CellState, is_terminal
from curaflow.domain.messages import CellUpdate, FetchInput
from curaflow.domain.models import CellSnapshot
from curaflow.domain.reasons import TerminalReason
from curaflow.domain.tally import SOURCE_ANSWER_KINDS
from curaflow.ledger import cells as ledger
from curaflow.ledger import remembered as memory
from curaflow.ledger.artifacts import held_pages, store_artifact
from curaflow.ledger.holdings import hold
from curaflow.observability.metrics import record_unrecognised_answer
from curaflow.outbound import attempt_deadline
from curaflow.paths import PathEscape
from curaflow.sources.corroboration import corroborated
from curaflow.sources.errors import SourceError, WorkUnavailable

#: ``errno`` values of a full artifact disk (no space, quota exceeded).
DISK_FULL = frozenset({errno.ENOSPC, errno.EDQUOT})


class FetchActivity:
    """Holds the worker's :class:`~activities.deps.ActivityDeps` for the ``fetch`` activity."""

    def __init__(self, deps: ActivityDeps) -> None:
        self.deps = deps

    @activity.defn(name="fetch")
    async def fetch(self, inp: FetchInput) -> CellUpdate:
        """Fetch the artifact of the work bound to the cell.

        Returns:
            The cell afterwards: ``artifact_ready``, terminal, or ``pending`` with
            ``retry_stage`` set (another fallback stage should search again).

        Raises:
            ApplicationError: ``foreign_caller`` (non-retryable, nothing done) when the calling
                execution is not the job's own (:func:`activities.caller.require_own_job`).
            ApplicationError: ``download_failed`` / ``download_timeout`` /
                ``rate_limited`` (retryable), ``internal_error`` when the cell is missing,
                ``configuration_mismatch`` (retryable, before the step opens) when this
                worker does not know the target's account (:func:`~activities.errors.source_of`).
        """
        require_own_job(inp.job_id)
        return await self.run(inp)

    async def run(self, inp: FetchInput, *, opened: CellSnapshot | None = None, store_held: bool = False) -> CellUpdate:
        """The fetch step (see :meth:`fetch`).

        Args:
            opened: the cell as the search half of the same ``acquire`` attempt left it,
                its step still open (:meth:`activities.search.SearchActivity.run`); no
                second step is opened then, and the caller bounds the requests by the
                job's deadline. None: open the step here; its requests end by the job's
                deadline at the latest (:func:`~curaflow.outbound.attempt_deadline`).
            store_held: the binding already recorded this process's store as the cell's holder
                (:class:`~curaflow.ledger.cells.Carry`): no statement of its own here.
        """
        deps = self.deps
        target = inp.target
        info = activity.info()
        lease_ms = inp.heartbeat_interval_ms * 2
        deadline: int | None = None
        # A source this worker does not know costs this attempt before the step opens:
        # nothing in the ledger changes, the retry may land where it is known.
        source = source_of(deps, target.account)
        if opened is not None:
            cell: CellSnapshot | None = opened
        else:
            async with deps.pool.acquire() as conn, conn.transaction():
                cell, barrier, deadline, *_ = await ledger.start_step(
                    conn,
                    inp.job_id,
                    target.target_id,
                    stage=CellStage.FETCHING,
                    attempt=info.attempt,
                    lease_ms=lease_ms,
                    owner=deps.identity,
                )
            if cell is not None and barrier is not None:
                return barrier_update(cell, barrier)
        if cell is None:
            raise permanent(
                TerminalReason.INTERNAL_ERROR, f"job {inp.job_id} cell {target.target_id} not in the ledger"
            )
        policy = source.policy

        with attempt_deadline(deadline):
            async with Heartbeater(
                deps.pool, inp.job_id, target.target_id, inp.heartbeat_interval_ms / 1000, lease_ms
            ) as hb:
                while True:
                    if is_terminal(cell.state) or cell.state != CellState.SELECTED or cell.work is None:
                        # Nothing (more) to fetch: the attempt ends here, and with it the lease
                        # its step took (``lease_active`` means an attempt runs).
                        async with deps.pool.acquire() as conn:
                            await ledger.end_lease(conn, inp.job_id, target.target_id)
                        return CellUpdate(cell=cell)
                    work = cell.work

                    async def progress(done: int, total: int, work_id: str = work.work_id) -> None:
                        hb.update(stage="fetching", work_id=work_id, pages_done=done, pages_total=total)

                    # Before the first byte: this host's store holds the cell's folder until its
                    # own retention pass deletes it (workers share no disk).
                    if not store_held:
                        await hold(deps.pool, deps.store.identity()[0], inp.job_id, target.target_id)
                        store_held = True  # the cell's folder: a rebind to the next candidate writes the same one
                    held: dict[int, bytes] = {}
                    try:
                        artifact = await deps.store.fetch(
                            source, work, inp.job_id, target.target_id, on_page=progress, held=held
                        )
                    except WorkUnavailable as raised:
                        # A file's 404/410 is the work's only if the source's detail of the
                        # work says it is gone (one request, only on this path).
                        try:
                            err = await corroborated(source, work.work_id, raised)
                        except SourceError as cut:  # the job's deadline cut the detail: no answer
                            raise source_failure(cut, info.attempt, policy=policy) from cut
                        remembered_ms = policy.memory_ms(err.recognised)
                        facts = {
                            "job_id": inp.job_id,
                            "target_id": target.target_id,
                            "account": target.account,
                            "work_id": work.work_id,
                            "why": err.why,
                            "kind": str(err.kind),
                            "remembered_ms": remembered_ms,
                        }
                        if err.recognised:
                            activity.logger.info("candidate unavailable, moving on", extra=facts)
                        else:
                            # The same answer would come for any work: the work held back
                            # briefly, not for the week (counted once committed, below).
                            activity.logger.warning(
                                "source.answer_unrecognised: the work is held back briefly, moving on", extra=facts
                            )
                        deps.store.delete(inp.job_id, target.target_id)
                        ended: CellUpdate | None = None
                        async with deps.pool.acquire() as conn, conn.transaction():
                            written = await memory.remember_unavailable(
                                conn,
                                gate=deps.settings.source_task_queue(target.account),
                                work_type=work.work_type,
                                work_id=work.work_id,
                                why=err.why,
                                job_id=inp.job_id,
                                ttl_ms=remembered_ms,
                                unusable=str(err.kind) in SOURCE_ANSWER_KINDS,
                                held=not err.recognised,
                            )
                            nxt = await ledger.rebind_next(
                                conn, inp.job_id, target, work.work_id, err.why, str(err.kind), err.recognised
                            )
                            assert nxt is not None
                            if nxt.state == CellState.PENDING and nxt.work_id is None:
                                ended = await end_unbound(
                                    conn,
                                    inp.job_id,
                                    target,
                                    nxt,
                                    fallback_pass=inp.fallback_stage,
                                    max_passes=inp.max_fallback_stages,
                                    max_examined=policy.max_examined,
                                )
                        if not err.recognised and (written or remembered_ms <= 0):
                            # Committed: one count per hold remembered (an alert watches
                            # it) — none for an attempt whose transaction failed (its
                            # retry counts) nor for a hold a live verdict outlasted.
                            record_unrecognised_answer(target.account, str(err.kind))
                        if ended is not None:
                            return ended
                        cell = nxt
                        continue
                    except SourceError as err:
                        raise source_failure(err, info.attempt, policy=policy) from err
                    except PathEscape as err:  # ids are validated at the source: a bug, never retried
                        raise permanent(TerminalReason.INTERNAL_ERROR, str(err)) from err
                    except OSError as err:
                        if err.errno not in DISK_FULL:
                            raise
                        # curaflow's own disk: no retry within the job frees it. Pages already
                        # complete stay on disk for a later attempt once space is freed.
                        raise permanent(
                            TerminalReason.STORAGE_FULL, f"artifact store: {err.strerror or 'no space left on device'}"
                        ) from err
                    # The ledger's copy, before or with the cell's move to ready: a deliver
                    # attempt on any process can then read it. A work whose pages are all
                    # still in memory is copied by the move's own statement (no statement or
                    # transaction of its own, no file read again); any other first.
                    pages = held_pages(artifact, held)
                    if pages is None:
                        await store_artifact(deps.pool, inp.job_id, target.target_id, artifact, held=held)
                    async with deps.pool.acquire() as conn, conn.transaction():
                        ready = await ledger.artifact_ready(
                            conn, inp.job_id, target.target_id, work.work_id, artifact, pages=pages
                        )
                    if ready is None:
                        raise permanent(
                            TerminalReason.INTERNAL_ERROR, f"job {inp.job_id} cell {target.target_id} not in the ledger"
                        )
                    return CellUpdate(cell=ready)
