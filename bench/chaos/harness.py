"""The harness every chaos scenario runs in (:class:`Scenario`): submitting jobs as a careful
consumer does (``POST /jobs`` retried with the same idempotency key while the answer is a
5xx or nothing; a few started from a Temporal client with the same Task), killing and
restarting workers, waiting for recovery, draining, and the truth audit of what the routes
received against the ledger and every job's report."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import random
import subprocess
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import httpx
from temporalio.api.enums.v1 import EventType
from temporalio.client import RPCTimeoutOrCancelledError
from temporalio.service import RPCError, RPCStatusCode

from bench.chaos.audit import LANDED_OK, audit, directory_arrivals, job_deliveries, webhook_arrivals
from bench.chaos.plan import Plan
from bench.chaos.receiver import read_received
from bench.chaos.records import Fault, ScenarioResult, Tracked
from bench.chaos.stack import TASK_QUEUE, ChaosStack
from bench.stats import summarise
from curaflow.devstack.temporal import temporal_binary
from curaflow.domain.verdicts import STOPPED_REASONS
from curaflow.ledger.db import now_ms

#: Activities that search, fetch or send: none may be scheduled after a cancel.
WORK_ACTIVITIES = {"search", "fetch", "deliver"}
TERMINAL = {"succeeded", "failed", "cancelled", "expired"}


class ReceiverTail:
    """Follows the webhook receiver's log: which jobs' requests have arrived so far."""

    def __init__(self, log: Path) -> None:
        self.log = log
        self.offset = 0
        self.jobs: set[str] = set()

    def refresh(self) -> None:
        try:
            with open(self.log, "rb") as fh:
                fh.seek(self.offset)
                chunk = fh.read()
        except OSError:
            return
        end = chunk.rfind(b"\n") + 1
        self.offset += end
        for line in chunk[:end].splitlines():
            with contextlib.suppress(ValueError):
                self.jobs.add(str(json.loads(line).get("job_id")))

    async def wait_for(self, job_id: str, timeout_s: float) -> bool:
        """Wait until a request of ``job_id`` arrived; False after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self.refresh()
            if job_id in self.jobs:
                return True
            await asyncio.sleep(0.1)
        return False


