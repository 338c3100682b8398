"""Whether a file's "not there" is the work's: the source's own description of the work decides.

An image host's 404/410 (a page, an animated work's frames zip) says only that the file is
not at that path. Pixiv's image host answers it for a work deleted or made private — and so
does a misconfigured mirror or proxy (``pixiv.image_host``), a CDN during a deploy or a
moved path, for every work while it lasts. Taken as the work's, each work fetched
meanwhile was remembered unavailable for the week (``unavailable_ttl_ms``) and nothing
was counted for the alert (until 2026-12-05).

Rule (owner: :func:`corroborated`; DESIGN.md "Work-owned failures and the decode budget"):
such an answer (:attr:`~curaflow.sources.errors.WorkUnavailable.corroborate`) is the
work's only when the source, asked for the work itself (:meth:`Source.work
<curaflow.sources.base.Source.work>`: Pixiv's ``/v1/illust/detail``, through the account's
rate gate like every request), answers that the work is gone in words it recognises as the
work's (a :class:`~curaflow.sources.errors.WorkUnavailable` with ``recognised``: the
app-api's own 404 error object). Anything else — the work described alive, a detail not
recognised as the work's (a proxy's 404 page, a bare 403, the "restricted" words), a
detail that cannot be asked (a 5xx, a timeout, a rate limit: any
:class:`~curaflow.sources.errors.SourceError`) — leaves it the host's answer: the work is
held back for ``unrecognised_hold_ms`` and counted, never the week. The unknown is cheap:
it costs one request and an hour, never a week.

Cost: one request of the work's detail, asked only once a file answered 404/410 — nothing
on the way of a page that answers.
"""

from __future__ import annotations

from collections.abc import Callable

from curaflow.outbound import past_deadline
from curaflow.sources.base import Source
from curaflow.sources.decoding import signed_format
from curaflow.sources.errors import SourceError, WorkUnavailable

__all__ = [
    "FRAMING_BYTES",
    "MAX_BYTES_PER_PIXEL",
    "ROUNDING_PX",
    "corroborated",
    "cut_by_deadline",
    "not_the_listed_picture",
    "signs_an_image",
    "sized",
]

#: The most bytes one pixel of a page can take in a file of the formats curaflow takes: a
#: 16-bit RGBA PNG stored without compression (8 bytes, its filter byte a row aside); a
#: compressed format is smaller, a JPEG, GIF or WebP far smaller.
MAX_BYTES_PER_PIXEL = 8
#: What a file of a page may hold beside its pixels (bytes): headers, a colour profile,
#: EXIF and a thumbnail, a PNG's row filter bytes and chunk framing.
FRAMING_BYTES = 4 * 1024 * 1024


def signs_an_image(head: bytes) -> bool:
    """Whether a body's first bytes sign an image format curaflow takes
    (:func:`~curaflow.sources.decoding.signed_format`): what a page's own bytes begin as."""
    return signed_format(head) is not None


