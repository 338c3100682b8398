"""A target's ``filters.start_date`` / ``end_date`` is a day ``YYYY-MM-DD`` or refused at load.

Pixiv's app-api takes ``start_date`` / ``end_date`` as ``YYYY-MM-DD`` (anything else is an
error: docs/reference/pixiv-and-delivery-apis.md §2.2), and the date filter of every
source compares a work's day with the setting as written (``curaflow.sources.filters``).
Until 2026-12-07 any text loaded: ``"yesterday"`` filtered every work out as a string
compared with days, and was sent to Pixiv with each search.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from curaflow.config import ConfigError, load_settings

pytestmark = pytest.mark.usefixtures("config_environment_cleared")


def write(tmp_path: Path, filters: str) -> Path:
    config = tmp_path / "curaflow.toml"
    config.write_text(
        '[[targets]]\nid = "ok"\nroutes = ["out"]\n'
        f'[[targets]]\nid = "dated"\nroutes = ["out"]\nfilters = {{ {filters} }}\n'
    )
    return config


NOT_DAYS = [
    "2020-13-45",
    "2021-02-29",  # not a leap year
    "2020-00-10",
    "yesterday",
    "2020-1-5",
    "2020/01/05",
    "20200105",
    "2020-01-05T00:00:00",
    "2020-01-05 ",
    "０２０２-01-05",  # fullwidth digits: not what Pixiv reads
]


@pytest.mark.parametrize("setting", ["start_date", "end_date"])
@pytest.mark.parametrize("value", NOT_DAYS)
def test_a_date_filter_that_is_not_a_day_is_refused_naming_the_target_and_the_setting(
    tmp_path: Path, setting: str, value: str
) -> None:
    config = write(tmp_path, f"{setting} = {value!r}".replace("'", '"'))
    with pytest.raises(ConfigError) as err:
        load_settings(config)
    message = str(err.value)
    assert f"targets[1].filters.{setting} ({value!r}) of target 'dated' is not a day YYYY-MM-DD" in message, message
    assert f"(in {config})" in message, message


def test_every_date_filter_that_is_not_a_day_is_named_at_once_before_their_order(tmp_path: Path) -> None:
    config = write(tmp_path, 'start_date = "yesterday", end_date = "2020-13-45"')
    with pytest.raises(ConfigError) as err:
        load_settings(config)
    message = str(err.value)
    assert "targets[1].filters.start_date ('yesterday')" in message and "filters.end_date ('2020-13-45')" in message
    assert "must not exceed" not in message  # the order of two texts that are no days means nothing


@pytest.mark.parametrize(("start", "end"), [("2020-01-01", "2020-12-31"), ("2024-02-29", "2024-02-29")])
def test_days_load_as_written(tmp_path: Path, start: str, end: str) -> None:
    settings = load_settings(write(tmp_path, f'start_date = "{start}", end_date = "{end}"'))
    dated = settings.target("dated")
    assert dated is not None and (dated.filters.start_date, dated.filters.end_date) == (start, end)
