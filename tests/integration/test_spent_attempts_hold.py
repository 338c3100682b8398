"""A work whose cell's last fetch attempt failed on the source's failure is held back briefly.

The ``fetch`` activity runs in the test process (``ActivityEnvironment``, its attempt number
and retry policy set as Temporal would) with a worker's real dependencies (the PostgreSQL
ledger, the artifact store); the store's download raises the failure under test. Until
2026-12-07 such a failure (a file cut short, a 5xx or a timeout every attempt) remembered
nothing: the cell ended ``download_failed``, its intent was released and the target's next
job bound the same work first again, for ever. Now the last attempt the cell gets holds the
work back for ``pixiv.unrecognised_hold_ms`` (counted, kind ``attempts_spent``); an earlier
attempt, an account's failure and the job's deadline cutting the call hold nothing. The
job-level case: ``tests/integration/test_unusable_works.py``
(``test_a_work_whose_file_never_arrives_whole_…``).
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

import pytest
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError

from activities.fetch import FetchActivity
from curaflow.domain.messages import FetchInput, TargetSpec
from curaflow.domain.models import CandidateReport
from curaflow.domain.reasons import TerminalReason
from curaflow.ledger import cells
from curaflow.ledger import remembered as memory
from curaflow.outbound.errors import time_limit_error
from curaflow.sources.errors import SourceError
from curaflow.sources.pixiv.client import parse_work
from curaflow.sources.pixiv.replay.data import recorded_works
from tests.deps_support import deps, unrecognised_count
from tests.support import Stack, job_env, ledger_job

pytestmark = pytest.mark.integration
__all__ = ["deps"]  # the module's fixture (tests.deps_support)

KIND = "attempts_spent"


async def bound_job(stack: Stack, opened: Any, *, deadline_in_ms: int = 3_600_000) -> tuple[FetchInput, str]:
    """A job whose cell is bound to a work: (the fetch's input, the work's id)."""
    settings = stack.settings
    target = TargetSpec(target_id="demo", routes=settings.route_refs(settings.targets[0]))
    job_id = await ledger_job(opened.pool, target, label="spent", deadline_in_ms=deadline_in_ms)
    work = parse_work(recorded_works()[0])
    async with opened.pool.acquire() as conn, conn.transaction():
        await cells.bind_work(conn, job_id, target, [work], CandidateReport())
    return FetchInput(job_id=job_id, target=target, heartbeat_interval_ms=1000), work.work_id


async def fetch_failing(
    opened: Any,
    inp: FetchInput,
    raised: BaseException,
    *,
    attempt: int,
    maximum_attempts: int,
    initial_interval: timedelta = timedelta(seconds=1),
    monkeypatch: pytest.MonkeyPatch,
) -> ApplicationError:
    """Attempt ``attempt`` of a step scheduled with ``maximum_attempts``, its download raising ``raised``."""

    async def download(*args: Any, **kw: Any) -> Any:
        raise raised

    monkeypatch.setattr(opened.store, "fetch", download)
    env = job_env(inp.job_id)
    env.info = dataclasses.replace(
        env.info,
        attempt=attempt,
        retry_policy=RetryPolicy(
            initial_interval=initial_interval, maximum_interval=timedelta(minutes=5), maximum_attempts=maximum_attempts
        ),
    )
    with pytest.raises(ApplicationError) as failed:
        await env.run(FetchActivity(opened).fetch, inp)
    return failed.value


async def held(opened: Any, work_id: str, job_id: str) -> list[memory.Unavailable]:
    return [r for r in await memory.list_unavailable(opened.pool) if r.work_id == work_id and r.job_id == job_id]


SOURCES_FAILURES = {
    "file-cut-short": SourceError(TerminalReason.DOWNLOAD_FAILED, "image incomplete after 512 bytes"),
    "image-host-5xx": SourceError(TerminalReason.DOWNLOAD_FAILED, "image HTTP 503", status=503),
    "download-timeout": SourceError(TerminalReason.DOWNLOAD_TIMEOUT, "image timeout"),
    "ugoira-metadata-5xx": SourceError(TerminalReason.REMOTE_HTTP_ERROR, "HTTP 502", status=502),
    "network": SourceError(TerminalReason.NETWORK_ERROR, "connection reset"),
}


@pytest.mark.parametrize("case", list(SOURCES_FAILURES))
async def test_the_cells_last_fetch_attempt_holds_the_work_back_briefly(
    deps: tuple[Stack, Any], monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    """Attempts 1 and 2 of 3 fail the same way and hold nothing (a blip retried within the
    cell costs nothing); the third, the last, holds the work back for
    ``unrecognised_hold_ms`` (a hold, not the week) and counts it once. The attempt still
    fails as the source's failure, retryable as before: the workflow's budget ends the cell."""
    stack, opened = deps
    inp, work_id = await bound_job(stack, opened)
    before = unrecognised_count(KIND)
    for attempt in (1, 2):
        failure = await fetch_failing(
            opened, inp, SOURCES_FAILURES[case], attempt=attempt, maximum_attempts=3, monkeypatch=monkeypatch
        )
        assert not failure.non_retryable and failure.type == str(SOURCES_FAILURES[case].reason)
        assert await held(opened, work_id, inp.job_id) == []
    assert unrecognised_count(KIND) == before
    failure = await fetch_failing(
        opened, inp, SOURCES_FAILURES[case], attempt=3, maximum_attempts=3, monkeypatch=monkeypatch
    )
    assert failure.type == str(SOURCES_FAILURES[case].reason)
    [row] = await held(opened, work_id, inp.job_id)
    assert row.held and row.until - row.seen_at == stack.settings.pixiv.unrecognised_hold_ms, row
    assert unrecognised_count(KIND) == before + 1


async def test_an_attempt_whose_next_would_come_after_the_deadline_is_the_last(
    deps: tuple[Stack, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The step has attempts left, but Temporal's backoff (60 s) ends past the job's deadline
    (30 s away): the workflow stops at the deadline first, so no attempt follows — and the
    cell ends released as when the attempts are spent. The work is held back here too."""
    stack, opened = deps
    inp, work_id = await bound_job(stack, opened, deadline_in_ms=30_000)
    failure = await fetch_failing(
        opened,
        inp,
        SOURCES_FAILURES["file-cut-short"],
        attempt=1,
        maximum_attempts=10,
        initial_interval=timedelta(seconds=60),
        monkeypatch=monkeypatch,
    )
    assert not failure.non_retryable
    [row] = await held(opened, work_id, inp.job_id)
    assert row.held


