"""An operator table says what happened whole, or says that it left something out.

``curaflow refusals list`` cut the receiver's answer at 80 characters and ``curaflow
unavailable list`` the why at 60, with no mark: a report saying less than what happened
without saying so (a newcomer's finding). And at 80 columns — a terminal's width, and
rich's when the output is piped — rich cut any word longer than its column (a URL, a JSON
text) with an ellipsis: ``HTTP 400: https://exam…``. Now a cell longer than its table
keeps is cut visibly — an ellipsis and how many characters were left out — and every
column folds a long word onto the next line instead of cutting it.
These tests call each command's rendering with rows, no ledger needed.
"""

from __future__ import annotations

import io
from types import SimpleNamespace
from typing import Any

import pytest
from rich.console import Console

from curaflow.cli import common
from curaflow.ledger.frontiers import StoredFrontier
from curaflow.ledger.remembered import Refusal
from curaflow.schedules import RecordedMiss

MS = 1796632734838  # 2026-12-07
#: A receiver's answer holding a word far wider than any column at 80 columns.
URL = "https://hooks.example.com/api/v2/deliveries/7f3a9c1e-0b4d-4e8a-9f21-c0ffee"
ANSWER = f"HTTP 400: {URL}"


@pytest.fixture
def width(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Set the consoles' width (whatever COLUMNS said when they were made)."""

    def set_width(columns: int) -> None:
        for console in (common.out_console, common.err_console):
            monkeypatch.setattr(console, "_width", columns)
            monkeypatch.setattr(console, "_height", 25)

    return set_width


def column(out: str, index: int) -> str:
    """The text of a boxed table's column ``index`` (from 0) in its body's rows, its lines
    joined without the spaces a wrap puts (every space dropped: compare with the value's)."""
    parts = [line.split("│")[index + 1] for line in out.splitlines() if line.startswith("│")]
    return "".join(part.strip() for part in parts).replace(" ", "")


def whole(value: str) -> str:
    return value.replace(" ", "")


def refusal(error: str) -> Refusal:
    return Refusal(
        route="hook",
        work_type="illust",
        work_id="123456789",
        reason="refused",
        error=error,
        job_id="demo@key-1",
        target_id="demo",
        refused_at=MS,
    )


def unavailable(why: str) -> dict[str, Any]:
    return {"account": "default", "work_id": "123", "seen_at": MS, "until": MS, "held": True, "why": why}


def test_refusals_list_says_how_much_of_a_long_answer_it_left_out(
    width: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from curaflow.cli.remembered import print_refusals

    width(400)
    long = "HTTP 400: " + "x" * 290  # 300 characters: the ledger keeps up to 2000
    print_refusals([refusal(long), refusal("HTTP 400: " + "y" * 70)])  # 80: whole, no mark
    out = capsys.readouterr().out
    assert long[:80] + "… (+220 characters)" in out, out
    assert "HTTP 400: " + "y" * 70 + " " in out and out.count("…") == 1, out


def test_unavailable_list_says_how_much_of_a_long_why_it_left_out(
    width: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from curaflow.cli.remembered import print_unavailable

    width(400)
    long = "the image host answered 403 to " + "z" * 69  # 100 characters: the ledger keeps up to 500
    print_unavailable([unavailable(long), unavailable("w" * 60)])  # 60: whole, no mark
    out = capsys.readouterr().out
    assert long[:60] + "… (+40 characters)" in out, out
    assert "w" * 60 + " " in out and out.count("…") == 1, out


def test_frontiers_list_says_how_much_of_a_long_frontier_it_left_out(
    width: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from curaflow.cli.remembered import print_frontiers

    width(400)
    row = StoredFrontier(target_id="t", fingerprint="f", frontier={"cursor": "c" * 200}, job_id="j", updated_at=MS)
    print_frontiers([row])
    out = capsys.readouterr().out
    text = '{"cursor": "' + "c" * 200 + '"}'  # 214 characters
    assert text[:100] + "… (+114 characters)" in out, out


def test_the_operator_tables_fold_a_long_word_at_80_columns(width: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """Each table's free text, at 80 columns, holds every character of a long word."""
    from curaflow.cli.remembered import print_accounts, print_frontiers, print_refusals, print_routes, print_unavailable
    from curaflow.cli.schedules import print_misses

    width(80)
    print_refusals([refusal(ANSWER[:80])])
    assert whole(ANSWER[:80]) in column(capsys.readouterr().out, 5)
    print_unavailable([unavailable(URL[:60])])
    assert whole(URL[:60]) in column(capsys.readouterr().out, 5)
    frontier = {"cursor": URL}
    print_frontiers([StoredFrontier(target_id="t", fingerprint="f", frontier=frontier, job_id="j", updated_at=MS)])
    assert whole(f'{{"cursor": "{URL}"}}') in column(capsys.readouterr().out, 1)
    account = {
        "account": "a",
        "paused_until": MS,
        "pause_reason": ANSWER,
        "cooldown_until": None,
        "next_at": None,
        "requests": 3,
        "rate_limits": 0,
    }
    print_accounts([account])
    assert whole(f"({ANSWER})") in column(capsys.readouterr().out, 1)
    route = {
        "route": "hook",
        "kind": "http",
        "paused_until": MS,
        "pause_reason": ANSWER,
        "cooldown_until": None,
        "streak": {"answer": ANSWER, "works": ["1", "2"]},
        "held_works": 0,
    }
    print_routes([route])
    out = capsys.readouterr().out
    assert whole(f"({ANSWER})") in column(out, 2), out
    assert whole(f"2 × {ANSWER}") in column(out, 4), out
    print_misses([RecordedMiss(schedule_id="nightly", nominal_at=MS, why=ANSWER, recorded_at=MS)])
    assert whole(ANSWER) in column(capsys.readouterr().out, 2)


def test_a_jobs_table_and_its_progress_fold_a_long_word_at_80_columns() -> None:
    from curaflow.cli.jobs import job_table
    from curaflow.cli.run import progress_table

    out = io.StringIO()
    console = Console(file=out, width=80, force_terminal=False, color_system=None)
    cell = SimpleNamespace(target_id="demo", state="failed", stage="delivery", work_id="123456789", reason=ANSWER)
    record: Any = SimpleNamespace(job_id="demo@key-1", cells=[cell])
    console.print(progress_table(record, {"status": "failed", "progress": {"stage": "delivery"}}))
    assert whole(ANSWER) in column(out.getvalue(), 4), out.getvalue()

    out.seek(0)
    out.truncate()
    job: Any = SimpleNamespace(
        job_id="demo@key-1",
        status="succeeded",
        progress=None,
        idempotency_key="key-1",
        correlation_id=None,
        created_at=None,
        started_at=None,
        updated_at=None,
        deadline_at=None,
        heartbeat_at=None,
        lease_active=False,
        attempt=1,
        result=SimpleNamespace(candidates=[SimpleNamespace(work_id="123", url=URL)], scanned=1),
        error=SimpleNamespace(code="delivery_failed", message=ANSWER),
    )
    console.print(job_table(job))
    text = "".join(out.getvalue().split())
    assert whole(f"delivered123{URL}") in text and whole(f"errordelivery_failed:{ANSWER}") in text, out.getvalue()
