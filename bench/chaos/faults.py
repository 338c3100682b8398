"""The fault scenarios: ``kills`` (a SIGKILL storm), ``postgres`` (stopped and killed),
``pg_hang`` (SIGSTOPped, with the source-queue owner), ``temporal`` (the dev server
stopped) and ``cancel`` / ``cancel_kills`` (a cancel storm over the three paths). Each is a
:data:`bench.chaos.harness.Runner`."""

from __future__ import annotations

import asyncio
import itertools
import time

from bench.chaos.harness import Scenario
from bench.chaos.records import Fault
from curaflow.ledger.db import now_ms

CANCEL_PATHS = ("http", "signal", "temporal")
CANCEL_MOMENTS = ("early", "random", "delivering")
#: An "early" cancel lands within this many seconds of the admission: the replay source
#: answers a search in milliseconds, so a job is delivering ~70 ms after its admission —
#: within 1.5 s (until 2026-12-06) the cancel landed in the delivery, whose send answered
#: within its grace, and stopped nothing (no job of the cancel storm ended `cancelled`).
EARLY_S = 0.05


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
    (within :data:`EARLY_S`: queued or searching), at random (within ``cancel_within_s``) or while
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
            await asyncio.sleep(s.rng.uniform(0, EARLY_S))
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
