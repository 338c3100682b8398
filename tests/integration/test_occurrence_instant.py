"""One job per nominal instant of a plan, whatever zone its id was written in.

An occurrence's id is the nominal instant as the plan's local time with its UTC offset
(``nightly@2026-12-06T0300+0100``), so one instant has another id once the plan's time zone
is changed (UTC → Europe/Berlin: ``T0200+0000`` then ``T0300+0100``). A plan whose times
do not depend on its zone (``@every 1h``, or a cron moved with its zone) keeps its instants:
a backfill or a late trigger of a time that ran before the change must converge on the job
it had (DESIGN.md "Scheduled occurrences": one job per nominal minute), not run it again.
Real PostgreSQL; the admission is the ``admit_occurrence`` activity's logic.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import asyncpg
import pytest

from curaflow.config import Settings
from curaflow.config.schedules import ScheduleConfig
from curaflow.domain.occurrence import AdmitOccurrenceInput, OccurrenceInput
from curaflow.routes import DirectoryRouteConfig
from curaflow.schedules.admit import OccurrenceConfigError, admit_occurrence
from tests.support import short_id

pytestmark = pytest.mark.integration

AT = datetime(2026, 12, 6, 2, 0, tzinfo=UTC)


def _settings(tmp_path: Path, plan: str, timezone: str) -> Settings:
    return Settings(
        state_dir=tmp_path,
        routes={"out": DirectoryRouteConfig(path=tmp_path)},
        schedules=[ScheduleConfig(id=plan, cron=["@every 1h"], timezone=timezone)],
    )


async def _admit(pool: asyncpg.Pool, settings: Settings, plan: str, timezone: str, at_ms: int) -> tuple[str, bool]:
    occurrence = OccurrenceInput(schedule_id=plan, cron=["@every 1h"], timezone=timezone, task_queue="curaflow")
    admitted = await admit_occurrence(
        pool, settings, AdmitOccurrenceInput(occurrence=occurrence, scheduled_at_ms=at_ms, trampoline_id="t")
    )
    return admitted.job_id, admitted.created


@pytest.mark.parametrize("second", [0, 42], ids=["same-second", "later-in-the-minute"])
async def test_an_instant_admitted_before_its_plan_s_zone_changed_is_not_run_again(
    ledger_pool: asyncpg.Pool, tmp_path: Path, second: int
) -> None:
    """02:00Z admitted under UTC (``T0200+0000``); after the plan moved to Europe/Berlin, a
    backfill of that time (or a trigger later in the same minute) converges on that job."""
    plan = f"zone{short_id()}"
    at_ms = int(AT.timestamp() * 1000)
    first, created = await _admit(ledger_pool, _settings(tmp_path, plan, "UTC"), plan, "UTC", at_ms)
    assert created and first == f"{plan}@2026-12-06T0200+0000"

    again, created = await _admit(
        ledger_pool, _settings(tmp_path, plan, "Europe/Berlin"), plan, "Europe/Berlin", at_ms + second * 1000
    )
    assert (again, created) == (first, False)
    count = await ledger_pool.fetchval("SELECT count(*) FROM jobs WHERE schedule_id = $1", plan)
    assert count == 1


async def test_other_instants_of_the_plan_are_their_own_jobs(ledger_pool: asyncpg.Pool, tmp_path: Path) -> None:
    """The next hour, and the same minute of another plan, are not that job."""
    plan, other = f"zone{short_id()}", f"zone{short_id()}"
    at_ms = int(AT.timestamp() * 1000)
    first, _ = await _admit(ledger_pool, _settings(tmp_path, plan, "UTC"), plan, "UTC", at_ms)
    later, created = await _admit(
        ledger_pool, _settings(tmp_path, plan, "Europe/Berlin"), plan, "Europe/Berlin", at_ms + 3_600_000
    )
    assert created and later == f"{plan}@2026-12-06T0400+0100"
    elsewhere, created = await _admit(
        ledger_pool, _settings(tmp_path, other, "Europe/Berlin"), other, "Europe/Berlin", at_ms
    )
    assert created and elsewhere == f"{other}@2026-12-06T0300+0100"
    assert first != later


@pytest.mark.parametrize("zone", ["Mars/Olympus_Mons", "../../etc/passwd", ""])
async def test_an_action_edited_to_an_unknown_zone_is_a_named_configuration_error(
    ledger_pool: asyncpg.Pool, tmp_path: Path, zone: str
) -> None:
    """``temporal schedule update`` can give the action any ``timezone``; the admission
    cannot name the occurrence's job. It must fail for good (``configuration_error``: the
    trampoline ends, no later time is skipped behind an activity retried for 130 min) and
    name the time as a miss, never raise the zone database's error (retried)."""
    plan = f"zone{short_id()}"
    at_ms = int(AT.timestamp() * 1000)
    with pytest.raises(OccurrenceConfigError, match="time zone"):
        await _admit(ledger_pool, _settings(tmp_path, plan, "UTC"), plan, zone, at_ms)
    misses = await ledger_pool.fetch("SELECT nominal_at, why FROM schedule_misses WHERE schedule_id = $1", plan)
    assert [(m["nominal_at"], m["why"]) for m in misses] == [(at_ms, "configuration_error")]
    assert await ledger_pool.fetchval("SELECT count(*) FROM jobs WHERE schedule_id = $1", plan) == 0
