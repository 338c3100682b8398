"""What a command prints of a value that is not curaflow's own words — a receiver's or a
source's answer, a route's, an account's or a plan's name from the configuration, a job
id, a scenario's error — is printed as it is, never read as rich markup.

The operator tables handed their cells to rich as markup (a newcomer's finding): a
receiver's answer ``HTTP 400: [b]bad[/b] tag`` was shown ``HTTP 400: bad tag`` in
``curaflow refusals list``, a ``[link=…]`` kept only its text, and an answer holding
``[/]`` ended the command with a ``MarkupError`` — a report that says less than what
happened, or nothing. The rule has one owner: the consoles of
:mod:`curaflow.cli.common` never read markup; curaflow's own styles are given as styles.
These tests call each command's rendering with rows, no ledger needed.
"""

from __future__ import annotations

import io
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from curaflow.cli import common
from curaflow.ledger.frontiers import StoredFrontier
from curaflow.ledger.remembered import Refusal
from curaflow.schedules import RecordedMiss, ScheduleView

#: Values rich would take for markup: a style, a link, a lone closing tag (MarkupError),
#: an emoji code (``:x:`` printed as a cross mark).
BOLD = "[b]x[/b]"
LINK = "[link=http://x]y"
CLOSE = "[/]"
EMOJI = ":x:"
ANSWER = f"HTTP 400: {BOLD} {LINK} {CLOSE} {EMOJI}"

MS = 1796632734838  # 2026-12-07


@pytest.fixture(autouse=True)
def wide(monkeypatch: pytest.MonkeyPatch) -> None:
    """Consoles wide enough that no table cell wraps (whatever COLUMNS said when they were
    made: a test worker may set it)."""
    for console in (common.out_console, common.err_console):
        monkeypatch.setattr(console, "_width", 250)
        monkeypatch.setattr(console, "_height", 25)


def test_the_consoles_print_square_brackets_as_they_are(capsys: pytest.CaptureFixture[str]) -> None:
    """Every line a command prints goes through these two consoles (``route r resumed``,
    ``triggered PLAN: job ID``, ``account A was not paused`` …)."""
    common.out_console.print(f"route {BOLD} resumed; {LINK} {CLOSE} {EMOJI}")
    common.err_console.print(f"paused {BOLD} {LINK} {CLOSE} {EMOJI}")
    captured = capsys.readouterr()
    assert captured.out == f"route {BOLD} resumed; {LINK} {CLOSE} {EMOJI}\n"
    assert captured.err == f"paused {BOLD} {LINK} {CLOSE} {EMOJI}\n"


def test_refusals_list_shows_the_receivers_answer_whole(capsys: pytest.CaptureFixture[str]) -> None:
    from curaflow.cli.remembered import print_refusals

    refusal = Refusal(
        route=f"r{BOLD}",
        work_type="illust",
        work_id=f"1{CLOSE}",
        reason="refused",
        error=ANSWER,
        job_id=f"demo@k{LINK}",
        target_id="demo",
        refused_at=MS,
    )
    print_refusals([refusal])
    out = capsys.readouterr().out
    for value in (f"r{BOLD}", f"1{CLOSE}", ANSWER, f"demo@k{LINK}"):
        assert value in out, out


def test_unavailable_list_shows_why_whole(capsys: pytest.CaptureFixture[str]) -> None:
    from curaflow.cli.remembered import print_unavailable

    row = {"account": f"a{BOLD}", "work_id": f"7{CLOSE}", "seen_at": MS, "until": MS, "held": True, "why": ANSWER}
    print_unavailable([row])
    out = capsys.readouterr().out
    for value in (f"a{BOLD}", f"7{CLOSE}", ANSWER):
        assert value in out, out


def test_frontiers_list_shows_another_sources_frontier_whole(capsys: pytest.CaptureFixture[str]) -> None:
    from curaflow.cli.remembered import print_frontiers

    row = StoredFrontier(
        target_id=f"t{BOLD}", fingerprint="f", frontier={"cursor": CLOSE}, job_id=f"j{LINK}", updated_at=MS
    )
    print_frontiers([row])
    out = capsys.readouterr().out
    for value in (f"t{BOLD}", f'{{"cursor": "{CLOSE}"}}', f"j{LINK}"):
        assert value in out, out


