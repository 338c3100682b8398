"""The chaos scenarios: load, real faults, then the truth audit.

Each scenario has its own targets and routes (a webhook route on the recording receiver
and a directory route per target), so its deliveries and its audit are its own; in the
full mode each also runs on a fresh stack. Jobs are submitted like a careful consumer
does: ``POST /jobs`` retried with the same idempotency key while the answer is a 5xx or
nothing (so an ambiguous admission is never a lost job), and a few started from a
Temporal client with the same Task (``curaflow.jobs.submit.start_job``).

* ``kills`` — a SIGKILL storm: ≥ 2 workers, one killed at random every few seconds and
  started again, while the jobs run;
* ``postgres`` — PostgreSQL stopped (``pg_ctl -m fast stop``) and later killed (SIGKILL
  of the postmaster) mid-run, each time started again after a few seconds;
* ``temporal`` — the Temporal dev server stopped and started again (same port, same
  SQLite file) mid-run; in the full mode a second time with SIGKILL;
* ``pg_hang`` — PostgreSQL SIGSTOPped (sockets open, nothing answers) for longer than the
  source-queue lease, then again with the account's source-queue owner SIGSTOPped too and
  woken after PostgreSQL (it finds its lease taken and must stop its queue's worker): every
  process ready again, and each account with one owner and every other worker its
  standby (``owners``);
* ``cancel`` / ``cancel_kills`` — a cancel storm: every job cancelled at a random moment
  through one of the three paths (``POST /jobs/{id}/cancel``, ``temporal workflow signal
  --name cancel``, ``temporal workflow cancel``), without and with worker kills.

Recovery after each fault: seconds from the service being back until every process
answers ``/ready`` 200, and until the first job admitted after it (a probe submitted at
once) is terminal.
"""

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
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx
from temporalio.api.enums.v1 import EventType
from temporalio.client import RPCTimeoutOrCancelledError
from temporalio.service import RPCError, RPCStatusCode

from bench.chaos.audit import LANDED_OK, audit, directory_arrivals, job_deliveries, webhook_arrivals
from bench.chaos.receiver import read_received
from bench.chaos.stack import SECRET, TASK_QUEUE, ChaosStack
from bench.stats import summarise
from curaflow.devstack.temporal import temporal_binary
from curaflow.domain.verdicts import STOPPED_REASONS
from curaflow.ledger.db import now_ms

#: Activities that search, fetch or send: none may be scheduled after a cancel.
WORK_ACTIVITIES = {"search", "fetch", "deliver"}
TERMINAL = {"succeeded", "failed", "cancelled", "expired"}
CANCEL_PATHS = ("http", "signal", "temporal")
CANCEL_MOMENTS = ("early", "random", "delivering")


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


@dataclass(frozen=True)
class Plan:
    """A scenario's sizes for one mode.

    Attributes:
        targets: targets (each with a webhook and a directory route of its own).
        jobs: jobs to submit (``kills``, ``cancel*``); load scenarios submit until the
            last fault has recovered, every ``interval_s``.
        interval_s: seconds between two submissions.
        temporal_every: every n-th job is started from a Temporal client (0: none).
        kill_every_s: mean seconds between two worker kills (0: no kills).
        down_s: how long a stopped service stays down.
        fault_kinds: the faults of a service scenario, in order (``fast stop``,
            ``SIGKILL``, ``stop``).
        lead_s / tail_s: load before each fault, and after the last one recovered.
        cancel_within_s: a "random" cancel lands uniformly within this many seconds of
            admission (the others: "early", within 1.5 s; "delivering", as soon as the
            webhook receiver has the job's request).
        receiver_delay_ms: the webhook receiver answers the scenario's routes after a
            random delay up to this (a request stays out that long).
        broken_targets: the last n targets' directory route lies under a regular file,
            so every write fails and is retried (a partial delivery: the
            webhook has the work, the directory never gets it, then the cancel comes).
        drain_s: how long to wait for the jobs to end before calling them stuck.
    """

    targets: int
    jobs: int = 0
    interval_s: float = 0.5
    temporal_every: int = 0
    kill_every_s: float = 0.0
    down_s: float = 5.0
    fault_kinds: tuple[str, ...] = ()
    lead_s: float = 4.0
    tail_s: float = 3.0
    cancel_within_s: float = 4.0
    receiver_delay_ms: int = 150
    broken_targets: int = 0
    drain_s: float = 120.0


#: The quick mode's source-queue lease and standby poll (the full mode keeps the defaults,
#: 10 s and 1 s): a killed or frozen owner is replaced within about 5.5 s, so the
#: ``pg_hang`` outage that must outlast the lease is 8 s instead of 15 s.
QUICK_PIXIV: dict[str, Any] = {"source_lease_ms": 5000, "source_standby_poll_ms": 500}


