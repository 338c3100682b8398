"""Which hold a finish may name for a cell, and what it says (``curaflow.domain.holds``;
the ledger's side is ``tests/integration/test_finish_holds.py``)."""

from __future__ import annotations

import pytest

from curaflow.domain.holds import (
    AccountWait,
    Hold,
    HoldScope,
    RouteWait,
    busy_until,
    held_by,
    hold_scope,
    hold_sentence,
    least_requests,
    spacing_until,
)

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


@pytest.mark.parametrize(
    ("kind", "pages", "requests"),
    [
        ("manga", 32, 32),  # one request per listed page
        ("illust", 1, 1),
        ("illust", 0, 1),  # at least one
        ("ugoira", 1, 1),  # an animation: one archive of frames
        ("ugoira", 40, 1),
    ],
)
def test_a_works_download_asks_the_source_once_per_page_or_once_for_an_animation(
    kind: str, pages: int, requests: int
) -> None:
    assert least_requests(kind, pages) == requests


@pytest.mark.parametrize(
    ("bound_at", "requests", "interval_ms", "until"),
    [
        (AT, 32, 1000, AT + 31_000),  # the first at the binding, each next an interval later
        (AT, 1, 1000, 0),  # a single request: the spacing holds nothing back from it
        (AT, 32, 0, 0),  # no spacing
        (0, 32, 1000, 0),  # no binding known
    ],
)
def test_the_accounts_spacing_is_a_lower_bound_from_the_binding(
    bound_at: int, requests: int, interval_ms: int, until: int
) -> None:
    assert spacing_until(bound_at, requests, interval_ms) == until


def test_an_accounts_spacing_is_named_only_when_it_alone_ends_past_the_deadline() -> None:
    # The break-it pass's second job: 32 pages bound 27 s before the deadline, 1 s apart.
    bound = AT - 27_000
    spaced = AccountWait(account="default", spacing_until=spacing_until(bound, 32, 1000))
    assert held_by([spaced], at=AT, scope=HoldScope("account")) == Hold(
        owner="account", name="default", kind="spacing", until=bound + 31_000
    )
    # 20 pages fit before the deadline at that spacing: a slow download is not the gate's
    fits = AccountWait(account="default", spacing_until=spacing_until(bound, 20, 1000))
    assert held_by([fits], at=AT) is None
    # a cooldown or a pause lasting longer is the longer wait
    cooling = spaced.model_copy(update={"cooldown_until": AT + 600_000, "rate_limited_at": AT - 1})
    assert held_by([cooling], at=AT) == Hold(owner="account", name="default", kind="cooling", until=AT + 600_000)
    # a route's scope never names the account's spacing
    assert held_by([spaced], at=AT, scope=HoldScope("route")) is None


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_an_accounts_spacing_says_so_in_words_of_its_own(lang: str) -> None:
    until = 1_796_000_000_000
    text = hold_sentence(Hold(owner="account", name="second", kind="spacing", until=until), lang)
    cooling = hold_sentence(Hold(owner="account", name="second", kind="cooling", until=until), lang)
    assert "second" in text and "2026-" in text and "min_interval_ms" in text and text != cooling
    assert "Route" not in text and "路由" not in text and "rate-limited" not in text and "限流" not in text


@pytest.mark.parametrize("kind", ["cooling", "paused"])
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_an_accounts_hold_says_the_account_and_until_when(kind: str, lang: str) -> None:
    text = hold_sentence(Hold(owner="account", name="second", kind=kind, until=1_796_000_000_000), lang)  # type: ignore[arg-type]
    assert "second" in text and "2026-" in text and "Route" not in text and "路由" not in text
    if kind == "paused":
        assert "curaflow accounts resume second" in text


def test_a_receiver_unavailable_is_named_as_it_asked_not_as_a_rate_limit() -> None:
    # A 5xx with a Retry-After: the intent's wait is recorded with its kind, and named so.
    down = RouteWait(route="hook", held_until=AT + 600_000, held_kind="unavailable")
    assert held_by([down], at=AT) == Hold(name="hook", kind="unavailable", until=AT + 600_000)
    assert held_by([down], at=AT + 600_000) is None  # over by then: it held nothing
    # the route's own cooldown outlasting it is the longer wait
    cooling = down.model_copy(update={"cooldown_until": AT + 900_000})
    assert held_by([cooling], at=AT) == Hold(name="hook", kind="cooling", until=AT + 900_000)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_receiver_unavailable_says_so_in_words_of_its_own(lang: str) -> None:
    until = 1_796_000_000_000
    text = hold_sentence(Hold(name="hook", kind="unavailable", until=until), lang)
    limited = hold_sentence(Hold(name="hook", kind="rate_limited", until=until), lang)
    assert "hook" in text and "2026-" in text and text != limited
    if lang == "zh":
        assert "不可用" in text and "限流" not in text
    else:
        assert "unavailable" in text and "rate limit" not in text and "rate-limit" not in text


