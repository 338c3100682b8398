"""A key a target's ``query`` or ``filters`` does not define is refused, as in every section.

``targets[].query`` and ``targets[].filters`` are the domain's models
(:class:`~curaflow.domain.messages.TargetQuery`, :class:`~curaflow.domain.messages.TargetFilters`,
workflow inputs, which ignore a key they do not know): until 2026-12-07 a misspelt filter
(``min_bookmark = 100``, ``exclude_r18 = true``) or query key (``tag = ["x"]``) loaded and
was dropped — the target ran unfiltered, or searched for nothing it was told — where a
misspelt key of any section is refused (``Section``: ``extra="forbid"``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from curaflow.config import ConfigError, load_settings

TARGET = '[routes.out]\nkind = "directory"\npath = "out"\n[[targets]]\nid = "demo"\nroutes = ["out"]\n'


@pytest.fixture(autouse=True)
def _no_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("CURAFLOW_CONFIG", "TEMPORAL_ADDRESS", "DATABASE_URL", "CURAFLOW_API_TOKEN", "PIXIV_REFRESH_TOKEN"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize(
    ("table", "setting"),
    [
        ("filters = { min_bookmark = 100 }", "targets.0.filters.min_bookmark"),
        ("filters = { exclude_r18 = true }", "targets.0.filters.exclude_r18"),
        ('query = { tag = ["x"] }', "targets.0.query.tag"),
        ('query = { tags = ["x"], order = "date_asc" }', "targets.0.query.order"),
    ],
)
def test_a_key_a_targets_query_or_filters_does_not_define_is_refused(tmp_path: Path, table: str, setting: str) -> None:
    path = tmp_path / "c.toml"
    path.write_text(TARGET + table + "\n", encoding="utf-8")
    with pytest.raises(ConfigError) as refused:
        load_settings(path)
    report = str(refused.value)
    assert setting in report
    assert "Extra inputs are not permitted" in report


def test_every_key_a_targets_query_and_filters_define_loads(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text(
        TARGET + 'query = { mode = "search", tags = ["x"], relation = "or", search_target = "exact_match_for_tags", '
        'sort = "date_asc", duration = "within_last_week", ranking_mode = "day" }\n'
        "filters = { min_bookmarks = 10, exclude_ai = true, r18 = false, max_page_count = 3, "
        'start_date = "2026-01-01", end_date = "2026-02-01" }\n',
        encoding="utf-8",
    )
    target = load_settings(path).targets[0]
    assert target.query.relation == "or" and target.query.sort == "date_asc"
    assert target.filters.min_bookmarks == 10 and target.filters.end_date == "2026-02-01"
