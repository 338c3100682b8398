"""Every setting is settable from the environment with the same result as from the file.

The settings model is enumerated (every field of every section, and the top-level
ones): each gets a value other than its default, once from the TOML file and once from
``CURAFLOW_<SECTION>__<FIELD>`` (as the environment carries it: text; JSON for lists and
tables), and the loaded settings must be the same. The environment also wins over a
valid TOML value of the same key.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, get_args

import pytest
import tomli_w
from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo

from curaflow.config import ConfigError, Settings, load_settings
from curaflow.observability.secrets import MASK, redacted

#: Fields whose values are whole tables of the file (routes, targets, schedules, accounts):
#: set from the environment as JSON, covered by their own test below.
TABLES = {"routes", "targets", "schedules"}

#: A value to try per field when the default-derived candidates are not accepted.
SPECIAL: dict[str, Any] = {
    "observability.log_level": "DEBUG",
    "observability.otlp_endpoint": "http://otel:4318",
    "temporal.address": "temporal.example:7233",
    "temporal.config_file": None,  # a file that must exist: tested in test_temporal_profile
    "temporal.profile": None,
    "temporal.deployment_name": None,  # set with build_id only: tested in test_versioning_settings
    "temporal.build_id": None,
    "database.url": "postgresql://u@db.example/curaflow",
    "pixiv.accounts": {"second": {"min_interval_ms": 1500}},
    "api.callback_allowed_hosts": ["hooks.example", "other.example"],
    "outbound.private_networks": ["10.0.0.0/8", "192.168.0.0/16"],
    "budgets.test_only_floor_ms": 1000,
    "source_modules": ["curaflow.sources.pixiv.source"],
    "route_modules": ["curaflow.routes.webhook"],
    "sources": None,  # a kind a module registers: tested in tests/unit/test_source_registry.py
}


def candidates(path: str, info: FieldInfo) -> list[Any]:
    if path in SPECIAL:
        return [SPECIAL[path]]
    default = info.get_default(call_default_factory=True)
    annotation = info.annotation
    kinds = set(get_args(annotation)) | {annotation}
    if isinstance(default, bool) or bool in kinds:
        return [not bool(default)]
    if isinstance(default, int | float) and not isinstance(default, bool):
        return [default * 2, default + 1, default - 1, 120_000]
    if default is None and (int in kinds):
        return [4321, 120_000]
    if isinstance(default, Path) or Path in kinds:
        return ["/srv/curaflow/" + path.replace(".", "-")]
    if isinstance(default, SecretStr) or SecretStr in kinds:
        return ["s3cret-value"]
    if isinstance(default, str) or str in kinds:
        return ["value-" + path.split(".")[-1].replace("_", "-")]
    if isinstance(default, list):
        return [["a.example", "b.example"]]
    return []


def env_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | dict):
        return json.dumps(value)
    return str(value)


def leaf_fields() -> list[tuple[str, FieldInfo]]:
    found: list[tuple[str, FieldInfo]] = []
    for name, info in Settings.model_fields.items():
        if name in TABLES:
            continue
        annotation = info.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            found += [(f"{name}.{sub}", sub_info) for sub, sub_info in annotation.model_fields.items()]
        else:
            found.append((name, info))
    return found


def nested(path: str, value: Any) -> dict[str, Any]:
    parts = path.split(".")
    out: dict[str, Any] = {parts[-1]: value}
    for part in reversed(parts[:-1]):
        out = {part: out}
    return out


def read(settings: Settings, path: str) -> Any:
    value: Any = settings
    for part in path.split("."):
        value = getattr(value, part)
    if isinstance(value, SecretStr):
        return value.get_secret_value()
    if isinstance(value, BaseModel):
        return value.model_dump()
    if isinstance(value, dict):
        return {k: v.model_dump() if isinstance(v, BaseModel) else v for k, v in value.items()}
    return value


pytestmark = pytest.mark.usefixtures("config_environment_cleared")


def from_file(tmp_path: Path, data: dict[str, Any]) -> Settings:
    path = tmp_path / "curaflow.toml"
    path.write_text(tomli_w.dumps(data))
    return load_settings(path)


FIELDS = [(p, i) for p, i in leaf_fields() if SPECIAL.get(p, 0) is not None]


def test_the_enumeration_covers_every_section() -> None:
    sections = {p.split(".")[0] for p, _ in FIELDS}
    assert {"temporal", "database", "api", "budgets", "delivery", "pixiv", "observability", "supervision"} <= sections
    assert "budgets.queued_timeout_ms" in dict(FIELDS) and "budgets.stall_timeout_ms" in dict(FIELDS)
    assert len(FIELDS) > 60


@pytest.mark.parametrize(("path", "info"), FIELDS, ids=[p for p, _ in FIELDS])
def test_a_setting_from_the_environment_equals_the_same_setting_from_the_file(
    path: str, info: FieldInfo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    default = read(load_settings(None), path)
    accepted = None
    for value in candidates(path, info):
        try:
            settings = from_file(tmp_path, nested(path, value))
        except ConfigError:
            continue
        if read(settings, path) != default:
            accepted = (value, settings)
            break
    assert accepted is not None, f"no test value for {path} ({info.annotation}); add one to SPECIAL"
    value, expected = accepted
    env = "CURAFLOW_" + path.upper().replace(".", "__")
    monkeypatch.setenv(env, env_text(value))
    from_env = load_settings(None)
    assert read(from_env, path) == read(expected, path), f"{env}={env_text(value)}"
    if path.startswith("budgets."):
        assert from_env.budgets.fallbacks() == expected.budgets.fallbacks() == []


def test_a_budget_from_the_environment_wins_over_a_valid_file_value(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CURAFLOW_BUDGETS__QUEUED_TIMEOUT_MS", "20000")
    monkeypatch.setenv("CURAFLOW_BUDGETS__STALL_TIMEOUT_MS", "90000")
    monkeypatch.setenv("CURAFLOW_BUDGETS__TEST_ONLY_FLOOR_MS", "1000")
    settings = from_file(tmp_path, {"budgets": {"queued_timeout_ms": 300_000, "stall_timeout_ms": 400_000}})
    assert (settings.budgets.queued_ms, settings.budgets.stall_ms) == (20_000, 90_000)
    assert settings.budgets.fallbacks() == []


@pytest.mark.parametrize(
    ("text", "used", "why"), [("abc", 1_800_000, "not_a_number"), ("59999", 1_800_000, "below_floor")]
)
def test_a_budget_the_file_would_refuse_is_refused_from_the_environment_alike(
    text: str, used: int, why: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CURAFLOW_BUDGETS__QUEUED_TIMEOUT_MS", text)
    settings = load_settings(None)
    assert settings.budgets.queued_ms == used
    assert [f.why for f in settings.budgets.fallbacks()] == [why]


def test_tables_from_the_environment_equal_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tables = {
        "routes": {"drop": {"kind": "directory", "path": str(tmp_path / "drop")}},
        "targets": [{"id": "night", "query": {"tags": ["風景"]}, "routes": ["drop"]}],
        "schedules": [{"id": "nightly", "cron": ["0 3 * * *"], "target_ids": ["night"]}],
    }
    expected = from_file(tmp_path, tables)
    for name, value in tables.items():
        monkeypatch.setenv(f"CURAFLOW_{name.upper()}", json.dumps(value))
    from_env = load_settings(None)
    for name in tables:
        assert [
            v.model_dump() for v in (getattr(from_env, name).values() if name == "routes" else getattr(from_env, name))
        ] == [
            v.model_dump() for v in (getattr(expected, name).values() if name == "routes" else getattr(expected, name))
        ], name


@pytest.mark.parametrize(
    ("conventional", "prefixed", "path", "value"),
    [
        ("TEMPORAL_ADDRESS", "CURAFLOW_TEMPORAL__ADDRESS", "temporal.address", "t.example:7233"),
        ("TEMPORAL_NAMESPACE", "CURAFLOW_TEMPORAL__NAMESPACE", "temporal.namespace", "prod"),
        ("DATABASE_URL", "CURAFLOW_DATABASE__URL", "database.url", "postgresql://db.example/c"),
        ("CURAFLOW_API_TOKEN", "CURAFLOW_API__TOKEN", "api.token", "tok-123"),
        ("PIXIV_REFRESH_TOKEN", "CURAFLOW_PIXIV__REFRESH_TOKEN", "pixiv.refresh_token", "rt-123"),
    ],
)
def test_conventional_names_equal_the_prefixed_ones(
    conventional: str, prefixed: str, path: str, value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(conventional, value)
    one = read(load_settings(None), path)
    monkeypatch.delenv(conventional)
    monkeypatch.setenv(prefixed, value)
    assert read(load_settings(None), path) == one == value


ROUTE_SECRETS_TOML = {
    "routes": {
        "tg": {"kind": "telegram", "chat_id": "-1001234567890"},
        "hook": {"kind": "webhook", "url": "https://hooks.example/curaflow"},
        "chat": {"kind": "discord"},
    },
    "targets": [{"id": "t", "query": {"tags": ["風景"]}, "routes": ["tg", "hook", "chat"]}],
}
ROUTE_SECRETS = {
    "CURAFLOW_ROUTES__TG__BOT_TOKEN": "123456:telegram-bot-token",
    "CURAFLOW_ROUTES__HOOK__SECRET": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
    "CURAFLOW_ROUTES__CHAT__URL": "https://discord.com/api/webhooks/1/discord-token",
}


def route_secrets(settings: Settings) -> dict[str, str]:
    return {name: value for name, value in settings.secrets() if name.startswith("routes.")}


def test_route_secrets_come_from_the_environment_not_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in ROUTE_SECRETS.items():
        monkeypatch.setenv(name, value)
    settings = from_file(tmp_path, ROUTE_SECRETS_TOML)
    assert route_secrets(settings) == {
        "routes.tg.bot_token": "123456:telegram-bot-token",
        "routes.hook.secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        "routes.chat.url": "https://discord.com/api/webhooks/1/discord-token",
    }


def test_route_secrets_come_from_files_in_the_secrets_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secrets = tmp_path / "run-secrets"
    secrets.mkdir()
    for name, value in ROUTE_SECRETS.items():
        (secrets / name).write_text(value + "\n")  # as `echo` writes it
    monkeypatch.setenv("CURAFLOW_SECRETS_DIR", str(secrets))
    monkeypatch.setenv("CURAFLOW_ROUTES__TG__BOT_TOKEN", "999:from-the-environment")  # the environment wins
    settings = from_file(tmp_path, ROUTE_SECRETS_TOML)
    assert route_secrets(settings) == {
        "routes.tg.bot_token": "999:from-the-environment",
        "routes.hook.secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        "routes.chat.url": "https://discord.com/api/webhooks/1/discord-token",
    }
    monkeypatch.setenv("CURAFLOW_SECRETS_DIR", str(tmp_path / "missing"))
    with pytest.raises(ConfigError, match="CURAFLOW_SECRETS_DIR"):
        from_file(tmp_path, ROUTE_SECRETS_TOML)


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"CURAFLOW_API_TOKEN": "change-me-long-random-token"}, "api.token"),
        ({"CURAFLOW_API__TOKEN": "change-me-please"}, "api.token"),
        ({"PIXIV_REFRESH_TOKEN": "change-me"}, "pixiv.refresh_token"),
        ({"DATABASE_URL": "postgresql://curaflow:change-me-curaflow-db@db/curaflow"}, "database.url (password)"),
        # asyncpg reads these passwords (percent-decoded; the query's when the URL's user has
        # none) and connects with the example's: until 2026-12-07 urlsplit read
        # 'change%2Dme-curaflow-db' or no password, and they ran.
        ({"DATABASE_URL": "postgresql://curaflow:change%2Dme-curaflow-db@db/curaflow"}, "database.url (password)"),
        ({"DATABASE_URL": "postgresql://curaflow:%43hange-me-curaflow-db@db/curaflow"}, "database.url (password)"),
        (
            {"DATABASE_URL": "postgresql://curaflow@db/curaflow?password=change-me-curaflow-db"},
            "database.url (password)",
        ),
        # An unencoded '/' makes every reader find another password (urlsplit none, asyncpg
        # a port): refused by the URL's text, before asyncpg's unreadable URL.
        ({"DATABASE_URL": "postgresql://curaflow:change-me/x@db/curaflow"}, "database.url (password)"),
        ({"DATABASE_URL": "postgresql://curaflow:change-me#x@db/curaflow"}, "database.url (password)"),
        ({"CURAFLOW_ROUTES__TG__BOT_TOKEN": "Change-Me-bot"}, "routes.tg.bot_token"),
    ],
)
def test_an_example_secret_is_refused_at_start(
    env: dict[str, str], named: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in {**ROUTE_SECRETS, **env}.items():
        monkeypatch.setenv(name, value)
    # One setting "holds" (until 2026-12-07 "api.token still hold", a newcomer's finding).
    with pytest.raises(ConfigError, match=rf"error, {re.escape(named)} still holds the example value 'change-me…'"):
        from_file(tmp_path, ROUTE_SECRETS_TOML)


def test_several_example_secrets_are_named_together_and_hold_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in {
        **ROUTE_SECRETS,
        "CURAFLOW_API__TOKEN": "change-me-please",
        "DATABASE_URL": "postgresql://curaflow:change-me-curaflow-db@db/curaflow",
    }.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(
        ConfigError, match=r"error, api\.token, database\.url \(password\) still hold the example value 'change-me…'"
    ):
        from_file(tmp_path, ROUTE_SECRETS_TOML)


@pytest.mark.parametrize(
    ("url", "password"),
    [
        ("postgresql://curaflow:s3cret%2Fpass-word@db/curaflow", "s3cret/pass-word"),
        ("postgresql://curaflow@db/curaflow?sslmode=disable&password=s3cret-pass-word", "s3cret-pass-word"),
        ("postgresql://curaflow:s3cret:pass-word@db/curaflow", "s3cret:pass-word"),
    ],
    ids=["percent-encoded", "in the query", "holding a colon"],
)
def test_the_database_password_asyncpg_sends_is_masked(
    url: str, password: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The password masked in every line and failure once the settings load
    (``Settings.secret_settings``, :func:`curaflow.observability.secrets.hold`) is the one
    asyncpg sends, as sent and as the URL writes it: until 2026-12-07 a password given in
    the URL's query (asyncpg's ``?password=``) was none, and was written out as it came."""
    monkeypatch.setenv("DATABASE_URL", url)
    from_file(tmp_path, {})
    written = url.split("password=")[-1] if "?" in url else url.split(":", 2)[2].rsplit("@", 1)[0]
    assert redacted(f"a {password} b {written} c") == f"a {MASK} b {MASK} c"


