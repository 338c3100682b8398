"""Admission of a ``candidate_search`` task: the one code path behind ``POST /jobs`` and ``curaflow run``.

Order (reference §1.2, §1.5, §9.6; DESIGN.md decisions 1–2):

1. validate the Task (the wire model :class:`curaflow.protocol.models.Task`, through
   :func:`curaflow.protocol.task.validate_task`);
2. resolve the target: ``params.target_id`` names it (unknown → 404 ``unknown_target``);
   without it the single eligible target (``accept_jobs``) is used — none → 400
   ``no_eligible_target``, several → 409 ``ambiguous_target``;
3. check the callback host allow-list, ``source.account`` and ``work_types``;
4. resolve identity: the job owning the key (exact, case-sensitive) must have the same
   target and equal normalised params, else 409 ``idempotency_conflict``; the derived
   id ``<target_id>@manual-<key lowercased>`` owned by another key (keys differing only
   in case) is a conflict too;
5. insert the job durably (insert-if-absent), then start its workflow — in the API in
   the background (:class:`WorkflowStarter`), so the answer does not wait for the
   Temporal frontend; in ``curaflow run`` inline. A crash between the two, or Temporal
   being unreachable, is repaired by the reconciler: the admission is still answered.

A replay answers 200 with the first admission's body, byte for byte.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from dataclasses import dataclass
from typing import Any

import asyncpg
import httpx
from temporalio.client import Client

from curaflow.config import Settings, TargetConfig
from curaflow.domain.execution import job_workflow, run_deadline_bound, run_end_room_ms
from curaflow.domain.messages import JobIdentity, JobInput, RunLimit, TargetQuery, TargetSpec
from curaflow.ledger.jobs import NewJob, RunTooShort, insert_job, mark_workflow_started, workflow_input
from curaflow.observability import metrics
from curaflow.observability.logs import get_logger
from curaflow.observability.supervision import Beat, Supervisor
from curaflow.outbound.destinations import parse_origin, url_port
from curaflow.protocol.errors import ProtocolError, invalid_params
from curaflow.protocol.keys import manual_job_id
from curaflow.protocol.models import MIN_DEADLINE_MS
from curaflow.protocol.task import (
    ValidatedTask,
    follower_conflict,
    identity_conflict,
    oversized_task,
    validate_task,
    workflow_id_conflict,
)
from curaflow.temporal.connection import start_job_workflow

log = get_logger("curaflow.jobs.admission")


@dataclass
class Admission:
    """The answer to an admission.

    Attributes:
        body: the response body ``{"job": Job}`` (frozen at first admission).
        replayed: False for a first admission (HTTP 202), True for a replay (200).
    """

    job_id: str
    body: dict[str, Any]
    replayed: bool
    job_input: JobInput | None = None


def run_limit_refusal(limit: RunLimit, now: int, *, room_ms: int) -> ProtocolError:
    """The refusal of a new job whose run Temporal closes too soon for any deadline (see
    :meth:`Admitter.admit`, ``run_limit``): the job would be timed out by Temporal, never
    end itself. Only a run that would create the job is refused (the ledger judges it,
    :class:`curaflow.ledger.jobs.RunTooShort`): a job that already holds the id is
    answered as usual (it keeps its own deadline).

    Args:
        limit: when and by which timeout Temporal closes the run.
        now: the database's time the insert judged it at (epoch ms).
        room_ms: what the job needs after its deadline to end itself
            (:func:`~curaflow.domain.execution.run_end_room_ms` of its budgets).

    Returns:
        ``invalid_params``, ``detail.field`` = ``limit.timeout``.
    """
    needed_s = -(-(MIN_DEADLINE_MS + room_ms) // 1000)
    return invalid_params(
        f"Temporal closes this run {max(0, limit.ends_at_ms - now) // 1000} s from now ({limit.timeout}): a job "
        f"needs at least {needed_s} s — its deadline, then {-(-room_ms // 1000)} s to end on its "
        f"own; start it with a longer {limit.timeout}, or none (deadline_ms bounds the job)",
        field=limit.timeout,
        minimum_s=needed_s,
    )


def resolve_target(settings: Settings, task: ValidatedTask) -> TargetConfig:
    """Pick the configured target a task runs (see module doc, step 2).

    Raises:
        ProtocolError: 404 / 400 / 409 ``invalid_params`` with ``detail.reason``.
    """
    if task.target_id is not None:
        target = settings.target(task.target_id)
        if target is None:
            raise invalid_params(
                f"unknown target {task.target_id!r}", http_status=404, reason="unknown_target", target_id=task.target_id
            )
        if not target.accept_jobs:
            raise invalid_params(
                f"target {task.target_id!r} does not accept jobs",
                reason="target_not_eligible",
                target_id=task.target_id,
            )
        return target
    eligible = [t for t in settings.targets if t.accept_jobs]
    if not eligible:
        raise invalid_params("no target accepts candidate_search jobs", reason="no_eligible_target")
    if len(eligible) > 1:
        raise invalid_params(
            "several targets accept jobs; name one with params.target_id",
            http_status=409,
            reason="ambiguous_target",
            targets=[t.id for t in eligible],
        )
    return eligible[0]


def effective_target(settings: Settings, target: TargetConfig, task: ValidatedTask) -> TargetSpec:
    """The target as this job runs it: the configured target with the task's view applied.

    The view applies to this job only (reference §1.5 "Effect on execution"): tags
    replace the configured tags, ``expand`` with several tags switches to OR, ``limit``
    is clamped to 1..100, ``scan_limit`` to ``[limit, 100]``, excluded works are skipped.
    """
    query = TargetQuery.model_validate(target.query.model_dump())
    view = task.params
    if "query" in view:
        query.tags = list(view["query"]["tags"])
        query.relation = "or" if view["query"].get("expand") and len(query.tags) > 1 else "and"
    constraints = view.get("constraints", {})
    limit = min(100, max(1, int(constraints.get("limit", target.limit))))
    scan_limit = min(100, max(limit, int(constraints.get("scan_limit", target.scan_limit))))
    exclude = [item["id"] for item in constraints.get("exclude", []) if item["kind"] == "work"]
    return TargetSpec(
        target_id=target.id,
        account=target.account,
        work_type=target.work_type,
        query=query,
        filters=target.filters,
        limit=limit,
        scan_limit=scan_limit,
        exclude_work_ids=exclude,
        storage_mode=target.storage_mode,
        routes=settings.route_refs(target),
    )


def check_task_against(settings: Settings, target: TargetConfig, task: ValidatedTask) -> None:
    """Admission checks that need the configuration (module doc, step 3).

    Raises:
        ProtocolError: 400 ``invalid_params``.
    """
    if task.callback_url is not None:
        # The allow-list compares host and port (curaflow.outbound.destinations); the
        # address the host resolves to is checked again at every connection.
        url = httpx.URL(task.callback_url)
        host = url.host.lower()
        allowed = [parse_origin(entry) for entry in settings.api.callback_allowed_hosts]
        if not any(origin.matches(url) for origin in allowed) or url.scheme not in ("http", "https"):
            raise invalid_params(
                "callback_url host and port are not on the allow-list",
                reason="callback_host_not_allowed",
                host=host,
                port=url_port(url),
            )
        if settings.api.callback_secret is None:
            raise invalid_params(
                "callbacks are not configured: pushes are signed with api.callback_secret, which is not set",
                reason="callback_host_not_allowed",
                host=host,
            )
    source = task.params.get("source", {})
    if "account" in source:
        requested = source["account"].strip() or "default"
        configured = target.account.strip() or "default"
        if requested != configured:
            raise invalid_params(
                "source.account is not available",
                reason="account_unavailable",
                requested=requested,
                configured=configured,
            )
    work_types = task.params.get("constraints", {}).get("work_types")
    if work_types and target.work_type not in work_types:
        raise invalid_params(
            "work type not available for this target",
            reason="work_type_not_available",
            target_type=target.work_type,
        )


class WorkflowStarter:
    """Starts admitted jobs' workflows in the background, a few at a time.

    The API answers an admission once the job is durable in the ledger (DESIGN.md
    decision 2) and hands the workflow start to this starter: a burst of admissions is
    not held up by the Temporal frontend, which also sees fewer concurrent starts. A
    start that fails, or that a crash loses, is done by the reconciler.

    The consumers run as one supervised loop named ``workflow_starter``
    (:mod:`curaflow.observability.supervision`): a failure outside a start (a bug) is logged, counted
    and the consumers restarted; queued starts are kept.

    Args:
        start: starts one job's workflow (``Admitter.start``).
        concurrency: starts in flight at once.
        supervisor: the process's supervisor (None: a private one that only logs).
    """

    def __init__(self, start: Any, concurrency: int = 8, *, supervisor: Supervisor | None = None) -> None:
        self._start = start
        self._concurrency = max(1, concurrency)
        self._queue: asyncio.Queue[tuple[str, JobInput | None, contextvars.Context]] = asyncio.Queue()
        self._stop = asyncio.Event()
        self._own = supervisor is None
        self._supervisor = supervisor or Supervisor(self._stop)
        self._supervisor.loop("workflow_starter", self._consumers)

    def submit(self, job_id: str, inp: JobInput | None) -> None:
        """Queue the start of ``job_id``'s workflow (it runs in the caller's context, so a
        trace of the admission request continues into the start)."""
        self._queue.put_nowait((job_id, inp, contextvars.copy_context()))

    async def _consumers(self, beat: Beat) -> None:
        beat.ok()
        async with asyncio.TaskGroup() as group:
            for _ in range(self._concurrency):
                group.create_task(self._consume(beat))

    async def _consume(self, beat: Beat) -> None:
        while True:
            job_id, inp, context = await self._queue.get()
            try:
                await asyncio.create_task(self._start(job_id, inp), context=context)
            except Exception as err:  # noqa: BLE001 - the job is durable; the reconciler starts it later
                log.warning("admission.start_deferred", job_id=job_id, error=type(err).__name__)
            finally:
                self._queue.task_done()
            beat.ok()

    async def close(self, timeout_s: float = 10.0) -> None:
        """Wait (up to ``timeout_s``) for queued starts, then stop."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._queue.join(), timeout_s)
        self._stop.set()
        if self._own:
            await self._supervisor.close()


