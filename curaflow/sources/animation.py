"""An animated work: its frames zip and delays, delivered as one animated GIF.

What every source may answer for an animated work (:meth:`~curaflow.sources.base.FileSource.animation`)
is an :class:`Animation`: the URL of a zip holding one image per frame, and the frames in
order, each with its file name in the zip and how long it shows (ms). Pixiv's ugoira is
one (its ``/v1/ugoira/metadata`` answer is read by :mod:`curaflow.sources.pixiv.ugoira`);
another source builds the same object from its own answer. :func:`encode_gif` turns the
zip and the delays into one animated GIF (looping for ever), the one animated format
Telegram's ``sendAnimation``, Discord and every image viewer show; the delays also go
into the directory route's manifest.

Bounds (as for images, so a work can never exhaust a worker): the zip is at most
:data:`MAX_ZIP_BYTES` (streamed to disk, never held in memory) and lists at most
:func:`max_zip_entries` entries (counted before zipfile reads its directory), each entry at most
:data:`MAX_FRAME_BYTES` uncompressed, and the decode budget
(:mod:`curaflow.sources.decoding`): frames, pixels summed over every frame — each frame
decoded at its own size, and all of them held by the GIF encoder at the first frame's
size (~1 byte per pixel) — and CPU time. **Every frame's header is read first** (no pixel
decoded), so a zip whose first frame is 1×1 and whose later frames are 13000×13000 is
refused before anything is decoded; then each frame is charged as it is decoded.

Whose failure: a frame that signs a frame format and is none, or does not decode,
although its CRC matched — the work's (:class:`UnusableAnimation`); a frame whose bytes
sign no frame format at all (:class:`FrameNotAnImage`: a page, a format never seen), an
animation without frames, a frame missing from
a zip whose directory was read (:class:`FrameNotInZip`), a body that is no zip at all
(:class:`NotAZip`), a frame stored encrypted or in a way the zip reader does not implement
(:class:`FrameNotReadable`), a JPEG frame of a coding the decoder does not implement that
does not decode (:class:`FrameCodingNotDecoded`), a central directory listing more entries than the frames may
(:func:`max_zip_entries`, counted before zipfile reads it: it builds an object per entry)
or one zipfile refuses as it opens the zip (:class:`UnreadableDirectory`) — unusable, but
not recognised as the work's (what the source
answered would be the same for every work while it lasts); over the budget — the work's
(:class:`~curaflow.sources.decoding.OverBudget`); a zip cut short, failing its CRC or whose
compressed stream breaks — maybe the transfer (:class:`AnimationBroken`, retried). Every
read of a member goes through :func:`_member`, the one place zipfile's errors are
classified (2026-12-05: a broken Deflate stream's ``zlib.error`` and an encrypted or
Deflate64 frame's ``RuntimeError`` escaped, the fetch failing as curaflow's own error in
every attempt and every job of the target).
"""

from __future__ import annotations

import contextlib
import io
import lzma
import mmap
import os
import re
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from PIL import Image, UnidentifiedImageError
from pydantic import BaseModel

from curaflow.paths import sync_file
from curaflow.sources.decoding import (
    PILLOW_REFUSALS,
    DecodeBudget,
    DecodeMeter,
    DelegatedReads,
    OverBudget,
    coding_not_decoded,
    machine_cause,
    metered_open,
    opening_layout,
    png_without_bad_ancillary,
    signed_format,
)

#: A frames zip larger than this is refused (bytes).
MAX_ZIP_BYTES = 64 * 1024 * 1024
#: One frame's uncompressed size at most (bytes).
MAX_FRAME_BYTES = 16 * 1024 * 1024
#: A frame's delay is clamped to this range (ms); GIF stores centiseconds.
MIN_DELAY_MS, MAX_DELAY_MS = 20, 655_350
#: A frame's file name in the zip: a plain file name.
FRAME_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
#: Formats a frame may have (what Pillow identifies from its bytes; ``MPO`` is a JPEG that
#: carries more pictures after its first, which is the frame).
FRAME_FORMATS = frozenset({"JPEG", "MPO", "PNG", "GIF", "WEBP"})
#: The first bytes of a zip (a local file header, or the end record of an empty one).
ZIP_SIGNATURES = (b"PK\x03\x04", b"PK\x05\x06")
#: The signature every central directory entry starts with (zipfile checks it per entry).
CENTRAL_SIGNATURE = b"PK\x01\x02"
#: Entries a frames zip may list besides two per frame (:func:`max_zip_entries`).
ZIP_ENTRY_MARGIN = 16


