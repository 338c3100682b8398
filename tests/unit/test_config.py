"""Configuration loading, validation messages and budget resolution (reference §8)."""

from __future__ import annotations

from pathlib import Path

import pytest

from curaflow.config import ConfigError, load_settings, resolve_budget


def test_builtin_default_is_one_demo_target_delivering_to_a_directory(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("CURAFLOW_CONFIG", "TEMPORAL_ADDRESS", "DATABASE_URL"):
        monkeypatch.delenv(name, raising=False)
    settings = load_settings()
    assert [t.id for t in settings.targets] == ["demo"]
    assert settings.routes["out"].kind == "directory"
    assert settings.routes["out"].path.name == "curaflow-out"
    assert settings.embedded


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (120_000, 120_000),
        (59_999, 1_800_000),
        ("90000", 1_800_000),
        (None, 1_800_000),
        (float("nan"), 1_800_000),
        (60_000.7, 60_000),
        (True, 1_800_000),
    ],
)
def test_budget_resolution_falls_back_to_the_default(value: object, expected: int) -> None:
    assert resolve_budget(value, 1_800_000) == expected


def test_invalid_config_names_the_field(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text(
        '[routes.hook]\nkind = "webhook"\nurl = "http://x"\nsecret = "short!"\n'
        '[[targets]]\nid = "t"\nroutes = ["hook"]\n'
    )
    with pytest.raises(ConfigError) as err:
        load_settings(path)
    assert "routes.hook" in str(err.value) and "whsec_" in str(err.value)


def test_unknown_route_reference_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text('[routes.out]\nkind = "directory"\npath = "x"\n[[targets]]\nid = "t"\nroutes = ["nope"]\n')
    with pytest.raises(ConfigError, match="unknown route 'nope'"):
        load_settings(path)


def test_a_route_named_twice_by_a_target_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text('[routes.out]\nkind = "directory"\npath = "x"\n[[targets]]\nid = "t"\nroutes = ["out", "out"]\n')
    with pytest.raises(ConfigError, match=r"target 't' names route\(s\) \['out'\] more than once"):
        load_settings(path)


def test_missing_file_is_reported(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        load_settings(tmp_path / "absent.toml")


def test_conventional_environment_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEMPORAL_ADDRESS", "temporal:7233")
    monkeypatch.setenv("DATABASE_URL", "postgresql://db/curaflow")
    monkeypatch.setenv("CURAFLOW_API__PORT", "9999")
    settings = load_settings()
    assert settings.temporal.address == "temporal:7233"
    assert settings.database.url == "postgresql://db/curaflow"
    assert settings.api.port == 9999
    assert not settings.embedded


def test_test_only_floor_allows_short_budgets() -> None:
    settings = load_settings(budgets={"queued_timeout_ms": 2000, "test_only_floor_ms": 1000})
    assert settings.budgets.queued_ms == 2000
    assert load_settings(budgets={"queued_timeout_ms": 2000}).budgets.queued_ms == 1_800_000


def schedule_config(tmp_path: Path, **plan: str) -> Path:
    path = tmp_path / "c.toml"
    lines = "".join(f'{key} = "{value}"\n' for key, value in plan.items())
    path.write_text('[[schedules]]\nid = "nightly"\ntarget_ids = ["demo"]\n' + lines)
    return path


@pytest.mark.parametrize(
    ("plan", "message"),
    [
        ({"cron": "0 3 * *"}, "expected 5 fields"),
        ({"cron": "0 3 * * * * * *"}, "expected 5 fields"),
        ({"cron": "0 3 * * *;"}, "expected 5 fields"),
        ({"cron": "@sometimes"}, "unknown descriptor"),
        ({"cron": "@every"}, "unknown descriptor"),
        ({"cron": "0 3 * * *", "timezone": "Tokyo"}, "unknown timezone 'Tokyo'"),
        # names the time-zone database files but no IANA zone: "localtime" is each host's own
        # zone (the Temporal server's for the cron, each worker's for the job id), "right/…"
        # counts leap seconds (Python reads 02:00Z in December as Berlin's 04:00+0200)
        ({"cron": "0 3 * * *", "timezone": "localtime"}, "not an IANA time zone 'localtime'"),
        ({"cron": "0 3 * * *", "timezone": "posixrules"}, "not an IANA time zone 'posixrules'"),
        ({"cron": "0 3 * * *", "timezone": "Factory"}, "not an IANA time zone 'Factory'"),
        ({"cron": "0 3 * * *", "timezone": "right/Europe/Berlin"}, "not an IANA time zone 'right/Europe/Berlin'"),
        ({"cron": "0 3 * * *", "timezone": "posix/Europe/Berlin"}, "not an IANA time zone 'posix/Europe/Berlin'"),
    ],
)
def test_bad_schedule_cron_or_timezone_is_refused_at_load(tmp_path: Path, plan: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message) as err:
        load_settings(schedule_config(tmp_path, **plan))
    assert "schedules" in str(err.value)


@pytest.mark.parametrize(
    "plan",
    [
        {"cron": "0 3 * * *", "timezone": "Asia/Tokyo"},
        {"cron": "0 3 * * *", "timezone": "Asia/Kathmandu"},
        {"cron": "0 3 * * *", "timezone": "Etc/GMT+5"},
        {"cron": "0 3 * * *", "timezone": "EST5EDT"},
        {"cron": "30 4 1-15 JAN,JUL MON-FRI"},
        {"cron": "0 0 3 * * * 2027"},
        {"cron": "@daily"},
        {"cron": "@every 90m"},
    ],
)
def test_temporal_cron_shapes_are_accepted(tmp_path: Path, plan: dict[str, str]) -> None:
    settings = load_settings(schedule_config(tmp_path, **plan))
    assert settings.schedules[0].cron == [plan["cron"]]


@pytest.mark.parametrize(
    ("budgets", "field", "used", "why"),
    [
        ({"queued_timeout_ms": 30_000}, "budgets.queued_timeout_ms", 1_800_000, "below_floor"),
        ({"stall_timeout_ms": "15m"}, "budgets.stall_timeout_ms", 900_000, "not_a_number"),
        ({"stall_timeout_ms": True}, "budgets.stall_timeout_ms", 900_000, "not_a_number"),
        ({"queued_timeout_ms": 90_000.5}, "budgets.queued_timeout_ms", 90_000, "not_an_integer"),
    ],
)
def test_a_budget_not_used_as_configured_is_warned_about(
    budgets: dict[str, object], field: str, used: int, why: str
) -> None:
    """The original warns at config validation (reference §8); a silent fallback hides a typo."""
    from structlog.testing import capture_logs

    from curaflow.config import warn_budget_fallbacks
    from curaflow.observability.logs import get_logger

    settings = load_settings(budgets=budgets)
    with capture_logs() as logs:
        warn_budget_fallbacks(settings, get_logger("test"))
    [line] = [entry for entry in logs if entry["event"] == "config.budget_fallback"]
    assert line["log_level"] == "warning"
    assert (line["field"], line["used_ms"], line["why"]) == (field, used, why)
    assert field in line["message"] and str(used) in line["message"]


def test_budgets_used_as_configured_are_not_warned_about() -> None:
    from structlog.testing import capture_logs

    from curaflow.config import warn_budget_fallbacks
    from curaflow.observability.logs import get_logger

    settings = load_settings(budgets={"queued_timeout_ms": 120_000, "stall_timeout_ms": 60_000})
    with capture_logs() as logs:
        assert warn_budget_fallbacks(settings, get_logger("test")) == []
    assert logs == []


def test_each_load_reads_its_own_file_with_no_shared_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from concurrent.futures import ThreadPoolExecutor

    monkeypatch.delenv("CURAFLOW_CONFIG", raising=False)
    files = []
    for n in range(8):
        path = tmp_path / f"c{n}.toml"
        path.write_text(f"reconcile_interval_ms = {1000 + n}\n")
        files.append(path)
    with ThreadPoolExecutor(8) as pool:  # concurrent loads: no file leaks into another load
        loaded = list(pool.map(lambda p: load_settings(p).reconcile_interval_ms, files * 4))
    assert loaded == [1000 + n for n in range(8)] * 4
    assert load_settings().reconcile_interval_ms == 30_000  # no file: the defaults, not the last file


def test_the_former_fallback_key_is_still_read(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text("max_fallback_stages = 5\n")
    assert load_settings(path).max_fallback_passes == 5
    path.write_text("max_fallback_passes = 2\n")
    assert load_settings(path).max_fallback_passes == 2


@pytest.mark.parametrize("token", ["  tok-123\n", "\ttok-123 ", "tok-123\r\n", "\ufefftok-123"])
def test_a_refresh_token_is_used_without_the_whitespace_around_it(monkeypatch: pytest.MonkeyPatch, token: str) -> None:
    # a token pasted with a newline was sent verbatim and blamed on the account (invalid_grant)
    monkeypatch.setenv("PIXIV_REFRESH_TOKEN", token)
    settings = load_settings(pixiv={"accounts": {"second": {"refresh_token": token}}, "refresh_token": token})
    for name, config in settings.source_configs().items():
        assert config.refresh_token is not None, name
        assert config.refresh_token.get_secret_value() == "tok-123", name  # type: ignore[attr-defined]
    assert settings.pixiv.refresh_token is not None and settings.pixiv.refresh_token.get_secret_value() == "tok-123"


def test_a_refresh_token_with_whitespace_inside_is_refused_naming_the_setting() -> None:
    with pytest.raises(ConfigError, match=r"pixiv\.accounts\.second\.refresh_token"):
        load_settings(pixiv={"accounts": {"second": {"refresh_token": "tok 123"}}})


@pytest.mark.parametrize("value", [0, 59_999, 86_400_001, 7 * 86_400_000])
def test_the_route_wide_rate_limit_cap_is_refused_below_a_minute_or_beyond_a_day(value: int) -> None:
    with pytest.raises(ConfigError, match=r"delivery\.route_rate_limit_cap_ms: .*between 60000 \(1 min\) and 86400000"):
        load_settings(delivery={"route_rate_limit_cap_ms": value})


@pytest.mark.parametrize("value", [0, 999, 86_400_001, 864_000_000, 7 * 86_400_000])
def test_the_refusal_pause_of_a_route_is_refused_below_a_second_or_beyond_a_day(value: int) -> None:
    # 864 000 000 is a day (86 400 000) with one zero too many: 10 days. It held a broken
    # route for as long, silently, where the rate-limit cap beside it is refused at load.
    with pytest.raises(ConfigError, match=r"delivery\.route_pause_ms: .*between 1000 \(1 s\) and 86400000 \(24 h\)"):
        load_settings(delivery={"route_pause_ms": value})


@pytest.mark.parametrize("value", [1_000, 3_600_000, 86_400_000])
def test_the_refusal_pause_of_a_route_may_be_anything_from_a_second_to_a_day(value: int) -> None:
    assert load_settings(delivery={"route_pause_ms": value}).delivery.route_pause_ms == value


def test_the_route_wide_rate_limit_cap_is_its_own_setting_not_the_refusal_pause() -> None:
    # One setting, one decision: the pause after refusals never moves the rate-limit cap.
    default = load_settings().delivery
    assert default.route_rate_limit_cap_ms == 3_600_000 == default.route_pause_ms
    shorter = load_settings(delivery={"route_pause_ms": 60_000}).delivery
    assert shorter.route_rate_limit_cap_ms == 3_600_000
    both = load_settings(delivery={"route_pause_ms": 60_000, "route_rate_limit_cap_ms": 60_000}).delivery
    assert both.route_rate_limit_cap_ms == 60_000


# ---- an account's gate: the spacing and the concurrency of its requests -------------------

#: A ``[sources]`` kind of the tests (``tests/fakes/catalog_source.py``), registered by its module.
CATALOG = {"source_modules": ["tests.fakes.catalog_source"]}


@pytest.mark.parametrize(
    ("section", "loc"),
    [
        ({"pixiv": {"min_interval_ms": "{v}"}}, r"pixiv\.min_interval_ms"),
        ({"pixiv": {"replay_min_interval_ms": "{v}"}}, r"pixiv\.replay_min_interval_ms"),
        ({"pixiv": {"accounts": {"second": {"min_interval_ms": "{v}"}}}}, r"pixiv\.accounts\.second\.min_interval_ms"),
        (
            {
                **CATALOG,
                "sources": {"shelf": {"kind": "catalog", "url": "http://127.0.0.1:9", "min_interval_ms": "{v}"}},
            },
            r"sources\.shelf\.min_interval_ms",
        ),
    ],
)
@pytest.mark.parametrize("value", [-1, 60_001, 600_000, 86_400_000])
def test_an_accounts_request_spacing_is_refused_beyond_a_minute(
    section: dict[str, object], loc: str | None, value: int
) -> None:
    # 600 000 is a minute with a zero too many: every job of the account waited ten minutes
    # a request, silently, until its deadline.
    with pytest.raises(ConfigError, match=(loc or r"min_interval_ms") + r": .*between 0 and 60000 \(1 min\)"):
        load_settings(**_with(section, value))


@pytest.mark.parametrize(
    ("section", "loc"),
    [
        ({"pixiv": {"replay_max_concurrency": "{v}"}}, r"pixiv\.replay_max_concurrency"),
        ({"pixiv": {"accounts": {"second": {"max_concurrency": "{v}"}}}}, r"pixiv\.accounts\.second\.max_concurrency"),
        (
            {
                **CATALOG,
                "sources": {"shelf": {"kind": "catalog", "url": "http://127.0.0.1:9", "max_concurrency": "{v}"}},
            },
            r"sources\.shelf\.max_concurrency",
        ),
    ],
)
@pytest.mark.parametrize("value", [0, 65, 1_000])
def test_an_accounts_concurrency_is_refused_beyond_64(section: dict[str, object], loc: str | None, value: int) -> None:
    with pytest.raises(ConfigError, match=(loc or r"max_concurrency") + r": .*between 1 and 64"):
        load_settings(**_with(section, value))


@pytest.mark.parametrize(("interval", "concurrency"), [(0, 1), (1_000, 1), (60_000, 64)])
def test_an_accounts_gate_may_be_anything_within_its_bounds(interval: int, concurrency: int) -> None:
    settings = load_settings(
        pixiv={"accounts": {"second": {"min_interval_ms": interval, "max_concurrency": concurrency}}}
    )
    second = settings.pixiv.accounts["second"]
    assert (second.min_interval_ms, second.max_concurrency) == (interval, concurrency)


def _with(section: dict[str, object], value: int) -> dict[str, object]:
    """``section`` with its ``"{v}"`` placeholder replaced by ``value``."""
    return {
        k: (_with(v, value) if isinstance(v, dict) else value if v == "{v}" else v)  # type: ignore[arg-type]
        for k, v in section.items()
    }


def test_the_foreign_queue_wait_defaults_to_20_s_and_is_read_from_the_file_and_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from curaflow.config import DEFAULT_FOREIGN_QUEUE_WAIT_MS
    from curaflow.ledger.reconciler import FOREIGN_QUEUE_WAIT_MS

    monkeypatch.delenv("CURAFLOW_CONFIG", raising=False)
    monkeypatch.delenv("CURAFLOW_FOREIGN_QUEUE_WAIT_MS", raising=False)
    assert load_settings().foreign_queue_wait_ms == DEFAULT_FOREIGN_QUEUE_WAIT_MS == FOREIGN_QUEUE_WAIT_MS == 20_000
    path = tmp_path / "c.toml"
    path.write_text("foreign_queue_wait_ms = 60000\n")
    assert load_settings(path).foreign_queue_wait_ms == 60_000
    monkeypatch.setenv("CURAFLOW_FOREIGN_QUEUE_WAIT_MS", "5000")
    assert load_settings(path).foreign_queue_wait_ms == 5_000


@pytest.mark.parametrize(
    ("value", "message"),
    [(0, "greater than or equal to 1000"), (999, "greater than or equal to 1000"), (366 * 86_400_000, "at most")],
)
def test_a_foreign_queue_wait_under_a_second_or_beyond_a_year_is_refused(value: int, message: str) -> None:
    # Under a second the wait would only race Temporal's list of the queue's pollers.
    with pytest.raises(ConfigError, match=rf"foreign_queue_wait_ms.*{message}"):
        load_settings(foreign_queue_wait_ms=value)


@pytest.mark.parametrize("value", [60_001, 300_000, 86_400_000])
def test_a_ledger_gauges_interval_beyond_a_minute_is_refused_naming_the_alert(value: int) -> None:
    # A reading older than 2 minutes, for 2 minutes, pages CuraflowLedgerGaugesStale: a process
    # reading less often than every minute would page it while its ledger answers every read.
    with pytest.raises(ConfigError, match=r"observability\.ledger_gauges_interval_ms.*at most 60000"):
        load_settings(observability={"ledger_gauges_interval_ms": value})


@pytest.mark.parametrize("value", [100, 15_000, 60_000])
def test_a_ledger_gauges_interval_up_to_a_minute_loads(value: int) -> None:
    assert (
        load_settings(observability={"ledger_gauges_interval_ms": value}).observability.ledger_gauges_interval_ms
        == value
    )