def test_a_route_no_worker_that_took_the_send_knew_is_curaflows_hold() -> None:
    # The attempt met a worker without the route (a rolling change): the next attempt was
    # due then; named as curaflow's, the route's name kept, never as the receiver's wait.
    unknown = RouteWait(route="hook", held_until=AT + 600_000, held_kind="configuration")
    assert held_by([unknown], at=AT) == Hold(owner="curaflow", name="hook", kind="configuration", until=AT + 600_000)
    assert held_by([unknown], at=AT, scope=HoldScope("route", "hook")) is not None  # the route's cell's scope
    assert held_by([unknown], at=AT, scope=HoldScope("route", "other")) is None
    assert held_by([unknown], at=AT + 600_000) is None  # the next attempt came before: it held nothing
    # the route's own pause outlasting it is the longer wait
    paused = unknown.model_copy(update={"paused_until": AT + 900_000})
    assert held_by([paused], at=AT) == Hold(name="hook", kind="paused", until=AT + 900_000)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_configuration_hold_says_so_in_words_of_its_own(lang: str) -> None:
    until = 1_796_000_000_000
    text = hold_sentence(Hold(owner="curaflow", name="hook", kind="configuration", until=until), lang)
    assert "hook" in text and "2026-" in text
    if lang == "zh":
        assert "配置" in text and "限流" not in text
    else:
        assert "configuration" in text and "does not know route hook" in text and "rate limit" not in text


def test_a_hold_of_a_kind_this_build_does_not_know_drops_the_hold_not_the_cell() -> None:
    # The protocol is additive: a later build may add a kind (a rolling upgrade reads its
    # rows and payloads); the snapshot is read, without the structured hold.
    from curaflow.domain.models import CellSnapshot

    later = {"owner": "route", "name": "hook", "kind": "a-later-kind", "until": AT}
    cell = CellSnapshot.model_validate({"target_id": "demo", "reason_message": "said", "held_by": later})
    assert (cell.held_by, cell.reason_message) == (None, "said")
    known = {**later, "kind": "unavailable"}
    assert CellSnapshot.model_validate({"target_id": "demo", "held_by": known}).held_by == Hold.model_validate(known)


@pytest.mark.parametrize(
    ("started", "others", "concurrency", "until"),
    [
        (False, 1, 1, AT),  # never started, the one slot another job's: busy until seen
        (False, 2, 2, AT),  # every slot of two
        (False, 1, 2, 0),  # a slot free: the step could have started
        (True, 1, 1, 0),  # a step opened once (a retry, a later pass): a queue is not proven
        (False, 0, 1, 0),  # nothing held the queue (no worker serves it: not the account's)
        (False, 1, 0, 0),  # the account's concurrency unknown
    ],
)
def test_an_accounts_queue_is_busy_only_when_other_jobs_held_every_slot(
    started: bool, others: int, concurrency: int, until: int
) -> None:
    assert busy_until(started=started, others=others, concurrency=concurrency, seen_at=AT) == until


def test_a_busy_queue_is_named_when_still_seen_past_the_deadline() -> None:
    busy = AccountWait(account="default", busy_until=AT + 500)
    assert held_by([busy], at=AT, scope=HoldScope("account")) == Hold(
        owner="account", name="default", kind="busy", until=AT + 500
    )
    assert held_by([busy], at=AT + 500) is None  # the finish read it before the deadline: not proven
    assert held_by([busy], at=AT, scope=HoldScope("route")) is None
    # a cooldown lasting longer is the longer wait
    cooling = busy.model_copy(update={"cooldown_until": AT + 600_000, "rate_limited_at": AT - 1})
    assert held_by([cooling], at=AT) == Hold(owner="account", name="default", kind="cooling", until=AT + 600_000)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_busy_account_says_so_in_words_of_its_own(lang: str) -> None:
    until = 1_796_000_000_000
    text = hold_sentence(Hold(owner="account", name="second", kind="busy", until=until), lang)
    spacing = hold_sentence(Hold(owner="account", name="second", kind="spacing", until=until), lang)
    assert "second" in text and "2026-" in text and "max_concurrency" in text and text != spacing
    assert "Route" not in text and "路由" not in text and "rate-limited" not in text and "限流" not in text
    assert ("其他任务" if lang == "zh" else "another job") in text