def plans(quick: bool) -> dict[str, Plan]:
    """Scenario name → its plan, in the order they run (quick: fewer jobs, shorter outages)."""
    if quick:
        return {
            "kills": Plan(targets=2, jobs=10, interval_s=1.0, temporal_every=4, kill_every_s=2.0, drain_s=60),
            "postgres": Plan(
                targets=2, interval_s=1.0, down_s=2.0, fault_kinds=("fast stop", "SIGKILL"), lead_s=2, tail_s=1,
                drain_s=60,
            ),
            "temporal": Plan(
                targets=2, interval_s=1.0, temporal_every=4, down_s=3.0, fault_kinds=("stop",), lead_s=2, tail_s=1,
                drain_s=60,
            ),
            "pg_hang": Plan(
                targets=2, interval_s=1.0, down_s=8.0, fault_kinds=("hang with the owner",), lead_s=3, tail_s=2,
                drain_s=90,
            ),  # 8 s: longer than the quick stack's source-queue lease (QUICK_PIXIV)
            "cancel_kills": Plan(
                targets=2, jobs=12, interval_s=0.3, temporal_every=4, kill_every_s=3.0, cancel_within_s=6.0,
                receiver_delay_ms=1500, broken_targets=1, drain_s=60,
            ),
        }  # fmt: skip
    return {
        "kills": Plan(targets=4, jobs=50, interval_s=0.8, temporal_every=8, kill_every_s=3.0, drain_s=180),
        "postgres": Plan(
            targets=4, interval_s=1.0, temporal_every=10, down_s=5.0,
            fault_kinds=("fast stop", "SIGKILL", "fast stop", "SIGKILL"), drain_s=180,
        ),
        "temporal": Plan(
            targets=4, interval_s=1.0, temporal_every=6, down_s=8.0, fault_kinds=("stop", "SIGKILL"), drain_s=180
        ),
        "pg_hang": Plan(
            targets=3, interval_s=1.0, temporal_every=8, down_s=25.0, fault_kinds=("hang", "hang with the owner"),
            drain_s=180,
        ),
        "cancel": Plan(
            targets=3, jobs=45, interval_s=0.3, temporal_every=5, cancel_within_s=10.0, receiver_delay_ms=1500,
            broken_targets=1, drain_s=120,
        ),
        "cancel_kills": Plan(
            targets=3, jobs=45, interval_s=0.3, temporal_every=5, kill_every_s=4.0, cancel_within_s=10.0,
            receiver_delay_ms=1500, broken_targets=1, drain_s=180,
        ),
        "edges": Plan(targets=len(EDGE_CASES), jobs=len(EDGE_CASES), interval_s=0.2, drain_s=150),
    }  # fmt: skip


def scenario_config(
    name: str, plan: Plan, receiver_url: str, root: Path, hostile_url: str = "", internal_url: str = ""
) -> dict[str, Any]:
    """The routes and targets of one scenario: target ``<name><i>`` delivers to the webhook
    route ``<name>-hook<i>`` (the receiver, path ``/<name>/<i>``) and the directory route
    ``<name>-dir<i>`` (under a regular file for the last ``broken_targets``); every
    target takes the whole ranking (61 recorded works). The receiver answers that route
    after up to ``receiver_delay_ms``. ``edges`` is built by :func:`edges_config` (it
    needs the hostile party's ``hostile_url`` and ``internal_url``)."""
    if name == "edges":
        return edges_config(receiver_url, root, hostile_url, internal_url)
    routes: dict[str, Any] = {}
    targets = []
    for i in range(plan.targets):
        hook, folder = f"{name}-hook{i}", f"{name}-dir{i}"
        url = f"{receiver_url}/{name}/{i}?delay_ms={plan.receiver_delay_ms}"
        routes[hook] = {"kind": "webhook", "url": url, "secret": SECRET, "timeout_ms": 5000}
        path = root / "routes" / name / str(i)
        if i >= plan.targets - plan.broken_targets:
            blocker = root / "routes" / name / f"regular-file-{i}"
            blocker.parent.mkdir(parents=True, exist_ok=True)
            blocker.write_text("a directory route under a regular file can never write\n")
            path = blocker / "out"
        routes[folder] = {"kind": "directory", "path": str(path)}
        targets.append({"id": f"{name.replace('_', '')}{i}", "query": {"mode": "ranking"}, "routes": [hook, folder]})
    return {"routes": routes, "targets": targets}


@dataclass
class Tracked:
    """A job the scenario submitted.

    Attributes:
        admitted_ms: when the admission was acknowledged (202/200, or the Temporal start returned).
        attempts: submissions until it was (retries after a 5xx or no answer).
        cancel: how it was cancelled (``http``, ``signal``, ``temporal``), if it was.
        cancel_ms / cancel_answer: when the cancel was sent, and what came back.
    """

    job_id: str
    key: str
    target_id: str
    via: str
    admitted_ms: int = 0
    attempts: int = 0
    probe: bool = False
    cancel: str | None = None
    moment: str | None = None
    cancel_ms: int | None = None
    cancel_answer: str | None = None


