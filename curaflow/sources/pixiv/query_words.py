"""The words Pixiv's app-api takes in a target's query: the one owner.

A Pixiv target's query sends its words as they are: ``search_target``, ``sort`` and
``duration`` with every page of a tag search (``GET /v1/search/illust``), ``ranking_mode``
as ``mode`` and ``ranking_date`` as ``date`` with every page of a ranking
(``GET /v1/illust/ranking``; :mod:`curaflow.sources.pixiv.scan.retrieval`). The app-api
answers a word it does not take with HTTP 400 naming the parameter — a refusal of the
request, never retried (:func:`curaflow.sources.pixiv.client.answers.refuses_request`):
every job of such a target ended ``remote_http_error`` without a work. So the words are
defined here and the configuration refuses a target with another
(:meth:`~curaflow.sources.pixiv.config.PixivSourceConfig.query_problems`, read by
:func:`curaflow.config.checks.check_query_words`; 2026-12-07: any text loaded —
``sort = "newest"``, ``ranking_mode = "daily"``, ``ranking_date = "yesterday"``).

A consumer's Task cannot carry them: its ``params.query`` holds ``tags`` and ``expand``
only (:class:`curaflow.protocol.models.tasks.TaskQuery`, unknown members ignored), and a
job runs the configured target's words (:func:`curaflow.jobs.admission.effective_target`).

Every key is checked whatever the target's ``mode`` (a word one mode does not send is
still no word Pixiv takes there). ``duration`` and ``ranking_date`` may be absent — or
empty, which is never sent (TOML has no null).
"""

from __future__ import annotations

from curaflow.domain.days import day_problem
from curaflow.domain.messages import TargetQuery
from curaflow.sources.base import QueryWordProblem

#: ``search_target`` of a tag search (reference ``pixiv-and-delivery-apis.md`` §2.2).
SEARCH_TARGETS: tuple[str, ...] = ("partial_match_for_tags", "exact_match_for_tags", "title_and_caption")
#: ``sort`` of a tag search (reference §2.2; ``popular_desc`` for premium accounts only —
#: a non-premium account's answer is Pixiv's to give, the word is one it takes). The scan
#: frontier keeps its own list of the orders it understands
#: (:func:`curaflow.sources.pixiv.frontier.applies`).
SORTS: tuple[str, ...] = ("date_desc", "date_asc", "popular_desc")
#: ``duration`` of a tag search and the days each reaches back from now (reference §2.2;
#: the days: :func:`curaflow.sources.pixiv.scan.pages.outside_duration`).
DURATION_DAYS: dict[str, int] = {"within_last_day": 1, "within_last_week": 7, "within_last_month": 30}
#: ``mode`` of a ranking: the reference's (§1.2: PixivFlow's ``rankingMode``) and those
#: pixivpy's ``illust_ranking`` documents besides (``day_manga``, ``week_r18``,
#: ``week_r18g``).
RANKING_MODES: tuple[str, ...] = (
    "day",
    "week",
    "month",
    "day_male",
    "day_female",
    "day_ai",
    "day_manga",
    "week_original",
    "week_rookie",
    "day_r18",
    "day_male_r18",
    "day_female_r18",
    "week_r18",
    "week_r18g",
)

#: The keys whose words are one of a list, with the list.
_LISTED: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("search_target", SEARCH_TARGETS),
    ("sort", SORTS),
    ("duration", tuple(DURATION_DAYS)),
    ("ranking_mode", RANKING_MODES),
)
#: The keys that may be absent (or empty: never sent).
_OPTIONAL = ("duration", "ranking_date")


def query_problems(query: TargetQuery) -> list[QueryWordProblem]:
    """The words of ``query`` Pixiv's app-api does not take, in the query's key order:
    ``search_target``, ``sort``, ``duration``, ``ranking_mode`` outside their lists
    (compared as written: ``Date_Desc`` is no word of it), ``ranking_date`` not a day
    ``YYYY-MM-DD`` of the calendar (:func:`curaflow.domain.days.day_problem`)."""
    problems: list[QueryWordProblem] = []
    for key, words in _LISTED:
        word = getattr(query, key)
        if (word is None or word == "") and key in _OPTIONAL:
            continue
        if word not in words:
            problems.append(QueryWordProblem(key, word, "one of " + ", ".join(words)))
    day = query.ranking_date
    if day and (problem := day_problem(day)):
        problems.append(QueryWordProblem("ranking_date", day, f"a day YYYY-MM-DD of the calendar ({problem})"))
    return problems
