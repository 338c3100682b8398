"""Retention: prune what a finished job no longer needs, keep what deduplication needs.

The policy (``curaflow prune``, DESIGN "Retention"): for every job that **finished** more
than N days ago (``jobs.completed_at``; an open job is never touched, whatever its age),

* **pruned**: its lifecycle events (``job_events``) but the terminal one and those whose
  push is still pending, and their settled push rows (``event_pushes``, the terminal
  event's too) — a push still pending is kept (marked ``kept_at``) until it is settled,
  then goes with its event at the next pass (:func:`forget_settled`) —, its cells' candidate reports
  (but what the Result reads of them: ``fetched``, ``filtered``), scan candidates and search
  checkpoints, and its artifacts — the cells' ``artifact`` metadata at once, the fetched
  files on every host that holds them (below), the ledger's copy an attempt that outlived
  the job's finish left (``artifact_chunks``: the finish deleted the rest); named
  schedule misses older than N days;
* **kept**: the job row (identity, idempotency key and frozen admission answer, the
  occurrence it was), its terminal event (``job.succeeded`` … ``job.cancelled``: the
  stream still ends as the job did, so a consumer's cursor taken before the prune, or
  none, reads the job's end and its long poll stops; the event is as it was written, its
  ``payload.job`` naming the assets of that moment), its cells (state, bound work, terminal reason), its outcome
  record, and every delivery intent — the memory of what each route received, which
  the scan's ``known`` hook reads so a work is never delivered twice — as well as route
  refusals and unavailable works (they have their own clear/TTL rules).

A pruned job answers ``GET /jobs/{id}`` with its status, work, deliveries and error; its
``result`` has no assets (``scanned`` and ``filtered`` are as before), and its event page holds only its
terminal event (same id; ``unacked`` counts it until it is acked). A job is
marked ``pruned_at`` so a later run skips it. Work is done in batches, each one
transaction holding its jobs' rows (``FOR UPDATE SKIP LOCKED``: a job some process holds
is taken by a later run).

**Files on every host.** Workers share no disk: a cell's files are in the artifacts
directory of the worker that fetched them, recorded in ``artifact_holdings``
(:mod:`curaflow.ledger.holdings`). A prune deletes the folders its own store holds for
pruned jobs and forgets them; folders other stores hold stay recorded until each of
those workers' retention pass — which runs on every worker, with or without
``retention.days`` — deletes them (:func:`release_tick`). The report says what was
removed here and what is still pending where. Folders are deleted before their rows,
after the batch commits (a failure leaves a row to retry, never a file nothing points to).
"""

from __future__ import annotations

import asyncio
from dataclasses import asdict, dataclass, field

import asyncpg

from curaflow.artifacts import ArtifactStore
from curaflow.ledger import holdings
from curaflow.ledger.db import now_ms
from curaflow.ledger.event_pushes import PENDING
from curaflow.observability.logs import get_logger
from curaflow.protocol.models import TERMINAL_EVENT_TYPES

log = get_logger("curaflow.retention")

DAY_MS = 24 * 3600 * 1000
#: The ledger's tables, for :func:`ledger_bytes` (those that exist are measured).
LEDGER_TABLES = (
    "jobs",
    "cells",
    "delivery_intents",
    "job_events",
    "event_pushes",
    "event_cursors",
    "outcomes",
    "route_refusals",
    "unavailable_works",
    "source_gates",
    "schedule_watch",
    "schedule_misses",
    "artifact_holdings",
    "artifact_stores",
    "artifact_chunks",
)


