"""What the replay serves: the recorded works, synthetic deep result sets, search matching.

Recorded data: ``data/*.json`` (pixivpy's public-domain fixtures with personal details
replaced; see ``curaflow/sources/pixiv/replay/data/README.md``). A :class:`DeepSet` adds a
synthetic result set for one tag, deep enough to page past the app-api's 5000-offset cap.
Pure functions of the data; the routes are :mod:`curaflow.sources.pixiv.replay.app`.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from functools import lru_cache
from importlib import resources
from typing import Any

PLACEHOLDER_URL = "https://s.pximg.net/common/images/limit_sanity_level_360.png"


@lru_cache(maxsize=1)
def recorded_works() -> tuple[dict[str, Any], ...]:
    """Every recorded illust, in recorded order (ranking, related, detail), unique by id."""
    root = resources.files("curaflow.sources.pixiv.replay") / "data"
    works: list[dict[str, Any]] = []
    seen: set[int] = set()
    for name in ("illust_ranking.json", "illust_related.json", "illust_detail.json"):
        data = json.loads((root / name).read_text(encoding="utf-8"))
        items = data.get("illusts") or [data["illust"]]
        for item in items:
            if item["id"] not in seen:
                seen.add(item["id"])
                works.append(item)
    return tuple(works)


@lru_cache(maxsize=1)
def _recorded_by_id() -> dict[str, dict[str, Any]]:
    return {str(w["id"]): w for w in recorded_works()}


def newest_day() -> str:
    """The newest recorded ``create_date`` day: the replay's "today"."""
    return max(w["create_date"][:10] for w in recorded_works())


@dataclass(frozen=True)
class DeepSet:
    """A synthetic result set for one tag, deep enough to page past the 5000-offset cap.

    Works are ranked newest first (rank 0 = newest); rank ``r`` has id
    ``id_base + count - r`` (ids grow with time, as on Pixiv), ``per_day`` works per day
    ending on ``last_day``, one page of 100×100 pixels and ``total_bookmarks`` 1000 when
    ``r`` is in ``popular_ranks``, else 0.
    """

    tag: str
    count: int = 5400
    per_day: int = 100
    last_day: str = "2025-02-04"
    popular_ranks: frozenset[int] = frozenset()
    id_base: int = 900_000_000

    def work_id(self, rank: int) -> str:
        """The id of the work at ``rank``."""
        return str(self.id_base + self.count - rank)

    def rank_of(self, work_id: str) -> int | None:
        """The rank of ``work_id`` in this set, or None when it is not one of its works."""
        rank = self.id_base + self.count - int(work_id) if work_id.isdigit() else -1
        return rank if 0 <= rank < self.count else None


