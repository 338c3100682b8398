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

A failure of the source's that stays retryable for the bound work (its file cut short, a
5xx or a timeout on every attempt, a frames zip that never arrives whole) is retried as
any; when no attempt of the cell follows — its attempts are spent, or the next would come
after the job's deadline — the work is *held back* for the source's
``unrecognised_hold_ms`` (:func:`holds_back`), counted as an answer not recognised (kind
``attempts_spent``), so that the target's next job binds its next candidate instead of
this one first again, for ever. A hold is no verdict: it ends, and the work is asked again.

A full artifact disk (``ENOSPC``, ``EDQUOT``) ends the cell at once with its own reason,
``storage_full`` (curaflow's, not retried: no retry within the job frees the disk). A cell's
folder that leads out of the artifacts directory through a symbolic link (an operator moved
the job's folder to another disk and linked it back: :class:`~curaflow.paths.LinkEscape`)
ends it at once ``storage_moved`` (the operator's, naming the folder: curaflow writes
nothing outside its root), never ``internal_error``. A work released as unavailable has its
folder removed as retention removes one (:func:`~curaflow.ledger.holdings.remove_folders`:
nothing outside the root followed); a folder that stays is left and said
(``artifact.release_folder_refused``) and the store's retention pass tries it again and says
it — the release goes on.
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

import asyncio

from temporalio import activity
from temporalio.client import Client

from activities.caller import claim_of, open_own_step, require_own_job
from activities.deps import ActivityDeps
from activities.errors import (
    UNLIMITED_ATTEMPTS,
    attempts_granted,
    barrier_update,
    next_attempt,
    permanent,
    source_failure,
    source_of,
    storage_failure,
)
from activities.heartbeat import Heartbeater
from activities.unbound import end_unbound
from curaflow.domain.cells import CellStage, CellState, is_terminal
from curaflow.domain.messages import CellUpdate, FetchInput
from curaflow.domain.models import CellSnapshot, Work
from curaflow.domain.reasons import Owner, TerminalReason, reason_info
from curaflow.domain.tally import SOURCE_ANSWER_KINDS
from curaflow.ledger import cells as ledger
from curaflow.ledger import remembered as memory
from curaflow.ledger.artifacts import held_pages, store_artifact
from curaflow.ledger.db import LEDGER_ERRORS
from curaflow.ledger.holdings import hold, remove_folders
from curaflow.observability.metrics import ATTEMPTS_SPENT_KIND, record_unrecognised_answer
from curaflow.outbound import attempt_deadline, time_left
from curaflow.paths import LinkEscape, PathEscape
from curaflow.sources.base import SourcePolicy
from curaflow.sources.corroboration import corroborated, cut_by_deadline
from curaflow.sources.errors import SourceError, WorkUnavailable


def blames_no_one_but_the_source(err: SourceError) -> bool:
    """Whether a failure of the bound work's fetch may hold the work back once no attempt of
    its cell follows (:func:`holds_back`): the reason's owner is the source
    (:data:`~curaflow.domain.reasons.REASONS`: ``download_failed``, ``download_timeout``,
    ``metadata_failed``, ``remote_http_error``, ``network_error`` — a file cut short, a
    5xx, a timeout, a zip never whole), and the job's deadline did not cut the call
    (:func:`~curaflow.sources.corroboration.cut_by_deadline`: curaflow's own bound, no
    answer of the host's). An account's failure (a rate limit, a refused login, a
    restriction: owner ``account``) says nothing of the work and is its gate's to handle.
    """
    return reason_info(str(err.reason)).owner is Owner.SOURCE and not cut_by_deadline(err)


async def no_attempt_follows(err: SourceError, client: Client | None) -> bool:
    """Whether the running attempt is the last its cell's step gets: the failure is not
    retried (``err.retryable`` false), the attempts granted are spent
    (:func:`~activities.errors.attempts_granted`: the step's scheduled ``maximum_attempts``,
    or more when an operator raised it; Temporal is asked only from the scheduled last
    attempt on), or the next attempt would come, after Temporal's backoff
    (:func:`~activities.errors.next_attempt`), only once the job's deadline has passed
    (:func:`~curaflow.outbound.time_left`). An attempt with no retry policy (run outside a
    workflow) is never the last."""
    if not err.retryable:
        return True
    info = activity.info()
    policy = info.retry_policy
    if policy is None:
        return False
    granted = (
        UNLIMITED_ATTEMPTS if policy.maximum_attempts <= 0 else await attempts_granted(policy.maximum_attempts, client)
    )
    if info.attempt >= granted:
        return True
    delay_ms = next_attempt().delay_ms
    return delay_ms is not None and time_left(delay_ms / 1000) < delay_ms / 1000


async def holds_back(deps: ActivityDeps, inp: FetchInput, work: Work, err: SourceError, policy: SourcePolicy) -> None:
    """Hold ``work`` back from its account's later scans when its cell's last fetch attempt
    failed on ``err``, a failure of the source's (DESIGN.md "Owners of decisions": a work
    the source never delivers whole does not block its target).

    Rule (owner): when :func:`blames_no_one_but_the_source` and :func:`no_attempt_follows`,
    the work is remembered ``held`` for :meth:`SourcePolicy.memory_ms(False)
    <curaflow.sources.base.SourcePolicy.memory_ms>` (``unrecognised_hold_ms``: a hold, not
    a verdict — later scans are told ``unrecognised``, which no scan frontier keeps), logged
    ``source.answer_unrecognised`` and counted under :data:`ATTEMPTS_SPENT_KIND` once the
    hold is written (or holds are off), as every hold on an answer not recognised as the
    work's. Until 2026-12-07 nothing was remembered: the cell ended ``download_failed``, its
    intent was released, and the target's next job bound the same work first again — every
    job of the target failed on it while its other candidates waited. An earlier attempt
    writes nothing: a blip retried within the cell costs nothing. A ledger that refuses the
    write costs the hold only (logged): the attempt fails as it would.
    """
    target = inp.target
    if not blames_no_one_but_the_source(err) or not await no_attempt_follows(err, deps.client):
        return
    remembered_ms = policy.memory_ms(False)
    why = f"{err.reason} on every attempt of the cell: {err}"[:500]
    facts = {
        "job_id": inp.job_id,
        "target_id": target.target_id,
        "account": target.account,
        "work_id": work.work_id,
        "why": why,
        "kind": ATTEMPTS_SPENT_KIND,
        "remembered_ms": remembered_ms,
    }
    try:
        async with deps.pool.acquire() as conn:
            written = await memory.remember_unavailable(
                conn,
                gate=deps.settings.source_task_queue(target.account),
                work_type=work.work_type,
                work_id=work.work_id,
                why=why,
                job_id=inp.job_id,
                ttl_ms=remembered_ms,
                held=True,
            )
    except LEDGER_ERRORS as write:
        activity.logger.warning("fetch.hold_not_recorded", extra={**facts, "error": type(write).__name__})
        return
    activity.logger.warning(
        "source.answer_unrecognised: the cell's fetch attempts are spent; the work is held back briefly",
        extra=facts,
    )
    if written or remembered_ms <= 0:
        record_unrecognised_answer(target.account, ATTEMPTS_SPENT_KIND)


def storage_moved_message(err: LinkEscape) -> str:
    """The attempt's message for a cell's folder leading out of the artifacts directory
    (``storage_moved``): the path and what to do."""
    return (
        f"artifact store: {err}: the job's folder was moved out of the artifacts directory and linked back; "
        "curaflow writes nothing outside it — move the folder back (or remove the link), then run the job again"
    )


async def release_folder(deps: ActivityDeps, inp: FetchInput) -> None:
    """Remove the cell's folder of a work released as unavailable (the next candidate's
    pages go into a folder of their own making), as retention removes one
    (:func:`~curaflow.ledger.holdings.remove_folders`: a link inside the root unlinked,
    nothing outside the root followed), in a thread.

    Never fails the release: a folder that stays — a file the disk refuses, a job's folder
    an operator moved out of the root behind a symbolic link — is left and said
    (``artifact.release_folder_refused``); its holding stays recorded, so this store's
    retention pass tries it again and says it (``PruneReport.errors``,
    ``retention.folders_refused``). The next candidate's fetch meets a folder leading out
    as ``storage_moved``. Until 2026-12-07 ``ArtifactStore.delete`` (removed) raised ``LinkEscape``
    here: the attempt failed untyped, the work neither remembered nor released.
    """
    target_id = inp.target.target_id
    refused = await asyncio.to_thread(remove_folders, deps.store, [(inp.job_id, target_id)])
    for why in refused.values():
        activity.logger.warning(
            "artifact.release_folder_refused", extra={"job_id": inp.job_id, "target_id": target_id, "error": why}
        )


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
                ``storage_full`` / ``storage_moved`` (non-retryable) for the artifact
                store's disk full or its folder leading out of it through a link,
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
            claim = claim_of(inp)  # the step's input is the job's, judged in its opening (foreign_caller)
            async with deps.pool.acquire() as conn, conn.transaction():
                cell, barrier, deadline, *_ = await open_own_step(
                    conn,
                    inp.job_id,
                    claim,
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
                        await release_folder(deps, inp)
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
                        await holds_back(deps, inp, work, err, policy)
                        raise source_failure(err, info.attempt, policy=policy) from err
                    except LinkEscape as err:  # the store's disk leads out: whoever moved the folder
                        raise permanent(TerminalReason.STORAGE_MOVED, storage_moved_message(err)) from err
                    except PathEscape as err:  # ids are validated at the source: a bug, never retried
                        raise permanent(TerminalReason.INTERNAL_ERROR, str(err)) from err
                    except OSError as err:
                        # curaflow's own disk (storage_failure: storage_full at once, or raised
                        # as it came, retried). Pages already complete stay on disk for a
                        # later attempt once space is freed.
                        if (failed := storage_failure(err)) is None:
                            raise
                        raise failed from err
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