@dataclass
class Fault:
    """One fault: injected at ``down_ms``, the service back at ``up_ms`` (epoch ms).

    Attributes:
        ready_s: from ``up_ms`` until every process answered ``/ready`` 200.
        probe: the job submitted as soon as the service was back.
        first_job_s: from ``up_ms`` until that job was terminal.
        owners_s: from ``up_ms`` until every account had one source-queue owner and every
            other worker was its standby (``pg_hang``).
        owners: the workers' source-queue entries then (worker → account → detail).
    """

    kind: str
    down_ms: int
    up_ms: int = 0
    ready_s: float | None = None
    probe: str | None = None
    first_job_s: float | None = None
    owners_s: float | None = None
    owners: dict[str, dict[str, str]] = field(default_factory=dict)


@dataclass
class ScenarioResult:
    """Everything one scenario measured (the table's column and the JSON's entry)."""

    name: str
    plan: dict[str, Any]
    seconds: float = 0.0
    faults: list[Fault] = field(default_factory=list)
    kills: int = 0
    kill_ready_s: list[float] = field(default_factory=list)
    submitted: int = 0
    via_temporal: int = 0
    refused: int = 0
    terminal: int = 0
    stuck: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    statuses: dict[str, int] = field(default_factory=dict)
    job_seconds: dict[str, Any] = field(default_factory=dict)
    slowest: list[dict[str, Any]] = field(default_factory=list)
    after_fault: int = 0
    after_fault_not_succeeded: list[dict[str, Any]] = field(default_factory=list)
    not_succeeded: list[dict[str, Any]] = field(default_factory=list)
    cancels: dict[str, int] = field(default_factory=dict)
    cancel_moments: dict[str, int] = field(default_factory=dict)
    cancel_outcomes: dict[str, int] = field(default_factory=dict)
    cancelled_landed: dict[str, int] = field(default_factory=dict)
    unexpected_status: list[dict[str, Any]] = field(default_factory=list)
    late_steps: list[dict[str, Any]] = field(default_factory=list)
    audit: dict[str, Any] = field(default_factory=dict)
    exits: list[dict[str, Any]] = field(default_factory=list)
    stuck_details: list[dict[str, Any]] = field(default_factory=list)
    edges: dict[str, Any] = field(default_factory=dict)
    edge_findings: dict[str, list[Any]] = field(default_factory=dict)
    owner_findings: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None

    def checks(self) -> dict[str, int]:
        """Every figure that must be 0 for the scenario to pass."""
        a = self.audit
        return {
            "lost": len(self.lost),
            "stuck": len(self.stuck),
            "cross_job_duplicates": int(a.get("cross_job_duplicates", 0)),
            "missing_at_route": int(a.get("missing_at_route", 0)),
            "phantoms": int(a.get("phantoms", 0)),
            "understated": int(a.get("understated", 0)),
            "sends_after_cancel": int(a.get("sends_after_cancel", 0)),
            "late_steps": len(self.late_steps),
            "after_fault_not_succeeded": len(self.after_fault_not_succeeded),
            "unexpected_status": len(self.unexpected_status),
            **{check: len(found) for check, found in self.edge_findings.items()},
            "owners": len(self.owner_findings),
            "errors": 1 if self.error else 0,
        }

    @property
    def ok(self) -> bool:
        return not any(self.checks().values())

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["checks"] = self.checks()
        data["ok"] = self.ok
        return data


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


async def kills(s: Scenario) -> None:
    """Submit the jobs while one worker at a time is SIGKILLed and restarted."""
    stop = asyncio.Event()
    killer = asyncio.create_task(s.killer(stop))
    await s.load(asyncio.Event(), s.plan.jobs)
    await s.settle_submissions()
    # Keep killing until most jobs ended (or a bound), so kills hit every step.
    ids = list(s.jobs)
    bound = time.monotonic() + max(15.0, s.plan.jobs * s.plan.interval_s)
    while time.monotonic() < bound:
        done = await s.stack.fetch(
            "SELECT count(*) AS n FROM jobs WHERE job_id = ANY($1::text[]) AND completed_at IS NOT NULL", ids
        )
        if done[0]["n"] >= 0.9 * len(ids):
            break
        await asyncio.sleep(0.5)
    stop.set()
    await killer
    s.result.faults.append(
        Fault(f"{s.result.kills} worker SIGKILLs", down_ms=min(j.admitted_ms for j in s.jobs.values()))
    )


async def postgres(s: Scenario) -> None:
    """Load; ``pg_ctl -m fast stop`` … start; load; SIGKILL of the postmaster … start; load."""
    stop = asyncio.Event()
    loader = asyncio.create_task(s.load(stop))
    for kind in s.plan.fault_kinds:
        await asyncio.sleep(s.plan.lead_s)
        fault = Fault(f"PostgreSQL {kind} {s.plan.down_s:.0f} s", down_ms=now_ms())
        if kind == "fast stop":
            await s.stack.postgres_fast_stop()
        else:
            await s.stack.postgres_kill()
        await asyncio.sleep(s.plan.down_s)
        await s.stack.postgres_start()
        await s.recover(fault)
    await asyncio.sleep(s.plan.tail_s)
    stop.set()
    await loader


