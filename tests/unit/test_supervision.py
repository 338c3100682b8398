"""The supervision rule (:mod:`curaflow.observability.supervision`), on plain asyncio loops with short bounds."""

from __future__ import annotations

import asyncio
from pathlib import Path

import asyncpg
import pytest
from prometheus_client import REGISTRY
from temporalio.service import RPCError, RPCStatusCode

from curaflow.observability.supervision import Beat, LoopState, SupervisionPolicy, Supervisor
from curaflow.process.refusals import refused_setting
from tests.support import eventually

QUICK: dict[str, float] = {"timeout_s": 5.0, "interval_s": 0.005}  # the loops here run in milliseconds
FAST = SupervisionPolicy(initial_backoff_s=0.01, max_backoff_s=0.04, fatal_after_s=0.3)


def errors(loop: str) -> float:
    return REGISTRY.get_sample_value("curaflow_background_errors_total", {"loop": loop}) or 0.0


def test_backoff_doubles_up_to_its_cap() -> None:
    policy = SupervisionPolicy(initial_backoff_s=0.5, max_backoff_s=30.0)
    assert [policy.backoff(n) for n in range(1, 9)] == [0.5, 1, 2, 4, 8, 16, 30, 30]


def test_backoff_is_its_cap_at_any_count_of_failures() -> None:
    # A loop failing for hours under a long fatal_after_ms: 0.5 * 2**1999 is no float
    # (OverflowError in the supervisor's own restart).
    policy = SupervisionPolicy(initial_backoff_s=0.5, max_backoff_s=30.0, fatal_after_s=10 * 24 * 3600)
    assert [policy.backoff(n) for n in (1_025, 2_000, 2**31)] == [30, 30, 30]


async def test_any_exception_is_survived_counted_and_reported_until_the_loop_recovers() -> None:
    kinds: list[BaseException] = [
        asyncpg.InterfaceError("connection is closed"),
        asyncpg.exceptions.InternalClientError("protocol state"),
        asyncpg.exceptions.ConnectionDoesNotExistError("closed in the middle of operation"),
        RPCError("frontend unavailable", RPCStatusCode.UNAVAILABLE, b""),
        KeyError("a bug"),
    ]
    stop = asyncio.Event()
    sup = Supervisor(stop, SupervisionPolicy(initial_backoff_s=0.01, max_backoff_s=0.04, fatal_after_s=60))
    runs = 0
    checks_while_failing: list[dict[str, object]] = []

    async def body(beat: Beat) -> None:
        nonlocal runs
        runs += 1
        if kinds:
            if runs > 1:
                checks_while_failing.append(sup.checks()["loop:unit-any"])
            raise kinds.pop(0)
        beat.ok("fine")
        await stop.wait()

    before = errors("unit-any")
    sup.loop("unit-any", body)
    await eventually(lambda: runs == 6 and sup.checks()["loop:unit-any"]["ok"] is True, **QUICK)

    assert errors("unit-any") - before == 5
    assert all(c["ok"] is False and "failing" in str(c["detail"]) for c in checks_while_failing)
    assert sup.checks()["loop:unit-any"] == {"ok": True, "detail": "fine"}
    assert sup.failure is None
    stop.set()
    await sup.close()


async def test_a_loop_that_does_not_recover_fails_the_process_once() -> None:
    stop = asyncio.Event()
    reasons: list[str] = []
    sup = Supervisor(stop, FAST, on_fatal=reasons.append)

    async def body(beat: Beat) -> None:
        raise OSError("connection refused")

    sup.loop("unit-down", body)
    await eventually(lambda: bool(reasons), **QUICK)
    await asyncio.sleep(0.1)

    assert len(reasons) == 1 and "unit-down has not recovered" in reasons[0] and "OSError" in reasons[0]
    assert sup.failure == reasons[0]
    assert sup.checks()["loop:unit-down"]["ok"] is False
    await sup.close()


async def test_without_a_fatal_handler_the_loop_keeps_trying() -> None:
    stop = asyncio.Event()
    sup = Supervisor(stop, FAST)
    runs = 0

    async def body(beat: Beat) -> None:
        nonlocal runs
        runs += 1
        if runs < 15:
            raise OSError("down")
        beat.ok()
        await stop.wait()

    sup.loop("unit-keeps", body)
    # fourteen failures, each logged with its traceback: on a loaded machine that alone can
    # take seconds, so this wait is longer than QUICK's
    await eventually(lambda: sup.checks()["loop:unit-keeps"]["ok"] is True, timeout_s=30, interval_s=0.005)

    assert sup.failure is not None  # logged as unrecoverable, yet nobody could restart the process
    stop.set()
    await sup.close()


