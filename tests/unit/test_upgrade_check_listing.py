"""``upgrade-check`` never answers "job_v1 can be retired" from part of the executions.

``legacy_executions`` examines at most ``limit`` listed executions (10 000: each costs a
history read). Until 2026-12-05 a namespace listing more stopped there silently: every
examined execution held its marker, so the command said "job_v1 can be retired" (exit 0)
having looked at part of them — and an operator deleting ``job_v1`` then would leave the
rest unable to replay. Now a listing cut by the limit is no answer: ``ListingCut``, and
the command says how many it examined and how to narrow the list (exit 1).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import WorkflowHistory
from typer.testing import CliRunner

from curaflow.cli.app import app
from curaflow.temporal import upgrades
from curaflow.temporal.upgrades import ListingCut, legacy_executions, replays_core_v1
from tests.unit.test_replay_histories import HISTORIES, job_history, patches

V3 = next(p for p in HISTORIES if job_history(p) and patches(p) == {"core-v3"})


@dataclass
class _Listed:
    id: str
    run_id: str
    start_time: datetime
    status: Any = None


class _Namespace:
    """A client of a namespace listing ``count`` executions, each started on core v3."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.history = WorkflowHistory.from_json(V3.stem, V3.read_text())
        self.namespace = "jobs"

    async def list_workflows(self, query: str, *, limit: int | None = None) -> AsyncIterator[_Listed]:
        for i in range(self.count if limit is None else min(self.count, limit)):
            yield _Listed(f"job-{i}", f"run-{i}", datetime(2026, 12, 1, tzinfo=UTC))

    def get_workflow_handle(self, workflow_id: str, *, run_id: str) -> Any:
        history = self.history

        class _Handle:
            async def fetch_history(self) -> WorkflowHistory:
                return history

        return _Handle()


async def test_a_listing_within_the_limit_is_an_answer() -> None:
    assert not replays_core_v1(_Namespace(1).history)  # type: ignore[arg-type]
    assert await legacy_executions(_Namespace(3), limit=3) == []  # type: ignore[arg-type]


async def test_a_listing_cut_by_the_limit_is_no_answer() -> None:
    with pytest.raises(ListingCut) as cut:
        await legacy_executions(_Namespace(4), limit=3)  # type: ignore[arg-type]
    assert (cut.value.examined, cut.value.found) == (3, [])


def test_the_command_says_what_it_examined_and_exits_1(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from curaflow.cli import upgrades as cli

    async def connect(settings: Any) -> Any:
        return _Namespace(4)

    async def the_jobs_namespace(settings: Any, client: Any, **kwargs: Any) -> None:
        return None

    async def listing(client: Any, **kwargs: Any) -> list[Any]:
        return await legacy_executions(client, limit=3, **kwargs)

    monkeypatch.setattr("curaflow.temporal.connection.connect_configured", connect)
    monkeypatch.setattr(cli, "not_the_jobs_namespace", the_jobs_namespace)
    monkeypatch.setattr(upgrades, "legacy_executions", listing)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TEMPORAL_ADDRESS", "127.0.0.1:1")
    monkeypatch.delenv("DATABASE_URL", raising=False)

    result = CliRunner().invoke(app, ["upgrade-check"])

    assert result.exit_code == 1, result.output
    assert "can be retired" not in result.output.replace("cannot be retired", "")
    assert "3" in result.output and "--started-before" in result.output, result.output