#: How long after PostgreSQL is back every account must have one owner and every other
#: worker its standby: the lease (10 s), the old owner's worker stopping or abandoned
#: (graceful shutdown 30 s + 10 s), with slack for a loaded machine.
OWNERS_BOUND_S = 75.0


def owners_settled(entries: dict[str, dict[str, str]]) -> bool:
    """Every account is owned by exactly one worker and every other worker stands by."""
    accounts = {a for per in entries.values() for a in per}
    if not accounts or "*" in accounts:
        return False
    for account in accounts:
        details = [per.get(account, "") for per in entries.values()]
        if sum(d.startswith("owning") for d in details) != 1:
            return False
        if not all(d.startswith(("owning", "standby")) for d in details):
            return False
    return True


async def pg_hang(s: Scenario) -> None:
    """Load; PostgreSQL SIGSTOPped ``down_s`` … SIGCONT; (with ``owner`` in the kind) the
    source-queue owner SIGSTOPped with it and woken 3 s after PostgreSQL; load. After each:
    readiness, the first job, and one owner per account with every other worker standing by."""
    stop = asyncio.Event()
    loader = asyncio.create_task(s.load(stop))
    for kind in s.plan.fault_kinds:
        await asyncio.sleep(s.plan.lead_s)
        entries = await s.stack.source_queues()
        owner = next(
            (i for i, w in enumerate(s.stack.workers) if any(d.startswith("owning") for d in entries[w.name].values())),
            None,
        )
        stuck_owner = "owner" in kind and owner is not None
        fault = Fault(
            f"PostgreSQL SIGSTOP {s.plan.down_s:.0f} s" + (" + its source-queue owner" if stuck_owner else ""),
            down_ms=now_ms(),
        )
        pids = await s.stack.postgres_pause()
        if stuck_owner:
            assert owner is not None
            s.stack.workers[owner].pause()
        await asyncio.sleep(s.plan.down_s)
        await s.stack.postgres_resume(pids)
        if stuck_owner:
            assert owner is not None
            await asyncio.sleep(3)
            s.stack.workers[owner].resume()
        await s.recover(fault)
        began = time.monotonic() - (now_ms() - fault.up_ms) / 1000
        while True:
            fault.owners = await s.stack.source_queues()
            if owners_settled(fault.owners):
                fault.owners_s = round(time.monotonic() - began, 2)
                break
            if time.monotonic() - began > OWNERS_BOUND_S:
                s.result.owner_findings.append({"fault": fault.kind, "owners": fault.owners})
                break
            await asyncio.sleep(0.5)
    await asyncio.sleep(s.plan.tail_s)
    stop.set()
    await loader


async def temporal(s: Scenario) -> None:
    """Load; stop the Temporal dev server … start it again (full mode: then SIGKILL … start)."""
    stop = asyncio.Event()
    loader = asyncio.create_task(s.load(stop))
    for kind in s.plan.fault_kinds:
        await asyncio.sleep(s.plan.lead_s)
        fault = Fault(f"Temporal {kind} {s.plan.down_s:.0f} s", down_ms=now_ms())
        await s.stack.temporal_stop(kill=kind == "SIGKILL")
        await asyncio.sleep(s.plan.down_s)
        await s.stack.temporal_start()
        await s.recover(fault)
    await asyncio.sleep(s.plan.tail_s)
    stop.set()
    await loader


async def cancel_storm(s: Scenario) -> None:
    """Every job cancelled through one of the three paths at one of three moments — early
    (within 1.5 s: queued or searching), at random (within ``cancel_within_s``) or while
    delivering (once the webhook receiver has its request, which it answers slowly) —
    each (path, moment) pair in turn; worker kills meanwhile when the plan says so."""
    stop = asyncio.Event()
    killer = asyncio.create_task(s.killer(stop)) if s.plan.kill_every_s else None
    pairs = list(itertools.product(CANCEL_PATHS, CANCEL_MOMENTS))
    s.rng.shuffle(pairs)
    combos = itertools.cycle(pairs)
    cancels: list[asyncio.Task[None]] = []

    async def one(path: str, moment: str) -> None:
        job = await s.submit()
        if job is None:
            return
        job.moment = moment
        if moment == "early":
            await asyncio.sleep(s.rng.uniform(0, 1.5))
        elif moment == "random":
            await asyncio.sleep(s.rng.uniform(0, s.plan.cancel_within_s))
        else:
            await s.receiver.wait_for(job.job_id, s.plan.cancel_within_s * 3)
        await s.cancel(job, path)

    for _ in range(s.plan.jobs):
        cancels.append(asyncio.create_task(one(*next(combos))))
        await asyncio.sleep(s.plan.interval_s)
    await asyncio.gather(*cancels)
    stop.set()
    if killer is not None:
        await killer
    if s.result.kills:
        s.result.faults.append(Fault(f"{s.result.kills} worker SIGKILLs", down_ms=0))