@dataclass
class PruneReport:
    """What :func:`prune` removed (or, with ``dry_run``, would remove).

    Attributes:
        cutoff_ms: jobs that finished before this instant (epoch ms, UTC) were pruned.
        jobs: finished jobs whose records were pruned.
        events / pushes: event rows and push rows deleted (a job's terminal event is
            kept: :data:`KEPT_EVENT_TYPES`; so is an event whose push is still pending,
            with its push: the consumer is still owed it), including those an earlier
            prune kept pending and that were settled since (:func:`forget_settled`).
        candidate_reports: cells whose candidate report was cut to what the job's
            Result reads (``fetched``, ``filtered``).
        artifacts: cells whose artifact metadata was removed.
        misses: named schedule misses deleted.
        chunks: rows of the ledger's copy of artifacts (``artifact_chunks``) deleted: the
            finish deletes the copy, so these are what an attempt that outlived its job's
            finish copied after it (until 2026-12-07 they stayed for good).
        files_removed: cells' artifact folders deleted by this run, by store label
            (``host:path``): those this store held for pruned jobs (of this run or of
            earlier ones), and folders of cells fetched before holdings were recorded.
        files_pending: folders of pruned jobs stores still hold (deleted at those
            workers' next retention pass): ``{store_id, label, folders, seen_at_ms}``.
        errors: one line for each folder this store could not delete (``<job>/<target>:
            <why>``: a file the disk refuses to remove, a folder leading out of the
            root — never followed); it stays pending and the next pass tries it again.
    """

    cutoff_ms: int
    dry_run: bool = False
    jobs: int = 0
    events: int = 0
    pushes: int = 0
    candidate_reports: int = 0
    artifacts: int = 0
    misses: int = 0
    chunks: int = 0
    files_removed: dict[str, int] = field(default_factory=dict)
    files_pending: list[dict[str, object]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


#: The event types a prune keeps: the terminal ones (one per job), so a pruned job's
#: stream still ends as the job did (a consumer's cursor reads the end, not an empty page).
KEPT_EVENT_TYPES: tuple[str, ...] = tuple(TERMINAL_EVENT_TYPES.values())

#: What a prune keeps of a cell's candidate report: what the job's ``Result`` reads
#: (``scanned`` from ``fetched``, ``filtered``: at most ``FILTERED_CAP`` entries), so a
#: pruned job still says what its search saw; the rest (reasons, days, pages …) goes.
_REPORT_KEPT = """CASE WHEN candidate_report IS NULL THEN NULL ELSE jsonb_strip_nulls(jsonb_build_object(
    'fetched', candidate_report->'fetched', 'filtered', candidate_report->'filtered')) END"""

_ELIGIBLE = "completed_at IS NOT NULL AND completed_at < $1 AND pruned_at IS NULL"
#: An event ``e`` whose push is not pending any more, or that has none (``$3``: ``pending``):
#: the events a prune may delete.
_NOT_OWED = """NOT EXISTS (SELECT 1 FROM event_pushes p
                               WHERE p.job_id = e.job_id AND p.seq = e.seq AND p.status = $3)"""
#: Pushes a prune kept pending (``kept_at``, migration 0057: the partial index
#: ``event_pushes_kept``) that are settled now (``$1``: ``pending``).
_KEPT_SETTLED = "kept_at IS NOT NULL AND status <> $1"


async def forget_settled(pool: asyncpg.Pool, *, batch: int = 500, dry_run: bool = False) -> tuple[int, int]:
    """Delete the pushes a prune kept because they were still owed, once settled (sent,
    or dead-lettered), with their events but the terminal one (:data:`KEPT_EVENT_TYPES`):
    what the prune would have deleted had they been settled then. Run by every retention
    pass (:func:`prune`, :func:`release_tick`), so whoever pruned, each is gone by the pass
    after its settlement. A push still pending stays, and so does its event.

    Bounded: the kept pushes are found through their partial index (``event_pushes_kept``),
    in proportion to what prunes kept, never by reading every push; batches of ``batch``
    rows, each one transaction holding them (``FOR UPDATE SKIP LOCKED``: a row another
    pass holds is that pass's). Pending pushes of pruned jobs a prune of an earlier version
    kept unmarked are marked first (through the index of pending pushes). Until 2026-12-07
    nothing deleted a kept push once sent: the job was marked pruned and no prune took it
    again.

    Returns:
        ``(pushes, events)`` deleted (with ``dry_run``: that would be).
    """
    if dry_run:
        row = await pool.fetchrow(
            f"""SELECT count(*) AS pushes,
                       count(*) FILTER (WHERE e.type <> ALL($2::text[])) AS events
                FROM event_pushes p JOIN job_events e USING (job_id, seq) WHERE p.{_KEPT_SETTLED}""",
            PENDING,
            KEPT_EVENT_TYPES,
        )
        assert row is not None
        return int(row["pushes"]), int(row["events"])
    await pool.execute(
        """UPDATE event_pushes p SET kept_at = j.pruned_at FROM jobs j
           WHERE p.status = $1 AND p.kept_at IS NULL AND j.job_id = p.job_id AND j.pruned_at IS NOT NULL""",
        PENDING,
    )
    pushes = events = 0
    while True:
        async with pool.acquire() as conn, conn.transaction():
            rows = await conn.fetch(
                f"""SELECT job_id, seq FROM event_pushes WHERE {_KEPT_SETTLED}
                    ORDER BY job_id, seq LIMIT $2 FOR UPDATE SKIP LOCKED""",
                PENDING,
                batch,
            )
            if not rows:
                break
            ids, seqs = [r["job_id"] for r in rows], [r["seq"] for r in rows]
            gone = await conn.execute(
                """DELETE FROM event_pushes p USING unnest($1::text[], $2::integer[]) AS k(job_id, seq)
                   WHERE p.job_id = k.job_id AND p.seq = k.seq""",
                ids,
                seqs,
            )
            dropped = await conn.execute(
                """DELETE FROM job_events e USING unnest($1::text[], $2::integer[]) AS k(job_id, seq)
                   WHERE e.job_id = k.job_id AND e.seq = k.seq AND e.type <> ALL($3::text[])""",
                ids,
                seqs,
                KEPT_EVENT_TYPES,
            )
        pushes += int(gone.split()[-1])
        events += int(dropped.split()[-1])
        if len(rows) < batch:
            break
    if pushes:
        log.info("retention.pushes_forgotten", pushes=pushes, events=events)
    return pushes, events


async def prune(
    pool: asyncpg.Pool,
    cutoff_ms: int,
    *,
    store: ArtifactStore | None = None,
    batch: int = 500,
    dry_run: bool = False,
) -> PruneReport:
    """Prune the records of jobs that finished before ``cutoff_ms`` (see the module doc).

    Args:
        pool: the ledger.
        cutoff_ms: epoch ms (UTC); typically ``now - days × 86 400 000``.
        store: this host's artifact store: the folders it holds for pruned jobs are
            deleted (None: the ledger only; every worker's pass deletes its own).
        batch: jobs per transaction.
        dry_run: count only, change nothing.

    Returns:
        The counts.
    """
    report = PruneReport(cutoff_ms=cutoff_ms, dry_run=dry_run)
    if dry_run:
        row = await pool.fetchrow(
            f"""WITH j AS (SELECT job_id FROM jobs WHERE {_ELIGIBLE})
                SELECT (SELECT count(*) FROM j) AS jobs,
                       (SELECT count(*) FROM job_events e JOIN j USING (job_id)
                        WHERE e.type <> ALL($2::text[]) AND {_NOT_OWED}) AS events,
                       (SELECT count(*) FROM event_pushes p JOIN j USING (job_id) WHERE p.status <> $3) AS pushes,
                       (SELECT count(*) FROM cells c JOIN j USING (job_id)
                        WHERE c.candidate_report IS NOT NULL) AS candidate_reports,
                       (SELECT count(*) FROM cells c JOIN j USING (job_id) WHERE c.artifact IS NOT NULL) AS artifacts,
                       (SELECT count(*) FROM schedule_misses WHERE nominal_at < $1) AS misses,
                       (SELECT count(*) FROM artifact_chunks c JOIN j USING (job_id)) AS chunks""",
            cutoff_ms,
            KEPT_EVENT_TYPES,
            PENDING,
        )
        assert row is not None
        for key in ("jobs", "events", "pushes", "candidate_reports", "artifacts", "misses", "chunks"):
            setattr(report, key, int(row[key]))
        pushes, events = await forget_settled(pool, dry_run=True)
        report.pushes += pushes
        report.events += events
        report.files_pending = [asdict(p) for p in await holdings.pending(pool)]
        return report
    legacy: list[tuple[str, str]] = []
    while True:
        async with pool.acquire() as conn, conn.transaction():
            ids = [
                r["job_id"]
                for r in await conn.fetch(
                    f"SELECT job_id FROM jobs WHERE {_ELIGIBLE} ORDER BY completed_at LIMIT $2 FOR UPDATE SKIP LOCKED",
                    cutoff_ms,
                    batch,
                )
            ]
            if not ids:
                break
            legacy += sorted(await holdings.unheld(conn, ids))
            cells = await conn.fetch(
                """SELECT job_id, target_id, artifact IS NOT NULL AS has_artifact,
                          candidate_report IS NOT NULL AS has_report
                   FROM cells WHERE job_id = ANY($1::text[])""",
                ids,
            )
            # A push still pending is owed to the consumer (its event too: the push row
            # cascades with it); the sweeper sends it whenever a worker runs again.
            pushes = await conn.execute(
                "DELETE FROM event_pushes WHERE job_id = ANY($1::text[]) AND status <> $2", ids, PENDING
            )
            # ... marked kept, so the pass after it is settled finds it (forget_settled).
            await conn.execute(
                "UPDATE event_pushes SET kept_at = $3 WHERE job_id = ANY($1::text[]) AND status = $2",
                ids,
                PENDING,
                now_ms(),
            )
            # The ledger's copy of artifacts goes with the finish; what an attempt that
            # outlived the finish copied after it goes here (nothing reads it any more).
            chunks = await conn.execute("DELETE FROM artifact_chunks WHERE job_id = ANY($1::text[])", ids)
            events = await conn.execute(
                f"""DELETE FROM job_events e WHERE job_id = ANY($1::text[]) AND type <> ALL($2::text[])
                      AND {_NOT_OWED}""",
                ids,
                KEPT_EVENT_TYPES,
                PENDING,
            )
            await conn.execute(
                f"""UPDATE cells SET candidate_report = {_REPORT_KEPT}, candidates = NULL,
                                    search_checkpoint = NULL, artifact = NULL
                   WHERE job_id = ANY($1::text[])""",
                ids,
            )
            await conn.execute("UPDATE jobs SET pruned_at = $2 WHERE job_id = ANY($1::text[])", ids, now_ms())
        report.jobs += len(ids)
        report.pushes += int(pushes.split()[-1])
        report.events += int(events.split()[-1])
        report.chunks += int(chunks.split()[-1])
        report.candidate_reports += sum(1 for c in cells if c["has_report"])
        report.artifacts += sum(1 for c in cells if c["has_artifact"])
        if len(ids) < batch:
            break
    status = await pool.execute("DELETE FROM schedule_misses WHERE nominal_at < $1", cutoff_ms)
    report.misses = int(status.split()[-1])
    pushes, events = await forget_settled(pool, batch=batch)
    report.pushes += pushes
    report.events += events
    if store is not None:
        released = await holdings.release(pool, store)
        removed = released.removed
        report.errors += released.refused
        if legacy:  # fetched before holdings existed: only this host's copy can be found
            failures = await asyncio.to_thread(holdings.remove_folders, store, legacy)
            removed += len(legacy) - len(failures)
            report.errors += [f"{job}/{target}: {why}" for (job, target), why in failures.items()]
        _, label = await asyncio.to_thread(store.identity)
        if removed:
            report.files_removed[label] = removed
        _log_refused(label, report.errors)
    report.files_pending = [asdict(p) for p in await holdings.pending(pool)]
    return report


def retention_cutoff(days: int | None, now: int) -> int | None:
    """The time (epoch ms, UTC) before which a retention pass at ``now`` with ``retention.days``
    = ``days`` prunes — what finished, and the misses named, before it —; None when
    ``days`` is unset (nothing is pruned). The one reading of ``days`` as a cutoff: the
    pass's (:func:`prune_tick`) and the schedule watch's, which names no miss the pass
    deletes (:func:`curaflow.schedules.watch.unadmitted_actions`)."""
    return None if days is None else now - days * DAY_MS


async def prune_tick(
    pool: asyncpg.Pool, store: ArtifactStore | None, days: int | None, *, now: int | None = None
) -> PruneReport:
    """One pass of a worker's ``retention`` loop (every worker runs it).

    With ``retention.days`` set: :func:`prune` with the cutoff ``now − days``, logged as
    ``retention.pruned`` when it removed anything. Without: only this store's folders of
    jobs a ``curaflow prune`` (or another worker) pruned are deleted (:func:`release_tick`).
    Either way the store's transfer folders dead attempts left are swept
    (:meth:`~curaflow.artifacts.ArtifactStore.sweep_transfers`, logged as
    ``retention.transfers_swept``).

    Args:
        now: epoch ms (UTC) of the pass (default the clock; a simulation passes its own).
    """
    at = now_ms() if now is None else now
    if store is not None:
        await holdings.register_store(pool, store, at)
        swept = await asyncio.to_thread(store.sweep_transfers)
        if swept:
            log.info("retention.transfers_swept", folders=swept)
    cutoff = retention_cutoff(days, at)
    if cutoff is None:
        return await release_tick(pool, store, now=at)
    report = await prune(pool, cutoff, store=store)
    removed = sum(report.files_removed.values())
    if report.jobs or report.misses or removed:
        log.info(
            "retention.pruned",
            days=days,
            jobs=report.jobs,
            events=report.events,
            pushes=report.pushes,
            candidate_reports=report.candidate_reports,
            artifacts=report.artifacts,
            misses=report.misses,
            files_removed=removed,
            files_pending=sum(int(str(p["folders"])) for p in report.files_pending),
        )
    return report


async def release_tick(pool: asyncpg.Pool, store: ArtifactStore | None, *, now: int | None = None) -> PruneReport:
    """Delete this store's folders of pruned jobs (:func:`curaflow.ledger.holdings.release`),
    logged as ``retention.files_removed`` when it deleted any, and the pushes a prune kept
    that were settled since (:func:`forget_settled`)."""
    report = PruneReport(cutoff_ms=now_ms() if now is None else now)
    report.pushes, report.events = await forget_settled(pool)
    if store is None:
        return report
    released = await holdings.release(pool, store)
    _, label = await asyncio.to_thread(store.identity)
    if released.removed:
        report.files_removed[label] = released.removed
        log.info("retention.files_removed", store=label, folders=released.removed)
    report.errors += released.refused
    _log_refused(label, report.errors)
    return report


def _log_refused(label: str, refused: list[str]) -> None:
    """Log the folders this store could not delete (``retention.folders_refused``): they
    stay recorded and the next pass tries them again."""
    if refused:
        log.warning("retention.folders_refused", store=label, folders=len(refused), first=refused[:5])


async def ledger_bytes(conn: asyncpg.Connection | asyncpg.Pool) -> dict[str, int]:
    """Bytes on disk of each ledger table with its indexes and TOAST
    (``pg_total_relation_size``), by table name."""
    rows = await conn.fetch(
        """SELECT t AS name, pg_total_relation_size(to_regclass(t)) AS bytes
           FROM unnest($1::text[]) AS u(t) WHERE to_regclass(t) IS NOT NULL""",
        list(LEDGER_TABLES),
    )
    return {r["name"]: int(r["bytes"]) for r in rows}