@pytest.mark.parametrize(
    "raised",
    [
        SourceError(TerminalReason.RATE_LIMITED, "rate limit", cooldown_s=60),  # the account's: its gate's
        SourceError(TerminalReason.AUTH_FAILED, "invalid_grant", retryable=False),
        SourceError(TerminalReason.ACCOUNT_RESTRICTED, "restricted", retryable=False),
    ],
    ids=["rate-limited", "auth-failed", "account-restricted"],
)
async def test_an_accounts_failure_on_the_last_attempt_holds_nothing(
    deps: tuple[Stack, Any], monkeypatch: pytest.MonkeyPatch, raised: SourceError
) -> None:
    """A rate limit, a refused login, a restriction say nothing of the work: the account's
    gate owns them, and every work of the account would meet them."""
    stack, opened = deps
    inp, work_id = await bound_job(stack, opened)
    before = unrecognised_count(KIND)
    await fetch_failing(opened, inp, raised, attempt=3, maximum_attempts=3, monkeypatch=monkeypatch)
    assert await held(opened, work_id, inp.job_id) == []
    assert unrecognised_count(KIND) == before


async def test_a_call_the_jobs_deadline_cut_holds_nothing(
    deps: tuple[Stack, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """curaflow's own bound is no answer of the host's: the deadline's, never the work's."""
    stack, opened = deps
    inp, work_id = await bound_job(stack, opened)
    cut = SourceError(TerminalReason.DOWNLOAD_TIMEOUT, "image timeout")
    cut.__cause__ = time_limit_error(5.0, True, None, by_deadline=True)
    await fetch_failing(opened, inp, cut, attempt=3, maximum_attempts=3, monkeypatch=monkeypatch)
    assert await held(opened, work_id, inp.job_id) == []
