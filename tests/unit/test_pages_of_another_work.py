"""A page whose original is another work's file, or another page's, is never that page.

Pixiv names a page's original after its work (``<id>_p<N>.<ext>`` under
``/img-original/``): a listing whose page names another id (a cache or a proxy that
merged two answers, a field filled from another work's) lists a file that is not the
work's. Until 2026-12-07 it was the work's page: the other work's image was delivered as
the work listed — the work recorded delivered on its routes (never sent again, its own
pages never sent). Now such a page has no URL curaflow fetches (``unusable_url`` at its
fetch: what the source sent, held back briefly, never the work's), as a sample listed in
the original's place. So is a page whose original is another page of the work (Pixiv
names page ``N`` ``<id>_p<N>``; 2026-12-07). A file name in no shape curaflow knows names
no work and no page: taken.
"""

from __future__ import annotations

from typing import Any

import pytest

from curaflow.sources.pixiv.client import parse_work
from tests.unit.test_unknown_work_shapes import illust

ORIGINALS = "https://i.pximg.net/img-original/img/2025/02/04/00/00/00"


def _work(*urls: str) -> Any:
    """The listing of work 126872003 with ``urls`` for its pages' originals."""
    if len(urls) == 1:
        return parse_work(illust(meta_single_page={"original_image_url": urls[0]}, meta_pages=[], page_count=1))
    pages = [{"image_urls": {"original": u}} for u in urls]
    return parse_work(illust(meta_single_page={}, meta_pages=pages, page_count=len(urls)))


@pytest.mark.parametrize(
    "urls",
    [
        (f"{ORIGINALS}/126860839_p0.png",),
        (f"{ORIGINALS}/126872003_p0.png", f"{ORIGINALS}/126860839_p1.png"),
        (f"{ORIGINALS}/1_p0.jpg",),
    ],
    ids=["single", "second-of-two", "short-id"],
)
def test_a_page_naming_another_works_file_is_never_the_works_page(urls: tuple[str, ...]) -> None:
    work = _work(*urls)
    others = [u for u in urls if "/126872003_" not in u]
    assert not set(others) & {p.url for p in work.pages}
    assert "" in [p.url for p in work.pages]


@pytest.mark.parametrize(
    "urls",
    [
        (f"{ORIGINALS}/126872003_p0.png",),
        (f"{ORIGINALS}/126872003_p0.png", f"{ORIGINALS}/126872003_p1.jpg"),
        (f"{ORIGINALS}/illustration.png",),  # a name in no shape curaflow knows: names no work
    ],
    ids=["own", "own-two", "no-shape"],
)
def test_a_page_naming_the_work_or_none_is_the_works_page(urls: tuple[str, ...]) -> None:
    assert [p.url for p in _work(*urls).pages] == list(urls)


@pytest.mark.parametrize(
    "urls",
    [
        (f"{ORIGINALS}/126872003_p0.png", f"{ORIGINALS}/126872003_p0.png"),
        (f"{ORIGINALS}/126872003_p0.png", f"{ORIGINALS}/126872003_p2.png", f"{ORIGINALS}/126872003_p1.png"),
        (f"{ORIGINALS}/126872003_p1.png",),
    ],
    ids=["first-page-listed-again", "pages-swapped", "single-naming-the-second"],
)
def test_a_page_naming_another_page_of_the_work_is_never_that_page(urls: tuple[str, ...]) -> None:
    """Pixiv names page ``N`` of a work ``<id>_p<N>`` (its place in ``meta_pages``, from 0;
    ``meta_single_page``'s is page 0). A listing whose page ``N`` names another page's file
    (a cache or a proxy that merged two answers, a field filled from its neighbour) lists
    a file that is not that page: delivered, the work went out with one page twice (or out
    of order), recorded delivered on its routes and never sent again, its missing page
    never sent. Such a page has no URL curaflow fetches (``unusable_url``: held briefly,
    what the source sent, never the work's)."""
    work = _work(*urls)
    assert all(p.url in ("", f"{ORIGINALS}/126872003_p{p.index}.png") for p in work.pages)
    assert "" in [p.url for p in work.pages]


def test_a_page_named_with_its_own_number_is_taken_whatever_its_extension() -> None:
    urls = (f"{ORIGINALS}/126872003_p0.jpg", f"{ORIGINALS}/126872003_p1.png", f"{ORIGINALS}/126872003_p2.gif")
    assert [p.url for p in _work(*urls).pages] == list(urls)
