"""What an operator's configuration may not silently mean: a text setting left empty or
holding a control character, a setting read only when first used (``log_level``), a
number outside what its part can take (a port, the pool sizes, a body limit), a name given
twice (a schedule id, a target of a schedule). Each is refused when the settings load,
with the setting named — never a traceback, never a different meaning (the current
directory for an empty path, the main task queue for an empty one, every interface for an
empty host, a token no HTTP header can carry)."""

from __future__ import annotations

from pathlib import Path

import pytest

from curaflow.config import ConfigError, load_settings
from curaflow.domain.execution import MAX_JOB_TARGETS

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
HOOK = f'[routes.h]\nkind = "webhook"\nurl = "https://hooks.example.org/h"\nsecret = "{SECRET}"\n'
TARGET_H = '[[targets]]\nid = "demo"\nroutes = ["h"]\n'
TARGET_T = TARGET_H.replace('"h"', '"t"')
TARGET_D = TARGET_H.replace('"h"', '"d"')


def load(tmp_path: Path, text: str) -> None:
    path = tmp_path / "c.toml"
    path.write_text(text, encoding="utf-8")
    load_settings(path)


@pytest.fixture(autouse=True)
def _no_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("CURAFLOW_CONFIG", "TEMPORAL_ADDRESS", "DATABASE_URL", "CURAFLOW_API_TOKEN", "PIXIV_REFRESH_TOKEN"):
        monkeypatch.delenv(name, raising=False)


BLANK_TEXT = [
    # (TOML, the setting the error must name)
    ('[api]\ntoken = ""\n', "api.token"),
    ('[api]\ntoken = "   "\n', "api.token"),
    ('[api]\nhost = ""\n', "api.host"),
    ('[temporal]\ntask_queue = ""\n', "temporal.task_queue"),
    ('[observability]\nmetrics_host = ""\n', "observability.metrics_host"),
    ('[observability]\notlp_endpoint = " "\n', "observability.otlp_endpoint"),
    ('[pixiv]\napi_url = ""\n', "pixiv.api_url"),
    (
        f'[routes.t]\nkind = "telegram"\nbot_token = ""\nchat_id = "-100123"\n{TARGET_T}',
        "routes.t.bot_token",
    ),
    (
        f'[routes.t]\nkind = "telegram"\nbot_token = "1:A"\nchat_id = ""\n{TARGET_T}',
        "routes.t.chat_id",
    ),
    (
        f'[routes.d]\nkind = "discord"\nurl = ""\n{TARGET_D}',
        "routes.d.url",
    ),
    ('[routes.out]\nkind = "directory"\npath = "o"\ntask_queue = ""\n', "routes.out.task_queue"),
    ('[[targets]]\nid = "demo"\nroutes = ["out"]\nquery = { tags = [""] }\n', "targets[0].query.tags[0]"),
]


@pytest.mark.parametrize(("text", "setting"), BLANK_TEXT)
def test_a_text_setting_left_empty_is_refused_naming_it(tmp_path: Path, text: str, setting: str) -> None:
    with pytest.raises(ConfigError) as err:
        load(tmp_path, text)
    assert setting in str(err.value) and "empty" in str(err.value)


@pytest.mark.parametrize(
    ("text", "setting"),
    [
        ('[api]\ntoken = "ab\\u0000c"\n', "api.token"),
        ('[temporal]\ntask_queue = "q\\u0000"\n', "temporal.task_queue"),
        ('[api]\ntoken = "abc\\n"\n', "api.token"),
    ],
)
def test_a_text_setting_holding_a_control_character_is_refused(tmp_path: Path, text: str, setting: str) -> None:
    with pytest.raises(ConfigError) as err:
        load(tmp_path, text)
    assert setting in str(err.value) and "control character" in str(err.value)