class Scenario:
    """One scenario's run: submissions, faults, the drain and the audit.

    Args:
        stack: the running stack (its config holds this scenario's targets and routes).
        name: the scenario's name (its targets are ``<name><i>``).
        plan: its sizes.
        rng: the run's random source (kills, cancel moments, paths).
    """

    def __init__(self, stack: ChaosStack, name: str, plan: Plan, rng: random.Random) -> None:
        self.stack = stack
        self.name = name
        self.plan = plan
        self.rng = rng
        self.targets = [f"{name.replace('_', '')}{i}" for i in range(plan.targets)]
        self.jobs: dict[str, Tracked] = {}
        self.result = ScenarioResult(name=name, plan=asdict(plan))
        self._seq = itertools.count()
        self._pending: set[asyncio.Task[Any]] = set()
        self._http = stack.http()
        self._tag = f"{int(time.time()) % 100000:05d}"
        self.receiver = ReceiverTail(stack.received_log)
        #: target id → fields added to its jobs' Task (``deadline_ms``, ``callback_url``).
        self.task_fields: dict[str, dict[str, Any]] = {}

    # ---- submitting ------------------------------------------------------------------------

    def _next_task(self) -> tuple[int, dict[str, Any]]:
        n = next(self._seq)
        target = self.targets[n % len(self.targets)]
        task = {
            "protocol_version": "1",
            "job_type": "candidate_search",
            "idempotency_key": f"{self.name}-{self._tag}-{n}",
            "params": {"target_id": target},
            **self.task_fields.get(target, {}),
        }
        return n, task

    async def submit(self, *, probe: bool = False, via: str | None = None) -> Tracked | None:
        """Submit one job (HTTP, or from a Temporal client every ``temporal_every``-th job);
        retried with the same key until an answer says it was admitted or refused."""
        n, task = self._next_task()
        if via is None:
            every = self.plan.temporal_every
            via = "temporal" if every and n % every == every - 1 else "http"
        key, target = task["idempotency_key"], task["params"]["target_id"]
        job = Tracked(f"{target}@manual-{key.lower()}", key, target, via, probe=probe)
        deadline = time.monotonic() + 120
        while True:
            job.attempts += 1
            try:
                if via == "http":
                    answer = await self._http.post("/jobs", json=task)
                    if answer.status_code in (200, 202):
                        break
                    if answer.status_code < 500:
                        self.result.refused += 1
                        self.result.unexpected_status.append({"job_id": job.job_id, "admission": answer.text[:300]})
                        return None
                else:
                    from curaflow.jobs.submit import start_job

                    assert self.stack.client is not None
                    await asyncio.wait_for(start_job(self.stack.client, task, task_queue=TASK_QUEUE), 10)
                    break
            except (httpx.HTTPError, RPCError, RPCTimeoutOrCancelledError, TimeoutError):
                pass  # start_job answers once admitted: a worker killed meanwhile costs a retry
            if time.monotonic() > deadline:
                self.result.unexpected_status.append({"job_id": job.job_id, "admission": "no answer for 120 s"})
                return None
            await asyncio.sleep(0.5)
        job.admitted_ms = now_ms()
        self.jobs[job.job_id] = job
        return job

    def spawn(self, coro: Awaitable[Any]) -> asyncio.Task[Any]:
        task: asyncio.Task[Any] = asyncio.ensure_future(coro)
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)
        return task

    async def load(self, stop: asyncio.Event, count: int | None = None) -> None:
        """Submit a job every ``interval_s`` (each in its own task, so a submission riding
        out an outage does not hold up the next) until ``stop`` or ``count`` jobs."""
        sent = 0
        while not stop.is_set() and (count is None or sent < count):
            self.spawn(self.submit())
            sent += 1
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.plan.interval_s)

    async def settle_submissions(self) -> None:
        """Wait for every submission still retrying."""
        while self._pending:
            await asyncio.gather(*list(self._pending), return_exceptions=True)

    # ---- faults ------------------------------------------------------------------------------

    async def killer(self, stop: asyncio.Event) -> None:
        """SIGKILL one worker at random every ~``kill_every_s`` and start it again 0.3–1 s later;
        each restart is timed until that worker answers ``/ready`` 200."""
        timers: set[asyncio.Task[None]] = set()
        while not stop.is_set():
            pause = self.rng.uniform(0.6, 1.4) * self.plan.kill_every_s
            try:
                await asyncio.wait_for(stop.wait(), pause)
                break
            except TimeoutError:
                pass
            index = self.rng.randrange(len(self.stack.workers))
            await self.stack.kill_worker(index)
            self.result.kills += 1
            await asyncio.sleep(self.rng.uniform(0.3, 1.0))
            self.stack.restart_worker(index)
            timers.add(asyncio.create_task(self._time_ready(index, time.monotonic())))
        await asyncio.gather(*timers)

    async def _time_ready(self, index: int, since: float) -> None:
        worker = self.stack.workers[index]
        async with httpx.AsyncClient(timeout=5) as http:
            while time.monotonic() - since < 120:
                with contextlib.suppress(httpx.HTTPError):
                    if (await http.get(worker.ready_url)).status_code == 200:
                        self.result.kill_ready_s.append(round(time.monotonic() - since, 2))
                        return
                await asyncio.sleep(0.1)

    async def recover(self, fault: Fault) -> None:
        """After ``fault``'s service is back: measure readiness and the first job's end."""
        fault.up_ms = now_ms()
        probe_task = asyncio.create_task(self.submit(probe=True, via="http"))
        try:
            fault.ready_s = round(await self.stack.wait_ready(120), 2)
        except TimeoutError as err:
            fault.ready_s = None
            self.result.unexpected_status.append({"fault": fault.kind, "ready": str(err)})
        probe = await probe_task
        fault.probe = probe.job_id if probe else None
        self.result.faults.append(fault)

    # ---- the end ---------------------------------------------------------------------------------

    async def drain(self) -> None:
        """Wait until every submitted job is terminal in the ledger (or ``drain_s`` passed)."""
        await self.settle_submissions()
        ids = list(self.jobs)
        deadline = time.monotonic() + self.plan.drain_s
        while True:
            rows = await self.stack.fetch(
                "SELECT job_id FROM jobs WHERE job_id = ANY($1::text[]) AND completed_at IS NOT NULL", ids
            )
            if len(rows) == len(ids) or time.monotonic() > deadline:
                return
            await asyncio.sleep(0.5)

    async def finish(self) -> ScenarioResult:
        """Gather every view, run the audit and fill the result."""
        r = self.result
        ids = list(self.jobs)
        r.submitted = len(ids)
        r.via_temporal = sum(1 for j in self.jobs.values() if j.via == "temporal")
        rows = {
            row["job_id"]: dict(row)
            for row in await self.stack.fetch(
                """SELECT job_id, business_status, created_at, completed_at, cancel_requested_at
                   FROM jobs WHERE job_id = ANY($1::text[])""",
                ids,
            )
        }
        views: dict[str, dict[str, Any]] = {}
        async with self.stack.http() as http:
            for job_id in ids:
                answer = await http.get(f"/jobs/{job_id}")
                if answer.status_code == 200:
                    views[job_id] = answer.json()
        r.lost = sorted(j for j in ids if j not in rows or j not in views)
        r.stuck = sorted(j for j in ids if j in rows and rows[j]["completed_at"] is None)
        r.terminal = sum(1 for j in ids if j in rows and rows[j]["completed_at"] is not None)
        r.statuses = dict(Counter(views[j]["status"] for j in ids if j in views))
        durations = [
            (row["completed_at"] - row["created_at"]) for row in rows.values() if row["completed_at"] is not None
        ]
        r.job_seconds = {k: round(v / 1000, 1) for k, v in summarise(durations).items() if k in ("p50", "p95", "max")}
        slow = sorted(
            (row for row in rows.values() if row["completed_at"] is not None),
            key=lambda row: row["created_at"] - row["completed_at"],
        )[:3]
        r.slowest = [await self.timeline(row["job_id"], row["created_at"]) for row in slow]
        first_fault = min((f.down_ms for f in r.faults), default=None)
        for job_id in ids:
            view, job = views.get(job_id), self.jobs[job_id]
            if view is None or view["status"] == "succeeded":
                continue
            summary = {
                "job_id": job_id,
                "via": job.via,
                "status": view["status"],
                "business_status": rows[job_id]["business_status"],
                "error": (view.get("error") or {}).get("code"),
                "reason": ((view.get("error") or {}).get("detail") or {}).get("internal_code"),
                "cancel": job.cancel,
            }
            if job.cancel is None:
                r.not_succeeded.append(summary)
                if first_fault is not None and job.admitted_ms >= first_fault:
                    r.after_fault_not_succeeded.append(summary)
            elif view["status"] != "cancelled" and not failed_on_its_own(summary["status"], summary["reason"]):
                r.unexpected_status.append(summary)
        r.after_fault = sum(
            1 for j in self.jobs.values() if first_fault is not None and j.admitted_ms >= first_fault and not j.cancel
        )
        for fault in r.faults:
            if fault.probe and fault.probe in rows and rows[fault.probe]["completed_at"] is not None:
                fault.first_job_s = round((rows[fault.probe]["completed_at"] - fault.up_ms) / 1000, 2)
        r.cancels = dict(Counter(j.cancel for j in self.jobs.values() if j.cancel))
        r.cancel_moments = dict(Counter(j.moment for j in self.jobs.values() if j.moment))
        landed: Counter[str] = Counter()
        for view in views.values():
            if view["status"] == "cancelled":
                kinds = {d["status"] for d in job_deliveries(view) if d.get("status") in LANDED_OK}
                landed.update(["jobs"] if kinds else [])
                landed.update(kinds)
        r.cancelled_landed = dict(landed)
        r.cancel_outcomes = dict(
            Counter(
                f"{j.moment} → {views[j.job_id]['status']}"
                for j in self.jobs.values()
                if j.moment and j.job_id in views
            )
        )

        intents = [
            dict(row)
            for row in await self.stack.fetch(
                """SELECT job_id, target_id, route, route_kind, work_id, status, idempotency_key, sent_at
                   FROM delivery_intents WHERE job_id = ANY($1::text[])""",
                ids,
            )
        ]
        hooks = {f"{self.name}-hook{i}" for i in range(self.plan.targets)}
        dirs = {
            f"{self.name}-dir{i}": self.stack.root / "routes" / self.name / str(i) for i in range(self.plan.targets)
        }
        # The audit reads the webhook receivers and the directories; other routes (the
        # edges scenario's Telegram) are checked by their scenario.
        intents = [i for i in intents if i["route"] in hooks or i["route"] in dirs]
        received = [r_ for r_ in read_received(self.stack.received_log) if r_.get("route") in hooks]
        arrivals = webhook_arrivals(received, hooks) + directory_arrivals(dirs)
        reported = {job_id: job_deliveries(view) for job_id, view in views.items()}
        cancels = {j: row["cancel_requested_at"] for j, row in rows.items() if row["cancel_requested_at"] is not None}
        result = audit(arrivals, intents, reported, cancels)
        result.bad_signatures = sum(1 for r_ in received if not r_.get("signature_ok"))
        r.audit = result.as_dict()
        if any(j.cancel for j in self.jobs.values()):
            r.late_steps = await self.late_steps([j.job_id for j in self.jobs.values() if j.cancel])
        r.stuck_details = [await self.diagnose(job_id) for job_id in r.stuck[:5]]
        r.exits = [asdict(e) for e in self.stack.exits]
        await self._http.aclose()
        return r

    async def late_steps(self, job_ids: list[str]) -> list[dict[str, Any]]:
        """Activities that search, fetch or send scheduled after a job's first cancel event
        (a ``cancel`` signal or a Temporal cancel request) in its history."""
        assert self.stack.client is not None
        late: list[dict[str, Any]] = []
        for job_id in job_ids:
            try:
                history = await self.stack.client.get_workflow_handle(job_id).fetch_history()
            except RPCError as err:
                if err.status == RPCStatusCode.NOT_FOUND:
                    continue
                raise
            barrier = False
            for event in history.events:
                if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED or (
                    event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED
                    and event.workflow_execution_signaled_event_attributes.signal_name == "cancel"
                ):
                    barrier = True
                elif barrier and event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
                    activity = event.activity_task_scheduled_event_attributes.activity_type.name
                    if activity in WORK_ACTIVITIES:
                        late.append({"job_id": job_id, "activity": activity, "event_id": event.event_id})
        return late

    async def timeline(self, job_id: str, created_at: int) -> dict[str, Any]:
        """A job's events as ``[type(stage), seconds after admission]`` (why it was slow)."""
        events = await self.stack.fetch(
            "SELECT type, at, payload->'progress'->>'stage' AS stage FROM job_events WHERE job_id = $1 ORDER BY seq",
            job_id,
        )
        job = self.jobs.get(job_id)
        return {
            "job_id": job_id,
            "created_at": created_at,
            "via": job.via if job else None,
            "cancel": job.cancel if job else None,
            "events": [
                [e["type"] + (f"({e['stage']})" if e["stage"] else ""), round((e["at"] - created_at) / 1000, 2)]
                for e in events
            ],
        }

    async def diagnose(self, job_id: str) -> dict[str, Any]:
        """What a stuck job looks like: ledger rows, the execution's status and last events."""
        out: dict[str, Any] = {"job_id": job_id}
        job = await self.stack.fetch(
            "SELECT last_stage, attempt, cancel_requested_at, workflow_started_at, completed_at"
            " FROM jobs WHERE job_id = $1",
            job_id,
        )
        out["job"] = [dict(r) for r in job]
        out["cells"] = [
            dict(r)
            for r in await self.stack.fetch(
                """SELECT target_id, state, stage, work_id, terminal_reason_code, lease_owner, lease_until, heartbeat_at
                   FROM cells WHERE job_id = $1""",
                job_id,
            )
        ]
        out["intents"] = [
            dict(r)
            for r in await self.stack.fetch(
                "SELECT route, work_id, status, attempts, sent_at, last_error FROM delivery_intents WHERE job_id = $1",
                job_id,
            )
        ]
        assert self.stack.client is not None
        try:
            handle = self.stack.client.get_workflow_handle(job_id)
            out["execution"] = str((await handle.describe()).status)
            history = await handle.fetch_history()
            out["last_events"] = [EventType.Name(e.event_type) for e in history.events[-12:]]
        except RPCError as err:
            out["execution"] = f"{err.status.name}: {err.message}"
        return out

    # ---- cancels -------------------------------------------------------------------------------

    async def cancel(self, job: Tracked, path: str) -> None:
        """Cancel ``job`` through ``path`` (retried while its execution does not exist yet)."""
        job.cancel, job.cancel_ms = path, now_ms()
        if path == "http":
            try:
                answer = await self._http.post(f"/jobs/{job.job_id}/cancel")
                job.cancel_answer = f"{answer.status_code} {answer.json().get('status')}"
            except (httpx.HTTPError, ValueError) as err:
                job.cancel_answer = type(err).__name__
            return
        verb = ["signal", "--name", "cancel"] if path == "signal" else ["cancel"]
        cmd = [temporal_binary(), "workflow", *verb, "--address", self.stack.temporal_address, "-w", job.job_id]
        deadline = time.monotonic() + 20
        while True:
            done = await asyncio.to_thread(subprocess.run, cmd, capture_output=True, text=True, timeout=30)
            if done.returncode == 0:
                job.cancel_answer = "ok"
                return
            message = (done.stderr or done.stdout).strip().splitlines()
            job.cancel_answer = message[-1][:200] if message else f"exit {done.returncode}"
            if "not found" not in job.cancel_answer.lower() or time.monotonic() > deadline:
                return  # already completed, or a real refusal: recorded as the answer
            await asyncio.sleep(0.2)


Runner = Callable[[Scenario], Awaitable[None]]


def failed_on_its_own(status: str, reason: str | None) -> bool:
    """Whether a cancelled job's ``failed`` end is the truth, not a lost cancel.

    The cell verdict (:func:`curaflow.domain.verdicts.cell_verdict`) keeps a failure the
    cell met on its own (a route that refused the work: ``delivery_failed``) whatever
    the cancel; only a *stopped* reason (:data:`~curaflow.domain.verdicts.STOPPED_REASONS`)
    becomes ``cancelled_by_consumer``. A ``failed`` job whose reason is a stop, unknown,
    or ``internal_error`` is a cancel that did not reach it.
    """
    if status != "failed" or reason is None:
        return False
    return reason not in {str(r) for r in STOPPED_REASONS} | {"internal_error"}