def max_zip_entries(frames: int) -> int:
    """The most entries a frames zip of ``frames`` frames may list: two per frame and
    :data:`ZIP_ENTRY_MARGIN` more. Pixiv's ugoira zip lists its frames alone; the margin
    is another packer's folder entries, a manifest, and the ``__MACOSX/._<frame>`` copy a
    Mac's archiver adds for each file. With ``frames`` at most ``outbound.decode_max_frames``
    (planned before the zip is fetched), zipfile builds at most ~2 000 ``ZipInfo`` at the
    default budget (~370 bytes each: under 1 MB) where the zip's byte cap alone let it
    build 1.4 million (a 45 MiB directory of a million entries: ~360 MiB, 3.8 s of CPU).
    """
    return 2 * frames + ZIP_ENTRY_MARGIN


class UnusableAnimation(ValueError):
    """The animation or its zip describes no usable animation.

    Attributes:
        recognised: the refusal is a fact of the work's own file (a frame in the whole
            zip that is no image or does not decode: the host holds those bytes) — True;
            False for a subclass naming an answer that would come for any work while it
            lasts (:class:`NotAZip`, :class:`FrameNotInZip`). Read by the artifact store
            as :attr:`~curaflow.sources.errors.WorkUnavailable.recognised`.
    """

    recognised = True


class NotAZip(UnusableAnimation):
    """What the frames zip's URL answered is no zip at all (an HTML or JSON page): an
    answer an image host or a proxy may give for any work while it lasts, not recognised
    as the work's (:attr:`~curaflow.sources.errors.WorkUnavailable.recognised`)."""

    recognised = False


class FrameNotInZip(UnusableAnimation):
    """The animation names a frame the whole zip does not hold: two answers of the source
    disagreeing (the metadata's frame names, the image host's zip) — what a renamed frame
    file or a zip of another size served for the URL would look like for every animated
    work; not recognised as the work's (2026-12-05: it cost each such work the week)."""

    recognised = False


class FrameNotReadable(UnusableAnimation):
    """A frame of the zip is stored in a way the zip reader cannot open: encrypted, or by
    a compression method or zip version it does not implement (Deflate64, which Windows'
    own zip writes for large files; AES's method 99) — zipfile's ``RuntimeError`` /
    ``NotImplementedError``. The host's packing, not the work: a change of it would come
    so for every animated work, so it is not recognised as the work's."""

    recognised = False


class UnreadableDirectory(UnusableAnimation):
    """The frames zip's central directory is one curaflow does not read: it lists more
    entries than the animation's frames may (:func:`max_zip_entries`, counted from the
    bytes before zipfile reads it), zipfile refuses it as it opens the zip (a zip
    version it does not implement, a name flagged UTF-8 that is none), or it lists a
    frame's name for two members (which one is the frame is not said). What the image host
    served disagrees with the metadata, or is its packing: it would come so for every
    animated work while it lasts, so it is not recognised as the work's (as
    :class:`FrameNotInZip`)."""

    recognised = False


class FrameNotAnImage(UnusableAnimation):
    """A frame of the zip whose bytes sign none of the frame formats
    (:func:`~curaflow.sources.decoding.signed_format`: an HTML or JSON page where the
    frame was, a format never seen — a TIFF, an AVIF): what the host packed, which a
    change of its packing would give every animated work while it lasts — as a page that
    is no image (``not_an_image``), not recognised as the work's (2026-12-06: it cost the
    work the week). A frame signing a frame format and not one (its CRC matched: the host
    holds those bytes) stays the work's (:class:`UnusableAnimation`)."""

    recognised = False


