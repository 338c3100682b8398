"""One classification of the ledger's errors: every way PostgreSQL can be unreachable,
hung, restarting or out of resources is 503 ``ledger_unavailable`` with ``Retry-After``;
a bug stays a 500 (:func:`curaflow.ledger.db.is_unavailable`)."""

from __future__ import annotations

import ssl

import asyncpg
import httpx
import pytest
from structlog.testing import capture_logs

from curaflow.api.app import create_app
from curaflow.config import Settings
from curaflow.ledger.db import is_unavailable

X = asyncpg.exceptions

OUTAGES: list[BaseException] = [
    # what a SIGKILL / SIGSTOP of PostgreSQL mid-request was seen to raise
    X.InternalClientError("cannot switch to state 12; another operation is in progress"),
    X.ProtocolError("unexpected message"),
    X.OutdatedSchemaCacheError("cached statement plan is invalid due to a database schema or configuration change"),
    X.TargetServerAttributeNotMatched("None of the hosts match the target attribute requirement"),
    X.InterfaceError("connection is closed"),
    X.InterfaceError("cannot perform operation: another operation is in progress"),
    X.InterfaceError("pool is closing"),
    X.ConnectionDoesNotExistError("connection was closed in the middle of operation"),
    X.ConnectionFailureError("connection failure"),
    X.ClientCannotConnectError("cannot connect"),
    X.ConnectionRejectionError("rejected"),
    X.ProtocolViolationError("protocol violation"),
    X.TransactionResolutionUnknownError("unknown"),
    X.CannotConnectNowError("the database system is starting up"),
    X.AdminShutdownError("terminating connection due to administrator command"),
    X.CrashShutdownError("terminating connection because of crash of another server process"),
    X.DatabaseDroppedError("database dropped"),
    X.IdleSessionTimeoutError("terminating connection due to idle-session timeout"),
    X.QueryCanceledError("canceling statement due to statement timeout"),
    X.TooManyConnectionsError("sorry, too many clients already"),
    X.OutOfMemoryError("out of memory"),
    X.DiskFullError("could not extend file"),
    X.PostgresIOError("could not read block"),
    X.IdleInTransactionSessionTimeoutError("terminating connection due to idle-in-transaction timeout"),
    X.TransactionTimeoutError("terminating connection due to transaction timeout"),
    # PostgreSQL rolled the transaction back because of another one: the same call may succeed
    X.SerializationError("could not serialize access due to concurrent update"),
    X.DeadlockDetectedError("deadlock detected"),
    X.StatementCompletionUnknownError("statement completion unknown"),
    X.TransactionRollbackError("transaction rollback"),
    # a failover's standby refusing a write; a lock_timeout (2026-12-06)
    X.ReadOnlySQLTransactionError("cannot execute UPDATE in a read-only transaction"),
    X.LockNotAvailableError("canceling statement due to lock timeout"),
    ConnectionRefusedError(111, "Connection refused"),
    ConnectionResetError(104, "Connection reset by peer"),
    BrokenPipeError(32, "Broken pipe"),
    OSError(113, "No route to host"),
    TimeoutError(),
    TimeoutError(),
    ssl.SSLError("decryption failed or bad record mac"),
]

NOT_OUTAGES: list[BaseException] = [
    X.UniqueViolationError("duplicate key value violates unique constraint"),
    X.TransactionIntegrityConstraintViolationError("a deferred constraint refused at commit"),
    X.PostgresSyntaxError("syntax error"),
    X.UndefinedColumnError("column does not exist"),
    X.DataError("invalid input"),
    X.ClientConfigurationError("invalid DSN"),
    X.UnsupportedServerFeatureError("unsupported"),
    RuntimeError("a bug"),
    KeyError("a bug"),
    ValueError("a bug"),
]


@pytest.mark.parametrize("err", OUTAGES, ids=lambda e: type(e).__name__)
def test_every_outage_is_the_ledger_being_unavailable(err: BaseException) -> None:
    assert is_unavailable(err)
    wrapped = RuntimeError("admission failed")
    wrapped.__cause__ = err
    assert is_unavailable(wrapped)  # raised ``from`` it


@pytest.mark.parametrize("err", NOT_OUTAGES, ids=lambda e: type(e).__name__)
def test_a_bug_or_a_refused_statement_is_not_an_outage(err: BaseException) -> None:
    assert not is_unavailable(err)


@pytest.mark.parametrize(
    "err",
    [OUTAGES[0], X.ConnectionDoesNotExistError("closed"), X.TooManyConnectionsError("too many"), OUTAGES[-1]],
    ids=lambda e: type(e).__name__,
)
async def test_the_api_answers_an_outage_503_with_retry_after_and_a_bug_500(err: BaseException) -> None:
    app = create_app(Settings())

    @app.get("/outage-probe/{job_id}")
    async def broken(job_id: str) -> None:
        raise err

    @app.get("/bug-probe/{job_id}")
    async def bug(job_id: str) -> None:
        raise RuntimeError("a bug")

    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)  # no lifespan: no database needed
    async with httpx.AsyncClient(transport=transport, base_url="http://api") as http:
        outage = await http.get("/outage-probe/j")
        failed = await http.get("/bug-probe/j")
    assert outage.status_code == 503, outage.text
    assert outage.headers["retry-after"] == "5"
    assert outage.json()["error"]["retryable"] is True
    assert outage.json()["error"]["detail"] == {"reason": "ledger_unavailable"}
    assert failed.status_code == 500


async def test_a_failed_read_is_not_logged_as_a_rejected_job() -> None:
    """``schedule.job_rejected`` names a refused admission; a failed read or cancel is a failed request."""
    app = create_app(Settings())
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    with capture_logs() as logs:
        async with httpx.AsyncClient(transport=transport, base_url="http://api") as http:
            read = await http.get("/jobs/some-job")  # no token: 401 (or 503 with no token configured)
            admission = await http.post("/jobs", json={})
    assert read.status_code >= 400 and admission.status_code >= 400
    by_path: dict[tuple[str, str], dict[str, object]] = {}
    for entry in logs:
        if "http_status" in entry:
            by_path.setdefault((entry["method"], entry["path"]), entry)  # the outcome line comes first
    assert by_path[("GET", "/jobs/some-job")]["event"] == "api.request_failed"
    assert by_path[("GET", "/jobs/some-job")]["stage"] == "job lookup failed"
    assert by_path[("POST", "/jobs")]["event"] == "schedule.job_rejected"
