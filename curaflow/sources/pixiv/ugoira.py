"""Ugoira (Pixiv's animated works): the app-api's metadata read as an :class:`~curaflow.sources.animation.Animation`.

An ugoira (``illust.type == "ugoira"``) is not its cover image: the app-api's
``GET /v1/ugoira/metadata?illust_id=<id>`` answers ``{"ugoira_metadata": {"zip_urls":
{"medium": <zip>}, "frames": [{"file": "000000.jpg", "delay": <ms>}, …]}}`` (reference
``pixiv-and-delivery-apis.md``; the downloaders users know — gallery-dl, PixivUtil2 —
fetch the same zip). The zip holds one JPEG per frame; the delays are per frame, in
milliseconds. What becomes of the animation then (one animated GIF, its bounds) is
generic: :mod:`curaflow.sources.animation`.

Whose failure: metadata of the app-api's shape that describes no animation — the work's
(:class:`~curaflow.sources.animation.UnusableAnimation`); an answer that is not the
app-api's metadata object — the source's (:class:`UnrecognisedMetadata`).
"""

from __future__ import annotations

import math
import re
from typing import Any
from urllib.parse import urlsplit

from curaflow.outbound import url_problem
from curaflow.sources.animation import (
    FRAME_NAME,
    MAX_DELAY_MS,
    Animation,
    AnimationFrame,
    UnusableAnimation,
    clamp_delay,
)


class UnrecognisedMetadata(ValueError):
    """The answer is not the app-api's ``ugoira_metadata`` object: the source answered
    something curaflow does not recognise (the source's failure, never the work's)."""


#: A frames zip's file name as Pixiv names it: the work's id, then ``_ugoira`` and its size
#: (``62841186_ugoira600x600.zip``, ``…_ugoira1920x1080.zip``).
ZIP_NAME = re.compile(r"([0-9]{1,20})_ugoira[0-9]*x[0-9]*\.zip", re.IGNORECASE)


def zip_work_id(zip_url: str) -> str | None:
    """The work a frames zip's URL names (:data:`ZIP_NAME`: its file name's id, without
    leading zeros), or None when its file name is in no shape curaflow knows."""
    try:
        name = urlsplit(zip_url).path.rsplit("/", 1)[-1]
    except ValueError:  # not a URL (an unclosed IPv6 bracket …)
        return None
    match = ZIP_NAME.fullmatch(name)
    return (match.group(1).lstrip("0") or "0") if match else None


def parse_metadata(body: Any, work_id: str | None = None) -> Animation:
    """Parse an app-api ``/v1/ugoira/metadata`` answer (about ``work_id``, when given).

    Raises:
        UnrecognisedMetadata: the answer holds no ``ugoira_metadata`` object, or its frames
            zip is another work's (:func:`zip_work_id` names a work other than
            ``work_id``): the metadata carries no id of its own, the zip's name is the one
            word of the work it is about — a cache or a proxy keyed without the query
            answers every ugoira with the first one's, whose animation was delivered as
            the work asked until 2026-12-07 (the work recorded delivered, never sent
            again). A name in no shape curaflow knows names no work: taken.
        UnusableAnimation: it does, and it describes no usable animation: no zip URL, or
            one that is not an ``https`` URL a request can be made for
            (:func:`~curaflow.outbound.url_problem`); no frames; a frame name that is not
            a plain file name; a frame without a delay in ms (an integer, or a number
            written as a float or as decimal text, at least 0: a delay below the shortest
            viewers honour is raised to it, one below zero is none, and so is one longer
            than a GIF frame lasts, :data:`~curaflow.sources.animation.MAX_DELAY_MS`).

    How many frames an animation may have is the decode budget's
    (:class:`~curaflow.sources.decoding.DecodeBudget`), checked before the zip is fetched.
    """
    meta = body.get("ugoira_metadata") if isinstance(body, dict) else None
    if not isinstance(meta, dict):
        raise UnrecognisedMetadata("no ugoira_metadata object in the answer")
    urls = meta.get("zip_urls")
    zip_url = _zip_url(urls) if isinstance(urls, dict) else None
    if not isinstance(zip_url, str) or not zip_url.startswith("https://"):
        raise UnusableAnimation("no frames zip URL")
    if (problem := url_problem(zip_url)) is not None:
        raise UnusableAnimation(f"the frames zip URL is {problem}")
    named = zip_work_id(zip_url)
    if work_id is not None and named is not None and named != (work_id.lstrip("0") or "0"):
        raise UnrecognisedMetadata(
            f"the frames zip is work {named}'s, not work {work_id}'s: an answer about another work"
        )
    raw = meta.get("frames")
    if not isinstance(raw, list) or not raw:
        raise UnusableAnimation("no frames")
    frames = []
    for item in raw:
        name, delay = (item.get("file"), item.get("delay")) if isinstance(item, dict) else (None, None)
        if not isinstance(name, str) or not FRAME_NAME.match(name) or name.startswith("."):
            raise UnusableAnimation(f"frame file name {name!r} is not a plain file name")
        ms = _delay_ms(delay)
        if ms is None:
            raise UnusableAnimation(f"frame {name}: delay {delay!r} is not a number of ms")
        frames.append(AnimationFrame(file=name, delay_ms=clamp_delay(ms)))
    return Animation(zip_url=zip_url, frames=frames)


def _zip_url(urls: dict[str, Any]) -> Any:
    """The frames zip of ``zip_urls``: ``medium`` (what the app-api sends), else
    ``original``, else the first ``https`` URL under another size's key (a key curaflow
    has not seen is still the zip of the same frames)."""
    for key in ("medium", "original"):
        if urls.get(key):
            return urls[key]
    return next((v for v in urls.values() if isinstance(v, str) and v.startswith("https://")), None)


def _delay_ms(delay: Any) -> int | None:
    """A frame's delay in ms: an integer, or a number written otherwise — a float
    (``100.0``), decimal text (``"100"``) — rounded; None for anything else (no delay), a
    number below zero included: no duration the app-api sends, as the text ``"-100"`` was
    never read as one (until 2026-12-06 the number was raised to the shortest delay and
    the work delivered with timings curaflow made up, then never sent again); so is a
    delay longer than a GIF frame lasts (:data:`~curaflow.sources.animation.MAX_DELAY_MS`,
    655 350 ms), which was lowered to it alike until 2026-12-06."""
    ms = _read_delay_ms(delay)
    return ms if ms is None or ms <= MAX_DELAY_MS else None


def _read_delay_ms(delay: Any) -> int | None:
    """:func:`_delay_ms` before its upper bound."""
    if isinstance(delay, bool):
        return None
    if isinstance(delay, int):
        return delay if delay >= 0 else None
    if isinstance(delay, float):
        return round(delay) if math.isfinite(delay) and delay >= 0 else None
    if isinstance(delay, str) and delay.strip().isascii() and delay.strip().isdigit():
        return int(delay.strip())
    return None