@pytest.mark.parametrize("url", ["https://x.example/\\u001b[2J", "https://x.example:99999/h"])
def test_a_route_url_that_is_no_url_is_a_configuration_error_not_a_traceback(tmp_path: Path, url: str) -> None:
    with pytest.raises(ConfigError, match=r"routes\.h2.*not (a URL|an http\(s\) URL with a host and a port)"):
        load(tmp_path, f'{HOOK}{TARGET_H}[routes.h2]\nkind = "webhook"\nurl = "{url}"\nsecret = "{SECRET}"\n')


@pytest.mark.parametrize(
    ("text", "setting"),
    [
        ('state_dir = ""\n', "state_dir"),
        ('artifacts_dir = " "\n', "artifacts_dir"),
        ('[routes.out]\nkind = "directory"\npath = ""\n', "path"),
        ('[temporal]\naddress = "x:7233"\nconfig_file = ""\n', "config_file"),
    ],
)
def test_an_empty_path_is_refused_not_taken_for_the_current_directory(tmp_path: Path, text: str, setting: str) -> None:
    with pytest.raises(ConfigError) as err:
        load(tmp_path, text)
    assert setting in str(err.value) and "empty" in str(err.value)


@pytest.mark.parametrize(
    "text",
    [
        f"{HOOK.replace(SECRET, '')}{TARGET_H}",
        '[api]\ncallback_secret = ""\n',
    ],
)
def test_an_empty_signing_secret_is_a_configuration_error_not_a_traceback(tmp_path: Path, text: str) -> None:
    with pytest.raises(ConfigError, match="secret"):
        load(tmp_path, text)


def test_the_nexus_endpoint_keeps_its_documented_empty_value(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text('[temporal]\nnexus_endpoint = ""\n')
    assert load_settings(path).temporal.nexus_endpoint == ""


@pytest.mark.parametrize("level", ["LOUD", "", "verbose"])
def test_an_unknown_log_level_is_refused_at_load(tmp_path: Path, level: str) -> None:
    with pytest.raises(ConfigError, match=r"observability\.log_level"):
        load(tmp_path, f'[observability]\nlog_level = "{level}"\n')


@pytest.mark.parametrize(("level", "kept"), [("debug", "DEBUG"), ("Warning", "WARNING"), ("INFO", "INFO")])
def test_a_log_level_is_read_whatever_its_case(tmp_path: Path, level: str, kept: str) -> None:
    path = tmp_path / "c.toml"
    path.write_text(f'[observability]\nlog_level = "{level}"\n')
    assert load_settings(path).observability.log_level == kept


SCHEDULE = '[[schedules]]\nid = "{id}"\ncron = "@daily"\ntarget_ids = {targets}\n'


def test_two_schedules_with_one_id_are_refused(tmp_path: Path) -> None:
    # one Temporal schedule per id: the second plan replaced the first's cron at sync,
    # while its occurrences were admitted with the first plan's targets
    text = SCHEDULE.format(id="n", targets='["demo"]') + SCHEDULE.format(id="n", targets="[]")
    with pytest.raises(ConfigError, match=r"duplicate schedule ids: \['n'\]"):
        load(tmp_path, text)


def test_a_schedule_naming_a_target_twice_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"schedule 'n' names target\(s\) \['demo'\] more than once"):
        load(tmp_path, SCHEDULE.format(id="n", targets='["demo", "demo"]'))


@pytest.mark.parametrize(
    ("text", "setting"),
    [
        ("[api]\nport = 0\n", "api.port"),
        ("[api]\nport = -5\n", "api.port"),
        ("[api]\nport = 70000\n", "api.port"),
        ("[api]\nmax_body_bytes = -1\n", "api.max_body_bytes"),
        ("[api]\nmax_body_bytes = 0\n", "api.max_body_bytes"),
        ("[database]\npool_min_size = -1\n", "database.pool_min_size"),
        ("[database]\npool_max_size = 0\n", "database.pool_max_size"),
        ("[database]\npool_min_size = 20\npool_max_size = 5\n", "pool_min_size"),
        ("[budgets]\ntest_only_floor_ms = -1\n", "budgets.test_only_floor_ms"),
    ],
)
def test_a_number_its_part_cannot_take_is_refused_at_load(tmp_path: Path, text: str, setting: str) -> None:
    with pytest.raises(ConfigError) as err:
        load(tmp_path, text)
    assert setting in str(err.value)