def sized(
    err: WorkUnavailable,
    width: object,
    height: object,
    frames: int = 1,
    *,
    first: tuple[object, object] | None = None,
    begins_as: Callable[[bytes], bool] = signs_an_image,
) -> WorkUnavailable:
    """``err`` (``too_large``: a body whose own bytes went over its byte limit — never its
    announced length alone, which its raisers read rather than believe) as the work's own
    size settles it.

    Rule (owner; DESIGN.md "Work-owned failures and the decode budget"): a body over the
    limit is the work's — remembered for ``unavailable_ttl_ms`` — only when ``frames``
    images of ``width`` × ``height`` pixels, as the source describes the work, could be
    that large (:data:`MAX_BYTES_PER_PIXEL` a pixel, :data:`FRAMING_BYTES` a frame, over
    the limit). A page whose size the source does not give (Pixiv lists page 0's alone) is
    taken to be the size of the work's first page (``first``), when that one is given:
    the pages of one work are usually one size, so a later page over the limit is the
    work's when its first page is large enough that a page of its size could be (until
    2026-12-05 it was always the host's: a work's huge later page was held an hour and
    downloaded to the limit again every hour). A body larger than any image of those
    dimensions could be, or a page of no size given (nor its first page's; a size that is
    no positive integer), is what the host sent — a broken mirror or proxy streaming the
    same huge body for every work — held for ``unrecognised_hold_ms`` and counted, never
    the week (until 2026-12-05 every body over the limit was the work's). The raisers feed it
    only bytes counted (:func:`~curaflow.outbound.iter_capped` ``by_length=False`` for an image
    page or a frames zip, the source guard's and the artifact store's counts): until
    2026-12-07 a ``Content-Length`` over the limit was refused unread and judged here as if
    the bytes had gone over, so a header that lies on a large page cost the work the week.

    Asked first (2026-12-07): whether the body's own first bytes (``err.head``, kept by the
    artifact store as it received them) begin as the file it must be — ``begins_as``: an
    image format for a page (:func:`signs_an_image`), a zip's header for a frames zip. A
    body that does not (an HTML page, zeros, bytes never seen; none received, or not known)
    is no file of the work's whatever its size: what the host sent, held briefly. Until
    then the size alone was weighed, and every work listed over ~2 900 px square — every
    ugoira of ten frames or more, each frame allowed its framing — "could be" that large: a
    mirror streaming an endless page for every file cost each such work the week.

    Args:
        err: what the download raised; returned unchanged unless it is ``too_large`` with
            its ``limit_bytes``.
        width / height: the page's size as the source listed it (pixels; anything else:
            unknown).
        frames: the images the body holds (an animation's frames zip: its frames).
        first: the size of the work's first page (width, height, pixels), standing for a
            page whose own size is not given; None: not known.
        begins_as: whether the body's first bytes begin as the file it must be
            (:func:`signs_an_image` for a page).
    """
    if str(err.kind) != "too_large" or err.limit_bytes is None:
        return err
    if err.head is None or not begins_as(err.head):
        said = "none received" if not err.head else repr(err.head[:12])
        return WorkUnavailable(
            err.work_id,
            f"{err.why}, beginning as no file of the work's ({said}): the host's answer",
            err.kind,
            limit_bytes=err.limit_bytes,
        )
    known = _positive(width, height)
    if not known and first is not None and _positive(*first):
        width, height = first
        known = True
    most = frames * (MAX_BYTES_PER_PIXEL * width * height + FRAMING_BYTES) if known else 0  # type: ignore[operator]
    if known and most > err.limit_bytes:
        return WorkUnavailable(err.work_id, f"{err.why} (a work of {width}x{height} may be)", err.kind, recognised=True)
    said = f"{width}x{height} pixels, at most {most} bytes" if known else "a size the source does not give"
    return WorkUnavailable(
        err.work_id,
        f"{err.why}, for an image of {said}: the host's answer",
        err.kind,
        limit_bytes=err.limit_bytes,
    )


#: How far each side of a page's decoded size may be from an exact scale of the size its
#: source lists (pixels): a copy scaled down rounds each side to a whole pixel (floor,
#: ceiling or nearest: under one pixel off), and the replay serves its pictures at a tenth
#: of the listed size, floored.
ROUNDING_PX = 1


def not_the_listed_picture(width: int, height: int, listed_width: object, listed_height: object) -> str | None:
    """Why a page decoded at ``width`` × ``height`` pixels cannot be the picture its source
    lists at ``listed_width`` × ``listed_height``; None when it may be (or nothing is listed).

    Rule (owner; DESIGN.md "Work-owned failures and the decode budget", 2026-12-07): the
    page is the listed picture, or a copy of it scaled either way, when one scale takes the
    listed size to the decoded one with each side within :data:`ROUNDING_PX` — or the listed
    sides swapped (a picture whose EXIF orientation turns it: which of its two sizes a
    listing gives is not known). Any other picture (a CDN's or a proxy's placeholder, a
    "not available" thumbnail of 120×60 answered for a page listed 2480×3508) is no page of
    the work: what the image host answered, never the work's own bytes — the caller refuses
    it as an answer not recognised (``not_an_image``, held back for
    ``unrecognised_hold_ms``), never delivered. Until 2026-12-07 nothing compared the two,
    and such a picture was delivered as the work on every route, the work counted
    delivered for ever.

    The aspect ratio alone is compared, never the size: Pixiv lists an original's size
    (what curaflow downloads) only for a work's first page, and a mirror or the replay may
    serve a scaled copy. A listed size that is not two positive integers (absent, zero, a
    text) says nothing: no check. A picture scaled down to a few pixels agrees with any
    ratio within the rounding (a 1×1 answer passes): only a ratio that disagrees is told.

    Args:
        width / height: the decoded page's size (pixels, positive).
        listed_width / listed_height: the page's size as its source listed it (pixels;
            anything else: unknown).
    """
    if not _positive(listed_width, listed_height, width, height):
        return None
    assert isinstance(listed_width, int) and isinstance(listed_height, int)  # _positive: ints
    lw, lh = listed_width, listed_height
    if _one_scale(width, height, lw, lh) or _one_scale(width, height, lh, lw):
        return None
    return (
        f"a picture of {width}x{height} pixels, while the source lists the page at {lw}x{lh}"
        " (another aspect ratio, turned or not): not the work's picture"
    )


