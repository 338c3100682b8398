"""A configuration error names where its value really came from.

Each kind of error — a type, a range, an unknown key, a missing one, a rule across
settings checked at the top level — is loaded once with no ``CURAFLOW_*`` variable set
and once with ``CURAFLOW_CONFIG`` (the usual deployment) and an unrelated variable set:
the report is the same, naming the file. A value given by a variable names that
variable, and a rule across settings names each setting's own origin. Until 2026-12-07
any ``CURAFLOW_*`` variable made every error name a variable that did not exist
(``environment variable CURAFLOW_SUPERVISION__MAX_BACKOFF_MS`` for a bad value of the
file), and a rule across settings named no origin at all.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from curaflow.config import ConfigError, load_settings

pytestmark = pytest.mark.usefixtures("config_environment_cleared")


def report(config: Path) -> str:
    with pytest.raises(ConfigError) as err:
        load_settings(config)
    return str(err.value)


#: (kind of error, the file, the line of the report that must name the file).
FILE_ERRORS = [
    (
        "type",
        '[supervision]\nmax_backoff_ms = "x"\n',
        "  - supervision.max_backoff_ms: Input should be a valid integer",
    ),
    ("range", "[database]\npool_max_size = 0\n", "  - database.pool_max_size: Input should be greater than"),
    ("unknown key", "[supervision]\nbogus = 1\n", "  - supervision.bogus: Extra inputs"),
    ("unknown top-level key", "bogus = 1\n", "  - bogus: Extra inputs"),
    ("former key", "max_fallback_stages = 99\n", "  - max_fallback_passes: Input should be less than"),
    ("missing key", '[[targets]]\nroutes = ["out"]\n', "  - targets.0.id: Field required"),
    (
        "missing key of a route's kind",
        '[routes.out]\nkind = "directory"\n',
        "  - routes.out.directory.path: Field required",
    ),
    (
        "unknown key of a route's kind",
        '[routes.out]\nkind = "directory"\npath = "o"\nbogus = 1\n',
        "  - routes.out.directory.bogus: Extra inputs",
    ),
    (
        "a route's own rule (a webhook url holding a tab)",
        '[routes.out]\nkind = "webhook"\nurl = "https://hooks.example/a\\tb"\n'
        'secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"\n',
        "  - routes.out.webhook: Value error, not a URL",
    ),
    (
        "a route's own rule (a Discord webhook url of no host)",
        '[routes.out]\nkind = "discord"\nurl = "https:///api/webhooks/1/x"\n',
        "  - routes.out.discord: Value error",
    ),
    (
        "type in a target",
        '[[targets]]\nid = "a"\nroutes = ["out"]\n[targets.filters]\nmin_bookmarks = "x"\n',
        "  - targets.0.filters.min_bookmarks: Input should be a valid integer",
    ),
    (
        "settings out of order",
        "[supervision]\ninitial_backoff_ms = 60000\nmax_backoff_ms = 1000\n",
        "  - (top level): Value error, supervision.initial_backoff_ms (60000) must not exceed",
    ),
    ("beyond a ceiling", "[retention]\ndays = 99999999\n", "  - (top level): Value error, retention.days is 99999999"),
    (
        "a reference across sections",
        '[[targets]]\nid = "a"\nroutes = ["nope"]\n',
        "  - (top level): Value error, target 'a' names unknown route 'nope'",
    ),
    ("an empty text", '[api]\nhost = ""\n', "  - (top level): Value error, api.host is empty"),
    (
        "two settings of a section",
        '[temporal]\ndeployment_name = "d"\n',
        "  - temporal: Value error, temporal.deployment_name and temporal.build_id go together",
    ),
]


@pytest.mark.parametrize("variables", [{}, {"CURAFLOW_CONFIG": "", "CURAFLOW_LOG": "1"}], ids=["unset", "set"])
@pytest.mark.parametrize(("kind", "text", "line"), FILE_ERRORS, ids=[k for k, _, _ in FILE_ERRORS])
def test_an_error_of_the_file_names_the_file_whatever_variable_is_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, variables: dict[str, str], kind: str, text: str, line: str
) -> None:
    config = tmp_path / "curaflow.toml"
    config.write_text(text)
    for name, value in variables.items():
        monkeypatch.setenv(name, value or str(config))
    message = report(config)
    found = [row for row in message.splitlines() if row.startswith(line)]
    assert found, message
    assert found[0].endswith(f"(in {config})") or f": in {config}" in found[0], message
    assert "environment variable" not in message, message


def test_a_variable_given_beside_the_file_is_named_and_the_file_for_its_own_value(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "curaflow.toml"
    config.write_text("[supervision]\ninitial_backoff_ms = 60000\n")
    monkeypatch.setenv("CURAFLOW_CONFIG", str(config))
    monkeypatch.setenv("CURAFLOW_SUPERVISION__MAX_BACKOFF_MS", "1000")
    message = report(config)
    assert (
        f"(supervision.initial_backoff_ms: in {config}; "
        "supervision.max_backoff_ms: environment variable CURAFLOW_SUPERVISION__MAX_BACKOFF_MS)"
    ) in message, message


def test_a_bad_value_of_a_variable_names_the_variable_and_not_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "curaflow.toml"
    config.write_text("[supervision]\ninitial_backoff_ms = 600\n")
    monkeypatch.setenv("CURAFLOW_CONFIG", str(config))
    monkeypatch.setenv("CURAFLOW_SUPERVISION__MAX_BACKOFF_MS", "x")
    message = report(config)
    assert "  - supervision.max_backoff_ms: " in message, message
    assert message.endswith("(environment variable CURAFLOW_SUPERVISION__MAX_BACKOFF_MS)"), message
    assert str(config) not in message


def test_a_setting_left_at_its_default_is_named_the_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "curaflow.toml"
    config.write_text("[supervision]\ninitial_backoff_ms = 60000\n")  # above the default max_backoff_ms (30 s)
    monkeypatch.setenv("CURAFLOW_CONFIG", str(config))
    message = report(config)
    assert f"(supervision.initial_backoff_ms: in {config}; supervision.max_backoff_ms: default)" in message, message


def test_a_target_list_a_variable_replaces_is_named_by_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A list of the environment replaces the file's whole list (tables merge, lists do
    not): the file's target is not what loaded, whatever it holds at the same place."""
    config = tmp_path / "curaflow.toml"
    config.write_text('[[targets]]\nid = "a"\nroutes = ["out"]\n[targets.filters]\nmin_bookmarks = 5\n')
    monkeypatch.setenv("CURAFLOW_TARGETS", '[{"id": "b", "routes": ["out"], "filters": {"min_bookmarks": "x"}}]')
    message = report(config)
    assert "  - targets.0.filters.min_bookmarks: " in message, message
    assert message.endswith("(environment variable CURAFLOW_TARGETS)"), message