async def test_a_non_fatal_loop_never_fails_the_process() -> None:
    stop = asyncio.Event()
    reasons: list[str] = []
    sup = Supervisor(stop, FAST, on_fatal=reasons.append)

    async def body(beat: Beat) -> None:
        raise RPCError("unavailable", RPCStatusCode.UNAVAILABLE, b"")

    before = errors("unit-optional")
    sup.loop("unit-optional", body, fatal=False)
    # failing for longer than fatal_after_s (0.3 s), and at least three times: on a loaded
    # machine the retries come later, so wait for both rather than for a fixed time
    await asyncio.sleep(0.6)
    await eventually(lambda: errors("unit-optional") - before >= 3, timeout_s=10, what="three failed runs")

    assert reasons == [] and sup.failure is None
    await sup.close()


async def test_a_body_that_returns_while_the_process_runs_is_a_failure_unless_finite() -> None:
    stop = asyncio.Event()
    sup = Supervisor(stop, SupervisionPolicy(initial_backoff_s=0.01, max_backoff_s=0.01, fatal_after_s=60))
    runs = {"endless": 0, "finite": 0}

    async def endless(beat: Beat) -> None:
        runs["endless"] += 1
        beat.ok()

    async def finite(beat: Beat) -> None:
        runs["finite"] += 1
        beat.ok()

    before = errors("unit-returns")
    sup.loop("unit-returns", endless)
    sup.loop("unit-finite", finite, finite=True)
    await eventually(lambda: runs["endless"] >= 3, **QUICK)

    assert errors("unit-returns") - before >= 2
    assert runs["finite"] == 1 and sup.checks()["loop:unit-finite"] == {"ok": True}
    stop.set()
    await sup.close()


async def test_every_bounds_a_hung_tick_and_recovers() -> None:
    stop = asyncio.Event()
    sup = Supervisor(stop, SupervisionPolicy(initial_backoff_s=0.01, max_backoff_s=0.01, fatal_after_s=60))
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        ticks += 1
        if ticks == 1:
            await asyncio.sleep(3600)  # a query on a half-open connection

    before = errors("unit-hung")
    sup.every("unit-hung", 0.01, tick, timeout_s=0.1)
    await eventually(lambda: ticks >= 3, **QUICK)

    assert errors("unit-hung") - before == 1
    stop.set()
    await sup.close()


async def test_a_critical_task_that_ends_fails_the_process_at_once() -> None:
    stop = asyncio.Event()
    reasons: list[str] = []
    sup = Supervisor(stop, SupervisionPolicy(fatal_after_s=3600), on_fatal=reasons.append)

    async def worker_run() -> None:
        await asyncio.sleep(0.05)
        raise RuntimeError("Worker failed: fatal poll error")

    sup.critical("unit-worker", worker_run())
    await eventually(lambda: bool(reasons), **QUICK)

    assert "unit-worker RuntimeError: Worker failed" in reasons[0]
    assert sup.checks()["loop:unit-worker"]["ok"] is False
    await sup.close()


async def test_a_critical_task_ending_at_shutdown_is_no_failure() -> None:
    stop = asyncio.Event()
    reasons: list[str] = []
    sup = Supervisor(stop, on_fatal=reasons.append)

    async def worker_run() -> None:
        await stop.wait()

    sup.critical("unit-worker-ok", worker_run())
    await asyncio.sleep(0.01)
    assert sup.checks()["loop:unit-worker-ok"] == {"ok": True}
    stop.set()
    await asyncio.sleep(0.01)

    assert reasons == [] and sup.failure is None
    await sup.close()


def test_loop_names_are_unique() -> None:
    async def run() -> None:
        sup = Supervisor(asyncio.Event())

        async def body(beat: Beat) -> None:
            await asyncio.sleep(3600)

        sup.loop("unit-dup", body)
        with pytest.raises(ValueError):
            sup.loop("unit-dup", body)
        await sup.close()

    asyncio.run(run())


