"""Re-record the workflow histories replayed by ``tests/unit/test_replay_histories.py``.

    python scripts/record_histories.py            # writes tests/histories/*.json

Runs real jobs on a throw-away embedded stack (an in-memory Temporal dev server, an
embedded PostgreSQL in a temporary directory — or ``DATABASE_URL`` — and an in-process
worker serving the replay of the recorded Pixiv responses), then exports each
execution's history as JSON (the same format as ``temporal workflow show --output json``
and the UI's download):

* ``job_succeeded``: a protocol job delivered to a directory;
* ``job_no_candidate``: a scheduled-style job (fallback stages) that finds nothing;
* ``job_cancelled``: a job cancelled by the ``cancel`` signal before it ran;
* ``job_deadline``: a job whose deadline fires while its fetch waits at the rate gate;
* ``job_cancel_in_ledger``: a job whose cancel was recorded in the ledger before its
  workflow started (the first step finds it);
* ``scheduled_occurrence`` / ``scheduled_job``: a schedule trampoline and the job it
  started, with two targets (two cells);
* ``event_push``: an ``EventPushWorkflow`` run;
* ``job_temporal_client``: a job a Temporal client started with ``start_job``
  (update-with-start: the ``admission`` update, the ``admit`` step, ``cell_progress``);
* ``job_refused_input``: an execution started with no input (refused ``invalid_params``);
* ``job_reporting_run``: a run another client added (``ALLOW_DUPLICATE``) under the id of
  a job that ended: it admits its Task and only reports the job;
* ``job_cancel_two_targets``: a job of two targets cancelled (the ``cancel`` signal) once
  one cell delivered, while the other's webhook send is out to a receiver that never
  answers: the cancel cuts it and stops that cell, so ``job_status`` says ``cancelled`` and
  the execution ends Canceled (``_v3``); recorded before that rule (``_v2``), the same job
  said ``succeeded`` and completed. The workflow code is the same: both replay;
* ``job_quick``: a protocol job whose download is over before the ``cell_progress``
  signal is due (no request spacing): the shape of most jobs, without the signal.

Files recorded before core v2 (``*_v1.json`` and the unsuffixed files of 2026-11) stay:
they prove that executions started before the upgrade still replay (``workflows/job_v1.py``).
New recordings are written with the ``--suffix`` given (default: today's date).

When to run it: only after an *intended*, versioned change of a workflow (new code
paths behind ``workflow.patched``), so the histories show the new shape while the old
recordings keep proving that running executions still replay. Keep the old files when
you add new ones (suffix them with the date) unless the change deliberately drops
support for the old shape (``workflow.deprecate_patch``).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import tomli_w

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from curaflow.config import load_settings  # noqa: E402
from curaflow.devstack.postgres import EmbeddedPostgres  # noqa: E402
from curaflow.devstack.temporal import TemporalDevServer  # noqa: E402
from curaflow.domain.messages import CancelRequest, PushInput  # noqa: E402
from curaflow.process.httpserver import BackgroundServer  # noqa: E402
from curaflow.temporal.connection import connect  # noqa: E402

OUT = ROOT / "tests" / "histories"


async def record(tmp: Path, suffix: str) -> dict[str, str]:
    """Run the jobs and write their histories; returns name → workflow id."""
    from curaflow.jobs.admission import Admitter
    from curaflow.ledger.db import create_pool, migrate
    from curaflow.process.worker import run_worker
    from curaflow.schedules import occurrence_input

    server = TemporalDevServer(log_file=tmp / "temporal.log")
    await server.start()
    held = await BackgroundServer(never_answers()).start()
    pg: EmbeddedPostgres | None = None
    database_url = os.environ.get("DATABASE_URL")
    if not database_url:
        pg = EmbeddedPostgres(tmp / "pg")
        database_url = pg.start()
    config = {
        "state_dir": str(tmp / "state"),
        "temporal": {"address": server.address, "task_queue": "record"},
        "database": {"url": database_url},
        "budgets": {"heartbeat_interval_ms": 1000},
        "pixiv": {"replay_min_interval_ms": 2500},
        "reconcile_interval_ms": 500,
        "routes": {
            "out": {"kind": "directory", "path": str(tmp / "out")},
            "held": {"kind": "webhook", "url": f"{held.url}/hook", "secret": "whsec_" + "cmVjb3JkLWhpc3Rvcmllcy0xMg=="},
        },
        "targets": [
            {"id": "demo", "query": {"tags": ["オリジナル"]}, "routes": ["out"]},
            {"id": "demo2", "query": {"tags": ["風景"]}, "routes": ["out"], "accept_jobs": False},
            {"id": "held", "query": {"tags": ["風景"]}, "routes": ["held"], "accept_jobs": False},
        ],
        "schedules": [{"id": "nightly", "cron": ["0 3 * * *"], "timezone": "UTC", "target_ids": ["demo", "demo2"]}],
    }
    path = tmp / "curaflow.toml"
    path.write_text(tomli_w.dumps(config))
    settings = load_settings(path)
    client = await connect(server.address)
    pool = await create_pool(database_url, min_size=1, max_size=4)
    await migrate(pool)
    admitter = Admitter(settings, pool, client)
    ids: dict[str, str] = {}

    def task(key: str, tags: list[str], **extra: object) -> dict[str, object]:
        return {
            "protocol_version": "1",
            "job_type": "candidate_search",
            "idempotency_key": key,
            "params": {"query": {"tags": tags}, "target_id": "demo"},
            **extra,
        }

    try:
        # cancelled before any worker runs it: the signal arrives with the first task
        ids["job_cancelled"] = (await admitter.admit(task("rec-cancel", ["オリジナル"]))).job_id
        await client.get_workflow_handle(ids["job_cancelled"]).signal("cancel", CancelRequest())
        # a consumer cancel recorded in the ledger before the workflow starts
        unstarted = Admitter(settings, pool, None)
        ids["job_cancel_in_ledger"] = (await unstarted.admit(task("rec-ledger-cancel", ["オリジナル"]))).job_id
        await pool.execute(
            "UPDATE jobs SET cancel_requested_at = created_at, cancel_reason = 'cancelled_by_consumer'"
            " WHERE job_id = $1",
            ids["job_cancel_in_ledger"],
        )
        await admitter.start(ids["job_cancel_in_ledger"])

        stop = asyncio.Event()
        worker = asyncio.create_task(run_worker(settings, stop))
        try:
            ids["job_succeeded"] = (await admitter.admit(task("rec-ok", ["オリジナル"]))).job_id
            ids["job_no_candidate"] = (await admitter.admit(task("rec-none", ["no-such-tag-anywhere"]))).job_id
            # the rate gate spaces source requests 2.5 s apart: the deadline fires in the fetch
            ids["job_deadline"] = (await admitter.admit(task("rec-deadline", ["風景"], deadline_ms=2000))).job_id
            occ = occurrence_input(settings, settings.schedules[0]).model_copy(
                update={"scheduled_at_ms": int(datetime(2025, 1, 1, 3, 0, tzinfo=UTC).timestamp() * 1000)}
            )
            ids["scheduled_occurrence"] = "nightly@occurrence-recorded"
            trampoline = await client.start_workflow(
                "ScheduledJobWorkflow", occ, id=ids["scheduled_occurrence"], task_queue="record"
            )
            result = await trampoline.result()
            ids["scheduled_job"] = result["job_id"]
            from curaflow.jobs.submit import start_job

            handle = await start_job(client, task("rec-temporal", ["オリジナル"]), task_queue="record")
            ids["job_temporal_client"] = handle.id
            # A run another client adds under an ended job's id (Temporal's default reuse
            # policy): it only reports the job (the ``reporting-run`` patch).
            reported = task("rec-reporting", ["オリジナル"])
            first = await start_job(client, reported, task_queue="record")
            await first.result()
            ids["job_reporting_run"] = first.id
            await client.start_workflow("JobWorkflow", reported, id=first.id, task_queue="record")
            ids["job_refused_input"] = "demo@manual-rec-no-input"
            await client.start_workflow("JobWorkflow", id=ids["job_refused_input"], task_queue="record")
            ids["job_cancel_two_targets"] = await cancel_after_first_delivery(settings, client, pool)
            ids["event_push"] = f"push-events:{ids['job_succeeded']}"
            await client.start_workflow(
                "EventPushWorkflow", PushInput(job_id=ids["job_succeeded"]), id=ids["event_push"], task_queue="record"
            )
            for name, wid in ids.items():
                try:
                    await asyncio.wait_for(client.get_workflow_handle(wid).result(), timeout=60)
                except TimeoutError:
                    raise
                except Exception as err:  # noqa: BLE001 - cancelled/failed runs are recorded too
                    print(f"{name}: ended with {type(err).__name__}")
        finally:
            stop.set()
            await worker
        # A worker without request spacing: the download ends before the progress signal is due.
        quick_path = tmp / "curaflow-quick.toml"
        quick_path.write_text(tomli_w.dumps({**config, "pixiv": {"replay_min_interval_ms": 0}}))
        quick = load_settings(quick_path)
        await asyncio.sleep(3)  # past the slot the spaced gate handed out last
        stop = asyncio.Event()
        worker = asyncio.create_task(run_worker(quick, stop))
        try:
            ids["job_quick"] = (await Admitter(quick, pool, client).admit(task("rec-quick", ["オリジナル"]))).job_id
            await asyncio.wait_for(client.get_workflow_handle(ids["job_quick"]).result(), timeout=60)
        finally:
            stop.set()
            await worker
        OUT.mkdir(parents=True, exist_ok=True)
        for name, wid in ids.items():
            history = await client.get_workflow_handle(wid).fetch_history()
            data = without_stack_traces(json.loads(history.to_json()))
            (OUT / f"{name}_{suffix}.json").write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
            print(f"wrote tests/histories/{name}_{suffix}.json ({len(data['events'])} events, workflow {wid})")
    finally:
        await pool.close()
        await held.stop()
        server.stop()
        if pg is not None:
            pg.stop()
    return ids


async def cancel_after_first_delivery(settings: Any, client: Any, pool: Any) -> str:
    """Start a job of the targets ``demo`` and ``held`` and cancel it (the ``cancel``
    signal) once ``demo`` is submitted and ``held``'s send is out (its receiver never answers)."""
    from curaflow.domain.messages import JobInput
    from curaflow.ledger.db import now_ms
    from curaflow.ledger.jobs import NewJob, insert_job, mark_workflow_started
    from curaflow.schedules.admit import target_spec
    from curaflow.temporal.connection import start_job_workflow

    created = now_ms()
    targets = [t for t in settings.targets if t.id in ("demo", "held")]
    inp = JobInput(
        job_id="nightly@cancel-two-targets",
        plan_id="nightly",
        schedule_id="nightly",
        trigger="schedule",
        created_at_ms=created,
        deadline_at_ms=created + 600_000,
        targets=[target_spec(settings, t) for t in targets],
        budgets=settings.budgets_model(),
        source_task_queues=settings.source_task_queues(),
    )
    async with pool.acquire() as conn:
        await insert_job(conn, NewJob(job_input=inp))
    await start_job_workflow(client, inp, settings.temporal.task_queue)
    async with pool.acquire() as conn:
        await mark_workflow_started(conn, inp.job_id)
    for _ in range(600):
        state = await pool.fetchval("SELECT state FROM cells WHERE job_id = $1 AND target_id = 'demo'", inp.job_id)
        if state == "submitted":
            break
        await asyncio.sleep(0.05)
    await client.get_workflow_handle(inp.job_id).signal("cancel", CancelRequest())
    return inp.job_id


def never_answers() -> Any:
    """An app that holds every POST for an hour (a receiver that never answers)."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    async def hold(request: Request) -> Response:
        await asyncio.sleep(3600)
        return Response(status_code=200)

    return Starlette(routes=[Route("/hook", hold, methods=["POST"])])


def without_stack_traces(node: Any) -> Any:
    """``node`` with every failure's ``stackTrace`` emptied: it names the recording
    machine's paths, and replay never reads it."""
    if isinstance(node, dict):
        return {k: ("" if k == "stackTrace" else without_stack_traces(v)) for k, v in node.items()}
    if isinstance(node, list):
        return [without_stack_traces(v) for v in node]
    return node


def main() -> None:
    """Record every history into ``tests/histories/`` (``--suffix SUFFIX``, default today's date)."""
    suffix = datetime.now(UTC).strftime("%Y%m%d")
    if len(sys.argv) == 3 and sys.argv[1] == "--suffix":
        suffix = sys.argv[2]
    with tempfile.TemporaryDirectory(prefix="curaflow-record-") as tmp:
        asyncio.run(record(Path(tmp), suffix))


if __name__ == "__main__":
    main()
