"""``POST /jobs`` when PostgreSQL or Temporal answers with an error nobody named: the
consumer gets the protocol's error (retryable flagged right, ``Retry-After`` where a retry
is the answer), nothing is half-written, and a retry of the same key converges on one job
with one run.

Faults are PostgreSQL's and Temporal's own answers: a trigger that makes the real server
raise the SQLSTATE, and the real Temporal client's ``StartWorkflowExecution`` answering
the status (after the start actually happened, for a lost answer).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from temporalio.service import RPCError, RPCStatusCode

from tests.conftest import StackFactory
from tests.support import eventually, short_id

pytestmark = pytest.mark.integration


def config(tmp_path: Path) -> dict[str, object]:
    out = f"out-{short_id()}"
    return {
        "reconcile_interval_ms": 1000,
        "routes": {out: {"kind": "directory", "path": str(tmp_path / "out")}},
        "targets": [{"id": "demo", "routes": [out]}],
    }


@pytest.mark.parametrize(
    "sqlstate",
    [
        "40001",  # serialization_failure
        "40P01",  # deadlock_detected
        "53300",  # too_many_connections
        "57014",  # query_canceled (a statement timeout)
    ],
)
async def test_a_transient_ledger_refusal_is_retryable_and_a_retry_converges(
    make_stack: StackFactory, tmp_path: Path, sqlstate: str
) -> None:
    stack = make_stack(config(tmp_path))
    http = await stack.start_api()
    pool = await stack.ledger()
    key = f"pgfault-{short_id()}"
    fn = f"fault_{short_id()}".replace("-", "_").lower()
    await pool.execute(
        f"""CREATE FUNCTION {fn}() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN IF NEW.idempotency_key = '{key}' THEN
              RAISE EXCEPTION 'injected' USING ERRCODE = '{sqlstate}'; END IF; RETURN NEW; END $$;
            CREATE TRIGGER {fn} BEFORE INSERT ON jobs FOR EACH ROW EXECUTE FUNCTION {fn}();"""
    )
    try:
        refused = await http.post("/jobs", json=stack.task(key=key, target_id="demo"))
    finally:
        await pool.execute(f"DROP TRIGGER {fn} ON jobs; DROP FUNCTION {fn}();")
    assert refused.status_code == 503, refused.text
    assert refused.headers["retry-after"] == "5"
    error = refused.json()["error"]
    assert (error["code"], error["retryable"], error["detail"]["reason"]) == (
        "internal_error",
        True,
        "ledger_unavailable",
    )
    assert await pool.fetchval("SELECT count(*) FROM jobs WHERE idempotency_key = $1", key) == 0
    admitted = await http.post("/jobs", json=stack.task(key=key, target_id="demo"))
    assert admitted.status_code == 202, admitted.text
    assert await pool.fetchval("SELECT count(*) FROM jobs WHERE idempotency_key = $1", key) == 1


def _fail_starts(service: Any, status: RPCStatusCode, *, after_start: bool, answered: list[str]) -> Callable[[], None]:
    """Make ``service.start_workflow_execution`` answer ``status`` (after making the start
    when ``after_start``: the answer lost), noting each answer in ``answered``; returns the undo."""
    real: Callable[..., Awaitable[Any]] = service.start_workflow_execution

    async def failing(req: Any, **kwargs: Any) -> Any:
        answered.append(req.workflow_id)
        if after_start:
            await real(req, **kwargs)
        raise RPCError(f"injected {status.name}", status, b"")

    service.start_workflow_execution = failing
    return lambda: setattr(service, "start_workflow_execution", real)


@pytest.mark.parametrize(
    ("status", "after_start"),
    [
        (RPCStatusCode.RESOURCE_EXHAUSTED, False),
        (RPCStatusCode.UNAVAILABLE, False),
        (RPCStatusCode.DEADLINE_EXCEEDED, True),
        (RPCStatusCode.NOT_FOUND, False),
        (RPCStatusCode.PERMISSION_DENIED, False),
        (RPCStatusCode.UNKNOWN, False),
    ],
    ids=lambda v: getattr(v, "name", str(v)),
)
async def test_a_refused_start_is_answered_and_converges_on_one_run(
    make_stack: StackFactory, tmp_path: Path, status: RPCStatusCode, after_start: bool
) -> None:
    stack = make_stack(config(tmp_path))
    http = await stack.start_api()
    pool = await stack.ledger()
    app = stack.api.app  # type: ignore[union-attr]

    async def connected() -> bool:
        return app.state.admitter.client is not None

    await eventually(connected, timeout_s=30, what="the API's Temporal client")
    client = app.state.admitter.client
    answered: list[str] = []
    undo = _fail_starts(client.workflow_service, status, after_start=after_start, answered=answered)
    key = f"tfault-{short_id()}"
    try:
        first = await http.post("/jobs", json=stack.task(key=key, target_id="demo"))
        assert first.status_code == 202, first.text  # durable in the ledger: admitted
        again = await http.post("/jobs", json=stack.task(key=key, target_id="demo"))
        assert again.status_code == 200 and again.content == first.content
        # both admissions' starts were answered with the fault (the starter runs them after the answer)
        await eventually(lambda: len(answered) >= 2, timeout_s=30, what="the starts answered with the fault")
        assert await pool.fetchval("SELECT workflow_started_at FROM jobs WHERE idempotency_key = $1", key) is None
    finally:
        undo()
    job_id = first.json()["job"]["job_id"]

    async def started() -> bool:
        return await pool.fetchval("SELECT workflow_started_at FROM jobs WHERE job_id = $1", job_id) is not None

    await eventually(started, timeout_s=60, what="the reconciler started the job's workflow")
    runs = [e async for e in client.list_workflows(f"WorkflowId = '{job_id}'")]
    desc = await client.get_workflow_handle(job_id).describe()
    assert desc.id == job_id
    assert len({r.run_id for r in runs} | {desc.run_id}) == 1
    assert await pool.fetchval("SELECT count(*) FROM jobs WHERE idempotency_key = $1", key) == 1
