"""A work is gone for the week only in Pixiv's own words that it is gone (DESIGN.md
"Attribution before judgement": recognise positively only what lets you blame the work).

The app-api's error object (``user_message``, ``message``, ``reason``) under HTTP 404 is
also what it answers for every request while an endpoint it does not serve is asked —
``{"error": {"user_message": "指定されたエンドポイントは存在しません", "message": "", …}}``,
"the specified endpoint does not exist" (pixivpy #39) — and a wording never seen may say
anything (a maintenance, a limit of the account's). Until 2026-12-07 any words to its user
made the work gone for the week and its target's frontier passed it for good (``gone``
lasting), and a scan's empty page was taken for the end of results on such a detail.

The client runs against ``httpx.MockTransport``, the app-api answering in its wire format.
"""

from __future__ import annotations

from datetime import UTC, datetime

import httpx
import pytest

from curaflow.domain.messages import TargetFilters, TargetQuery, TargetSpec
from curaflow.domain.reasons import TerminalReason
from curaflow.sources.errors import SourceError, UnavailableKind, WorkUnavailable
from curaflow.sources.pixiv.client.answers import folded_words
from curaflow.sources.pixiv.client.constants import GONE_WORDS
from curaflow.sources.pixiv.frontier import Mark
from curaflow.sources.pixiv.scan.pages import _corroborate_end
from tests.support import pixiv_answering


def app_api_error(user_message: object) -> dict[str, object]:
    """The app-api's own error object (its four fields, as it sends them)."""
    return {"error": {"user_message": user_message, "message": "", "reason": "", "user_message_details": {}}}


#: Words to its user the app-api's object carries under a 404 that say nothing of the
#: work being gone.
NOT_GONE = [
    "指定されたエンドポイントは存在しません",  # an endpoint it does not serve (pixivpy #39)
    "The specified endpoint does not exist",
    "Page not found",
    "ただいまメンテナンス中です",  # a maintenance
    "작품이 삭제되었습니다",  # a language curaflow holds no wording of
    "該当ユーザーは既に退会したか、存在しないユーザーIDです",  # a user's, not a work's
    "404",
    "Ошибка",
]


@pytest.mark.parametrize("words", NOT_GONE)
async def test_a_404_whose_words_do_not_say_the_work_is_gone_holds_it_briefly(words: str) -> None:
    pixiv = pixiv_answering(lambda request: httpx.Response(404, json=app_api_error(words)))
    with pytest.raises(WorkUnavailable) as raised:
        await pixiv.illust_detail("123")
    assert (raised.value.kind, raised.value.recognised) == (UnavailableKind.GONE, False)
    with pytest.raises(WorkUnavailable) as raised:
        await pixiv.ugoira_metadata("123")
    assert raised.value.recognised is False and raised.value.corroborate is False


#: Pixiv's words that a work was deleted or never existed: the app-api's in Japanese (what
#: it answers a detail of a deleted work, pixivpy's users; the replay's), and Pixiv's English
#: wordings of the same (its web pages and its ajax API), as written and as a client may
#: see them (another width, case or spacing, an id added after them).
GONE = [
    "該当作品は削除されたか、存在しない作品IDです。",
    "該当作品は削除されたか、存在しない作品ＩＤです",
    "該当作品は削除されたか、存在しない作品IDです。(illust_id:123)",
    "Work has been deleted or the ID does not exist.",
    "work has been deleted or the ID  does not exist",
    "The following work is either deleted, or the ID does not exist.",
]


@pytest.mark.parametrize("words", GONE)
async def test_a_404_in_pixivs_words_that_the_work_is_gone_is_the_works(words: str) -> None:
    pixiv = pixiv_answering(lambda request: httpx.Response(404, json=app_api_error(words)))
    with pytest.raises(WorkUnavailable) as raised:
        await pixiv.illust_detail("123")
    assert raised.value.recognised is True
    with pytest.raises(WorkUnavailable) as raised:
        await pixiv.ugoira_metadata("123")
    assert raised.value.corroborate is True  # the work's once its detail says so too


def test_every_wording_is_written_as_it_is_compared() -> None:
    """A wording of :data:`GONE_WORDS` not written folded would never match."""
    assert [folded_words(w) for w in GONE_WORDS] == list(GONE_WORDS)


def target() -> TargetSpec:
    return TargetSpec(target_id="t", query=TargetQuery(tags=["風景"]), filters=TargetFilters())


@pytest.mark.parametrize("words", NOT_GONE[:2])
async def test_an_empty_page_is_no_end_of_results_on_a_detail_that_does_not_say_the_work_is_gone(words: str) -> None:
    """The scan takes an empty page where a work it knows stood for the end of its results
    only on something positive about that work; an endpoint's "does not exist" is not."""
    pixiv = pixiv_answering(lambda request: httpx.Response(404, json=app_api_error(words)))
    mark = Mark(work_id="123", create_date="2026-12-01T00:00:00+09:00")
    with pytest.raises(SourceError) as raised:
        await _corroborate_end(pixiv, target(), mark, datetime(2026, 12, 7, tzinfo=UTC))
    assert (raised.value.reason, raised.value.retryable) == (TerminalReason.REMOTE_HTTP_ERROR, True)
