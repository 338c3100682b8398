"""Which hold a finish may name for a cell, and what it says (``curaflow.domain.holds``;
the ledger's side is ``tests/integration/test_finish_holds.py``)."""

from __future__ import annotations

import pytest

from curaflow.domain.holds import AccountWait, Hold, HoldScope, RouteWait, held_by, hold_scope, hold_sentence

AT = 1_000_000


@pytest.mark.parametrize(
    ("state", "reason", "failure", "scope"),
    [
        # the job stopped while the cell waited: any hold of the owner its state waits for
        ("delivery_pending", "execution_timeout", {}, HoldScope("route")),
        ("pending", "execution_timeout", {}, HoldScope("account")),
        ("selected", "stalled_no_heartbeat", {}, HoldScope("account")),
        # a failure the deadline owns is the deadline's
        (
            "delivery_pending",
            "execution_timeout",
            {"failure_step": "deliver", "failure_route": "a", "failure_reason": "execution_timeout"},
            HoldScope("route"),
        ),
        # a route's own failure: only its own wait
        (
            "delivery_pending",
            "telegram_failed",
            {"failure_step": "deliver", "failure_route": "b", "failure_reason": "telegram_failed"},
            HoldScope("route", "b"),
        ),
        # the account's own failure: the account's hold
        (
            "pending",
            "rate_limited",
            {"failure_step": "acquire", "failure_reason": "rate_limited"},
            HoldScope("account"),
        ),
        # the source's failure is not the account's
        ("pending", "remote_http_error", {"failure_step": "acquire", "failure_reason": "remote_http_error"}, None),
        # stopped by a consumer or an operator; a state no wait holds
        ("delivery_pending", "cancelled_by_consumer", {}, None),
        ("pending", "execution_terminated", {}, None),
        ("submitted", "execution_timeout", {}, None),
    ],
)
def test_a_hold_is_named_only_when_it_is_what_held_the_cell(
    state: str, reason: str, failure: dict[str, str], scope: HoldScope | None
) -> None:
    assert hold_scope(state, reason, **failure) == scope


def test_the_scope_keeps_another_routes_wait_out() -> None:
    waits = [RouteWait(route="a"), RouteWait(route="b", held_until=AT + 7_200_000)]
    assert held_by(waits, at=AT, scope=HoldScope("route", "a")) is None
    assert held_by(waits, at=AT, scope=HoldScope("route")) == Hold(name="b", kind="rate_limited", until=AT + 7_200_000)
    assert held_by(waits, at=AT, scope=HoldScope("account")) is None


def test_an_accounts_cooldown_met_after_the_deadline_held_nothing_then() -> None:
    late = AccountWait(account="acc", cooldown_until=AT + 600_000, rate_limited_at=AT + 1)
    assert held_by([late], at=AT) is None
    early = late.model_copy(update={"rate_limited_at": AT - 1})
    assert held_by([early], at=AT) == Hold(owner="account", name="acc", kind="cooling", until=AT + 600_000)
    # a pause outlasting the cooldown is the longer wait
    paused = early.model_copy(update={"paused_until": AT + 3_600_000})
    assert held_by([paused], at=AT) == Hold(owner="account", name="acc", kind="paused", until=AT + 3_600_000)


@pytest.mark.parametrize("kind", ["cooling", "paused"])
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_an_accounts_hold_says_the_account_and_until_when(kind: str, lang: str) -> None:
    text = hold_sentence(Hold(owner="account", name="second", kind=kind, until=1_796_000_000_000), lang)  # type: ignore[arg-type]
    assert "second" in text and "2026-" in text and "Route" not in text and "路由" not in text
    if kind == "paused":
        assert "curaflow accounts resume second" in text