def _one_scale(width: int, height: int, listed_width: int, listed_height: int) -> bool:
    """Whether one scale ``s`` > 0 puts ``s * listed_width`` within :data:`ROUNDING_PX` of
    ``width`` and ``s * listed_height`` within it of ``height``: the intervals of ``s``
    each side allows, ``[(w - r) / W, (w + r) / W]`` and ``[(h - r) / H, (h + r) / H]``,
    meet (compared in integers, cross-multiplied)."""
    r = ROUNDING_PX
    return (width - r) * listed_height <= (height + r) * listed_width and (height - r) * listed_width <= (
        width + r
    ) * listed_height


def _positive(*values: object) -> bool:
    """Every value a positive int (a size in pixels as a source may list it)."""
    return all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in values)


async def corroborated(source: Source, work_id: str, err: WorkUnavailable) -> WorkUnavailable:
    """``err`` as the source's description of the work ``work_id`` settles it.

    Args:
        source: the source the work was fetched from (the same account and rate gate).
        work_id: the work being fetched (the cell's, not one read from the file's URL).
        err: what the fetch raised.

    Returns:
        ``err`` itself when it does not ask for corroboration
        (:attr:`~curaflow.sources.errors.WorkUnavailable.corroborate` false); else a
        ``WorkUnavailable`` of ``err``'s kind whose ``why`` says what the source answered
        for the work: ``recognised`` only when :meth:`Source.work` raised a recognised
        ``WorkUnavailable`` (the work is gone: its week), otherwise not (held briefly).

    Raises:
        Whatever :meth:`Source.work` raises other than ``SourceError`` /
        ``WorkUnavailable``: curaflow's own failures (the gate's database), a cancel.
        SourceError: the detail's, when the job's deadline cut it
            (:func:`cut_by_deadline`): curaflow's own bound, no answer of the host's —
            the caller fails the attempt as for any source call the deadline cuts
            (until 2026-12-05 the work was held back and counted as the host's answer,
            and the cell moved on to the next candidate).
    """
    if not err.corroborate:
        return err
    try:
        await source.work(work_id)
    except WorkUnavailable as detail:
        if detail.recognised:
            return WorkUnavailable(work_id, f"{err.why}; its detail: {detail.why}", err.kind, recognised=True)
        return WorkUnavailable(
            work_id,
            f"{err.why}; its detail answered what is not recognised as the work's ({detail.why[:200]})",
            err.kind,
        )
    except SourceError as detail:
        if cut_by_deadline(detail):
            raise
        reason = getattr(detail.reason, "value", detail.reason)
        return WorkUnavailable(
            work_id, f"{err.why}; its detail could not be asked ({reason}: {detail})"[:500], err.kind
        )
    return WorkUnavailable(work_id, f"{err.why}, though its detail lists the work: the image host's answer", err.kind)


def cut_by_deadline(err: BaseException) -> bool:
    """Whether ``err`` (a source call's failure) is the job's deadline cutting the call
    rather than an answer: the attempt's deadline has passed
    (:func:`~curaflow.outbound.past_deadline`), or an exchange in its causes was cut by
    it (:class:`~curaflow.outbound.TimeLimitExceeded` ``by_deadline``)."""
    if past_deadline():
        return True
    seen: BaseException | None = err
    for _ in range(8):  # the chain of raise … from: a few links at most
        if seen is None:
            break
        if getattr(seen, "by_deadline", False) is True:
            return True
        seen = seen.__cause__
    return False
