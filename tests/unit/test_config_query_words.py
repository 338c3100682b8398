"""A target's query words are the words its source takes, or the configuration is refused.

Pixiv's app-api takes ``search_target``, ``sort`` and ``duration`` from short lists and a
ranking's ``mode`` from another, its ``date`` as ``YYYY-MM-DD`` (reference
``pixiv-and-delivery-apis.md`` §1.2, §2.2). Until 2026-12-07 any text loaded
(``sort = "newest"``, ``search_target = "tags"``, ``duration = "week"``,
``ranking_mode = "daily"``, ``ranking_date = "yesterday"``): every job of such a target
asked Pixiv with it, was answered HTTP 400 naming the parameter (a refusal of the request,
never retried: ``remote_http_error``) and ended without a work. Now the load refuses the
word, naming the key and the words the source takes (exit 2 of every command that loads
the configuration).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from curaflow.cli.app import app
from curaflow.config import ConfigError, load_settings

pytestmark = pytest.mark.usefixtures("config_environment_cleared")


def write(tmp_path: Path, query: str) -> Path:
    config = tmp_path / "curaflow.toml"
    config.write_text(
        '[routes.out]\nkind = "directory"\npath = "out"\n'
        '[[targets]]\nid = "ok"\nroutes = ["out"]\n'
        f'[[targets]]\nid = "worded"\nroutes = ["out"]\nquery = {{ tags = ["x"], {query} }}\n',
        encoding="utf-8",
    )
    return config


#: (key, a word Pixiv does not take, a word the message must offer instead).
NOT_TAKEN = [
    ("sort", "newest", "date_desc"),
    ("sort", "Date_Desc", "popular_desc"),
    ("search_target", "tags", "partial_match_for_tags"),
    ("search_target", "exact", "exact_match_for_tags"),
    ("duration", "week", "within_last_week"),
    ("ranking_mode", "daily", "day"),
    ("ranking_mode", "weekly", "week"),
    ("ranking_date", "yesterday", "YYYY-MM-DD"),
    ("ranking_date", "2021-02-29", "YYYY-MM-DD"),
    ("ranking_date", "2026/12/07", "YYYY-MM-DD"),
]


@pytest.mark.parametrize(("key", "word", "instead"), NOT_TAKEN, ids=[f"{k}={w!r}" for k, w, _ in NOT_TAKEN])
def test_a_query_word_pixiv_does_not_take_is_refused_naming_the_key_and_the_words_it_takes(
    tmp_path: Path, key: str, word: str, instead: str
) -> None:
    config = write(tmp_path, f'{key} = "{word}"')
    with pytest.raises(ConfigError) as err:
        load_settings(config)
    message = str(err.value)
    assert f"targets[1].query.{key} ({word!r}) of target 'worded'" in message, message
    assert instead in message, message
    assert f"(in {config})" in message, message


def test_every_query_word_of_a_target_pixiv_does_not_take_is_named_at_once(tmp_path: Path) -> None:
    config = write(tmp_path, 'sort = "newest", duration = "week", ranking_mode = "daily"')
    with pytest.raises(ConfigError) as err:
        load_settings(config)
    message = str(err.value)
    for key in ("sort", "duration", "ranking_mode"):
        assert f"targets[1].query.{key}" in message, message


#: Every word the reference gives for each key (§1.2 ranking modes, §2.2 search).
TAKEN = [
    *(("search_target", w) for w in ("partial_match_for_tags", "exact_match_for_tags", "title_and_caption")),
    *(("sort", w) for w in ("date_desc", "date_asc", "popular_desc")),
    *(("duration", w) for w in ("within_last_day", "within_last_week", "within_last_month")),
    *(
        ("ranking_mode", w)
        for w in (
            "day",
            "week",
            "month",
            "day_male",
            "day_female",
            "day_ai",
            "week_original",
            "week_rookie",
            "day_r18",
            "day_male_r18",
            "day_female_r18",
        )
    ),
    ("ranking_date", "2024-02-29"),
]


@pytest.mark.parametrize(("key", "word"), TAKEN, ids=[f"{k}={w}" for k, w in TAKEN])
def test_every_word_pixiv_takes_loads(tmp_path: Path, key: str, word: str) -> None:
    target = load_settings(write(tmp_path, f'{key} = "{word}"')).target("worded")
    assert target is not None and getattr(target.query, key) == word


def test_a_command_that_loads_the_configuration_exits_2_naming_the_key(tmp_path: Path) -> None:
    config = write(tmp_path, 'sort = "newest"')
    result = CliRunner().invoke(app, ["run", "--config", str(config)], env={"COLUMNS": "400"})
    assert result.exit_code == 2, result.output
    words = " ".join(result.output.split())
    assert "targets[1].query.sort ('newest')" in words and "date_desc" in words, words


def test_a_tasks_query_carries_no_pixiv_word_the_job_runs_the_targets(tmp_path: Path) -> None:
    """A consumer's Task cannot carry a query word: ``params.query`` holds ``tags`` and
    ``expand`` (unknown members ignored, as the protocol's every level), so a job runs the
    words of its configured target — the ones the load checked — and nothing a Task sends
    reaches Pixiv but its tags."""
    from curaflow.jobs.admission import effective_target
    from curaflow.protocol.task import validate_task

    settings = load_settings(write(tmp_path, 'sort = "date_asc"'))
    target = settings.target("worded")
    assert target is not None
    task = validate_task(
        {
            "protocol_version": "1",
            "job_type": "candidate_search",
            "idempotency_key": "k",
            "params": {
                "target_id": "worded",
                "query": {"tags": ["y"], "sort": "newest", "search_target": "tags", "ranking_mode": "daily"},
            },
        }
    )
    assert task.params["query"] == {"tags": ["y"]}
    query = effective_target(settings, target, task).query
    assert (query.tags, query.sort, query.search_target, query.ranking_mode) == (
        ["y"],
        "date_asc",
        "partial_match_for_tags",
        "day",
    )