async def test_one_failed_tick_of_a_loop_ticking_less_often_than_fatal_after_is_survived() -> None:
    # The worker's retention pass ticks every hour (retention.interval_ms) under a fatal_after_ms
    # of 5 minutes: one pass failing on a blip (a lock timeout, a failover) came an hour after
    # the last ok(), and the worker exited 3 on that one failure. The bound counts from when
    # the failures began; a loop failing on and on still fails the process once past it.
    stop = asyncio.Event()
    reasons: list[str] = []
    sup = Supervisor(stop, FAST, on_fatal=reasons.append)  # fatal after 0.3 s
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        ticks += 1
        if ticks == 2:
            raise asyncpg.exceptions.LockNotAvailableError("canceling statement due to lock timeout")

    sup.every("unit-hourly", 0.6, tick)  # ticks twice as far apart as fatal_after_s
    await eventually(lambda: ticks >= 4, timeout_s=10, what="the ticks after the failed one")

    assert reasons == [] and sup.failure is None
    assert sup.checks()["loop:unit-hourly"]["ok"] is True
    stop.set()
    await sup.close()


async def test_a_loop_failing_on_and_on_after_a_long_healthy_wait_fails_past_the_bound() -> None:
    stop = asyncio.Event()
    reasons: list[str] = []
    sup = Supervisor(stop, FAST, on_fatal=reasons.append)
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        ticks += 1
        if ticks >= 2:
            raise OSError("connection refused")

    sup.every("unit-hourly-down", 0.6, tick)
    await eventually(lambda: bool(reasons), timeout_s=10, what="the process failed")

    assert len(reasons) == 1 and "unit-hourly-down has not recovered" in reasons[0]
    assert ticks >= 3  # the first failure alone did not end it: its retries ran past the bound
    await sup.close()


def _namespace_not_found() -> RPCError:
    from temporalio.api.errordetails.v1 import NamespaceNotFoundFailure

    return _with_detail(
        RPCStatusCode.NOT_FOUND, "Namespace prod is not found.", NamespaceNotFoundFailure(namespace="prod")
    )


def _namespace_not_active() -> RPCError:
    """What the Temporal server answers on a cluster where the namespace is a standby
    (``serviceerror.NamespaceNotActive``: ``FAILED_PRECONDITION`` with the detail)."""
    from temporalio.api.errordetails.v1 import NamespaceNotActiveFailure

    message = "Namespace: prod is active in cluster: east, while current cluster west is a standby cluster."
    detail = NamespaceNotActiveFailure(namespace="prod", current_cluster="west", active_cluster="east")
    return _with_detail(RPCStatusCode.FAILED_PRECONDITION, message, detail)


def _with_detail(status: RPCStatusCode, message: str, detail: object) -> RPCError:
    from google.protobuf.any_pb2 import Any as AnyDetail
    from google.rpc.status_pb2 import Status as GrpcStatus

    packed = AnyDetail()
    packed.Pack(detail)  # type: ignore[arg-type]
    raw = GrpcStatus(code=int(status), message=message, details=[packed])
    return RPCError(message, status, raw.SerializeToString())


@pytest.mark.parametrize(
    ("error", "status", "setting"),
    [
        (RPCError("request unauthorized", RPCStatusCode.PERMISSION_DENIED, b""), 2, "TEMPORAL_API_KEY"),
        (RPCError("API key expired", RPCStatusCode.UNAUTHENTICATED, b""), 2, "TEMPORAL_TLS_*"),
        (_namespace_not_found(), 2, "TEMPORAL_NAMESPACE / temporal.namespace"),
        (
            asyncpg.exceptions.InvalidPasswordError('password authentication failed for user "curaflow"'),
            2,
            "DATABASE_URL / database.url",
        ),
        (asyncpg.exceptions.InvalidCatalogNameError('database "curaflow" does not exist'), 2, "DATABASE_URL"),
        (RPCError("frontend unavailable", RPCStatusCode.UNAVAILABLE, b""), 3, None),
        (RPCError("not found", RPCStatusCode.NOT_FOUND, b""), 3, None),  # no namespace's detail: says nothing of it
        (RPCError("internal", RPCStatusCode.INTERNAL, b""), 3, None),
        # A standby of a replicated namespace: a failover makes it active here; Temporal asks
        # for workers on every cluster (docs/operations.md, "Exit status"): no configuration's.
        (_namespace_not_active(), 3, None),
        (OSError("connection refused"), 3, None),
    ],
)
async def test_a_loop_that_does_not_recover_on_a_refusal_of_the_configuration_fails_the_process_2(
    error: Exception, status: int, setting: str | None
) -> None:
    """The reconciler's tick refused by Temporal for this process's access (a permission, an
    expired API key), or for a namespace that is not there, or by PostgreSQL for its login
    or database, failed the loop as an outage and the process exited 3, "restart me": its
    supervisor restarted it into the same refusal, every ``supervision.fatal_after_ms``.
    No restart changes a configuration: the process exits 2 (as one that cannot start),
    and the reason says so; an outage, a refusal of one request and a bug stay 3."""
    stop = asyncio.Event()
    reasons: list[str] = []
    sup = Supervisor(stop, FAST, on_fatal=reasons.append, refused_setting=refused_setting)

    async def body(beat: Beat) -> None:
        raise error

    sup.loop("unit-refused", body)
    await eventually(lambda: bool(reasons), **QUICK)
    assert sup.exit_status == status
    assert ("a restart alone does not help" in reasons[0]) is (status == 2), reasons[0]
    # The reason ends with the setting to change (until 2026-12-08 it named none).
    assert setting is None or reasons[0].split("a restart alone does not help: fix ")[1].find(setting) >= 0, reasons[0]
    await sup.close()