#: The deadline of every ``edges`` job that ends on its own: a minute, so a loaded machine
#: never makes one of them expire.
EDGE_DEADLINE_MS = 60_000
#: The deadline of the cases that end only at their deadline (a send or a download that
#: never completes): long enough for several attempts, each cut at its own bound (a
#: route's ``timeout_ms`` of 5 s), short enough that the run does not wait a minute.
EDGE_EXPIRY_DEADLINE_MS = 20_000


@dataclass(frozen=True)
class EdgeCase:
    """One hostile party of the ``edges`` scenario: a target of its own, one job.

    Attributes:
        name: the case (the table's and the report's name).
        word: the search word the hostile source answers for it (``edges-<word>``).
        hook: how its webhook route's receiver behaves: ``""`` the recording receiver,
            else the hostile party's ``/hook/<hook>`` (``slow``, ``huge``, ``redirect``,
            ``ratelimit``, ``refusal``, ``nodelay``).
        telegram: it also delivers to a Telegram route on the hostile Bot API.
        telegram_api: the path of that Bot API on the hostile party (``""``: the
            rate-limiting one; ``/tg/refusal``: one refusing with random words).
        discord: it also delivers to a Discord route on the hostile party's webhook
            (429 without a delay, then Cloudflare's 1015 page, then accepted).
        callback: its job's ``callback_url`` points at the internal service through an
            allowed host name (``localhost``).
        min_bookmarks: the target's filter (the source case: page 1 is all filtered out).
        expected: the job's allowed ends (``status`` or ``status/reason``).
        deadline_ms: its job's ``deadline_ms``: a case that can only end at its deadline
            gets :data:`EDGE_EXPIRY_DEADLINE_MS` (the run waits for it), every other case
            :data:`EDGE_DEADLINE_MS` (it ends on its own, long before).
    """

    name: str
    word: str = "plain"
    hook: str = ""
    telegram: bool = False
    telegram_api: str = ""
    discord: bool = False
    callback: bool = False
    min_bookmarks: int | None = None
    expected: tuple[str, ...] = ("succeeded",)
    deadline_ms: int = EDGE_DEADLINE_MS


#: The ``edges`` cases, target ``edges<i>`` each (:mod:`bench.chaos.hostile` plays the parties).
EDGE_CASES: tuple[EdgeCase, ...] = (
    EdgeCase(
        "receiver streams its 200 at 1 KiB/s", hook="slow", expected=("expired",), deadline_ms=EDGE_EXPIRY_DEADLINE_MS
    ),
    EdgeCase("receiver answers 100 MiB", hook="huge"),
    EdgeCase("receiver redirects to an internal address", hook="redirect", expected=("failed/route_refused",)),
    EdgeCase("Telegram: 429, then 400 'Too Many Requests: retry after 1'", telegram=True),
    EdgeCase("callback_url: allowed name resolving to 127.0.0.1", callback=True),
    EdgeCase("endless image", word="endless"),
    EdgeCase("image trickling 1 B / 2 s", word="trickle", expected=("expired",), deadline_ms=EDGE_EXPIRY_DEADLINE_MS),
    EdgeCase("image URL answering JSON", word="json"),
    EdgeCase("image URL on an internal service", word="internal"),
    EdgeCase("search page 2: 500, 500, empty 200", word="source", min_bookmarks=1),
    EdgeCase("receiver: 429 Retry-After 1, then 503 Retry-After as a date", hook="ratelimit"),
    EdgeCase("search page of 50 MiB", word="hugepage", expected=("failed/remote_http_error",)),
    EdgeCase("decode bombs: thousands of GIF frames, a huge canvas, an ugoira's huge later frame", word="bomb"),
    EdgeCase("unusable animations: a zip URL that is not one, no frames, a frame without a delay", word="animation"),
    # The classes of an unknown answer: each run draws other members (the run's seed).
    EdgeCase(
        "receiver: an unknown refusal (a random 4xx and words)", hook="refusal", expected=("failed/route_refused",)
    ),
    EdgeCase(
        "Telegram: an unknown refusal (a random 4xx and words)",
        telegram=True,
        telegram_api="/tg/refusal",
        expected=("failed/route_refused",),
    ),
    EdgeCase("receiver: 429 without a delay, then an HTML 429", hook="nodelay"),
    EdgeCase("Discord: 429 without a delay, then Cloudflare's 1015 page", discord=True),
)
#: The cases whose listed hostile works must each be remembered unavailable (and the plain
#: work after them delivered in the same job).
EDGE_UNAVAILABLE_WORDS = ("bomb", "animation")
#: How long after the hostile party served a bomb (or an unusable animation's metadata)
#: the work must be remembered unavailable: the account's only source slot is free again.
EDGE_SLOT_FREE_MS = 10_000
#: The shortest wait allowed before asking again a party that rate-limited without a
#: delay: the backoff's first step (curaflow.domain.ratelimit.UNSTATED_BASE_MS), less the
#: clocks' slack.
EDGE_MIN_BACKOFF_MS = 4_500
#: How far past its deadline a job may end, and how long a hostile connection may stay
#: open after its job ended (or past its route's timeout).
EDGE_GRACE_MS = 5_000
#: ``timeout_ms`` of every webhook route of the scenario.
EDGE_HOOK_TIMEOUT_MS = 5_000
#: How much a worker's resident memory may grow during the scenario.
EDGE_RSS_GROWTH_MIB = 200
#: The hostile party's streamed answers → the case whose job they belong to.
EDGE_STREAMS = {
    "slow hook": "receiver streams its 200 at 1 KiB/s",
    "huge hook": "receiver answers 100 MiB",
    "endless image": "endless image",
    "trickling image": "image trickling 1 B / 2 s",
    "huge search page": "search page of 50 MiB",
}


