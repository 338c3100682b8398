"""Whether a fetched page is a deliverable image: decoded fully within its decode budget
(:func:`verify_image`), or refused as the work's (:class:`Refused`), or broken and maybe the
transfer's. Blocking: run in a thread."""

from __future__ import annotations

import contextlib
import dataclasses
import io
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, cast

from PIL import Image, ImageSequence, UnidentifiedImageError

from curaflow.sources.decoding import (
    FRAME_MAX_PIXELS,
    PILLOW_REFUSALS,
    PNG_SIGNATURE,
    DecodeBudget,
    DecodeMeter,
    OverBudget,
    coding_not_decoded,
    gif_framed,
    gif_layout,
    jpeg_framed,
    machine_cause,
    metered_open,
    opening_layout,
    png_coding_not_decoded,
    png_framed,
    png_libpng_refuses,
    png_without_bad_ancillary,
    viewed,
)
from curaflow.sources.decoding import signed_format as signed_head
from curaflow.sources.errors import UnavailableKind

#: Pixel formats a page may have (what Pillow identifies from the bytes, whatever the URL says).
#: ``MPO`` is a JPEG that carries more pictures after its first (CIPA DC-007: a stereo pair,
#: a phone's depth or gain map): what any JPEG reader shows is its first picture.
IMAGE_FORMATS = {"PNG": ".png", "JPEG": ".jpg", "MPO": ".jpg", "GIF": ".gif", "WEBP": ".webp"}
#: The formats Pillow decodes with libjpeg, at 1/8 scale through ``draft``.
JPEG_FORMATS = frozenset({"JPEG", "MPO"})
#: Default of ``outbound.image_max_pixels``: the largest frame verified (pixels decoded at
#: once; Pillow holds 4 bytes per pixel of an RGB(A) image, so 40 MP is ~160 MB).
IMAGE_MAX_PIXELS = FRAME_MAX_PIXELS


@dataclass(frozen=True)
class Refused:
    """A page that can never be delivered as a verified image: the work is unavailable,
    not retried.

    Attributes:
        why: what was seen.
        kind: ``not_an_image``, ``over_budget`` or ``undecodable``
            (:class:`~curaflow.sources.errors.UnavailableKind`).
        recognised: what the bytes show is the work's own (an image over the budget by
            its pixels or frames, a whole image that does not decode), stated where it is
            seen; False (the default) for a decode over its CPU time (this machine's
            measure: :attr:`~curaflow.sources.decoding.OverBudget.recognised`), for a
            whole image of a coding the decoder does not implement — a JPEG's frame
            header, a PNG's critical chunk libpng does not know
            (:func:`~curaflow.sources.decoding.coding_not_decoded`, 2026-12-07) — and for
            bytes that are no image Pillow
            verifies — an HTML or JSON page, a format not known here — which an image
            host or a proxy may answer for any work while it lasts
            (:attr:`~curaflow.sources.errors.WorkUnavailable.recognised`).
    """

    why: str
    kind: UnavailableKind = UnavailableKind.NOT_AN_IMAGE
    recognised: bool = False


#: Start-of-frame markers (SOF0–SOF15 but DHT, JPG and DAC), whose 6th byte is the frame's
#: component count (ITU T.81 B.2.2).
_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}


def one_scan(path: Path) -> bool:
    """Whether the JPEG at ``path`` (or an MPO's first picture) is read in one scan: its
    first start-of-scan holds every component of its frame (ITU T.81 B.2.3; a sequential
    frame has each component in exactly one scan). Markers are walked from the start by
    their lengths — an APP segment's contents (an EXIF thumbnail's own scan) are skipped —
    up to the first scan; anything else read (no SOI, no frame before the scan, a file
    that ends first) answers False."""
    with open(path, "rb") as fh:
        if fh.read(2) != b"\xff\xd8":
            return False
        components = None
        for _ in range(4096):
            if fh.read(1) != b"\xff":
                return False
            marker = fh.read(1)
            while marker == b"\xff":  # fill bytes
                marker = fh.read(1)
            if not marker or marker[0] in (0x00, 0xD9):
                return False
            if marker[0] == 0x01 or 0xD0 <= marker[0] <= 0xD8:  # no length: TEM, RSTn, SOI
                continue
            size = int.from_bytes(fh.read(2), "big")
            body = fh.read(max(0, size - 2))
            if size < 2 or len(body) != size - 2:
                return False
            if marker[0] in _SOF and len(body) >= 6:
                components = body[5]
            elif marker[0] == 0xDA:
                return components is not None and len(body) >= 1 and body[0] == components
    return False


