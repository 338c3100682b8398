"""Two settings where one bound must not exceed the other are refused inverted, at load,
naming both settings and their values (``curaflow.config.checks.ORDERED_SETTINGS``).

Until 2026-12-07 every such pair but the pool sizes loaded inverted and meant something
else than it said: a backoff that starts above its cap waits the cap every time (the
supervision loop's, an account's cooldown ladder), a callback push's retry policy was raised
to its initial interval by the workflow while the push's bounded wait reckoned with the
smaller cap, a delivery's inverted retry policy is one the Temporal SDK refuses to schedule
(every step of every job failed its workflow task), a hold on an answer not recognised as
the work's was cut to the TTL of one that was, a frame allowed more pixels than a whole
decode refused anyway, a target whose first day is after its last filtered out every work.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any, get_args

import pytest
from pydantic import BaseModel
from temporalio.api.common.v1 import RetryPolicy as RetryPolicyProto
from temporalio.common import RetryPolicy

from curaflow.config import ConfigError, Settings, SourceConfig, load_settings
from curaflow.config.checks import ORDERED_SETTINGS
from curaflow.routes.registry import kinds as route_kinds

#: A ``[sources]`` kind of the tests (``tests/fakes/catalog_source.py``), registered by its module.
CATALOG = {"source_modules": ["tests.fakes.catalog_source"]}
SHELF = {"kind": "catalog", "url": "http://127.0.0.1:9"}
OUT = {"out": {"kind": "directory", "path": "curaflow-out"}}  # the built-in target's route
CHAT = {"kind": "discord", "url": "https://discord.com/api/webhooks/1/abc"}

#: Every ordered pair: (dotted prefix, the setting that must not exceed, the one it must not exceed).
PAIRS = [
    ("supervision", "initial_backoff_ms", "max_backoff_ms"),
    ("delivery", "retry_initial_interval_ms", "retry_max_interval_ms"),
    ("api", "callback_retry_initial_interval_ms", "callback_retry_max_interval_ms"),
    ("pixiv", "rate_limit_base_ms", "rate_limit_cap_ms"),
    ("pixiv", "unrecognised_hold_ms", "unavailable_ttl_ms"),
    ("database", "pool_min_size", "pool_max_size"),
    ("outbound", "image_max_pixels", "decode_max_pixels"),
    ("sources.shelf", "rate_limit_base_ms", "rate_limit_cap_ms"),
    ("sources.shelf", "unrecognised_hold_ms", "unavailable_ttl_ms"),
    ("routes.chat", "max_file_bytes", "max_message_bytes"),
]
#: The value every pair's upper setting takes (the lower one: ``HI + 1``, inverted, or ``HI``).
HI = 2_000_000
IDS = [f"{prefix}.{lower}>{upper}" for prefix, lower, upper in PAIRS]


def given(prefix: str, values: dict[str, int]) -> dict[str, Any]:
    """The overrides of :func:`load_settings` that set ``values`` in the table ``prefix``."""
    if prefix == "sources.shelf":
        return {**CATALOG, "sources": {"shelf": {**SHELF, **values}}}
    if prefix == "routes.chat":
        return {"routes": {**OUT, "chat": {**CHAT, **values}}}
    return {prefix: values}


def test_every_ordered_pair_is_tried_here() -> None:
    tried = {(lower, upper) for _, lower, upper in PAIRS} | {("start_date", "end_date")}
    assert {(pair.lower, pair.upper) for pair in ORDERED_SETTINGS} <= tried


@pytest.mark.parametrize(("prefix", "lower", "upper"), PAIRS, ids=IDS)
def test_an_inverted_pair_is_refused_at_load_naming_both_settings_and_their_values(
    prefix: str, lower: str, upper: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(**given(prefix, {lower: HI + 1, upper: HI}))
    text = str(caught.value)
    # a route kind's own rule is reported under its table (``routes.chat.discord: …``)
    table = "" if prefix.startswith("routes.") else prefix + "."
    assert f"{table}{lower} ({HI + 1}) must not exceed {table}{upper} ({HI})" in text, text


@pytest.mark.parametrize(("prefix", "lower", "upper"), PAIRS, ids=IDS)
def test_a_pair_at_its_edge_loads(prefix: str, lower: str, upper: str) -> None:
    settings = load_settings(**given(prefix, {lower: HI, upper: HI}))
    model: object = settings
    for part in prefix.split("."):
        model = model[part] if isinstance(model, dict) else getattr(model, part)
    assert (getattr(model, lower), getattr(model, upper)) == (HI, HI)


def test_every_inverted_pair_is_named_at_once() -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(
            supervision={"initial_backoff_ms": 60_000, "max_backoff_ms": 1_000},
            delivery={"retry_initial_interval_ms": 10_000, "retry_max_interval_ms": 5_000},
        )
    text = str(caught.value)
    assert "supervision.initial_backoff_ms (60000)" in text and "delivery.retry_initial_interval_ms (10000)" in text


def test_lowering_a_cap_below_its_default_start_is_refused_too() -> None:
    # One setting given, the other its default: what the process would run is inverted all
    # the same (a supervision backoff of 500 ms capped at 200 ms waited 200 ms every time).
    with pytest.raises(
        ConfigError,
        match=r"supervision\.initial_backoff_ms \(500\) must not exceed supervision\.max_backoff_ms \(200\)",
    ):
        load_settings(supervision={"max_backoff_ms": 200})


def test_a_target_whose_first_day_is_after_its_last_is_refused() -> None:
    # compared as the filter compares them (curaflow.sources.filters): as written
    target = {"id": "t", "routes": ["out"], "filters": {"start_date": "2026-05-02", "end_date": "2026-05-01"}}
    with pytest.raises(ConfigError) as caught:
        load_settings(targets=[target])
    assert (
        "targets[0].filters.start_date ('2026-05-02') must not exceed targets[0].filters.end_date ('2026-05-01')"
        in str(caught.value)
    )
    target["filters"] = {"start_date": "2026-05-01", "end_date": "2026-05-01"}  # one day
    assert load_settings(targets=[target]).targets[0].filters.end_date == "2026-05-01"
    target["filters"] = {"start_date": "2026-05-02"}  # no last day: no pair
    assert load_settings(targets=[target]).targets[0].filters.start_date == "2026-05-02"


#: Every setting whose name says it is the lower bound of something and that is not the
#: lower of an ordered pair, with why (``ORDERED_SETTINGS``' comment names the rest).
NOT_A_PAIR = {
    ("PixivSettings", "min_interval_ms"): "a spacing between requests, with no most",
    ("PixivSettings", "replay_min_interval_ms"): "the same, in replay mode",
    ("PixivAccount", "min_interval_ms"): "the same, of one account",
    ("SourceConfig", "min_interval_ms"): "the same, of a [sources] instance",
    ("BudgetSettings", "test_only_floor_ms"): "the budgets' floor: a budget below it falls back to its default",
    ("TemporalSettings", "sticky_schedule_to_start_ms"): "a timeout named after Temporal's schedule-to-start",
    ("TargetFilters", "min_bookmarks"): "a least of bookmarks, not of pages (max_page_count)",
    ("ApiSettings", "start_concurrency"): "workflow starts in flight at once: the start is the action",
}


def _settings_models() -> list[type[BaseModel]]:
    """Every model a configuration holds: the sections and what they hold, each registered
    route kind, the base of every ``[sources]`` kind."""
    found: list[type[BaseModel]] = []

    def walk(model: type[BaseModel]) -> None:
        if model in found:
            return
        found.append(model)
        for info in model.model_fields.values():
            for outer in (info.annotation, *get_args(info.annotation)):
                for inner in (outer, *get_args(outer)):
                    if isinstance(inner, type) and issubclass(inner, BaseModel):
                        walk(inner)

    walk(Settings)
    for kind in route_kinds().values():
        walk(kind.config)
    walk(SourceConfig)
    return found


def test_every_setting_named_as_a_lower_bound_is_ordered_or_said_not_to_be_a_pair() -> None:
    # The kind, not the instances found once: a new ``*_min_*`` / ``*initial*`` / ``*base*``
    # setting is ordered against its upper bound, or said here why it has none.
    lower = re.compile(r"(^|_)(min|initial|base|lower|start|floor)(_|$)")
    ordered = {(pair.model, pair.lower) for pair in ORDERED_SETTINGS}
    unsaid = [
        f"{model.__name__}.{name}"
        for model in _settings_models()
        for name in model.model_fields
        if lower.search(name)
        and not any(issubclass(model, owner) and name == field for owner, field in ordered)
        and (model.__name__, name) not in NOT_A_PAIR
    ]
    assert unsaid == []


def test_the_defaults_are_ordered() -> None:
    load_settings(**CATALOG, sources={"shelf": SHELF})


def test_temporal_refuses_the_retry_policy_an_inverted_delivery_pair_gave() -> None:
    # The rule's source for delivery.retry_*: each step's RetryPolicy is built from them in
    # the workflow (workflows/steps.py), and the SDK refuses it as the step is scheduled.
    policy = RetryPolicy(initial_interval=timedelta(seconds=10), maximum_interval=timedelta(seconds=5))
    with pytest.raises(ValueError, match="Maximum interval cannot be less than initial interval"):
        policy.apply_to_proto(RetryPolicyProto())


@pytest.mark.parametrize(
    "overrides",
    [
        # a loop down for fatal_after_ms fails the process, whatever the backoff between restarts
        {"supervision": {"fatal_after_ms": 1_000, "max_backoff_ms": 30_000}},
        # the connect timeout also bounds the pool's first connections, where no acquire waits
        {"database": {"connect_timeout_ms": 60_000, "acquire_timeout_ms": 1_000}},
        # the API caps every database wait at its own bound, on purpose
        {"api": {"ledger_timeout_ms": 100}, "database": {"statement_timeout_ms": 60_000}},
        # a source page and an image page are different answers
        {"outbound": {"page_max_bytes": 128 * 1024 * 1024, "download_max_bytes": 65_536}},
        # the standby poll and the lease: the renewal is min(poll, lease / 4) on its own
        {"pixiv": {"source_standby_poll_ms": 60_000, "source_lease_ms": 400}},
    ],
    ids=["fatal-after", "connect-acquire", "ledger-timeout", "page-download", "standby-lease"],
)
def test_settings_that_are_independent_are_not_ordered(overrides: dict[str, object]) -> None:
    load_settings(**overrides)
