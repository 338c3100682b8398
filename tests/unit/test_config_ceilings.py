"""Every duration a setting gives is one the parts downstream can honour, or a clear
refusal at load: a value beyond them (a unit slip, a zero too many, a paste) failed only
when first used — a traceback from ``curaflow prune``, a worker's retention loop failing
until the worker exits, PostgreSQL refusing the session's statement timeout —, and a
budget beyond them overflowed the timer it set (``curaflow.config.checks.check_durations``).
"""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from curaflow.cli.app import app
from curaflow.config import ConfigError, load_settings
from curaflow.config.budgets import budget_fallback
from curaflow.config.checks import MAX_SETTING_DAYS, MAX_SETTING_MS, PG_MAX_TIMEOUT_MS
from curaflow.protocol.models import MAX_DEADLINE_MS

HOOK = {"kind": "webhook", "url": "http://127.0.0.1:9/h", "secret": "whsec_" + "a" * 32}
#: A ``[sources]`` kind of the tests (``tests/fakes/catalog_source.py``), registered by its module.
CATALOG = {"source_modules": ["tests.fakes.catalog_source"]}
OUT = {"out": {"kind": "directory", "path": "curaflow-out"}}  # the built-in target's route
SHELF = {"kind": "catalog", "url": "http://127.0.0.1:9"}


@pytest.mark.parametrize(
    ("overrides", "loc"),
    [
        ({"database": {"statement_timeout_ms": PG_MAX_TIMEOUT_MS + 1}}, r"database\.statement_timeout_ms"),
        ({"database": {"connect_timeout_ms": MAX_SETTING_MS + 1}}, r"database\.connect_timeout_ms"),
        ({"retention": {"days": MAX_SETTING_DAYS + 1}}, r"retention\.days"),
        ({"retention": {"days": 10**11}}, r"retention\.days"),
        ({"retention": {"interval_ms": 10**17}}, r"retention\.interval_ms"),
        ({"delivery": {"route_hold_ms": 10**17}}, r"delivery\.route_hold_ms"),
        ({"delivery": {"retry_max_interval_ms": 10**15}}, r"delivery\.retry_max_interval_ms"),
        ({"budgets": {"heartbeat_interval_ms": 10**15}}, r"budgets\.heartbeat_interval_ms"),
        ({"budgets": {"default_deadline_ms": MAX_DEADLINE_MS + 1}}, r"budgets\.default_deadline_ms"),
        ({"api": {"cancel_wait_ms": 10**13}}, r"api\.cancel_wait_ms"),
        ({"pixiv": {"request_timeout_ms": 10**15}}, r"pixiv\.request_timeout_ms"),
        ({"pixiv": {"unavailable_ttl_ms": 10**18}}, r"pixiv\.unavailable_ttl_ms"),
        ({"outbound": {"download_timeout_ms": 10**15}}, r"outbound\.download_timeout_ms"),
        ({"routes": {**OUT, "hook": {**HOOK, "timeout_ms": 10**15}}}, r"routes\.hook\.timeout_ms"),
        (
            {**CATALOG, "sources": {"shelf": {**SHELF, "unrecognised_hold_ms": 10**15}}},
            r"sources\.shelf\.unrecognised_hold_ms",
        ),
    ],
)
def test_a_duration_beyond_what_its_parts_honour_is_refused_at_load_naming_it(
    overrides: dict[str, object], loc: str
) -> None:
    with pytest.raises(ConfigError, match=loc + r" .*at most"):
        load_settings(**overrides)


def test_every_duration_at_its_ceiling_is_accepted() -> None:
    settings = load_settings(
        database={"statement_timeout_ms": PG_MAX_TIMEOUT_MS},
        retention={"days": MAX_SETTING_DAYS, "interval_ms": MAX_SETTING_MS},
        delivery={"route_hold_ms": MAX_SETTING_MS},
        budgets={"default_deadline_ms": MAX_DEADLINE_MS},
    )
    assert settings.database.statement_timeout_ms == PG_MAX_TIMEOUT_MS
    assert settings.retention.days == MAX_SETTING_DAYS
    assert settings.budgets.default_deadline_ms == MAX_DEADLINE_MS


def test_every_offending_setting_is_named_at_once() -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(database={"statement_timeout_ms": 10**10}, retention={"days": 10**11})
    assert "database.statement_timeout_ms" in str(caught.value) and "retention.days" in str(caught.value)


@pytest.mark.parametrize("field", ["queued_timeout_ms", "stall_timeout_ms"])
def test_a_budget_beyond_the_ceiling_falls_back_to_its_default_with_a_warning(field: str) -> None:
    # The budgets keep the original's rule (reference §8): a process never refuses to start
    # on one; a value it cannot honour is replaced by the default and named in a warning.
    settings = load_settings(budgets={field: 10**17})
    used = settings.budgets.queued_ms if field == "queued_timeout_ms" else settings.budgets.stall_ms
    assert used <= MAX_SETTING_MS
    fallback = budget_fallback(f"budgets.{field}", 10**17, 1_800_000)
    assert fallback is not None and fallback.why == "above_ceiling" and fallback.used_ms == 1_800_000


@pytest.mark.parametrize(
    "args",
    [
        ["prune", "--older-than-days", str(10**11)],  # a traceback from the ledger's timestamp arithmetic
        ["prune", "--older-than-days", str(MAX_SETTING_DAYS + 1)],
        ["temporal-setup", "--timeout", "-1"],  # was accepted: no try at all
    ],
    ids=" ".join,
)
def test_a_command_refuses_a_duration_out_of_range_before_doing_anything(args: list[str]) -> None:
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    words = " ".join(result.output.replace("│", " ").split())
    assert "Invalid value for" in words and args[1] in words