def test_the_env_example_holds_only_refused_secrets() -> None:
    """Every secret of the shipped env example is a ``change-me`` value (so it cannot run as is)."""
    example = Path(__file__).resolve().parents[2] / "deploy" / "curaflow.env.example"
    values = dict(line.split("=", 1) for line in example.read_text().splitlines() if line and not line.startswith("#"))
    for name in ("CURAFLOW_API_TOKEN", "CURAFLOW_DB_PASSWORD", "TEMPORAL_DB_PASSWORD"):
        assert values[name].startswith("change-me"), name


@pytest.mark.parametrize(
    ("variable", "value", "field"),
    [
        ("CURAFLOW_RETENTION__DAYS", "abc", "retention.days"),
        ("CURAFLOW_DATABASE__POOL_MAX_SIZE", "many", "database.pool_max_size"),
        ("CURAFLOW_ROUTES__OUT__KIND", "nope", "routes.out"),
    ],
)
def test_an_invalid_value_from_the_environment_names_its_variable_not_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, variable: str, value: str, field: str
) -> None:
    config = tmp_path / "curaflow.toml"
    config.write_text('[retention]\ndays = 3\n[routes.out]\nkind = "directory"\npath = "out"\n')
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigError) as err:
        load_settings(config)
    message = str(err.value)
    assert f"  - {field}: " in message and f"(environment variable {variable})" in message, message
    assert str(config) not in message  # the file holds no error