def edges_config(receiver_url: str, root: Path, hostile_url: str, internal_url: str) -> dict[str, Any]:
    """The ``edges`` stack's targets and routes (one per :data:`EDGE_CASES` entry), and
    the source, image host and callback settings that point at the hostile party: the
    Pixiv API and image host are the hostile source in front of the replay; callbacks
    may go to ``localhost`` on any port, signed, with loopback not allowed for data
    destinations (``outbound.private_networks`` empty)."""
    routes: dict[str, Any] = {}
    targets = []
    for i, case in enumerate(EDGE_CASES):
        hook, folder = f"edges-hook{i}", f"edges-dir{i}"
        url = f"{hostile_url}/hook/{case.hook}/{i}" if case.hook else f"{receiver_url}/edges/{i}?delay_ms=150"
        routes[hook] = {"kind": "webhook", "url": url, "secret": SECRET, "timeout_ms": EDGE_HOOK_TIMEOUT_MS}
        routes[folder] = {"kind": "directory", "path": str(root / "routes" / "edges" / str(i))}
        names = [hook, folder]
        if case.telegram:
            routes[f"edges-tg{i}"] = {
                "kind": "telegram", "bot_token": f"{900 + i}:hostile-bot", "chat_id": "-100",
                "api_url": hostile_url + case.telegram_api, "timeout_ms": 10_000,
            }  # fmt: skip
            names.append(f"edges-tg{i}")
        if case.discord:
            routes[f"edges-dc{i}"] = {
                "kind": "discord",
                "url": f"{hostile_url}/api/webhooks/{i}/nodelay",
                "timeout_ms": 10_000,
            }
            names.append(f"edges-dc{i}")
        target: dict[str, Any] = {
            "id": f"edges{i}",
            "query": {"mode": "search", "tags": [f"edges-{case.word}"]},
            "routes": names,
        }
        if case.min_bookmarks is not None:
            target["filters"] = {"min_bookmarks": case.min_bookmarks}
        targets.append(target)
    return {
        "routes": routes,
        "targets": targets,
        "pixiv": {"api_url": hostile_url, "auth_url": hostile_url, "image_url": f"{hostile_url}/i"},
        "outbound": {"download_timeout_ms": 15_000},
        # No worker is killed here: a long heartbeat timeout (20 s) keeps a starved machine
        # from losing attempts (a lost attempt after a send is reported unknown; 6 s lost a
        # Telegram send at a load average of 11). Cancels still reach a step within about a
        # second: heartbeats go to Temporal at most every second whatever the interval.
        "budgets": {"heartbeat_interval_ms": 10_000},
        "api": {
            "callback_allowed_hosts": ["localhost:*"],
            "callback_secret": SECRET,
            "callback_max_attempts": 2,
            "callback_timeout_ms": 2000,
        },
    }


