"""Works as the app-api sends them: a work id's shape, an ``illust`` object parsed into a
:class:`~curaflow.domain.models.Work` (or refused as :class:`InvalidWork`), a restricted
placeholder, a ``next_url``'s offset."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta, timezone
from typing import Any
from urllib.parse import parse_qs, urlsplit

from curaflow.domain.models import Work
from curaflow.domain.text import clean_text

#: A Pixiv work id: a positive decimal integer without leading zeros that fits a bigint.
WORK_ID = re.compile(r"[1-9][0-9]{0,18}")
MAX_WORK_ID = 2**63 - 1


def is_work_id(value: str) -> bool:
    """True when ``value`` has the shape of a Pixiv work id (``126872003``).

    ASCII digits only, no sign, no leading zero, at most 2**63 - 1. Anything else (a path
    such as ``../../x`` or ``/tmp/x``, whitespace, full-width digits) is refused: the id
    becomes part of file names, idempotency keys and URLs.
    """
    return bool(WORK_ID.fullmatch(value)) and int(value) <= MAX_WORK_ID


class InvalidWork(ValueError):
    """An ``illust`` object that cannot be used: an id not of Pixiv's shape, or broken fields.

    Attributes:
        raw_id: the id as the source sent it (cleaned, at most 64 characters), for logs.
        work_id: the work's id when it is of Pixiv's shape (:func:`is_work_id`: only the
            fields are broken), else None — a scan still knows which work it passed
            (:func:`~curaflow.sources.pixiv.scan.pages._parse_page`).
    """

    def __init__(self, raw_id: Any, why: str, *, work_id: str | None = None) -> None:
        self.raw_id = clean_text(str(raw_id))[:64]
        self.work_id = work_id
        super().__init__(f"invalid work {self.raw_id!r}: {why}")


def parse_work(illust: dict[str, Any], *, cleaned: bool = False, now: datetime | None = None) -> Work:
    """Convert one app-api ``illust`` object into a :class:`~curaflow.domain.models.Work`.

    Multi-page works list every page from ``meta_pages``; single-page works use
    ``meta_single_page.original_image_url``. Text fields are cleaned
    (:func:`~curaflow.domain.text.clean_text`).

    Args:
        cleaned: every string of ``illust`` is already clean — it was read with
            :func:`~curaflow.domain.text.loads_clean`, as every app-api answer is
            (``PixivClient._get``) — so no text is cleaned again (~0.2 ms a 30-work page).
        now: the time the listing is read at (None: the clock's), for
            :func:`iso_create_date` (a ``create_date`` past it is not read).

    Raises:
        InvalidWork: the id is not of Pixiv's shape (:func:`is_work_id`), a field does not
            have its type, or a field that decides what is delivered or a lasting filter
            verdict holds a value the app-api never sends (``type`` absent or other than
            :data:`KNOWN_TYPES`; ``x_restrict`` / ``illust_ai_type`` outside
            :data:`KNOWN_X_RESTRICT` / :data:`KNOWN_AI_TYPES`; a ``page_count`` /
            ``total_bookmarks`` that is no count, a ``page_count`` below 1 or disagreeing
            with ``meta_pages``, several pages with none listed, more than
            :data:`MAX_WORK_PAGES` listed — refused before any is read; a ``visible`` that is no
            boolean). Such a work is never used *in this job*: what the source sent is not
            recognised, so it is no verdict on the work (the scan reads it again next job).
    """
    raw_id = illust.get("id") if isinstance(illust, dict) else None
    work_id = str(raw_id) if isinstance(raw_id, int | str) and not isinstance(raw_id, bool) else ""
    if not is_work_id(work_id):
        raise InvalidWork(raw_id, "the id is not a Pixiv work id")
    try:
        return _parse_work(illust, work_id, _kept if cleaned else clean_text, now)
    except (TypeError, ValueError, KeyError, AttributeError, OverflowError) as err:
        # OverflowError: an infinite number (``1e999`` in the JSON) where an integer goes.
        why = str(err)[:120] if type(err) is ValueError else f"{type(err).__name__} in its fields"
        raise InvalidWork(raw_id, why, work_id=work_id) from None


#: The ``type`` words of the app-api curaflow delivers (an illustration's pages, a manga's
#: pages, an ugoira's animation). Another word — a kind of work never seen, whose listed
#: image may be a cover of something else — is not read as any of them (:func:`parse_work`).
KNOWN_TYPES = frozenset({"illust", "manga", "ugoira"})
#: The most pages a work may list in ``meta_pages`` (five times the 200 images Pixiv takes
#: a work). A work listing more is a shape never seen (:func:`parse_work`), decided before
#: any page is read: an answer is bounded in bytes (``outbound.page_max_bytes``) but not in
#: items, and 4 MiB of ``meta_pages`` hold ~1.4 million ``{}`` — each became a page of a
#: valid work until 2026-12-05 (~3.4 s of the worker's CPU, every page carried in the
#: scan's checkpoint and fetched).
MAX_WORK_PAGES = 1000

#: The app-api's ``x_restrict`` values: 0 all ages, 1 R-18, 2 R-18G.
KNOWN_X_RESTRICT = frozenset({0, 1, 2})
#: The app-api's ``illust_ai_type`` values: 0 not stated (works before the field), 1 not AI, 2 AI.
KNOWN_AI_TYPES = frozenset({0, 1, 2})


def _count(illust: dict[str, Any], field: str, missing: int) -> int:
    """The count field ``field`` of an ``illust`` (``page_count``, ``total_bookmarks``,
    ``x_restrict`` …): a JSON integer that is at least 0 (or one written as decimal text);
    ``missing`` when the field is absent.

    Raises:
        ValueError: any other value — null, a word, a negative or fractional number, a
            boolean: a value never seen, which read as 0 would decide a filter verdict that
            lasts (``filtered:min_bookmarks`` of a null bookmark count) or what is delivered
            where (an ``x_restrict`` of -1 read as all ages).
    """
    if field not in illust:
        return missing
    value = illust[field]
    if isinstance(value, str) and value.isascii() and value.isdigit():
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    raise ValueError(f"{field} {str(value)[:20]!r} is not a count")


def _parse_work(illust: dict[str, Any], work_id: str, clean: Callable[[str], str], now: datetime | None) -> Work:
    # One validation of the whole work (its pages as plain dicts, built in pydantic-core):
    # a model per page and an attribute set per page cost ~0.4 ms a 30-work search page.
    #
    # Recognised positively (2026-12-05): a value that decides what curaflow delivers, or a
    # filter verdict that lasts (the target's frontier passes such works for good), is read
    # only when it is one the app-api sends; any other makes the work InvalidWork — skipped
    # in this job, read again by the next (never a lasting verdict: frontier.rules).
    # No type is no kind (2026-12-06): read as `illust`, an ugoira listed without it was
    # delivered as its first frame and then a duplicate of the route for ever.
    kind = illust.get("type")
    if kind not in KNOWN_TYPES:
        raise ValueError(f"type {str(kind)[:20]!r} is not one curaflow delivers")
    meta_pages = illust.get("meta_pages")
    if meta_pages is not None and not isinstance(meta_pages, list):
        raise ValueError("meta_pages is not a list")
    listed = len(meta_pages) if meta_pages else 0
    if listed > MAX_WORK_PAGES:
        raise ValueError(f"{listed} meta_pages are more than any work holds (at most {MAX_WORK_PAGES} are read)")
    page_count = _count(illust, "page_count", max(listed, 1))
    if page_count < 1:
        raise ValueError("page_count is below 1")
    if listed and page_count != listed:
        # Which one is the work? Neither is known: a lasting filtered:page_count on the
        # one, a partial delivery on the other.
        raise ValueError(f"page_count {page_count} disagrees with the {listed} meta_pages")
    visible = illust.get("visible", True)
    if not isinstance(visible, bool):
        raise ValueError("visible is not a boolean")
    if page_count > 1 and not listed and not _placeholder_listed(illust, visible):
        # A work of several pages that lists none of them: its single image (the first
        # page, or a sample of it) is not the work — delivered so, the work was a duplicate
        # for ever with its other pages never sent. A placeholder lists none (Pixiv keeps
        # its page_count): it is told as one, never delivered (2026-12-07: until then it
        # was refused here, invalid every job, never hidden or unavailable).
        raise ValueError(f"a work of {page_count} pages lists none in meta_pages")
    x_restrict = _count(illust, "x_restrict", 0)
    ai_type = _count(illust, "illust_ai_type", 0)
    if x_restrict not in KNOWN_X_RESTRICT:
        raise ValueError(f"x_restrict {x_restrict} is not one the app-api sends")
    if ai_type not in KNOWN_AI_TYPES:
        raise ValueError(f"illust_ai_type {ai_type} is not one the app-api sends")
    width, height = illust.get("width"), illust.get("height")
    pages: list[dict[str, Any]]
    if listed:
        pages = []
        for i, page in enumerate(meta_pages or []):
            urls = page.get("image_urls") or {}
            original = _original(urls.get("original"), urls.get("large"), kind, work_id, i)
            pages.append({"index": i, "url": _page_url(original, clean)})
    else:
        single = illust.get("meta_single_page") or {}
        url = _original(
            single.get("original_image_url"), (illust.get("image_urls") or {}).get("large"), kind, work_id, 0
        )
        pages = [{"index": 0, "url": _page_url(url, clean)}]
    pages[0]["width"], pages[0]["height"] = width, height
    user = illust.get("user") or {}
    author = user.get("name")
    return Work.model_validate(
        {
            "work_id": work_id,
            "work_type": "illustration",
            "kind": kind,
            "title": clean(str(illust.get("title") or "")),
            "url": f"https://www.pixiv.net/artworks/{work_id}",
            "tags": [clean(str(t["name"])) for t in illust.get("tags") or [] if t.get("name")],
            "create_date": iso_create_date(illust.get("create_date"), clean, now=now),
            "page_count": page_count,
            "width": width,
            "height": height,
            "x_restrict": x_restrict,
            "ai_type": ai_type,
            "total_bookmarks": _count(illust, "total_bookmarks", 0),
            "visible": visible,
            "author": clean(str(author)) if author is not None else None,
            "pages": pages,
        }
    )


def _placeholder_listed(illust: dict[str, Any], visible: bool) -> bool:
    """Whether an ``illust`` listing no page is a restricted placeholder as Pixiv lists one
    (``visible: false``, or a ``limit_*`` image for its single page or its sample): the
    work it stands for is never delivered (:func:`is_placeholder`), whatever its
    ``page_count``."""
    if not visible:
        return True
    single = illust.get("meta_single_page") or {}
    return _limit_image(single.get("original_image_url")) or _limit_image((illust.get("image_urls") or {}).get("large"))


def _original(original: Any, sample: Any, kind: str, work_id: str, index: int) -> Any:
    """A page's URL as the app-api lists it: its original (``meta_single_page``'s
    ``original_image_url``, a ``meta_pages`` item's ``image_urls.original``).

    Without it (absent, null, empty, renamed) the page has no URL curaflow fetches (``""``:
    ``unusable_url`` at the fetch, what the source answered — held back briefly, never the
    work's), never its sample (``image_urls.large``, 600×1200): delivered so, the work was
    sent as a sample and a duplicate for ever, its original never sent (until 2026-12-06).
    The sample stays the page's URL only where it is no page delivered: a restricted
    placeholder's ``limit_*`` image (:func:`is_placeholder` reads it: the work is
    ``unavailable`` before any request) and an ugoira's cover (the frames zip is what is
    delivered).

    Nor is an ``original`` that is one of Pixiv's samples (:func:`is_sample`: a listing
    that put a resized copy in the original's place — a proxy saving bandwidth, a field
    filled from another) the page: until 2026-12-07 it was, the work delivered as its
    sample and a duplicate for ever; now the page has no URL curaflow fetches, as
    without an original. Nor is an ``original`` whose file is another work's
    (:func:`names_another_file`: a cache or a proxy that merged two answers): until
    2026-12-07 that work's image was delivered as this one, the work then a duplicate for
    ever, its own pages never sent. Nor is an ``original`` whose file is another page of
    the work (:func:`names_another_file` too: page ``index`` listing ``<id>_p<M>``, ``M`` not
    ``index`` — a merged or shifted answer): until 2026-12-07 it was, the work delivered
    with a page twice or out of order, then a duplicate for ever, a page never sent."""
    if kind == "ugoira":
        return original or sample or ""
    if original and not is_sample(original) and not names_another_file(original, work_id, index):
        return original
    if _limit_image(sample):
        return sample
    return ""


#: A page's file name on Pixiv's image host: its work's id, then the page — ``p`` and its
#: place in the work from 0 (``126872003_p0.png``, ``126872003_p1.png``: ``meta_pages``'
#: order, ``meta_single_page``'s page 0), or an ugoira's cover (``…_ugoira0.jpg``) — and a
#: sample's suffix (``…_p0_master1200.jpg``). Groups: the id, ``p`` or ``ugoira``, the number.
PAGE_FILE = re.compile(r"([0-9]{1,20})_(p|ugoira)([0-9]+)(?:_[a-z]+[0-9]*)?\.[A-Za-z0-9]+")


def _page_file(url: object) -> re.Match[str] | None:
    """The :data:`PAGE_FILE` match of the file of ``url`` (its last path segment, without a
    query); None for anything but text or a name of another shape."""
    if not isinstance(url, str):
        return None
    return PAGE_FILE.fullmatch(url.rsplit("/", 1)[-1].split("?", 1)[0])


def _number(digits: str) -> str:
    """Decimal ``digits`` without their leading zeros (``"0"`` for zero): compared as text,
    never turned into an int (a name of thousands of digits is no page's)."""
    return digits.lstrip("0") or "0"


def names_another_file(url: object, work_id: str, index: int | None = None) -> bool:
    """Whether the file of a page's ``url`` is named (:data:`PAGE_FILE`, leading zeros
    aside) after a work other than ``work_id``, or — ``index`` given, the page's place in
    the listing from 0 — as a page of the work other than page ``index`` (``<id>_p<M>``,
    ``M`` not ``index``: Pixiv names page ``N`` ``<id>_p<N>``). Either is a file that is not
    the page listed: a cache or a proxy that merged two answers, a field filled from
    another work's or a neighbour page's (the page: 2026-12-07). A file name in no shape
    curaflow knows, an ugoira's cover (``…_ugoira0``: no page number) or anything but text
    names neither: False (a renamed file must not refuse every page)."""
    match = _page_file(url)
    if match is None:
        return False
    if _number(match.group(1)) != _number(work_id):
        return True
    return index is not None and match.group(2) == "p" and _number(match.group(3)) != str(index)


#: The path segments of Pixiv's samples of a page (its resized copies on the image host):
#: ``/img-master/`` (``…_master1200.jpg``, ``…_square1200.jpg``) and ``/custom-thumb/``.
SAMPLE_SEGMENTS = frozenset({"img-master", "custom-thumb"})


def _may_be_sample(url: str) -> bool:
    """Whether ``url`` holds what a sample's URL must: a resize prefix's ``/c``, a segment
    of :data:`SAMPLE_SEGMENTS`, or a character ``urlsplit`` removes before it splits (tab,
    CR, LF: they could join those words across them). False proves :func:`is_sample` False."""
    return "/c" in url or "img-master" in url or "custom-thumb" in url or "\t" in url or "\r" in url or "\n" in url


def is_sample(url: object) -> bool:
    """Whether ``url`` is one of Pixiv's samples of a page, never the page itself: a path
    under a resize prefix (``/c/600x1200_90/…``) or holding a segment of
    :data:`SAMPLE_SEGMENTS` (``https://i.pximg.net/c/600x1200_90_webp/img-master/img/…_p0_master1200.jpg``).
    An original is under ``/img-original/``.

    A URL holding none of the words a sample's path needs (``/c``, the segments) and none
    of the characters ``urlsplit`` drops before it splits (tab, CR, LF: ``img-master``
    with a tab inside is read ``img-master``) is no sample, told without splitting it (2026-12-07): a
    search page lists ~300 page URLs, more than ``urlsplit``'s cache holds, and splitting
    each cost ~1.3 ms of the worker's CPU a one-cell job (docs/performance.md)."""
    if not isinstance(url, str):
        return False
    if not _may_be_sample(url):
        return False
    try:
        segments = urlsplit(url).path.split("/")
    except ValueError:  # not a URL: no sample either (the fetch refuses it)
        return False
    return (len(segments) > 1 and segments[1] == "c") or not SAMPLE_SEGMENTS.isdisjoint(segments)


def _limit_image(url: Any) -> bool:
    """Whether ``url`` is one of Pixiv's ``limit_*`` images (a restricted placeholder's)."""
    return isinstance(url, str) and "limit_" in url.rsplit("/", 1)[-1]


def _page_url(url: Any, clean: Callable[[str], str] = clean_text) -> Any:
    """A page's URL cleaned (``clean``: :func:`clean_text`); anything but text is left for
    the model's validation to refuse."""
    return clean(url) if isinstance(url, str) else url


def _kept(text: str) -> str:
    """``text`` as it is: the cleaning of a string :func:`~curaflow.domain.text.loads_clean` read."""
    return text


#: Pixiv's calendar: Japan's time (``+09:00``), in which the app-api writes every
#: ``create_date`` and reckons its days (a search's ``start_date`` / ``end_date``).
JST = timezone(timedelta(hours=9))
#: The first day a work of Pixiv's may be created on: Pixiv opened on 2007-09-10 (JST).
FIRST_DAY = date(2007, 9, 10)
#: How many days past the clock's day (UTC) a work's creation day may be: a work created
#: now carries Japan's day (up to a day past UTC's), and a day more of clock skew between
#: Pixiv's servers and the worker.
DAYS_AHEAD = 2
_JST_OFFSET = timedelta(hours=9)


def iso_create_date(
    value: object, clean: Callable[[str], str] = clean_text, *, now: datetime | None = None
) -> str | None:
    """A work's ``create_date`` when it is one curaflow reads — text of an ISO 8601 date
    or date-time (``2025-02-04T00:00:00+09:00``, as the app-api sends), cleaned, of a day
    a work may have been created on — else None (unknown). Date-sorted scans order works
    and page by its text and its first ten characters (its day); a date of another shape
    is never taken for one.

    Its day is Pixiv's, Japan's (:data:`JST`): a date-time written in another offset
    (``2025-02-03T22:11:59Z``, a proxy converting to UTC) is the same instant written as
    Pixiv does (``2025-02-04T07:11:59+09:00``) — until 2026-12-07 its text's day was read,
    a day off within hours of midnight, and a target's ``start_date`` filtered it for good.
    A time that is none (``T25:00``, an offset of ``+99:00``, words) is no date (its day
    cannot be told in Japan's calendar); a date-time without an offset, or a date alone,
    is read as Pixiv's.

    A day before :data:`FIRST_DAY` (before Pixiv opened) or more than :data:`DAYS_AHEAD`
    days past ``now``'s (UTC; None: the clock's) is no work's: a lie of the listing (a
    sentinel such as ``9999-12-31``, a proxy's copy, a broken backend), read as no date
    (2026-12-07). Until then it was read: a lasting ``filtered:date``, a settled bookmark
    count of a work created days ago, and a frontier mark dated there (a ``date_desc``
    head in the future passed every new work; a ``date_asc`` mark there failed every job
    of the target). A worker whose clock is days behind reads new works undated —
    examined ``invalid`` for that job where a date is read (a date-sorted page of such
    works only is retried), never a lasting verdict.
    """
    if not isinstance(value, str):
        return None
    text = clean(value).strip()
    if len(text) < 10 or (len(text) > 10 and text[10] not in "T "):
        return None
    try:
        day = date.fromisoformat(text[:10])
        if len(text) > 10:
            moment = datetime.fromisoformat(text)
            if moment.tzinfo is not None and moment.utcoffset() != _JST_OFFSET:
                text = moment.astimezone(JST).isoformat()
                day = date.fromisoformat(text[:10])
    except (ValueError, OverflowError):  # OverflowError: an offset past the year's ends
        return None
    if day < FIRST_DAY or day > ((now or datetime.now(UTC)).astimezone(UTC) + timedelta(days=DAYS_AHEAD)).date():
        return None
    return text


def search_texts(illust: dict[str, Any]) -> list[str] | None:
    """What a search of the app-api may match an ``illust`` by: its tags' ``name`` and
    ``translated_name``, its ``title`` and its ``caption`` (cleaned); None when they are
    not read positively in the app-api's shape (reference ``pixiv-and-delivery-apis.md``
    §2.3, pixivpy's ``illust_detail.json``): ``tags`` a list whose every item is an
    object with its ``name`` (text, not empty) and its ``translated_name`` (text or null),
    and ``title`` and ``caption`` text — every field present. Anything else (a field
    absent, null or renamed, a tag object of another key, a tag without its name) says
    nothing of what the work could match by, and neither does an answer with no text at
    all (no tag and an empty title: a work alive has a title). Until 2026-12-06 an absent
    field or a tag object of another key read as no text — the work "no longer matched"
    (:func:`~curaflow.sources.pixiv.scan.pages.no_longer_matches`), and the search's
    empty answer of an outage was taken for the end of results."""
    tags = illust.get("tags")
    if not isinstance(tags, list):
        return None
    texts: list[str] = []
    for tag in tags:
        if not isinstance(tag, dict) or "translated_name" not in tag:
            return None
        name, translated = tag.get("name"), tag.get("translated_name")
        if not isinstance(name, str) or not name or (translated is not None and not isinstance(translated, str)):
            return None
        texts.append(clean_text(name))
        if translated:
            texts.append(clean_text(translated))
    for field in ("title", "caption"):
        value = illust.get(field)
        if not isinstance(value, str):
            return None
        if value:
            texts.append(clean_text(value))
    return [t for t in texts if t] or None


def is_placeholder(work: Work) -> bool:
    """True for a restricted placeholder (``visible: false`` or a limit_* image)."""
    if not work.visible:
        return True
    return any(_limit_image(p.url) for p in work.pages)


#: The ``limit_*`` images of a placeholder that say the work itself cannot be had:
#: ``limit_unknown``, what the app-api lists for a work deleted or made private by its
#: author (Pixiv's apps render it "削除済み もしくは 非公開", deleted or private; bookmark
#: lists carry it with the artist's id 0). Nothing the account does shows such a work.
WORK_LIMITS = frozenset({"limit_unknown"})

#: The ``limit_*`` images of a placeholder that hide the work from *this account*, known by
#: name: ``limit_sanity_level`` and ``limit_unviewable`` (the account's display settings —
#: its "sensitive content" setting off; the same work is shown to an account that allows it,
#: and to the web with such a session), ``limit_mypixiv`` (shown to the artist's My pixiv
#: only: the account's relation to the artist). Listed for reference: any name outside
#: :data:`WORK_LIMITS`, one never seen included, is taken as these are.
ACCOUNT_LIMITS = frozenset({"limit_sanity_level", "limit_unviewable", "limit_mypixiv"})


#: Pixiv's hosts of its own static images, a placeholder's ``limit_*`` images among them:
#: ``s.pximg.net`` (``https://s.pximg.net/common/images/limit_unknown_360.png``) and, in
#: older listings, ``source.pixiv.net``.
STATIC_HOSTS = frozenset({"s.pximg.net", "source.pixiv.net"})


def limit_name(url: object) -> str | None:
    """The name of a ``limit_*`` image (``…/limit_sanity_level_360.png`` →
    ``limit_sanity_level``, ``…/limit_mypixiv_s.png?20110520`` → ``limit_mypixiv``): a known
    name (:data:`WORK_LIMITS`, :data:`ACCOUNT_LIMITS`) when the file's name starts with one,
    else the file's name without its extension; None for any other URL.

    A known name is read only from Pixiv's own image (2026-12-07): an ``http`` / ``https``
    URL on :data:`STATIC_HOSTS` whose path's file carries it. The same words in a query or
    a fragment (``…/9_p0.png?/limit_unknown.png``), or in a file on any other host, are no
    placeholder image of Pixiv's: such a URL's name is ``""``, a name never seen (the
    account's side, :func:`hidden_from_account`) — until 2026-12-07 they were read as
    ``limit_unknown``, and the work was ``unavailable`` for good."""
    if not _limit_image(url):
        return None
    try:
        parts = urlsplit(str(url))
        host = (parts.hostname or "").lower()
    except ValueError:  # not a URL (an unclosed IPv6 bracket …)
        return ""
    if parts.scheme.lower() not in ("http", "https") or host not in STATIC_HOSTS:
        return ""
    stem = parts.path.rsplit("/", 1)[-1].rsplit(".", 1)[0]
    for name in WORK_LIMITS | ACCOUNT_LIMITS:
        if stem == name or stem.startswith(f"{name}_"):
            return name
    return stem


def pixivs_placeholder(work: Work) -> bool:
    """Whether ``work`` is a restricted placeholder by Pixiv's own word: ``visible: false``,
    or a ``limit_*`` image of Pixiv's own (:func:`limit_name`: its file on
    :data:`STATIC_HOSTS`) of a name Pixiv lists (:data:`WORK_LIMITS`, :data:`ACCOUNT_LIMITS`).

    What an empty search answer may be taken for the end of results by (a hidden work is
    listed by no search: ``scan.pages._corroborate_end``), so recognised positively
    (2026-12-07): ``limit_`` in the file part of any other URL — a query, a fragment,
    another host — or a name never seen is no placeholder of Pixiv's (until then
    :func:`is_placeholder` decided, and such a detail ended the target's results, the
    scan exhausted, its sweep cleared). In a listing such a work stays a placeholder the
    account is told ``hidden`` (:func:`hidden_from_account`), a verdict that does not last.
    """
    if not work.visible:
        return True
    known = WORK_LIMITS | ACCOUNT_LIMITS
    return any(limit_name(page.url) in known for page in work.pages)


def hidden_from_account(work: Work) -> bool:
    """Whether a placeholder (:func:`is_placeholder`) is not positively the work's own
    fault — the cheap side, owner of that decision (DESIGN.md "The scan frontier of a
    target", 2026-12-06): True unless every ``limit_*`` image it lists is one of
    :data:`WORK_LIMITS` (a work deleted or made private), Pixiv's own image
    (:func:`limit_name`: its file on :data:`STATIC_HOSTS`). So ``limit_sanity_level``,
    ``limit_unviewable``, ``limit_mypixiv``, a name never seen, and ``visible: false``
    with no ``limit_*`` image are the account's: the scan tells such a work ``hidden``, a
    verdict that does not last, and a later job meets it again once the account may see
    it. False for a work that is no placeholder."""
    if not is_placeholder(work):
        return False
    names = {limit_name(p.url) for p in work.pages} - {None}
    return not names or not names <= WORK_LIMITS


def offset_of(next_url: object) -> int:
    """The ``offset`` query parameter of a ``next_url`` (0 when absent, or when the
    ``next_url`` is not text of a URL with a decimal ``offset``)."""
    if not next_url or not isinstance(next_url, str):
        return 0
    try:
        values = parse_qs(urlsplit(next_url).query).get("offset")
        return int(values[-1]) if values and values[-1].isascii() and values[-1].isdigit() else 0
    except ValueError:  # not a URL (an unclosed IPv6 bracket …)
        return 0