def test_the_edges_of_the_ranges_load(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text(
        "[api]\nport = 65535\nmax_body_bytes = 1024\n"
        "[database]\npool_min_size = 0\npool_max_size = 1\n[budgets]\ntest_only_floor_ms = 0\n"
    )
    settings = load_settings(path)
    assert (settings.api.port, settings.database.pool_min_size, settings.database.pool_max_size) == (65535, 0, 1)


def _account(name: str) -> str:
    """A configuration with one more Pixiv account, named ``name`` (a TOML basic string)."""
    return f'[pixiv.accounts."{name}"]\nmin_interval_ms = 1500\n'


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("a" * 3000, "bytes"),  # reached source_gates' primary key (btree entry ~2 700 bytes) and a task queue name
        ("あ" * 86, "bytes"),  # 258 bytes of UTF-8: the bound is bytes, not characters
        ("a\\u0000b", "control character"),
        ("a\\tb", "control character"),
        ("a\\u0085b", "control character"),
        ("a\\u200bb", "printable"),  # a zero-width space: two names that look the same
        ("a\\u2028b", "printable"),
        ("", "empty"),
        ("  ", "empty"),
    ],
    ids=["3000-chars", "258-bytes", "nul", "tab", "c1", "zero-width", "line-separator", "empty", "blank"],
)
def test_a_pixiv_account_name_that_cannot_work_is_refused_naming_it(tmp_path: Path, name: str, why: str) -> None:
    with pytest.raises(ConfigError) as err:
        load(tmp_path, _account(name))
    assert "pixiv account name" in str(err.value) and why in str(err.value)


@pytest.mark.parametrize(
    "name", ["second", "main.jp", "絵師アカウント", "あ" * 85, "a" * 255, "Ada Lovelace", "o'neil"]
)
def test_a_pixiv_account_name_that_works_loads(tmp_path: Path, name: str) -> None:
    path = tmp_path / "c.toml"
    path.write_text(_account(name), encoding="utf-8")
    settings = load_settings(path)
    assert name in settings.accounts()


def test_a_source_task_queue_temporal_cannot_take_is_refused(tmp_path: Path) -> None:
    # Temporal takes a task queue name of at most 1 000 bytes: `<task_queue>-source-<account>`.
    with pytest.raises(ConfigError, match="source task queue"):
        load(tmp_path, f'[temporal]\ntask_queue = "{"q" * 990}"\n')


def _targets(count: int, routes: int = 1) -> str:
    hooks = "".join(HOOK.replace("[routes.h]", f"[routes.h{r}]") for r in range(routes))
    names = ", ".join(f'"h{r}"' for r in range(routes))
    return hooks + "".join(f'[[targets]]\nid = "t{n}"\nroutes = [{names}]\n' for n in range(count))


def test_a_schedule_of_more_targets_than_a_job_runs_is_refused(tmp_path: Path) -> None:
    # the bound keeps twice its margin under what tests/workflow/test_job_size.py runs (1 000
    # targets); before 2026-12-06 the job's first activation was quadratic in its cells and
    # 500 failed by the SDK's deadlock detector
    ids = ", ".join(f'"t{n}"' for n in range(MAX_JOB_TARGETS + 1))
    plan = f'[[schedules]]\nid = "n"\ncron = "0 3 * * *"\ntarget_ids = [{ids}]\n'
    with pytest.raises(ConfigError, match=r"schedule 'n' runs 501 targets in one job: at most 500"):
        load(tmp_path, _targets(600) + plan)
    everyone = '[[schedules]]\nid = "all"\ncron = "0 3 * * *"\n'  # no target_ids: every target
    with pytest.raises(ConfigError, match=r"schedule 'all' runs 501 targets in one job: at most 500"):
        load(tmp_path, _targets(501) + everyone)
    load(tmp_path, _targets(600) + '[[schedules]]\nid = "n"\ncron = "0 3 * * *"\ntarget_ids = ["t1", "t2"]\n')
    load(tmp_path, _targets(500) + everyone)


