"""``curaflow schedules list`` is readable in 80 columns: no value is cut."""

from __future__ import annotations

import io
from datetime import UTC, datetime

from rich.console import Console

from curaflow.cli.schedules import render_schedules
from curaflow.schedules import ScheduleView

VIEWS = [
    ScheduleView(
        schedule_id="nightly-landscapes",
        cron=["0 3 * * *", "30 15 * * 1-5"],
        timezone="Europe/Paris",
        target_ids=["landscapes", "cityscapes-at-night"],
        paused=False,
        note="",
        next_runs=[datetime(2026, 12, 4, 2, 0, tzinfo=UTC)],
        recent=[],
        actions=1234,
        missed_catchup=2,
        skipped_overlap=17,
        configured=True,
    ),
    ScheduleView(
        schedule_id="weekly",
        cron=["@weekly"],
        timezone="UTC",
        target_ids=[],
        paused=True,
        note="holiday",
        next_runs=[],
        recent=[],
        actions=0,
        missed_catchup=0,
        skipped_overlap=0,
        configured=False,
    ),
]


def rendered(width: int) -> str:
    out = io.StringIO()
    render_schedules(VIEWS, Console(file=out, width=width, force_terminal=False, color_system=None))
    return out.getvalue()


def test_every_value_is_whole_in_80_columns() -> None:
    text = rendered(80)
    assert "…" not in text
    assert all(len(line) <= 80 for line in text.splitlines()), text
    for value in (
        "nightly-landscapes",
        "0 3 * * * | 30 15 * * 1-5",
        "Europe/Paris",
        "landscapes, cityscapes-at-night",
        "2026-12-04 02:00:00 UTC",
        "1234",
        "missed 2",
        "skipped 17",
        "paused (not in config)",
        "(all)",
    ):
        assert value in text, (value, text)


def test_a_wide_terminal_gets_the_table_wrapped_never_cut() -> None:
    text = rendered(160)
    assert "…" not in text and "┃ id" in text
    for value in ("nightly-landscapes", "Europe/Paris", "cityscapes-at-night", "2026-12-04 02:00:00", "1234"):
        assert value in text, (value, text)


def test_no_plans_says_so_and_how_to_add_one() -> None:
    """With no schedules ``curaflow schedules list`` printed nothing at all (exit 0): a
    newcomer could not tell an empty answer from a command that did nothing (a newcomer's
    finding, after ``schedules sync`` had said ``no schedules configured``)."""
    for width in (80, 160):
        out = io.StringIO()
        render_schedules([], Console(file=out, width=width, force_terminal=False, color_system=None))
        text = out.getvalue()
        assert "no schedules" in text, text
        assert "[[schedules]]" in text and "curaflow schedules sync" in text, text