def at_eighth(image: Image.Image, path: Path) -> bool:
    """Whether decoding ``image`` (opened from ``path``) holds 1/8 of its pixels: a
    sequential JPEG (or an MPO's first picture) read in one scan (:func:`one_scan`) and
    decoded through ``draft``, where libjpeg scales each block as it reads it. Any other
    JPEG is not: for a progressive one, or one whose components come in scans of their
    own, libjpeg keeps every coefficient of the picture at full size until its last scan
    (2 bytes a coefficient), whatever the output's scale — 1.6 KB claiming 13 000 px square
    took ~1 GB when it was counted at 1/8."""
    return image.format in JPEG_FORMATS and not image.info.get("progressive") and one_scan(path)


def decoded_pixels(image: Image.Image, path: Path) -> int:
    """Pixels the full decode of one frame of ``image`` (opened from ``path``) holds at once
    (a JPEG read in one scan, or such an MPO's first picture, at 1/8 scale through
    ``draft``: :func:`at_eighth`; any other JPEG at its full size; an animated GIF, APNG or
    WebP frame on its whole canvas)."""
    w, h = image.size
    if at_eighth(image, path):
        return max(1, -(-w // 8)) * max(1, -(-h // 8))
    return w * h


def frame_count(image: Image.Image, path: Path, meter: DecodeMeter) -> int:
    """How many frames decoding ``image`` (opened from ``path``) decodes, from its headers
    (no pixel decoded): a GIF's by walking its blocks (at most one over the budget's frame
    bound), an APNG's from its ``acTL``, an animated WebP's from its container, else 1 (an
    MPO too: its first picture is the one decoded)."""
    if image.format == "GIF":
        return viewed(path, lambda view: gif_layout(view, meter.budget.max_frames, meter)[0], 0)
    if image.format == "MPO":
        return 1  # its first picture (_load_frames)
    return max(1, int(getattr(image, "n_frames", 1)))


#: The last bytes of a whole file of each format (PNG's IEND chunk, JPEG's EOI); a GIF's
#: trailer is found by walking its blocks (:func:`~curaflow.sources.decoding.gif_framed`).
_ENDINGS = {"PNG": b"\x00\x00\x00\x00IEND\xaeB`\x82", "JPEG": b"\xff\xd9", "MPO": b"\xff\xd9"}


def signed_format(path: Path) -> str | None:
    """The format (a key of :data:`IMAGE_FORMATS`) the first bytes of ``path`` sign
    (:func:`~curaflow.sources.decoding.signed_format`), or None: what a page is when
    Pillow refuses it as it opens it (a WebP libwebp refuses, a GIF cut inside its first
    image descriptor), so that its verdict is read from its framing
    (:func:`whole_by_framing`) as for an image that fails later."""
    with open(path, "rb") as fh:
        return signed_head(fh.read(12))


def whole_by_framing(path: Path, fmt: str, meter: DecodeMeter | None = None) -> bool:
    """True when ``path`` ends as a whole file of ``fmt`` ends (PNG: the IEND chunk, reached
    by walking its chunks, :func:`~curaflow.sources.decoding.png_framed`; JPEG: EOI,
    trailing zero bytes allowed, its first picture's EOI reached by walking its segments and
    scans, :func:`~curaflow.sources.decoding.jpeg_framed` — an EXIF thumbnail's EOI or a
    carried PNG's IEND is no file's end; GIF: its blocks reach its trailer,
    :func:`~curaflow.sources.decoding.gif_framed` — its last byte alone is ``0x3B`` for one
    cut in 256; WebP: the RIFF length is the file's): a transfer cut short does not, so a
    page whole by its framing that does not decode is what the image host holds (the
    work's), and any other is maybe the transfer's (retried).

    Raises:
        DecodeStopped: ``meter`` was stopped while the file's blocks, chunks or segments
            were walked.
    """
    if fmt == "GIF":
        return viewed(path, lambda view: gif_framed(view, meter), False)
    check = meter.check if meter is not None else None
    if fmt == "PNG" and not viewed(path, lambda view: png_framed(view, check), False):
        return False  # its IEND is a chunk's contents (a PNG it carries), or none
    if fmt in JPEG_FORMATS and not viewed(path, lambda view: jpeg_framed(view, check), False):
        return False  # its EOI is a segment's contents (an EXIF thumbnail's), or none
    size = path.stat().st_size
    with open(path, "rb") as fh:
        head = fh.read(12)
        fh.seek(max(0, size - 64))
        tail = fh.read()
    if fmt == "WEBP":
        return (
            head[:4] == b"RIFF"
            and head[8:12] == b"WEBP"
            and int.from_bytes(head[4:8], "little") + 8 in (size, size - 1)
        )
    ending = _ENDINGS.get(fmt)
    if ending is None:
        return False
    return (tail.rstrip(b"\x00") if fmt in JPEG_FORMATS else tail).endswith(ending)


@dataclass(frozen=True)
class Verified:
    """A page :func:`check_image` decoded whole.

    Attributes:
        width / height: its size in pixels (the first frame's, as ``Image.open`` reads it).
    """

    width: int
    height: int


def verify_image(
    path: Path,
    suffix: str | None = None,
    *,
    max_pixels: int | None = None,
    budget: DecodeBudget | None = None,
    meter: DecodeMeter | None = None,
) -> str | Refused | None:
    """:func:`check_image`, None for a whole image (the other arguments and answers are its)."""
    del suffix
    checked = check_image(path, max_pixels=max_pixels, budget=budget, meter=meter)
    return None if isinstance(checked, Verified) else checked


def _load_frames(image: Image.Image, meter: DecodeMeter, held: int) -> None:
    """Decode every frame of ``image`` (freshly opened: nothing read of its pixels yet),
    each charged to ``meter`` first (a JPEG: ``held``, its :func:`decoded_pixels`); a
    JPEG's output at 1/8 scale (``draft``: libjpeg still reads every coefficient of the
    file), an MPO's first picture the same way (the one a reader shows: the pictures after
    it are a depth or gain map, a stereo pair's other eye); then the meter's deadline is
    checked."""
    if image.format in JPEG_FORMATS:
        image.draft(image.mode, (max(1, image.width // 8), max(1, image.height // 8)))
        meter.frame(held)
        image.load()
    else:
        for frame in ImageSequence.Iterator(image):
            meter.frame(frame.width * frame.height)
            frame.load()
    meter.check()


def check_image(
    path: Path,
    *,
    max_pixels: int | None = None,
    budget: DecodeBudget | None = None,
    meter: DecodeMeter | None = None,
) -> Verified | str | Refused:
    """Decode ``path`` fully, within its decode budget; :class:`Verified` (with its size)
    when it is a whole image.

    Args:
        path: the file (the format is told from its bytes, never from its name).
        max_pixels: the largest frame decoded (:func:`decoded_pixels`); overrides the
            budget's ``frame_max_pixels``.
        budget: the decode budget (default :class:`~curaflow.sources.decoding.DecodeBudget`()).
        meter: the decode's account (default: a fresh one of ``budget``); the caller's,
            to stop the decode from another thread.

    Returns:
        :class:`Verified`: a whole PNG, JPEG (an MPO: its first picture), GIF or WebP; a
        :class:`Refused` when the bytes are not one of those
        images (``not_an_image``), the decode is over its budget (``over_budget``: refused
        from the headers before anything is decoded — every frame of an animation counted,
        a GIF's or WebP's canvas read from its bytes before Pillow opens it — or at the
        frame that crossed it), or the file is whole by its framing and does not decode
        (``undecodable``; a PNG too whose CRCs are right but whose structure libpng
        refuses: :func:`~curaflow.sources.decoding.png_libpng_refuses` — recognised as the
        work's, but for a coding the decoder does not implement, a PNG's critical chunk
        libpng does not know too, decoded by Pillow or not:
        :func:`~curaflow.sources.decoding.coding_not_decoded`); a ``str`` when the image
        is broken or short and not whole by its framing (another download may succeed).
        A file Pillow refuses as it opens it is judged by the format its first bytes sign
        (:func:`signed_format`) the same way; only bytes signing none of them are
        ``not_an_image``.
        A JPEG's scan data is checked as far as libjpeg refuses it (its warnings are not
        visible through Pillow: DESIGN "Image checks").

    Raises:
        DecodeStopped: ``meter`` was stopped, or its deadline passed.
        OSError: the machine refused a read of the file (an ``errno``, ``EINVAL`` too:
            :func:`~curaflow.sources.decoding.machine_error`; a seek the bytes name before
            the file's start is theirs, :class:`~curaflow.sources.decoding.SeekBeforeStart`)
            — curaflow's, never a verdict on the page.

    Header first (``Image.open`` reads no pixel data) and the frames counted, then Pillow
    ``verify()`` (structure, PNG CRCs) and a full ``load()`` of every frame from a second
    open, each charged to the meter before it is decoded; a JPEG, whose ``verify()``
    checks nothing, is decoded from its first open. A PNG refused only for wrong CRCs on
    ancillary chunks (which libpng, and so a browser, drops with a warning) is checked
    again without them (:func:`~curaflow.sources.decoding.png_without_bad_ancillary`), as
    a page is (what libpng refuses in it too); the page itself is left as it came.
    Pillow's own size guard and warnings defer to the budget
    (:func:`~curaflow.sources.decoding.pillow_defers`): the verdict is the same whatever
    the warning filters. Blocking: call it in a thread.
    """
    if meter is None:
        budget = budget or DecodeBudget()
        if max_pixels is not None:
            budget = dataclasses.replace(budget, frame_max_pixels=max_pixels)
        meter = budget.meter()
    checked = _check(path, path, meter)
    if isinstance(checked, Verified) or (isinstance(checked, Refused) and checked.kind == UnavailableKind.OVER_BUDGET):
        return checked  # a copy without bad ancillary chunks has the same frames and pixels
    # A PNG Pillow refused for an ancillary chunk's CRC alone is checked again without
    # those chunks (what libpng, and so a browser, shows); the page itself is untouched.
    with meter.running(), open(path, "rb") as fh:
        head = fh.read(len(PNG_SIGNATURE))
        repaired = png_without_bad_ancillary(head + fh.read(), meter.check) if head == PNG_SIGNATURE else None
    if repaired is None:
        return checked
    return _check(io.BytesIO(repaired), path, meter)


def _png_shown(view: memoryview, meter: DecodeMeter) -> Refused | None:
    """None when libpng, and so a browser, shows the PNG Pillow verified in ``view``; else
    its refusal: ``undecodable`` recognised for a structure or an ``IHDR`` libpng refuses
    whatever chunks it knows (:func:`~curaflow.sources.decoding.png_libpng_refuses`), not
    recognised for a critical chunk libpng does not know, which Pillow skipped
    (:func:`~curaflow.sources.decoding.png_coding_not_decoded`, the PNG part of
    :func:`~curaflow.sources.decoding.coding_not_decoded`; 2026-12-07). One read of the
    file, two walks of its chunks by their lengths (~1 µs each for a page of a few chunks)."""
    refused = png_libpng_refuses(view, meter.check)
    if refused is not None:
        return Refused(f"whole PNG that libpng refuses: {refused}", UnavailableKind.UNDECODABLE, True)
    if png_coding_not_decoded(view, meter.check):
        why = "whole PNG with a critical chunk libpng does not know (the decoder's lack, not the file's)"
        return Refused(why, UnavailableKind.UNDECODABLE, recognised=False)
    return None


def _coding_not_decoded(source: Path | io.BytesIO, meter: DecodeMeter) -> bool:
    """Whether the bytes of ``source`` (a page's file, or a copy of them) declare a coding
    the decoder does not implement
    (:func:`~curaflow.sources.decoding.coding_not_decoded`, the owner)."""
    with open(source, "rb") if isinstance(source, Path) else contextlib.nullcontext(source) as fh:
        return coding_not_decoded(fh, meter.check)


#: The first bytes of a GIF, a JPEG and a PNG: what Pillow reads of them as it opens the
#: file is walked from the bytes first (:func:`~curaflow.sources.decoding.opening_layout`).
_WALKED_BEFORE_OPENING = (b"GIF", b"\xff\xd8\xff", PNG_SIGNATURE[:3])


def _check(source: Path | io.BytesIO, path: Path, meter: DecodeMeter) -> Verified | str | Refused:
    """:func:`check_image` of the bytes of ``source`` (``path``'s, opened once here, or a copy
    of them: a PNG without its ancillary chunks whose CRC is wrong); ``path`` is the page for
    what is read of its file alone (a JPEG's markers, its ending)."""
    fmt: str | None = None
    size = (0, 0)
    own = isinstance(source, Path)  # the page's file (opened once here), not a copy of its bytes
    try:
        with meter.running(), contextlib.ExitStack() as opened:
            fh: BinaryIO = opened.enter_context(open(path, "rb")) if own else cast(BinaryIO, source)
            layout = None
            if own:
                # What Pillow allocates as it opens the file (a GIF's or a WebP's canvas) is
                # planned from the bytes first: Pillow's own guard defers to the budget.
                head = fh.read(12)
                if head[:3] in _WALKED_BEFORE_OPENING or (head[:4] == b"RIFF" and head[8:] == b"WEBP"):
                    layout = viewed(fh, lambda view: opening_layout(view, meter), None)
                if layout is not None:
                    frames, canvas = layout
                    meter.plan(frames=frames, pixels=frames * canvas[0] * canvas[1], largest=canvas)
                fh.seek(0)
            with metered_open(fh, meter) as image:
                fmt = image.format
                if fmt not in IMAGE_FORMATS:
                    return Refused(f"not an image Pillow verifies (format {fmt})", recognised=False)
                w, h = size = image.size
                if fmt == "GIF" and layout is not None:
                    frames, canvas = layout  # every frame is decoded on the canvas they grow
                    largest = (max(w, canvas[0]), max(h, canvas[1]))
                else:
                    frames = frame_count(image, path, meter)
                    largest = (max(1, -(-w // 8)), max(1, -(-h // 8))) if at_eighth(image, path) else (w, h)
                held = largest[0] * largest[1]  # decoded_pixels, the file read once
                meter.plan(frames=frames, pixels=frames * held, largest=largest)
                if fmt in JPEG_FORMATS:
                    # Pillow's verify() of a JPEG or MPO checks nothing (ImageFile.verify
                    # only closes the file): the full decode is the whole check, made on
                    # this open (a second open cost ~30 µs a page).
                    _load_frames(image, meter, held)
                else:
                    image.verify()
            if fmt not in JPEG_FORMATS:
                fh.seek(0)
                with metered_open(fh, meter) as image:
                    _load_frames(image, meter, held)
            if fmt == "GIF" and own and not viewed(fh, lambda view: gif_framed(view, meter), False):
                # Pillow decodes the frames before a cut and stops: a GIF whose blocks do not
                # reach its trailer is cut short (maybe the transfer), never delivered short.
                return "a GIF whose blocks end before its trailer (cut short?)"
            if fmt == "PNG":
                # Pillow read every CRC (verify): what libpng refuses is judged — a copy
                # without bad ancillary chunks too (until 2026-12-07 an IHDR naming an
                # undefined method was verified so).
                shown = viewed(fh, lambda view: _png_shown(view, meter), None)
                if shown is not None:
                    return shown
    except OverBudget as err:
        return Refused(err.why, UnavailableKind.OVER_BUDGET, recognised=err.recognised)
    except PILLOW_REFUSALS as err:
        if (machine := machine_cause(err)) is not None:  # the disk's or the process's answer: curaflow's
            raise machine from None
        # Pillow refused the file as it opened it: its format is its signature's, and its
        # verdict that of any image that does not decode (whole by its framing or not).
        fmt = fmt or signed_format(path)
        if fmt is None and isinstance(err, UnidentifiedImageError):
            return Refused("not an image", recognised=False)
        try:
            with meter.running():  # a GIF's blocks are walked: stoppable, charged to its CPU time
                whole = fmt is not None and whole_by_framing(path, fmt, meter)
                not_decoded = whole and _coding_not_decoded(source, meter)
        except OverBudget as over:
            return Refused(over.why, UnavailableKind.OVER_BUDGET, recognised=over.recognised)
        if whole:
            if not_decoded:
                # A coding curaflow's decoder does not implement (a JPEG's 12-bit samples,
                # lossless, hierarchical; a PNG's critical chunk libpng does not know): the
                # decoder refused, not the file — held briefly (2026-12-07).
                return Refused(
                    f"whole {fmt} of a coding the decoder does not implement: {type(err).__name__}: {err}",
                    UnavailableKind.UNDECODABLE,
                    recognised=False,
                )
            return Refused(
                f"whole {fmt} that does not decode: {type(err).__name__}: {err}",
                UnavailableKind.UNDECODABLE,
                recognised=True,
            )
        if isinstance(err, UnidentifiedImageError):  # its message names the file, not what is wrong
            return f"a {fmt} that Pillow cannot open, not whole by its framing"
        return f"{type(err).__name__}: {err}"
    return Verified(*size)