def test_a_schedule_whose_job_sends_more_at_once_than_temporal_holds_is_refused(tmp_path: Path) -> None:
    # each route of each target is a pending delivery at once: Temporal's
    # limit.numPendingActivities.error (2 000) fails the workflow task beyond it, for ever
    everyone = '[[schedules]]\nid = "all"\ncron = "0 3 * * *"\n'
    with pytest.raises(ConfigError, match=r"schedule 'all' sends to 2200 routes at once in one job: at most 2000"):
        load(tmp_path, _targets(200, routes=11) + everyone)
    load(tmp_path, _targets(200, routes=10) + everyone)


@pytest.mark.parametrize(
    ("queue", "what"),
    [
        ("curaflow-pushes", "the callback pushes' task queue"),
        ("curaflow", "the main task queue"),
        ("curaflow-source-default", "source 'default''s task queue"),
    ],
)
def test_a_route_on_one_of_curaflows_own_task_queues_is_refused(tmp_path: Path, queue: str, what: str) -> None:
    # Every worker process serves a route's task_queue with a worker of `deliver` alone: on
    # one of curaflow's own queues it took that queue's other activities' tasks (a push, an
    # admission, a search) and failed each as not registered, a spent attempt.
    with pytest.raises(ConfigError) as err:
        load(tmp_path, HOOK + f'task_queue = "{queue}"\n' + TARGET_H)
    assert f"route 'h' runs on task queue {queue!r}, which is {what}" in str(err.value), str(err.value)


def test_a_route_on_a_task_queue_of_its_own_loads(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text(HOOK + 'task_queue = "edge"\n' + TARGET_H, encoding="utf-8")
    settings = load_settings(path)
    assert settings.routes["h"].task_queue == "edge"
    assert settings.push_policy().task_queue == settings.push_task_queue() == "curaflow-pushes"


# ---- ids that differ only in letter case (2026-12-07) ----------------------------------------

TARGET_ID = '[[targets]]\nid = "{id}"\nroutes = ["h"]\n'


def test_target_ids_that_differ_only_in_letter_case_are_refused(tmp_path: Path) -> None:
    # A target's id names its cells' artifact folders (<job>/<target>, the job's id
    # starting with it too): on a case-insensitive disk (macOS, Windows) "Art" and "art"
    # were one folder — one job's files the other's, retention deleting both.
    text = HOOK + TARGET_ID.format(id="Art") + TARGET_ID.format(id="art")
    with pytest.raises(ConfigError, match=r"target ids \['Art', 'art'\] differ only in letter case"):
        load(tmp_path, text)


def test_schedule_ids_that_differ_only_in_letter_case_are_refused(tmp_path: Path) -> None:
    # A schedule's id starts its occurrences' job ids (<schedule>@<date>T<HHMM>): the
    # artifact folders of "Daily"'s and "daily"'s occurrences of one minute were one.
    text = SCHEDULE.format(id="Daily", targets='["demo"]') + SCHEDULE.format(id="daily", targets='["demo"]')
    with pytest.raises(ConfigError, match=r"schedule ids \['Daily', 'daily'\] differ only in letter case"):
        load(tmp_path, text)


def test_ids_of_one_letter_case_and_distinct_still_load(tmp_path: Path) -> None:
    load(tmp_path, HOOK + TARGET_ID.format(id="Art") + TARGET_ID.format(id="art2"))