class Admitter:
    """Admits tasks into the ledger and starts their workflows.

    Args:
        settings: live configuration.
        pool: ledger pool.
        client: Temporal client (None: only write the ledger; the reconciler starts it).
        starter: when given, workflow starts are queued to it instead of awaited, so an
            admission answers as soon as the job is durable.
    """

    def __init__(
        self, settings: Settings, pool: asyncpg.Pool, client: Client | None, starter: WorkflowStarter | None = None
    ) -> None:
        self.settings = settings
        self.pool = pool
        self.client = client
        self.starter = starter

    async def admit(
        self,
        body: Any,
        *,
        trigger: str = "protocol",
        workflow_id: str | None = None,
        workflow_type: str | None = None,
        start: bool = True,
        store_params: bool = True,
        run_limit: RunLimit | None = None,
        follower_id: str | None = None,
    ) -> Admission:
        """Admit a Task (a ``POST /jobs`` body, or what a Temporal client started with).

        Args:
            body: the raw Task (validated here), or one the caller already validated.
            trigger: ``protocol`` | ``temporal`` | ``cli`` (schedules admit occurrences
                through :mod:`curaflow.schedules`).
            workflow_id: the id of the execution submitting the Task (Temporal clients): it
                must be the Task's job id, checked before anything is written.
            workflow_type: the type of that execution: it must be the type that runs the
                Task's ``job_type`` (:func:`curaflow.domain.execution.job_workflow`),
                checked before anything is written.
            start: start the job's workflow (False when the caller *is* that workflow).
            store_params: False for the legacy refetch route (reference §1.2): the job
                stores no params, and a replay compares no params. The comparison is
                skipped whenever either side has none, so a ``POST /jobs`` and a legacy
                refetch with the same key converge on one job.
            run_limit: when Temporal closes the submitting execution by a timeout its
                starter set (Temporal clients): a job created here gets a deadline at
                least :func:`~curaflow.domain.execution.run_end_room_ms` before it (the
                heartbeat timeout of a step whose worker was lost, then
                :data:`~curaflow.domain.execution.RUN_END_MARGIN`)
                (:func:`~curaflow.domain.execution.run_deadline_bound`, judged against
                the job's creation on the database's clock), so it ends itself instead
                of being timed out (and, under a workflow retry policy, run again in a
                new run). A job that already exists keeps its deadline.
            follower_id: the id of the workflow that will wait for the job (the
                ``follow_job`` activity's): it must not be the job id
                (:func:`curaflow.protocol.task.follower_conflict`), checked before
                anything is written.

        Returns:
            The admission; ``job_input`` is the job's workflow argument when this call
            created the job (None on a replay; read it from the ledger).

        Raises:
            ProtocolError: a Task not from ``POST /jobs`` larger than its body may be (413
                ``invalid_params``, :func:`curaflow.protocol.task.oversized_task`),
                validation (protocol order), target resolution, a workflow id
                that is not the job id, or a follower's that is (``invalid_params``,
                ``detail.field: workflow_id``),
                a workflow type that does not run the job type (``detail.field:
                job_type``), a ``run_limit`` that leaves a new job less than the
                shortest deadline (``detail.field``: ``run_timeout`` or
                ``execution_timeout``) or an idempotency conflict. Nothing is written.
        """
        # POST /jobs measured its body before decoding it; any other way measures here.
        measure = not isinstance(body, ValidatedTask) and trigger != "protocol"
        if measure and (too_large := oversized_task(body, self.settings.api.max_body_bytes)) is not None:
            raise too_large
        task = body if isinstance(body, ValidatedTask) else validate_task(body)
        target = resolve_target(self.settings, task)
        check_task_against(self.settings, target, task)
        spec = effective_target(self.settings, target, task)
        job_id = manual_job_id(target.id, task.idempotency_key)
        if workflow_id is not None and (conflict := workflow_id_conflict(job_id, workflow_id)) is not None:
            raise conflict
        if follower_id is not None and (conflict := follower_conflict(job_id, follower_id)) is not None:
            raise conflict
        if workflow_type is not None and workflow_type != job_workflow(task.job_type):
            raise invalid_params(
                f"a {task.job_type} job runs as {job_workflow(task.job_type)}, not {workflow_type}",
                field="job_type",
                expected=job_workflow(task.job_type),
                received=workflow_type,
            )

        # Dated by the insert, on the database's clock (docs/DESIGN.md "Ledger times are the
        # database's clock"): these two times are stand-ins until then.
        dated = JobInput(
            job_id=job_id,
            job_type=task.job_type,
            plan_id=target.id,
            trigger=trigger,  # type: ignore[arg-type]
            created_at_ms=0,
            deadline_at_ms=0,
            targets=[spec],
            budgets=self.settings.budgets_model(),
            max_fallback_stages=1,
            source_task_queues=self.settings.source_task_queues(),
            callback=task.callback_url is not None,
            callback_policy=self.settings.push_policy(),
            identity=JobIdentity(idempotency_key=task.idempotency_key, params=task.params if store_params else None),
            max_task_bytes=self.settings.api.max_body_bytes,
        )
        new = NewJob(
            job_input=dated,
            idempotency_key=task.idempotency_key,
            correlation_id=task.correlation_id,
            callback_url=task.callback_url,
            labels=task.labels,
            params=task.params if store_params else None,
            deadline_ms=task.deadline_ms or self.settings.budgets.default_deadline_ms,
            deadline_bound_ms=run_deadline_bound(
                run_limit.ends_at_ms if run_limit else None, heartbeat_timeout_ms=dated.budgets.heartbeat_timeout_ms
            ),
        )
        async with self.pool.acquire() as conn:
            # Inserted at once — one statement less for a new job than reading first; a
            # replay finds the job its key or id already names (insert_job's conflict path).
            try:
                row = await insert_job(conn, new)
            except RunTooShort as short:
                assert run_limit is not None
                raise run_limit_refusal(
                    run_limit, short.now_ms, room_ms=run_end_room_ms(dated.budgets.heartbeat_timeout_ms)
                ) from None
        inp = row.job_input  # None on a replay: the workflow argument is the first admission's
        record = row.record
        if row.created:
            metrics.record_admitted(trigger, record.job_type)
        if not row.created:
            conflict = identity_conflict(
                record.job_id,
                key=record.idempotency_key or "",  # a job without a key (an occurrence) is no Task's
                target_ids=record.target_ids,
                params=row.params if store_params else None,
                task=task,
                target_id=target.id,
            )
            if conflict is not None:
                raise conflict
        if not start:
            pass
        elif self.client is not None and record.workflow_started_at is None and self.starter is not None:
            self.starter.submit(record.job_id, inp if row.created else None)
        elif self.client is not None and record.workflow_started_at is None:
            try:
                await self.start(record.job_id, inp if row.created else None)
            except Exception as err:  # noqa: BLE001 - the job is durable; the reconciler starts it later
                log.warning("admission.start_deferred", job_id=record.job_id, error=type(err).__name__)
        return Admission(job_id=record.job_id, body=row.response, replayed=not row.created, job_input=inp)

    async def start(self, job_id: str, inp: JobInput | None = None) -> None:
        """Start (or attach to) the workflow of an admitted job and record it.

        Args:
            inp: the workflow argument when the caller has it; read from the ledger otherwise.
        """
        assert self.client is not None
        if inp is None:
            async with self.pool.acquire() as conn:
                inp = await workflow_input(conn, job_id)
        if inp is None:
            return
        await start_job_workflow(self.client, inp, self.settings.temporal.task_queue)
        async with self.pool.acquire() as conn:
            await mark_workflow_started(conn, job_id)
