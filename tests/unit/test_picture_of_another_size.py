"""A page whose picture's aspect ratio disagrees with the size its source lists is not the
work's picture.

Pixiv lists the size of a work's first page (``width`` / ``height``, its original's). An
image host (a CDN's or a proxy's placeholder, a "not available" thumbnail) answering the
page with a valid image of another picture — 120×60 for a page listed 2480×3508 — passed
the decode check until 2026-12-07: it was delivered on every route as the work, and the
work counted delivered for ever (never delivered again). Now such a page is an answer of
the source's never seen as the work's (``not_an_image``, not recognised: held back for
``unrecognised_hold_ms``), never completed, and the cell moves on. The picture's ratio is
what is compared — its sides may be swapped (an EXIF orientation), and a copy scaled
either way (a mirror's, the replay's tenth) rounds each side within a pixel; no listed size,
no check.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from PIL import Image

from curaflow.artifacts import ArtifactStore
from curaflow.domain.models import Work, WorkPage
from curaflow.sources.corroboration import not_the_listed_picture
from curaflow.sources.errors import UnavailableKind, WorkUnavailable
from tests.unit.test_store_pages import Pages, left_behind


def png(width: int, height: int) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (width, height), (90, 120, 150)).save(buf, format="PNG")
    return buf.getvalue()


def listed(width: object, height: object, pages: int = 1) -> Work:
    """Work 42 as Pixiv lists it: ``width`` × ``height`` on its first page alone."""
    return Work(
        work_id="42",
        url="https://www.pixiv.net/artworks/42",
        page_count=pages,
        width=width if isinstance(width, int) else None,
        height=height if isinstance(height, int) else None,
        pages=[
            WorkPage.model_construct(
                index=i,
                url=f"https://i.pximg.net/img-original/42_p{i}.png",
                width=width if i == 0 else None,
                height=height if i == 0 else None,
            )
            for i in range(pages)
        ],
    )


@pytest.mark.parametrize(
    ("decoded", "listing"),
    [
        ((120, 60), (2480, 3508)),  # a placeholder wider than tall for a portrait page
        ((60, 120), (2480, 3508)),  # turned: still 1:2, not ~1:1.41
        ((100, 100), (2480, 3508)),
        ((248, 300), (2480, 3508)),  # off by far more than rounding
        ((1000, 1000), (1000, 1500)),
    ],
)
def test_a_picture_of_another_ratio_is_not_the_listed_picture(
    decoded: tuple[int, int], listing: tuple[int, int]
) -> None:
    why = not_the_listed_picture(*decoded, *listing)
    assert why is not None
    assert f"{decoded[0]}x{decoded[1]}" in why and f"{listing[0]}x{listing[1]}" in why


@pytest.mark.parametrize(
    ("decoded", "listing"),
    [
        ((2480, 3508), (2480, 3508)),  # the original
        ((3508, 2480), (2480, 3508)),  # its sides swapped (EXIF orientation)
        ((248, 350), (2480, 3508)),  # the replay's tenth, floored
        ((849, 1200), (2480, 3508)),  # a master1200 sample's rounding
        ((1199, 848), (2480, 3508)),  # turned, rounded the other way
        ((100, 100), (1001, 999)),
        ((1, 1), (7, 3)),  # scaled to a pixel: every ratio rounds there
        ((4961, 7017), (2480, 3508)),  # scaled up
    ],
)
def test_the_listed_picture_scaled_or_turned_is_taken(decoded: tuple[int, int], listing: tuple[int, int]) -> None:
    assert not_the_listed_picture(*decoded, *listing) is None


@pytest.mark.parametrize(
    "listing",
    [(None, None), (0, 0), (2480, None), (-1, 60), ("2480", "3508"), (True, True), (2480.0, 3508.0)],
)
def test_a_size_not_listed_says_nothing(listing: tuple[object, object]) -> None:
    assert not_the_listed_picture(120, 60, *listing) is None


async def test_a_placeholder_answered_for_the_first_page_is_never_the_works_page(tmp_path: Path) -> None:
    source = Pages([png(120, 60), png(40, 30)])

    with pytest.raises(WorkUnavailable) as caught:
        await ArtifactStore(tmp_path).fetch(source, listed(2480, 3508, pages=2), "job@x", "t")  # type: ignore[arg-type]

    err = caught.value
    assert err.kind == UnavailableKind.NOT_AN_IMAGE
    assert not err.recognised  # held back briefly: what the host answered, never the work's week
    assert "page 0" in err.why and "120x60" in err.why and "2480x3508" in err.why
    assert left_behind(tmp_path) == []  # never completed: nothing on disk to deliver


async def test_a_page_kept_from_an_earlier_attempt_is_judged_as_one_downloaded(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path)
    folder = store.folder("job@x", "t")
    folder.mkdir(parents=True)
    (folder / "42_p0.png").write_bytes(png(120, 60))  # completed before the rule

    with pytest.raises(WorkUnavailable) as caught:
        await store.fetch(Pages([png(248, 350)]), listed(2480, 3508), "job@x", "t")  # type: ignore[arg-type]

    assert caught.value.kind == UnavailableKind.NOT_AN_IMAGE and not caught.value.recognised
    assert left_behind(tmp_path) == []


@pytest.mark.parametrize(
    ("page0", "listing"),
    [
        ((248, 350), (2480, 3508)),  # the replay's tenth
        ((350, 248), (2480, 3508)),  # turned
        ((120, 60), (None, None)),  # no size listed: no check
        ((120, 60), (0, 0)),
    ],
)
async def test_the_listed_picture_or_an_unlisted_size_is_delivered(
    tmp_path: Path, page0: tuple[int, int], listing: tuple[object, object]
) -> None:
    # Page 1 has no listed size (Pixiv lists page 0's alone): any picture is taken.
    source = Pages([png(*page0), png(30, 90)])

    artifact = await ArtifactStore(tmp_path).fetch(source, listed(*listing, pages=2), "job@x", "t")  # type: ignore[arg-type]

    assert [(f.width, f.height) for f in artifact.files] == [page0, (30, 90)]