class FrameCodingNotDecoded(UnusableAnimation):
    """A frame of the zip declares a coding the decoder does not implement
    (:func:`~curaflow.sources.decoding.coding_not_decoded`: a JPEG of 12-bit samples,
    lossless, hierarchical; a PNG whose only fault is a critical chunk libpng does not
    know, Apple's ``CgBI``) and does not decode: curaflow's decoder refuses, a fact of the
    machine's build as much as of the bytes — not recognised as the work's, held back
    briefly (2026-12-07: until then the work's, the week, as any frame that does not
    decode). A PNG frame Pillow decodes despite such a chunk is encoded: the GIF delivered
    is made of Pillow's pixels, the frame is not delivered."""

    recognised = False


def _frame_refused(name: str, data: bytes, why: str) -> UnusableAnimation:
    """The refusal of frame ``name`` whose bytes ``data`` do not decode (``why``): a
    :class:`FrameCodingNotDecoded` for an image of a coding the decoder does not implement,
    else :class:`UnusableAnimation` (the work's, its CRC having matched)."""
    if coding_not_decoded(io.BytesIO(data)):
        return FrameCodingNotDecoded(f"frame {name} is of a coding the decoder does not implement: {why}")
    return UnusableAnimation(f"frame {name} {why}")


class AnimationBroken(Exception):
    """The frames zip is cut short, fails its CRC or its compressed stream breaks: maybe
    the transfer (retried)."""


#: What reading a member raises when its compressed bytes are broken (the checksum of the
#: member is only checked at its end, so a broken stream shows first as its decompressor's
#: error): the zip's reader, Deflate's, LZMA's (bzip2's is an ``OSError`` without errno,
#: :class:`_MemberReader`).
_STREAM_ERRORS = (zipfile.BadZipFile, EOFError, zlib.error, lzma.LZMAError)


class _MemberReader(DelegatedReads):
    """A member of the zip opened for reading, whose decompression errors are
    :class:`AnimationBroken` (a broken stream: maybe the transfer) whoever reads it —
    Pillow opening the frame included (it lets an exception of another type through)."""

    def __init__(self, fh: IO[bytes], name: str) -> None:
        super().__init__(fh)
        self._name = name

    def _broken(self, err: BaseException) -> AnimationBroken:
        return AnimationBroken(f"frame {self._name} cannot be read from the zip: {type(err).__name__}: {err}")

    def read(self, size: int = -1) -> bytes:
        try:
            return super().read(size)
        except (*_STREAM_ERRORS, OSError) as err:  # bzip2's broken stream: an OSError without errno
            if (machine := machine_cause(err)) is not None:
                raise machine from None
            raise self._broken(err) from None

    def seek(self, offset: int, whence: int = 0) -> int:
        try:  # a seek backwards reads the member again from its start
            return super().seek(offset, whence)
        except (*_STREAM_ERRORS, OSError) as err:  # bzip2's broken stream: an OSError without errno
            if (machine := machine_cause(err)) is not None:
                raise machine from None
            raise self._broken(err) from None


