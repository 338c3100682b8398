"""A boolean where the configuration takes a number is refused, naming the setting.

pydantic's lax mode reads ``true`` as the integer 1 (and ``false`` as 0): until
2026-12-07 ``retention.days = true`` loaded as one day — every worker pruning what
finished more than a day ago —, an account's ``min_interval_ms = true`` as 1 ms
between its requests (``[pixiv]``, or ``sources.<name>.min_interval_ms``), ``jitter_ms =
true`` as 1 ms. A TOML boolean is no number
(TOML 1.0 "Boolean"), as a bool is none in a Task (DESIGN "Owners of decisions": whether a
number of a Task is an integer); a setting that takes a boolean still does, and an
environment variable's text still reads as the number it writes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from curaflow.config import ConfigError, load_settings

DIRECTORY = '[routes.out]\nkind = "directory"\npath = "out"\n'

BOOLEANS_FOR_NUMBERS = [
    # (TOML, the setting the error must name)
    ("[retention]\ndays = true\n", "retention.days"),
    ("max_fallback_passes = true\n", "max_fallback_passes"),
    ("max_fallback_passes = false\n", "max_fallback_passes"),
    ("[pixiv]\nmin_interval_ms = true\n", "pixiv.min_interval_ms"),
    ("[pixiv.accounts.second]\nmin_interval_ms = true\n", "pixiv.accounts.second.min_interval_ms"),
    ("[api]\nport = true\n", "api.port"),
    ("[observability]\nmetrics_port = true\n", "observability.metrics_port"),
    (
        '[[schedules]]\nid = "n"\ncron = ["0 3 * * *"]\ntarget_ids = ["demo"]\njitter_ms = true\n',
        "schedules.0.jitter_ms",
    ),
    (
        f'{DIRECTORY}[[targets]]\nid = "demo"\nroutes = ["out"]\nfilters = {{ min_bookmarks = true }}\n',
        "min_bookmarks",
    ),
    (f'{DIRECTORY}[[targets]]\nid = "demo"\nroutes = ["out"]\nlimit = true\n', "targets.0.limit"),
]


@pytest.fixture(autouse=True)
def _no_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("CURAFLOW_CONFIG", "TEMPORAL_ADDRESS", "DATABASE_URL", "CURAFLOW_API_TOKEN", "PIXIV_REFRESH_TOKEN"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize(("text", "setting"), BOOLEANS_FOR_NUMBERS)
def test_a_boolean_for_a_number_is_refused_naming_the_setting(tmp_path: Path, text: str, setting: str) -> None:
    path = tmp_path / "c.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as refused:
        load_settings(path)
    report = str(refused.value)
    assert setting in report
    assert "boolean" in report


def test_a_boolean_for_a_number_in_an_environment_variables_json_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CURAFLOW_RETENTION", '{"days": true}')
    with pytest.raises(ConfigError, match=r"retention\.days.*boolean"):
        load_settings(None)


def test_a_boolean_setting_and_numbers_written_as_text_still_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "c.toml"
    path.write_text(
        "[observability]\nlog_json = true\n[retention]\ndays = 30\n"
        f'{DIRECTORY}[[targets]]\nid = "demo"\nroutes = ["out"]\n'
        "filters = { exclude_ai = true, r18 = false, min_bookmarks = 0 }\n",
        encoding="utf-8",
    )
    monkeypatch.setenv("CURAFLOW_API__PORT", "9001")
    monkeypatch.setenv("CURAFLOW_PIXIV__MIN_INTERVAL_MS", "1500")
    settings = load_settings(path)
    assert settings.observability.log_json is True
    assert settings.retention.days == 30
    assert settings.api.port == 9001
    assert settings.pixiv.min_interval_ms == 1500
    assert settings.targets[0].filters.exclude_ai is True
    assert settings.targets[0].filters.r18 is False
    assert settings.targets[0].filters.min_bookmarks == 0


@pytest.mark.parametrize(
    ("text", "settings"),
    [
        # a boolean and another problem of the same table
        ("[api]\nport = true\nbogus = 1\n", ["api.port", "api.bogus"]),
        # a boolean of the root and a problem of a section
        ('max_fallback_passes = true\n[api]\nport = "abc"\n', ["max_fallback_passes", "api.port"]),
        # a boolean in a target's filters, an unknown key there, and another field's problem
        (
            f'{DIRECTORY}[[targets]]\nid = "demo"\nroutes = ["out"]\nlimit = "x"\n'
            "filters = { min_bookmark = 100, max_page_count = true }\n",
            ["targets.0.limit", "targets.0.filters.min_bookmark", "targets.0.filters.max_page_count"],
        ),
        # two booleans of one plain table: each
        (
            f'{DIRECTORY}[[targets]]\nid = "demo"\nroutes = ["out"]\n'
            "filters = { min_bookmarks = true, max_page_count = false }\n",
            ["targets.0.filters.min_bookmarks", "targets.0.filters.max_page_count"],
        ),
    ],
)
def test_a_boolean_for_a_number_is_said_with_every_other_problem(
    tmp_path: Path, text: str, settings: list[str]
) -> None:
    # An invalid file is reported field by field, every problem at once (configuration.md).
    # Until 2026-12-07 the refusal of a boolean for a number (and of a key a target's query or
    # filters does not define) was raised before the table's fields were validated, and
    # every other problem of that table went unsaid: fixed, reloaded, refused again.
    path = tmp_path / "c.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as refused:
        load_settings(path)
    report = str(refused.value)
    for setting in settings:
        assert f"- {setting}:" in report, report
