"""The cooldown ladder and ``Retry-After`` parsing (one definition each: curaflow.domain.ratelimit)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from curaflow.domain.ratelimit import (
    LADDER_BASE_MS,
    LADDER_CAP_MS,
    MAX_STATED_S,
    cooldown_left_ms,
    cooldown_ms,
    first_retry_after,
    ladder_ms,
    parse_retry_after,
    retry_delay_ms,
)

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


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("120, 120", 120.0),  # the same header twice (a proxy adding its own): one value, joined
        ("5,7", 7.0),
        ("30, 1.5", 30.0),
        (
            f"{format_datetime(NOW + timedelta(seconds=30), usegmt=True)}, "
            f"{format_datetime(NOW + timedelta(seconds=90), usegmt=True)}",
            90.0,
        ),
        (f"20, {format_datetime(NOW + timedelta(seconds=60), usegmt=True)}", 60.0),
    ],
)
def test_a_retry_after_sent_twice_is_the_longest_delay_it_states(value: str, seconds: float) -> None:
    # HTTP clients join a field sent twice with ", " (RFC 9110 §5.3; httpx's
    # `headers.get`). Read as no delay, the receiver's stated wait was ignored: the
    # backoff came back after 5 s, 10 s, 20 s …, each early retry spending an attempt of
    # the budget and prolonging the ban.
    assert parse_retry_after(value, now=NOW) == pytest.approx(seconds)


@pytest.mark.parametrize("value", ["120, soon", "5, -3", ", 5", "5,", "5,, 7", "inf, 5"])
def test_a_list_with_an_item_that_is_no_delay_is_no_delay(value: str) -> None:
    assert parse_retry_after(value, now=NOW) is None


def test_a_delay_beyond_any_wait_is_the_longest_one_never_a_crash() -> None:
    # A Discord or Telegram JSON body's integer of 400 digits made float() raise
    # OverflowError out of the route: curaflow's internal_error for a plain rate limit.
    from curaflow.domain.ratelimit import MAX_STATED_S

    assert parse_retry_after(10**400, now=NOW) == parse_retry_after(10**20, now=NOW) == float(MAX_STATED_S)
    assert parse_retry_after(-(10**400), now=NOW) is None  # no delay, as -1
    assert parse_retry_after("9" * 400, now=NOW) is None  # text that reads infinite, as "inf"


def test_the_first_usable_delay_wins() -> None:
    assert first_retry_after(2.5, "10", default=1.0) == 2.5
    assert first_retry_after(None, "10", default=1.0) == 10.0
    assert first_retry_after("garbage", None, default=1.0) == 1.0
    assert first_retry_after(0, "4", default=1.0) == 4.0  # 0 counts as absent, as the routes always did


# ---- an unknown or absent delay is a backoff, never a constant --------------------------------


def test_a_stated_delay_is_waited_exactly() -> None:
    from curaflow.domain.ratelimit import retry_delay_ms

    assert retry_delay_ms(1, 8_000) == 8_000
    assert retry_delay_ms(7, 1_250.4) == 1_251  # whatever the step
    assert retry_delay_ms(3, 2_500) == 2_500


@pytest.mark.parametrize("stated_s", [0.001, 1e-9, 0.25, 0.999])
def test_a_stated_delay_under_a_second_is_waited_a_second(stated_s: float) -> None:
    """A receiver stating (almost) no wait — Discord's ``retry_after`` of 0.001, a
    ``Retry-After: 0.001`` on a 429 or a 503 — was waited as stated: the next attempt came
    1 ms later, and a receiver answering so every time spent the delivery's whole attempt
    budget (12) in a hot loop within a second (the work abandoned, or ``partial`` — blocked
    on the route for good — when part of it was posted). A stated delay of 0 was already
    "none" (the backoff from 5 s): a stated wait is now at least a second, never shorter
    than stated."""
    from activities.errors import route_failure
    from curaflow.domain.reasons import TerminalReason
    from curaflow.routes.base import RouteError

    for step in (1, 5):
        assert retry_delay_ms(step, stated_s * 1000) == 1_000
    unavailable = RouteError(TerminalReason.DELIVERY_FAILED, "503", retry_after_s=stated_s)
    assert route_failure(unavailable).next_retry_delay == timedelta(seconds=1)


@pytest.mark.parametrize("stated", [None, 0, -1.0, float("nan"), float("inf")])
def test_a_missing_delay_backs_off_from_several_seconds(stated: float | None) -> None:
    from curaflow.domain.ratelimit import UNSTATED_BASE_MS, retry_delay_ms

    delays = [retry_delay_ms(step, stated) for step in range(1, 10)]
    assert delays[0] == UNSTATED_BASE_MS >= 5_000  # several seconds, never one
    assert delays[:4] == [5_000, 10_000, 20_000, 40_000]  # doubling
    assert max(delays) == 900_000 == delays[-1]  # capped at 15 min


def test_a_delay_of_an_unknown_shape_is_no_delay() -> None:
    assert parse_retry_after({"seconds": 3}) is None  # type: ignore[arg-type]
    assert parse_retry_after([3]) is None  # type: ignore[arg-type]
    assert first_retry_after({"x": 1}, "junk", None) is None  # no invented default


def test_a_route_failure_carries_the_delay_it_was_given() -> None:
    from datetime import timedelta

    from activities.errors import route_failure
    from curaflow.domain.reasons import TerminalReason
    from curaflow.routes.base import RouteError

    limited = RouteError(TerminalReason.DELIVERY_FAILED, "429", rate_limited=True)
    assert route_failure(limited, 5_000).next_retry_delay == timedelta(seconds=5)
    assert route_failure(limited).next_retry_delay is None  # Temporal's own backoff, never 1 s
    stated = RouteError(TerminalReason.DELIVERY_FAILED, "503", retry_after_s=3.0)
    assert route_failure(stated).next_retry_delay == timedelta(seconds=3)


@pytest.mark.parametrize("value", ["99999999999999999999", "1e300", 1e20, "Fri, 31 Dec 9999 23:59:59 GMT"])
def test_an_absurd_stated_delay_is_read_as_the_longest_a_job_may_wait(value: str | float) -> None:
    """A receiver stated 10^20 s: the wait overflowed ``timedelta`` and the deliver
    activity failed with ``OverflowError`` at once, every attempt — the receiver was sent
    the work again every couple of seconds, the opposite of what it asked."""
    seconds = parse_retry_after(value)
    assert seconds == MAX_STATED_S
    delay = retry_delay_ms(3, seconds * 1000)
    assert timedelta(milliseconds=delay) == timedelta(seconds=MAX_STATED_S)
    assert retry_delay_ms(1, 1e23) == MAX_STATED_S * 1000  # a caller's own number too
    # A source account's cooldown takes a stated delay only up to its ladder's cap
    # (test_a_source_cooldown_takes_a_stated_delay_only_up_to_the_ladders_cap).
    assert cooldown_ms(3, seconds * 1000) == cooldown_ms(1, 1e23) == LADDER_CAP_MS


def test_a_source_cooldown_takes_a_stated_delay_only_up_to_the_ladders_cap() -> None:
    """A ``Retry-After`` of a week cooled the account down for the week: every job of the
    account ended ``rate_limited`` meanwhile (until 2026-12-05). A longer limit now costs
    one more request after the cap (its answer climbs the ladder again)."""
    assert cooldown_ms(1, 7 * 86_400_000) == LADDER_CAP_MS
    assert cooldown_ms(1, 600_000) == 600_000  # within the cap: the floor, as before
    assert cooldown_ms(1, 7 * 86_400_000, base_ms=1_000, cap_ms=30_000) == 30_000
    assert cooldown_ms(1, float("nan")) == cooldown_ms(1, -5.0) == LADDER_BASE_MS


def test_a_rate_limit_without_a_gate_keeps_the_accounts_own_cap() -> None:
    """A source's rate limit that carries no cooldown from a gate (a source without one)
    climbs the ladder with the attempt number — within the instance's configured
    ``rate_limit_cap_ms``, the same cap its gate keeps (2026-12-05: a stated delay is waited
    only up to the ladder's cap). The activities took the default cap of 15 min whatever
    was configured: a 5-min cap waited a stated 15 min, a 1-h cap cut a stated 30 min."""
    from datetime import timedelta

    from activities.errors import source_failure
    from curaflow.domain.reasons import TerminalReason
    from curaflow.sources.base import SourceConfig
    from curaflow.sources.errors import SourceError

    for cap_ms, stated_s, waited in ((300_000, 900, 300), (3_600_000, 1800, 1800)):
        policy = SourceConfig(kind="x", rate_limit_cap_ms=cap_ms).policy()
        err = SourceError(TerminalReason.RATE_LIMITED, "429", retry_after_s=stated_s)
        failure = source_failure(err, 1, policy=policy)
        assert failure.next_retry_delay == timedelta(seconds=waited), cap_ms


@pytest.mark.parametrize(
    ("until", "cap", "left"),
    [
        (1_000 + 7 * 86_400_000, 900_000, 900_000),  # a week written before the cap: the cap
        (1_000 + 60_000, 900_000, 60_000),  # within the cap: what is left
        (1_000, 900_000, 0),  # ended now
        (0, 900_000, 0),  # never set (a row's default)
        (1_000 + 60_000, 0, 0),  # a cap of nothing holds nothing
    ],
)
def test_a_stored_cooldown_holds_what_is_left_of_it_at_most_the_cap(until: int, cap: int, left: int) -> None:
    assert cooldown_left_ms(until, 1_000, cap) == left