@contextlib.contextmanager
def _member(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> Iterator[_MemberReader]:
    """``info``'s member of ``archive`` opened for reading (:class:`_MemberReader`).

    Raises:
        FrameNotReadable: the member is encrypted, or stored by a method or a zip version
            the reader does not implement.
        AnimationBroken: its local header does not agree with the directory.
    """
    try:
        fh = archive.open(info)
    except RuntimeError as err:  # NotImplementedError is one
        raise FrameNotReadable(f"frame {info.filename} cannot be opened from the zip: {err}") from None
    except _STREAM_ERRORS as err:
        raise AnimationBroken(f"frame {info.filename} cannot be read from the zip: {err}") from None
    with fh:
        yield _MemberReader(fh, info.filename)


class AnimationFrame(BaseModel):
    """One frame: its file name in the zip and how long it shows (ms)."""

    file: str
    delay_ms: int


class Animation(BaseModel):
    """An animated work as a source answers it: the frames zip and its frames in order.

    Attributes:
        zip_url: the frames zip (downloaded through the source, as a page).
        frames: each frame's file name in the zip and delay (ms), in order.
    """

    zip_url: str
    frames: list[AnimationFrame]

    @property
    def delays_ms(self) -> list[int]:
        """Each frame's delay in ms, in order."""
        return [f.delay_ms for f in self.frames]


def clamp_delay(delay_ms: int) -> int:
    """A frame's delay within what viewers honour and GIF stores (:data:`MIN_DELAY_MS` … :data:`MAX_DELAY_MS`)."""
    return min(MAX_DELAY_MS, max(MIN_DELAY_MS, delay_ms))


def begins_as_zip(head: bytes) -> bool:
    """Whether a body's first bytes begin as a zip (:data:`ZIP_SIGNATURES`): what a frames
    zip's own bytes begin as (:func:`~curaflow.sources.corroboration.sized`)."""
    return head[:4] in ZIP_SIGNATURES


def _is_zip(path: Path) -> bool:
    with open(path, "rb") as fh:
        return fh.read(4) in ZIP_SIGNATURES


def _listed_entries(path: Path, limit: int) -> int:
    """How many central directory entries the zip at ``path`` may list, counting up to
    ``limit + 1``: the central directory signatures among its bytes.

    Each entry zipfile builds as it opens a zip starts with :data:`CENTRAL_SIGNATURE` (it
    refuses an entry without), so the count bounds what it builds whichever end record it
    reads — the end record's own entry count is not read by zipfile (a record saying
    65 535 let it build a million), and which record it reads (the ZIP64 one's place)
    differs between Python releases. A frame's bytes hold the signature by chance once in
    ~4 billion positions. One pass over the file in C (~10 ms for 64 MiB).

    Raises:
        OSError: the machine refused the read.
    """
    with open(path, "rb") as fh:
        if os.fstat(fh.fileno()).st_size == 0:
            return 0
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as view:
            count, at = 0, view.find(CENTRAL_SIGNATURE)
            while at >= 0 and count <= limit:
                count += 1
                at = view.find(CENTRAL_SIGNATURE, at + 4)
            return count


#: The first bytes of a GIF, a JPEG and a PNG: Pillow walks their blocks, segments or
#: chunks in Python as it opens the frame, so the whole frame is walked first
#: (:func:`~curaflow.sources.decoding.opening_layout`).
_WALKED_BEFORE_OPENING = (b"GIF", b"\xff\xd8\xff", b"\x89PN")


def _frame_size(archive: zipfile.ZipFile, info: zipfile.ZipInfo, meter: DecodeMeter) -> tuple[int, int]:
    """A frame's (width, height) from its header (no pixel decoded); a GIF's or a WebP's
    canvas is planned from its bytes before Pillow opens it
    (:func:`~curaflow.sources.decoding.opening_layout`: Pillow allocates it as it opens
    the file).

    Raises:
        FrameNotAnImage: the member's first bytes sign no image format curaflow takes.
        UnusableAnimation: the member signs one and is not an image of :data:`FRAME_FORMATS`.
        OverBudget: the frame's canvas is over the frame bound.
        AnimationBroken: the member cannot be read from the zip.
        DecodeStopped: ``meter`` was stopped while a PNG's chunks or a GIF's blocks were walked.
    """
    data = b""
    try:
        with _member(archive, info) as fh:
            head = fh.read(30)
            data = head + fh.read(MAX_FRAME_BYTES + 1) if head[:3] in _WALKED_BEFORE_OPENING else head
        if signed_format(head) is None:
            raise FrameNotAnImage(f"frame {info.filename} is no image of a frame format (by its first bytes)")
        layout = opening_layout(data, meter)
        if layout is not None:
            meter.plan(frames=1, pixels=0, largest=layout[1])  # only its first frame is decoded
        try:
            with _member(archive, info) as fh, Image.open(fh) as image:  # type: ignore[arg-type]
                return _frame_format_size(info, image)
        except (UnusableAnimation, AnimationBroken):
            raise
        except PILLOW_REFUSALS as err:
            if (machine := machine_cause(err)) is not None:
                raise machine from None
            with _member(archive, info) as fh:
                repaired = png_without_bad_ancillary(fh.read(MAX_FRAME_BYTES + 1), meter.check)
            if repaired is None:
                raise
            with Image.open(io.BytesIO(repaired)) as image:
                return _frame_format_size(info, image)
    except (UnusableAnimation, AnimationBroken):
        raise
    except UnidentifiedImageError:
        raise _frame_refused(info.filename, data, "is not an image") from None
    except PILLOW_REFUSALS as err:
        if (machine := machine_cause(err)) is not None:  # the disk's answer reading the zip: curaflow's
            raise machine from None
        raise _frame_refused(info.filename, data, f"has no readable header: {type(err).__name__}") from None


def _frame_format_size(info: zipfile.ZipInfo, image: Image.Image) -> tuple[int, int]:
    if image.format not in FRAME_FORMATS:
        raise UnusableAnimation(f"frame {info.filename} is not an image ({image.format})")
    return image.size


def _decoded(data: bytes, meter: DecodeMeter) -> Image.Image:
    """The frame ``data`` opened and decoded; a PNG with a wrong CRC on an ancillary chunk
    alone is decoded without that chunk, as libpng shows it
    (:func:`~curaflow.sources.decoding.png_without_bad_ancillary`).

    Raises:
        PILLOW_REFUSALS: as ``Image.open`` / ``load``
            (:data:`~curaflow.sources.decoding.PILLOW_REFUSALS`).
    """
    try:
        image = metered_open(io.BytesIO(data), meter)
        image.load()
        return image
    except PILLOW_REFUSALS:
        repaired = png_without_bad_ancillary(data, meter.check)
        if repaired is None:
            raise
    image = metered_open(io.BytesIO(repaired), meter)
    image.load()
    return image


def encode_gif(zip_path: Path, meta: Animation, dest: Path, *, meter: DecodeMeter | None = None) -> tuple[int, int]:
    """Write the frames of ``zip_path`` as one looping animated GIF at ``dest`` (blocking).

    Every frame's header is read first and the decode planned against ``meter``'s budget
    (module doc); frames are then read from the zip one at a time, each charged to
    ``meter`` before it is decoded. The file is written to a temporary name next to
    ``dest``, fsynced and renamed, so ``dest`` is complete or absent.

    Args:
        meter: the decode's account (default: a fresh one of the default budget). Call
            it in the thread that decodes: its CPU time is that thread's.

    Returns:
        The animation's ``(width, height)`` (the first frame's; others are fitted to it).

    Raises:
        UnusableAnimation: the body is no zip; its directory lists more entries than
            :func:`max_zip_entries`, cannot be read or lists a frame twice
            (:class:`UnreadableDirectory`); a
            frame is missing from it, not an image, or does not decode.
        OverBudget: a frame over :data:`MAX_FRAME_BYTES`, or the decode over its budget.
        AnimationBroken: the zip is cut short, or a frame fails its CRC.
        DecodeStopped: ``meter`` was stopped, or its deadline passed.
        OSError: the machine refused a read of the zip or the write of the GIF (an
            ``errno``: :func:`~curaflow.sources.decoding.machine_error`; a full disk
            too) — curaflow's, never the animation's.
    """
    meter = meter if meter is not None else DecodeBudget().meter()
    with meter.running():
        return _encode(zip_path, meta, dest, meter)


def _encode(zip_path: Path, meta: Animation, dest: Path, meter: DecodeMeter) -> tuple[int, int]:
    if not meta.frames:  # an Animation a source built without frames
        raise UnusableAnimation("no frames")
    meter.plan(frames=len(meta.frames), pixels=0)
    limit = max_zip_entries(len(meta.frames))
    if _listed_entries(zip_path, limit) > limit:  # before zipfile builds an object per entry
        raise UnreadableDirectory(f"the frames zip lists more than {limit} entries for {len(meta.frames)} frame(s)")
    # Read through DelegatedReads: a seek the zip's records name before its start is the
    # zip's (SeekBeforeStart), never taken for the disk's EINVAL (2026-12-07).
    raw = open(zip_path, "rb")  # noqa: SIM115 - closed with the archive; the disk's error raised as it came
    try:
        try:
            archive = zipfile.ZipFile(DelegatedReads(raw))  # type: ignore[arg-type]
        except (zipfile.BadZipFile, OSError) as err:
            # The disk's answer, not the zip's (nor the transfer's): curaflow's — also when
            # zipfile raised it as its own "File is not a zip file" (machine_cause).
            if (machine := machine_cause(err)) is not None:
                raise machine from None
            if not _is_zip(zip_path):
                raise NotAZip("the frames zip is not a zip") from None
            raise AnimationBroken(f"the frames zip cannot be read (cut short?): {err}") from None
        except (RuntimeError, UnicodeDecodeError) as err:  # NotImplementedError is a RuntimeError
            raise UnreadableDirectory(f"the zip reader refuses the frames zip's directory: {err}") from None
    except BaseException:
        raw.close()
        raise
    with raw, archive:
        entries: dict[str, zipfile.ZipInfo] = {}
        twice: set[str] = set()
        for entry in archive.infolist():
            seen = entries.get(entry.filename)
            if seen is not None and seen.header_offset != entry.header_offset:
                twice.add(entry.filename)  # two members of one name (listing one twice is one)
            entries[entry.filename] = entry
        sizes: list[tuple[int, int]] = []
        for frame in meta.frames:
            if frame.file in twice:
                # Which of the two is the frame is not said (zipfile reads the last, another
                # reader the first): until 2026-12-06 the last was taken and delivered.
                raise UnreadableDirectory(f"the frames zip holds frame {frame.file} twice")
            info = entries.get(frame.file)
            if info is None:
                raise FrameNotInZip(f"frame {frame.file} is not in the zip")
            if info.file_size > MAX_FRAME_BYTES:
                raise OverBudget(f"frame {frame.file} is {info.file_size} bytes, over {MAX_FRAME_BYTES}")
            sizes.append(_frame_size(archive, info, meter))
            meter.check()
        width, height = sizes[0]
        largest = max(sizes, key=lambda s: s[0] * s[1])
        own = sum(w * h for w, h in sizes)
        meter.plan(frames=len(sizes), pixels=max(own, width * height * len(sizes)), largest=largest)

        def frame_image(index: int, size: tuple[int, int] | None) -> Image.Image:
            name = meta.frames[index].file
            w, h = sizes[index]
            meter.frame(w * h)
            with _member(archive, entries[name]) as fh:  # a CRC that does not match: AnimationBroken
                data = fh.read(MAX_FRAME_BYTES + 1)
            try:
                image = _decoded(data, meter)
            except PILLOW_REFUSALS as err:
                if (machine := machine_cause(err)) is not None:
                    raise machine from None
                raise _frame_refused(name, data, f"cannot be decoded: {type(err).__name__}") from None
            rgb = image.convert("RGB")
            return rgb if size is None or rgb.size == size else rgb.resize(size)

        first = frame_image(0, None)

        def rest() -> Iterator[Image.Image]:
            for index in range(1, len(meta.frames)):
                yield frame_image(index, (width, height))

        tmp = dest.with_name(f".{dest.name}.part")
        try:
            with open(tmp, "wb") as out:
                first.save(
                    out,
                    format="GIF",
                    save_all=True,
                    append_images=rest(),
                    duration=meta.delays_ms,
                    loop=0,
                    disposal=1,
                )
                meter.check()
                out.flush()
                sync_file(out.fileno())  # a disk that cannot sync a file: as durable as it makes it
            os.replace(tmp, dest)
        finally:
            tmp.unlink(missing_ok=True)
    return width, height