def rss_mib(pid: int) -> float | None:
    """A process's resident memory (``VmRSS`` of ``/proc/<pid>/status``) in MiB; None if gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


async def edges(s: Scenario) -> None:
    """One job per hostile party (:data:`EDGE_CASES`), all at once, each with its case's
    deadline, while every worker's memory is sampled; once they ended and every hostile
    connection closed (or :data:`EDGE_GRACE_MS` passed), the case checks: each job's end
    is one its case allows, no job ended more than :data:`EDGE_GRACE_MS` past its
    deadline, no hostile connection outlived its job by more, the internal service was
    never reached, no hostile work was delivered, Telegram and Discord have each accepted
    post once, the rate-limiting receivers accepted the work once, the trickling
    receiver's every send was cut at its route's timeout and is reported ``unknown`` (it
    may have landed), no party that rate-limited without a delay was asked again within
    :data:`EDGE_MIN_BACKOFF_MS`, no work was refused for good (no hostile answer names a
    work), every decode bomb and unusable animation is remembered unavailable within
    :data:`EDGE_SLOT_FREE_MS` of being served (the account's source slot is free again:
    the job went on to the next work), and no worker grew by more than
    :data:`EDGE_RSS_GROWTH_MIB`."""
    stack = s.stack
    async with httpx.AsyncClient(timeout=120) as http:  # the bombs of this run, from its seed
        seeded = await http.post(f"{stack.hostile_url}/_chaos/seed", json={"seed": s.rng.randrange(2**31)})
        seeded.raise_for_status()
    internal_port = stack.internal_url.rsplit(":", 1)[1]
    for i, case in enumerate(EDGE_CASES):
        fields: dict[str, Any] = {"deadline_ms": case.deadline_ms}
        if case.callback:
            fields["callback_url"] = f"http://localhost:{internal_port}/callback"
        s.task_fields[f"edges{i}"] = fields
    pids = {w.name: w.popen.pid for w in stack.workers if w.popen is not None}
    baseline = {name: rss_mib(pid) or 0.0 for name, pid in pids.items()}
    peak = dict(baseline)
    stop = asyncio.Event()

    async def sample() -> None:
        while not stop.is_set():
            for name, pid in pids.items():
                peak[name] = max(peak[name], rss_mib(pid) or 0.0)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.25)

    sampler = asyncio.create_task(sample())
    await s.load(asyncio.Event(), len(EDGE_CASES))
    await s.drain()
    async with httpx.AsyncClient(timeout=10) as http:
        grace_end = time.monotonic() + EDGE_GRACE_MS / 1000
        while True:  # a connection that outlives its job by more than the grace is a finding
            state = (await http.get(f"{stack.hostile_url}/_chaos/state")).json()
            if state["open_streams"] == 0 or time.monotonic() >= grace_end:
                break
            await asyncio.sleep(0.25)
    stop.set()
    await sampler
    case_of = {f"edges{i}": case for i, case in enumerate(EDGE_CASES)}
    rows = await stack.fetch(
        "SELECT job_id, created_at, completed_at, deadline_at FROM jobs WHERE job_id = ANY($1::text[])",
        list(s.jobs),
    )
    rows = [{**dict(row), "target_id": s.jobs[row["job_id"]].target_id} for row in rows]
    found: dict[str, list[Any]] = {
        "unexpected_end": [],
        "overran_deadline": [],
        "open_connections": [],
        "internal_reached": list(state["internal_hits"]),
        "hostile_delivered": [],
        "telegram_duplicates": [],
        "not_delivered_once": [],
        "slow_send_not_cut": [],
        "memory_unbounded": [],
        "retried_too_soon": [],
        "work_refused_for_good": [],
        "not_unavailable": [],
        "slot_held": [],
    }
    telegram_delivered = 0
    discord_delivered = 0
    ends: dict[str, dict[str, Any]] = {}
    async with stack.http() as api:
        for row in rows:
            case = case_of[row["target_id"]]
            view = (await api.get(f"/jobs/{row['job_id']}")).json()
            reason = ((view.get("error") or {}).get("detail") or {}).get("internal_code")
            end = view["status"] + (f"/{reason}" if reason else "")
            took = (row["completed_at"] - row["created_at"]) if row["completed_at"] else None
            ends[case.name] = {"end": end, "seconds": round(took / 1000, 1) if took else None}
            if view["status"] not in case.expected and end not in case.expected:
                found["unexpected_end"].append({"case": case.name, "end": end, "job_id": row["job_id"]})
            deadline_at = row["deadline_at"] or row["created_at"] + case.deadline_ms
            if row["completed_at"] is None or row["completed_at"] > deadline_at + EDGE_GRACE_MS:
                found["overran_deadline"].append({"case": case.name, "job_id": row["job_id"], "seconds": took})
            for d in job_deliveries(view):
                if d.get("status") != "delivered":
                    continue
                telegram_delivered += str(d.get("route", "")).startswith("edges-tg")
                discord_delivered += str(d.get("route", "")).startswith("edges-dc")
    # Each post the hostile Telegram / Discord accepted is a delivery a job reports, once.
    if len(state["telegram_posts"]) != telegram_delivered:
        found["telegram_duplicates"].append(
            {"accepted_posts": state["telegram_posts"], "reported_delivered": telegram_delivered}
        )
    if state["discord_posts"] != discord_delivered or discord_delivered != sum(c.discord for c in EDGE_CASES):
        found["not_delivered_once"].append(
            {"party": "discord", "accepted": state["discord_posts"], "reported_delivered": discord_delivered}
        )
    ends = {c.name: ends[c.name] for c in EDGE_CASES if c.name in ends}
    hook_intents = {
        (row["job_id"], row["route"]): row["status"]
        for row in await stack.fetch(
            "SELECT job_id, route, status FROM delivery_intents WHERE job_id = ANY($1::text[])", list(s.jobs)
        )
    }
    job_of = {s.jobs[j].target_id: j for j in s.jobs}
    for i, case in enumerate(EDGE_CASES):
        accepted = state["hook_accepted"].get(str(i), 0)
        if case.hook in ("ratelimit", "nodelay") and accepted != 1:
            found["not_delivered_once"].append({"case": case.name, "accepted": accepted})
        if case.hook == "slow":
            # every attempt cut at the route's timeout (none outlives it by the grace), and
            # the send reported unknown: it may have landed
            sends = [stream for stream in state["streams"] if stream["what"] == f"slow hook {i}"]
            bound = EDGE_HOOK_TIMEOUT_MS + EDGE_GRACE_MS
            uncut = [x for x in sends if x["closed_ms"] is None or x["closed_ms"] - x["opened_ms"] > bound]
            status = hook_intents.get((job_of.get(f"edges{i}", ""), f"edges-hook{i}"))
            if not sends or uncut or status != "unknown":
                found["slow_send_not_cut"].append({"case": case.name, "sends": sends, "intent": status})
    # A rate limit without a delay is a backoff from 5 s, never a constant.
    for party, asked in state["asked_ms"].items():
        gaps = [b - a for a, b in itertools.pairwise(asked)]
        if any(gap < EDGE_MIN_BACKOFF_MS for gap in gaps):
            found["retried_too_soon"].append({"party": party, "gaps_ms": gaps})
    # An answer curaflow does not know never refuses a work for good.
    edge_routes = [name for i in range(len(EDGE_CASES)) for name in (f"edges-hook{i}", f"edges-tg{i}", f"edges-dc{i}")]
    refused = await stack.fetch(
        "SELECT route, work_id, reason, error FROM route_refusals WHERE route = ANY($1::text[]) AND until IS NULL",
        edge_routes,
    )
    found["work_refused_for_good"] = [dict(r) for r in refused]
    completed = {case_of[r["target_id"]].name: r["completed_at"] for r in rows}
    for stream in state["streams"]:
        owner = next((c for prefix, c in EDGE_STREAMS.items() if stream["what"].startswith(prefix)), None)
        ended = completed.get(owner) if owner else None
        closed = stream["closed_ms"]
        if closed is None or (ended is not None and closed > ended + EDGE_GRACE_MS):
            found["open_connections"].append({**stream, "job_completed_ms": ended})
    hostile_works = set(state["hostile_works"])
    hooks = {f"edges-hook{i}" for i in range(len(EDGE_CASES))}
    dirs = {f"edges-dir{i}": stack.root / "routes" / "edges" / str(i) for i in range(len(EDGE_CASES))}
    arrivals = webhook_arrivals(read_received(stack.received_log), hooks) + directory_arrivals(dirs)
    found["hostile_delivered"] = [asdict(a) for a in arrivals if a.work_id in hostile_works]
    remembered = {
        row["work_id"]: row["seen_at"]
        for row in await stack.fetch(
            "SELECT work_id, seen_at FROM unavailable_works WHERE work_id = ANY($1::text[])", list(hostile_works)
        )
    }
    unusable = {w: kind for w, kind in state["hostile_works"].items() if kind.split("/")[0] in EDGE_UNAVAILABLE_WORDS}
    found["not_unavailable"] = [{"work_id": w, "kind": k} for w, k in unusable.items() if w not in remembered]
    served = [
        {**x, "unavailable_after_ms": remembered[x["work_id"]] - x["at_ms"] if x["work_id"] in remembered else None}
        for x in state["served"]
    ]
    found["slot_held"] = [x for x in served if (x["unavailable_after_ms"] or 0) > EDGE_SLOT_FREE_MS]
    growth = {name: round(peak[name] - baseline[name], 1) for name in pids}
    found["memory_unbounded"] = [{n: g} for n, g in growth.items() if g > EDGE_RSS_GROWTH_MIB]
    s.result.edges = {
        "ends": ends,
        "rss_mib": {n: {"start": round(baseline[n], 1), "peak": round(peak[n], 1)} for n in pids},
        "streams": state["streams"],
        "telegram_requests": state["telegram_requests"],
        "hook_requests": state["hook_requests"],
        "telegram_posts": len(state["telegram_posts"]),
        "discord_posts": state["discord_posts"],
        "refusals": state["refusals"],
        "asked_ms": state["asked_ms"],
        "source_faults": state["source_faults"],
        "searches": state["searches"],
        "internal_hits": len(state["internal_hits"]),
        "seed": state["seed"],
        "unusable_works": {
            w: {"kind": k, "unavailable": w in remembered} for w, k in sorted(unusable.items(), key=lambda i: i[1])
        },
        "served": served,
    }
    s.result.edge_findings = found


RUNNERS: dict[str, Runner] = {
    "kills": kills,
    "postgres": postgres,
    "temporal": temporal,
    "pg_hang": pg_hang,
    "cancel": cancel_storm,
    "cancel_kills": cancel_storm,
    "edges": edges,
}


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