def test_a_worker_exits_with_the_status_of_its_loops_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    from curaflow.config import Settings
    from curaflow.observability.supervision import EXIT_CONFIGURATION, LoopFailed
    from curaflow.process import worker

    async def refused(settings: Settings) -> None:
        raise LoopFailed("reconciler has not recovered …", status=EXIT_CONFIGURATION)

    monkeypatch.setattr(worker, "run_worker", refused)
    status, message = worker.run_process(Settings())
    assert status == 2 and message is not None and "reconciler" in message


@pytest.mark.parametrize("how", ["loop", "critical"])
async def test_the_reason_of_a_failure_is_one_line_whatever_the_errors_message(how: str) -> None:
    """PostgreSQL's messages carry their DETAIL on a line of their own (``database "x" does
    not exist`` / ``DETAIL:  It seems to have just been dropped or renamed.``): a process's
    last words on stderr were two lines, the setting to fix on the second, and ``/ready``'s
    detail held the line break too."""
    stop = asyncio.Event()
    reasons: list[str] = []
    sup = Supervisor(stop, FAST, on_fatal=reasons.append, refused_setting=refused_setting)
    dropped = asyncpg.exceptions.InvalidCatalogNameError(
        'database "curaflow" does not exist\nDETAIL:  It seems to have just been dropped or renamed.'
    )

    async def body(beat: Beat) -> None:
        raise dropped

    if how == "loop":
        state = sup.loop("unit-dropped", body)
    else:
        state = sup.critical("unit-dropped", body(Beat(LoopState(name="unused", fatal=True))))
    await eventually(lambda: bool(reasons), **QUICK)
    assert "\n" not in reasons[0] and "dropped or renamed" in reasons[0], reasons[0]
    assert reasons[0].endswith("fix DATABASE_URL / database.url"), reasons[0]
    assert state.last_error is not None and "\n" not in state.last_error, state.last_error
    await sup.close()


@pytest.mark.parametrize(
    "error",
    [
        asyncpg.exceptions.InvalidCatalogNameError('database "postgres" does not exist'),
        asyncpg.exceptions.InvalidAuthorizationSpecificationError('role "postgres" is not permitted to log in'),
    ],
)
async def test_the_dev_stacks_refusal_by_its_own_postgresql_names_its_state_directory(
    tmp_path: Path, error: Exception
) -> None:
    """``curaflow dev`` runs its own PostgreSQL in ``<state_dir>/pg`` and reads no
    ``DATABASE_URL``: its reason named ``DATABASE_URL / database.url`` (2026-12-08). It names
    the data directory, what to restore there, and that deleting it starts over."""
    from curaflow.process.refusals import embedded_refused_setting

    stop = asyncio.Event()
    reasons: list[str] = []
    pgdata = tmp_path / "state" / "pg"
    sup = Supervisor(stop, FAST, on_fatal=reasons.append, refused_setting=embedded_refused_setting(pgdata))

    async def body(beat: Beat) -> None:
        raise error

    sup.loop("unit-dev-refused", body)
    await eventually(lambda: bool(reasons), **QUICK)
    assert sup.exit_status == 2
    assert "DATABASE_URL" not in reasons[0] and "database.url" not in reasons[0], reasons[0]
    fix = reasons[0].split("a restart alone does not help: fix ")[1]
    assert str(pgdata) in fix and "delete" in fix, reasons[0]
    await sup.close()
