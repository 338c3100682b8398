"""``curaflow run`` says why a job is not moving: the step Temporal retries, its attempt
and the last failure as the activity reported it.

A newcomer's finding (2026-12-07): with a source that could not be reached (a stored
replay token pointing at a replay that was not running; every search attempt failed
``network_error: pixiv auth: ConnectError``), ``curaflow run`` sat for 10 minutes at
``queued (searching)`` with an empty reason column — only the worker's log named the
error. While it waits, the command asks Temporal's description of the job's workflow
(``pending_activities[].attempt`` / ``.last_failure``) at most once per refresh and shows
one line per retried step under the table, masked and without markup; nothing when no
attempt failed.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from temporalio.api.common.v1 import ActivityType
from temporalio.api.failure.v1 import ApplicationFailureInfo, Failure, TimeoutFailureInfo
from temporalio.api.workflow.v1 import PendingActivityInfo
from temporalio.api.workflowservice.v1 import DescribeWorkflowExecutionResponse
from temporalio.service import RPCError, RPCStatusCode
from typer.testing import CliRunner

from curaflow.cli import run as run_cli
from curaflow.cli.app import app
from curaflow.cli.run import retrying_steps
from curaflow.domain.models import CellSnapshot, JobRecord
from curaflow.observability.secrets import MASK, hold

#: A secret no other test holds (held for the life of the test process).
TOKEN = "rEfr3sh-T0ken-Qx8Lz2KvN4"


def described(*pending: PendingActivityInfo) -> DescribeWorkflowExecutionResponse:
    return DescribeWorkflowExecutionResponse(pending_activities=list(pending))


def failed(step: str, attempt: int, message: str, reason: str | None = "network_error") -> PendingActivityInfo:
    failure = Failure(message=message)
    if reason is not None:
        failure.application_failure_info.CopyFrom(ApplicationFailureInfo(type=reason))
    return PendingActivityInfo(
        activity_id="1", activity_type=ActivityType(name=step), attempt=attempt, last_failure=failure
    )


def test_a_retried_step_is_named_with_its_attempt_and_the_activitys_reason_and_message() -> None:
    lines = retrying_steps(described(failed("search", 3, "pixiv auth: ConnectError")))
    assert lines == ["retrying search (attempt 3): network_error: pixiv auth: ConnectError"]


def test_nothing_is_said_when_no_attempt_failed() -> None:
    first = PendingActivityInfo(activity_id="1", activity_type=ActivityType(name="search"), attempt=1)
    assert retrying_steps(described(first)) == []
    assert retrying_steps(described()) == []


def test_a_message_on_several_lines_is_one_line_and_a_timeout_says_its_message() -> None:
    timeout = Failure(message="activity Heartbeat timeout", timeout_failure_info=TimeoutFailureInfo())
    lost = PendingActivityInfo(
        activity_id="2", activity_type=ActivityType(name="acquire"), attempt=2, last_failure=timeout
    )
    lines = retrying_steps(described(failed("search", 4, "pixiv  auth:\nConnect[b]Error[/b]\n"), lost))
    assert lines == [
        "retrying search (attempt 4): network_error: pixiv auth: Connect[b]Error[/b]",
        "retrying acquire (attempt 2): activity Heartbeat timeout",
    ]


# --- the command, with its services stubbed -------------------------------------------------


class Handle:
    def __init__(self, answers: list[Any]) -> None:
        self.answers = answers

    async def describe(self, **options: Any) -> Any:
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, BaseException):
            raise answer
        return SimpleNamespace(raw_description=answer)


class Client:
    def __init__(self, answers: list[Any]) -> None:
        self.asked: list[str] = []
        self.handle = Handle(answers)

    def get_workflow_handle(self, workflow_id: str) -> Handle:
        self.asked.append(workflow_id)
        return self.handle


class Pool:
    """A ledger whose job is searching for ``polls`` reads, then done."""

    def __init__(self, polls: int) -> None:
        self.reads = 0
        self.polls = polls

    @contextlib.asynccontextmanager
    async def acquire(self) -> AsyncIterator[Pool]:
        yield self

    async def fetchval(self, *args: Any) -> None:
        return None


def record(job_id: str, done: bool) -> JobRecord:
    cell = CellSnapshot(target_id="demo", state="failed" if done else "pending", stage="search")  # type: ignore[arg-type]
    return JobRecord(
        job_id=job_id, plan_id="p", created_at=1, updated_at=1, completed_at=2 if done else None, cells=[cell]
    )


def run_stubbed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, answers: list[Any], polls: int = 3) -> Any:
    client, pool = Client(answers), Pool(polls)

    @contextlib.asynccontextmanager
    async def services(settings: Any, **options: Any) -> AsyncIterator[Any]:
        yield SimpleNamespace(settings=settings, pool=pool, client=client, stack=None)

    class Admitter:
        def __init__(self, *args: Any) -> None:
            pass

        async def admit(self, body: dict[str, Any], trigger: str) -> Any:
            return SimpleNamespace(job_id="demo@manual-cli-1")

    async def load_job(conn: Pool, job_id: str) -> JobRecord:
        conn.reads += 1
        return record(job_id, done=conn.reads > conn.polls)

    @contextlib.contextmanager
    def every_refresh(console: Any, *, transient: bool) -> Iterator[Any]:
        # each refresh printed (a live display into a pipe shows its last one only)
        yield SimpleNamespace(update=console.print)

    monkeypatch.setattr(run_cli, "services", services)
    monkeypatch.setattr(run_cli, "live_progress", every_refresh)
    monkeypatch.setattr(run_cli, "Admitter", Admitter)
    monkeypatch.setattr(run_cli, "load_job", load_job)
    monkeypatch.setattr(run_cli, "POLL_S", 0.0)
    monkeypatch.setattr(run_cli, "RETRY_ASK_S", 0.0)
    monkeypatch.setattr(run_cli, "running_dev_lacks", lambda *args: None)
    monkeypatch.chdir(tmp_path)
    for name in ("CURAFLOW_CONFIG", "TEMPORAL_ADDRESS", "DATABASE_URL", "CURAFLOW_STATE_DIR"):
        monkeypatch.delenv(name, raising=False)
    result = CliRunner().invoke(app, ["run", "--tags", "x"])
    return result, client


def test_the_command_shows_the_retried_step_masked_while_it_waits(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    hold(TOKEN)
    answer = described(failed("search", 3, f"pixiv auth: ConnectError (refresh_token={TOKEN})"))
    result, client = run_stubbed(monkeypatch, tmp_path, [answer])
    output = " ".join(result.output.split())  # the console folds long lines
    assert "retrying search (attempt 3): network_error: pixiv auth: ConnectError" in output, output
    assert TOKEN not in result.output and MASK in output, output
    # asked about this job, at most once per refresh (the last read found it done: not asked)
    assert client.asked and set(client.asked) == {"demo@manual-cli-1"}
    assert len(client.asked) <= 3


def test_the_command_says_nothing_of_retries_when_no_attempt_failed_or_temporal_does_not_answer(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    first = PendingActivityInfo(activity_id="1", activity_type=ActivityType(name="search"), attempt=1)
    refused = RPCError("unavailable", RPCStatusCode.UNAVAILABLE, b"")
    result, client = run_stubbed(monkeypatch, tmp_path, [refused, described(first)])
    assert client.asked, result.output
    assert "retrying" not in result.output, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