@lru_cache(maxsize=8)
def deep_works(deep: DeepSet) -> tuple[dict[str, Any], ...]:
    """The works of ``deep`` in rank order (newest first)."""
    last = date.fromisoformat(deep.last_day)
    step = max(1, 86_400 // max(1, deep.per_day))
    works = []
    for rank in range(deep.count):
        day = last - timedelta(days=rank // deep.per_day)
        second = 86_399 - (rank % deep.per_day) * step
        stamp = f"{day.isoformat()}T{second // 3600:02d}:{second % 3600 // 60:02d}:{second % 60:02d}+09:00"
        wid = deep.work_id(rank)
        path = f"{day.year}/{day.month:02d}/{day.day:02d}/00/00/00/{wid}_p0"
        works.append(
            {
                "id": int(wid),
                "title": f"deep {rank}",
                "type": "illust",
                "image_urls": {"large": f"https://i.pximg.net/c/600x1200_90/img-master/img/{path}_master1200.jpg"},
                "caption": "",
                "restrict": 0,
                "user": {"id": 90009999, "name": "artist-deep", "account": "artistdeep"},
                "tags": [{"name": deep.tag, "translated_name": None}],
                "tools": [],
                "create_date": stamp,
                "page_count": 1,
                "width": 1000,
                "height": 1000,
                "sanity_level": 2,
                "x_restrict": 0,
                "series": None,
                "meta_single_page": {"original_image_url": f"https://i.pximg.net/img-original/img/{path}.jpg"},
                "meta_pages": [],
                "total_view": 100,
                "total_bookmarks": 1000 if rank in deep.popular_ranks else 0,
                "is_bookmarked": False,
                "visible": True,
                "is_muted": False,
                "total_comments": 0,
                "illust_ai_type": 1,
                "illust_book_style": 0,
            }
        )
    return tuple(works)


#: The replay's one animated work (an ugoira): found by its own tag only, so searches of
#: the recorded tags answer as recorded.
UGOIRA_ID = "99999001"
UGOIRA_TAG = "うごイラ"
#: Its frames' delays (ms), as ``/v1/ugoira/metadata`` lists them.
UGOIRA_DELAYS_MS = (60, 80, 100, 120, 140, 160)


@lru_cache(maxsize=1)
def ugoira_work() -> dict[str, Any]:
    """The synthetic ugoira, in the app-api's ``illust`` shape (``type: "ugoira"``; its
    image URLs are the cover frame, as Pixiv lists them)."""
    path = f"2026/11/01/00/00/00/{UGOIRA_ID}"
    return {
        "id": int(UGOIRA_ID),
        "title": "ugoira",
        "type": "ugoira",
        "image_urls": {"large": f"https://i.pximg.net/c/600x1200_90/img-master/img/{path}_master1200.jpg"},
        "caption": "",
        "restrict": 0,
        "user": {"id": 90009998, "name": "artist-ugoira", "account": "artistugoira"},
        "tags": [{"name": UGOIRA_TAG, "translated_name": "ugoira"}],
        "tools": [],
        "create_date": "2019-01-01T00:00:00+09:00",
        "page_count": 1,
        "width": 600,
        "height": 400,
        "sanity_level": 2,
        "x_restrict": 0,
        "series": None,
        "meta_single_page": {"original_image_url": f"https://i.pximg.net/img-original/img/{path}_ugoira0.jpg"},
        "meta_pages": [],
        "total_view": 100,
        "total_bookmarks": 100,
        "is_bookmarked": False,
        "visible": True,
        "is_muted": False,
        "total_comments": 0,
        "illust_ai_type": 1,
        "illust_book_style": 0,
    }


def ugoira_zip_name(work_id: str) -> str:
    """The frames zip's file name, as Pixiv names it (``<id>_ugoira600x600.zip``)."""
    return f"{work_id}_ugoira600x600.zip"


def ugoira_metadata(work: dict[str, Any]) -> dict[str, Any]:
    """The ``/v1/ugoira/metadata`` answer of ``work``."""
    path = work["meta_single_page"]["original_image_url"].split("/img/", 1)[1].rsplit("/", 1)[0]
    url = f"https://i.pximg.net/img-zip-ugoira/img/{path}/{ugoira_zip_name(str(work['id']))}"
    frames = [{"file": f"{i:06d}.jpg", "delay": d} for i, d in enumerate(UGOIRA_DELAYS_MS)]
    return {"ugoira_metadata": {"zip_urls": {"medium": url}, "frames": frames}}


def corpus(deep: DeepSet | None = None) -> tuple[dict[str, Any], ...]:
    """Every work the replay searches: the recording, the ugoira, then the deep set's works."""
    return recorded_works() + (ugoira_work(),) + (deep_works(deep) if deep is not None else ())


def work_for_id(work_id: str, deep: DeepSet | None = None) -> dict[str, Any] | None:
    """The recorded (or ugoira, or ``deep``) work with ``work_id``, or None."""
    if work_id == UGOIRA_ID:
        return ugoira_work()
    work = _recorded_by_id().get(work_id)
    if work is None and deep is not None:
        rank = deep.rank_of(work_id)
        if rank is not None:
            work = deep_works(deep)[rank]
    return work


def placeholder(work: dict[str, Any], limit: str = "limit_sanity_level") -> dict[str, Any]:
    """A restricted work as the app-api lists it: ``visible: false``, no tags, limit_* images.

    ``limit``: the name of the placeholder's image (``limit_sanity_level`` — the account's
    display settings hide it —, ``limit_mypixiv``, ``limit_unviewable``, ``limit_unknown`` …),
    served as ``https://s.pximg.net/common/images/<limit>_360.png``.
    """
    url = PLACEHOLDER_URL.replace("limit_sanity_level", limit)
    out = copy.deepcopy(work)
    out.update(
        {
            "title": "",
            "caption": "",
            "tags": [],
            "visible": False,
            "image_urls": {"square_medium": url, "medium": url, "large": url},
            "meta_single_page": {},
            "meta_pages": [],
        }
    )
    return out


def matches(work: dict[str, Any], word: str, target: str = "partial_match_for_tags") -> bool:
    """Whether a search for ``word`` finds ``work``, as the app-api matches.

    ``word``: space-separated tags are AND, `` OR `` separates alternatives. ``target``:
    ``partial_match_for_tags`` (substring of a tag or its translation, case-insensitive),
    ``exact_match_for_tags`` (a whole tag), ``title_and_caption`` (the text).
    """
    names = [t["name"].lower() for t in work.get("tags", [])]
    names += [(t.get("translated_name") or "").lower() for t in work.get("tags", [])]
    text = f"{work.get('title', '')} {work.get('caption', '')}".lower()

    def one(tag: str) -> bool:
        tag = tag.lower()
        if target == "title_and_caption":
            return tag in text
        if target == "exact_match_for_tags":
            return tag in names
        return any(tag in n for n in names if n)

    alternatives = [a.split() for a in re.split(r"\s+OR\s+", word.strip()) if a.strip()]
    return any(all(one(t) for t in group) for group in alternatives)


def search(
    works: Sequence[dict[str, Any]], word: str, target: str, start: str | None, end: str | None, sort: str
) -> list[dict[str, Any]]:
    """The works a search answers, in its order: matching ``word``, created within
    ``start``..``end`` (days, inclusive), sorted by ``sort`` (``date_desc`` default,
    ``date_asc``, ``popular_desc``: bookmarks, then newest id)."""
    found = [w for w in works if matches(w, word, target)]
    if start:
        found = [w for w in found if w["create_date"][:10] >= start]
    if end:
        found = [w for w in found if w["create_date"][:10] <= end]
    if sort == "popular_desc":
        found.sort(key=lambda w: (-int(w.get("total_bookmarks") or 0), -int(w["id"])))
    else:
        found.sort(key=lambda w: (w["create_date"], int(w["id"])), reverse=sort != "date_asc")
    return found