def test_an_invalid_value_in_the_file_names_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [k for k in os.environ if k.startswith("CURAFLOW_")]:
        monkeypatch.delenv(name)
    config = tmp_path / "curaflow.toml"
    config.write_text('[retention]\ndays = "x"\n')
    with pytest.raises(ConfigError, match=rf"retention\.days: .* \(in {re.escape(str(config))}\)"):
        load_settings(config)


def test_what_could_not_be_read_is_named_the_file_only_when_it_is_the_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``cannot read config None: CURAFLOW_SECRETS_DIR=…`` without a file, ``cannot read
    config curaflow.toml: CURAFLOW_SECRETS_DIR=…`` with a good one: the secrets directory
    (or a variable) was blamed on a file. The file is named when it is what could not be
    read (its TOML), never ``None``."""
    monkeypatch.setenv("CURAFLOW_SECRETS_DIR", str(tmp_path / "missing"))
    for config in (None, tmp_path / "good.toml"):
        (tmp_path / "good.toml").write_text("[api]\n")
        with pytest.raises(ConfigError) as raised:
            load_settings(config)
        said = str(raised.value)
        assert "None" not in said and "good.toml" not in said, said
        assert said == f"cannot read configuration: CURAFLOW_SECRETS_DIR={tmp_path / 'missing'}: not a directory"
    monkeypatch.delenv("CURAFLOW_SECRETS_DIR")
    (tmp_path / "bad.toml").write_text("x = [\n")
    with pytest.raises(ConfigError, match=rf"^cannot read config {re.escape(str(tmp_path / 'bad.toml'))}: "):
        load_settings(tmp_path / "bad.toml")
    from curaflow.config.loading import _unreadable

    path = tmp_path / "curaflow.toml"
    denied = PermissionError(13, "Permission denied", str(path))
    assert _unreadable(denied, path) == f"cannot read config {path}: {denied}"
    assert _unreadable(denied, None) == f"cannot read configuration: {denied}"  # a secret file's, no config


@pytest.mark.parametrize(
    ("variable", "value", "expected"),
    [
        ("CURAFLOW_SCHEDULES", '[{"id": "nightly"', "a JSON array"),
        ("CURAFLOW_TARGETS", "{x", "a JSON array"),
        ("CURAFLOW_ROUTES", "[", "a JSON object"),
        ("CURAFLOW_TEMPORAL", "{bad", "a JSON object"),
        ("CURAFLOW_API__CALLBACK_ALLOWED_HOSTS", '["hooks.example",', "a JSON array"),
        ("curaflow_pixiv__accounts", "{second", "a JSON object"),
    ],
)
def test_a_value_that_is_no_json_names_its_variable_and_what_was_expected(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, variable: str, value: str, expected: str
) -> None:
    """A variable whose value must be JSON (a list, a table) and is none was reported as
    ``cannot read configuration: error parsing value for field "schedules" from source
    "CuraflowEnv"``: pydantic-settings' class, not the variable to fix nor what it takes.
    The line names the variable as set and the JSON expected (never its value: it may hold a
    secret); a secret file alike."""
    for name in [k for k in os.environ if k.upper().startswith("CURAFLOW_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigError) as raised:
        load_settings(None)
    said = str(raised.value)
    assert said.startswith(f"cannot read configuration: environment variable {variable}: not {expected} "), said
    assert "CuraflowEnv" not in said and value not in said, said

    monkeypatch.delenv(variable)
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / variable).write_text(value + "\n")
    monkeypatch.setenv("CURAFLOW_SECRETS_DIR", str(secrets))
    with pytest.raises(ConfigError) as raised:
        load_settings(None)
    said = str(raised.value)
    assert said.startswith(f"cannot read configuration: secret file {secrets / variable}: not {expected} "), said
    assert "_Files" not in said, said
