"""The cooldown ladder and ``Retry-After`` parsing (one definition each: curaflow.domain.ratelimit)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from curaflow.domain.ratelimit import cooldown_ms, first_retry_after, ladder_ms, parse_retry_after

NOW = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)


def test_the_ladder_doubles_from_its_base_up_to_its_cap() -> None:
    assert [ladder_ms(step) for step in range(1, 7)] == [60_000, 120_000, 240_000, 480_000, 900_000, 900_000]
    assert ladder_ms(0) == ladder_ms(1) == 60_000  # no step below the first
    assert ladder_ms(10_000) == 900_000  # a long streak stays at the cap (no overflow)
    assert [ladder_ms(step, base_ms=200, cap_ms=1000) for step in (1, 2, 3, 4)] == [200, 400, 800, 1000]


def test_retry_after_is_the_floor_of_the_cooldown() -> None:
    assert cooldown_ms(1) == 60_000
    assert cooldown_ms(1, 90_000) == 90_000
    assert cooldown_ms(3, 90_000) == 240_000
    assert cooldown_ms(2, None, base_ms=100, cap_ms=1000) == 200


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("120", 120.0),
        (" 7 ", 7.0),
        ("0", 0.0),
        ("1.5", 1.5),  # decimal seconds: not RFC 9110, but sent by some APIs
        (3, 3.0),  # a JSON number (Discord's and Telegram's bodies)
        (0.25, 0.25),
        (format_datetime(NOW + timedelta(seconds=30), usegmt=True), 30.0),  # IMF-fixdate
        ("Monday, 30-Nov-26 12:01:00 GMT", 60.0),  # obsolete RFC 850 form
        ("Mon Nov 30 12:00:45 2026", 45.0),  # obsolete asctime form (no zone: GMT)
        (format_datetime(NOW - timedelta(hours=1), usegmt=True), 0.0),  # a past date: now
    ],
)
def test_both_forms_of_rfc_9110_are_read(value: str | float, seconds: float) -> None:
    assert parse_retry_after(value, now=NOW) == pytest.approx(seconds)


@pytest.mark.parametrize("value", [None, "", "  ", "soon", "-5", -1, "inf", "nan", float("inf"), True, "Mon, 99 Foo"])
def test_what_is_not_a_delay_is_none(value: str | float | None) -> None:
    assert parse_retry_after(value, now=NOW) is None


def test_the_first_usable_delay_wins() -> None:
    assert first_retry_after(2.5, "10", default=1.0) == 2.5
    assert first_retry_after(None, "10", default=1.0) == 10.0
    assert first_retry_after("garbage", None, default=1.0) == 1.0
    assert first_retry_after(0, "4", default=1.0) == 4.0  # 0 counts as absent, as the routes always did