def test_a_secret_file_is_named_as_such(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "curaflow.toml"
    config.write_text("[supervision]\ninitial_backoff_ms = 100\n")
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / "CURAFLOW_SUPERVISION__MAX_BACKOFF_MS").write_text("20\n")
    monkeypatch.setenv("CURAFLOW_SECRETS_DIR", str(secrets))
    message = report(config)
    assert (
        f"(supervision.initial_backoff_ms: in {config}; "
        f"supervision.max_backoff_ms: secret file {secrets / 'CURAFLOW_SUPERVISION__MAX_BACKOFF_MS'})"
    ) in message, message


def test_a_conventional_variable_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "curaflow.toml"
    config.write_text('[temporal]\nnamespace = "n"\n')
    monkeypatch.setenv("CURAFLOW_CONFIG", str(config))
    monkeypatch.setenv("TEMPORAL_ADDRESS", "x\x01")
    message = report(config)
    assert "temporal.address holds a control character" in message
    assert "(environment variable TEMPORAL_ADDRESS)" in message, message


def test_a_routes_own_rule_names_the_file_and_the_variable_its_table_merges(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rule of the route's model as a whole (its destination readable) is about its table,
    which the file and a variable make together: both are named, never the default."""
    config = tmp_path / "curaflow.toml"
    config.write_text('[routes.out]\nkind = "webhook"\nsecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"\n')
    monkeypatch.setenv("CURAFLOW_ROUTES__OUT__URL", "https://hooks.example/a\tb")
    message = report(config)
    assert "  - routes.out.webhook: Value error, not a URL" in message, message
    assert message.endswith(f"(environment variable CURAFLOW_ROUTES__OUT__URL and in {config})"), message


def test_a_route_kind_a_variable_gives_names_the_variable_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The route's table merges the file and the variable; the kind refused is the variable's."""
    config = tmp_path / "curaflow.toml"
    config.write_text('[routes.out]\nkind = "directory"\npath = "out"\n')
    monkeypatch.setenv("CURAFLOW_ROUTES__OUT__KIND", "nope")
    message = report(config)
    assert message.endswith("(environment variable CURAFLOW_ROUTES__OUT__KIND)"), message