def test_accounts_list_shows_the_sources_pause_reason_whole(capsys: pytest.CaptureFixture[str]) -> None:
    from curaflow.cli.remembered import print_accounts

    row = {
        "account": f"a{BOLD}",
        "paused_until": MS,
        "pause_reason": ANSWER,
        "cooldown_until": None,
        "next_at": None,
        "requests": 3,
        "rate_limits": 0,
    }
    print_accounts([row])
    out = capsys.readouterr().out
    for value in (f"a{BOLD}", f"({ANSWER})"):
        assert value in out, out


def test_routes_list_shows_the_receivers_answers_whole(capsys: pytest.CaptureFixture[str]) -> None:
    from curaflow.cli.remembered import print_routes

    row = {
        "route": f"r{BOLD}",
        "kind": "http",
        "paused_until": MS,
        "pause_reason": ANSWER,
        "cooldown_until": None,
        "streak": {"answer": f"HTTP 403: {CLOSE}", "works": ["1", "2"]},
        "held_works": 0,
    }
    print_routes([row])
    out = capsys.readouterr().out
    for value in (f"r{BOLD}", f"({ANSWER})", f"2 × HTTP 403: {CLOSE}"):
        assert value in out, out


def test_schedules_misses_and_list_show_the_plans_values_whole(capsys: pytest.CaptureFixture[str]) -> None:
    from curaflow.cli.schedules import print_misses, render_schedules

    print_misses([RecordedMiss(schedule_id=f"p{BOLD}", nominal_at=MS, why=f"why {CLOSE}", recorded_at=MS)])
    view = ScheduleView(
        schedule_id=f"p{BOLD}",
        cron=["0 3 * * *"],
        timezone="UTC",
        target_ids=[f"t{LINK}", f"u{CLOSE}"],
        paused=False,
        note="",
        next_runs=[datetime(2026, 12, 8, 3, tzinfo=UTC)],
        recent=[],
        actions=1,
        missed_catchup=0,
        skipped_overlap=0,
        configured=True,
    )
    render_schedules([view], common.out_console)  # 250 columns: the table
    out = capsys.readouterr().out
    for value in (f"p{BOLD}", f"why {CLOSE}", f"t{LINK}, u{CLOSE}"):
        assert value in out, out


def test_the_follow_progress_line_shows_the_stage_as_it_is() -> None:
    """``submit --follow``'s live line: the stage comes from the worker's events."""
    from curaflow.cli.jobs import follow_progress

    out = io.StringIO()
    console = Console(file=out, width=250, force_terminal=False, color_system=None)
    progress = follow_progress(console)
    progress.add_task(f"running · {BOLD} {LINK} {CLOSE}", job=f"demo@k{BOLD}")
    console.print(progress.make_tasks_table(progress.tasks))
    assert f"demo@k{BOLD}" in out.getvalue(), out.getvalue()
    assert f"running · {BOLD} {LINK} {CLOSE}" in out.getvalue(), out.getvalue()


def test_bench_prints_a_failed_scenarios_error_and_a_reference_name_whole(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from bench.result import Result
    from bench.runner import print_comparison, print_table

    print_table([Result(name=f"s{BOLD}", skipped=f"failed: MarkupError: {CLOSE} {LINK}")], common.out_console)
    reference = tmp_path / "ref[b]x.json"  # a name, no folder
    reference.write_text('{"results": []}')
    print_comparison({"results": []}, reference, common.out_console)
    out = capsys.readouterr().out
    for value in (f"s{BOLD}", f"failed: MarkupError: {CLOSE} {LINK}", "against ref[b]x.json"):
        assert value in out, out


def test_chaos_prints_a_scenarios_failure_whole(capsys: pytest.CaptureFixture[str]) -> None:
    from bench.chaos.records import ScenarioResult
    from bench.chaos.runner import _details

    result: Any = ScenarioResult(name=f"s{BOLD}", plan={})
    result.error = f"Traceback: {CLOSE} {LINK}"
    result.lost = [f"job{BOLD}"]
    _details([result], common.out_console)
    out = capsys.readouterr().out
    for value in (f"s{BOLD}: the scenario itself failed", f"Traceback: {CLOSE} {LINK}", f"job{BOLD}"):
        assert value in out, out
