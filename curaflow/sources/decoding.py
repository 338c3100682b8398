"""The decode budget: what decoding one file of a work may cost.

Owner of "how much may one decode cost". A decode is one page verified
(:func:`curaflow.artifacts.verify_image`) or one animation encoded
(:func:`curaflow.sources.animation.encode_gif`); its budget (:class:`DecodeBudget`,
settings ``outbound.image_max_pixels`` / ``decode_max_pixels`` / ``decode_max_frames`` /
``decode_max_cpu_ms``) bounds:

* **pixels of one frame** (``frame_max_pixels``): what a frame holds at once, ~4 bytes
  each — the memory bound;
* **pixels summed over every frame** (``max_pixels``): an animated GIF, APNG or WebP is
  decoded frame by frame *on its whole canvas*, so a frame of 1×1 on a 4000×4000 canvas
  costs 16 M pixels; an animation's frames are decoded at their own size and held by the GIF
  encoder at the canvas's, and both sums count;
* **frames** (``max_frames``);
* **CPU time** (``max_cpu_s``) of the decoding thread (:func:`time.thread_time`, so a busy
  machine does not make a work look expensive).

**Checked before and during.** :meth:`DecodeMeter.plan` is given what the headers say —
every frame's and every zip member's header, read without decoding a pixel (a GIF's
frames are counted by walking its blocks: :func:`gif_layout`) — and refuses a file over
the budget before any pixel is decoded. :meth:`DecodeMeter.frame` is charged before each
frame is decoded, so a file whose headers lied, or whose frames cost more CPU than their
pixels promise, stops at the next frame; and every read of the file a frame is decoded from
checks it too (:func:`metered_open`), so a frame that costs more than its pixels promise
(a progressive JPEG repeating its scans) stops inside its decode.

**Never outliving its attempt.** The decode runs in a thread of the attempt; the attempt
stops it (:meth:`DecodeMeter.stop`, when it is cancelled — the cancel reaches it through
the heartbeat) and the job's deadline bounds it (``deadline``, monotonic): the thread
raises :class:`DecodeStopped` at its next check — between two frames, or between two
blocks of the file a frame is decoded from (:func:`metered_open`). Why a thread and not a
process: the cost of a page of an ordinary work stays a few milliseconds (no process
start, no copy of the file), the headers' plan refuses every bomb seen before its first
frame, a frame's memory is bounded by the frame bound and its time by the checks between
its blocks; a process would add a hard memory limit for a single frame, which the frame
bound already gives.

Exceeding the budget makes the work unavailable (:class:`OverBudget`,
:class:`~curaflow.sources.errors.UnavailableKind` ``over_budget``): the work's failure when
its bytes say so (pixels, frames, segments: the same on every machine), held back briefly
when the CPU time says so (a measure of this machine too: :attr:`OverBudget.recognised`);
a stop is nobody's (:class:`DecodeStopped`: the attempt ends as its cancel or deadline says).

**The only owner of "too large", and of the verdict.** Pillow has a decompression-bomb
guard of its own (``PIL.Image.MAX_IMAGE_PIXELS``: a ``DecompressionBombWarning`` past
~89 M pixels, an error past twice that) that looks at the full size as a file is opened:
it refused a JPEG the budget decodes at 1/8 and an operator's raised
``image_max_pixels``, and its warning became an error under ``-W error``. It is switched
off (:func:`pillow_defers`, when this module is imported and as every decode starts):
every size it looked at before Pillow allocates is planned here first — the frame's size
from the header, a GIF's canvas as its frames grow it and a WebP's canvas from their bytes
before Pillow opens them (:func:`opening_layout`). Pillow's other warnings (an EXIF it
cannot read, an invalid APNG it reads as a still image, a transparency it drops while
converting) are about what it goes on to do anyway: they are ignored while curaflow
decodes, so ``-W error`` or ``PYTHONWARNINGS`` never changes a verdict.
"""

from __future__ import annotations

import contextlib
import errno
import io
import mmap
import os
import re
import struct
import threading
import time
import warnings
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, NamedTuple, TypeVar

from PIL import Image

from curaflow.outbound.settings import OutboundSettings

_DEFAULTS = OutboundSettings()
#: Defaults of the budget: its settings' (``outbound.*``, :class:`~curaflow.outbound.settings.OutboundSettings`).
FRAME_MAX_PIXELS = _DEFAULTS.image_max_pixels
MAX_PIXELS = _DEFAULTS.decode_max_pixels
MAX_FRAMES = _DEFAULTS.decode_max_frames
MAX_CPU_S = _DEFAULTS.decode_max_cpu_ms / 1000
#: How many GIF sub-blocks are walked between two checks of the meter.
_WALK_CHECK_EVERY = 65_536
#: The bytes that start a GIF block (extension, image descriptor, trailer): Pillow skips
#: any other byte where a block is due (GifImagePlugin ``_seek``), and so does :func:`gif_layout`.
_GIF_BLOCK = re.compile(rb"[\x21\x2c\x3b]")
#: The warnings filter :func:`pillow_defers` keeps first: whatever Pillow's own modules warn.
_PILLOW_MODULES = r"PIL(\.|$)"
_PILLOW_QUIET = ("ignore", None, Warning, re.compile(_PILLOW_MODULES), 0)
_QUIETING = threading.Lock()


def pillow_defers() -> None:
    """Make Pillow defer to the decode budget (module doc): its own decompression-bomb
    guard off (``PIL.Image.MAX_IMAGE_PIXELS = None``), and a filter ignoring the warnings
    Pillow's modules emit first in :data:`warnings.filters` (put back if a
    ``warnings.simplefilter`` or a ``catch_warnings`` moved it).

    Called when this module is imported and as every decode starts
    (:meth:`DecodeMeter.running`); cheap when nothing changed (one comparison). Process
    wide: every decode of untrusted bytes in curaflow is planned by the budget first, and
    Pillow's warnings would only say what it goes on to do anyway.
    """
    Image.MAX_IMAGE_PIXELS = None
    if warnings.filters[:1] != [_PILLOW_QUIET]:
        with _QUIETING:
            warnings.filterwarnings("ignore", category=Warning, module=_PILLOW_MODULES)


pillow_defers()


def machine_error(err: BaseException) -> bool:
    """Whether ``err``, met while a decode read a file of the artifacts directory, is the
    machine's answer rather than the verdict of the bytes: an ``OSError`` the operating
    system raised (it carries an ``errno``: an I/O error of the disk, a map the process may
    not make, too many open files, a full disk, an ``EINVAL`` a disk answers a read it
    cannot serve), never Pillow's (its ``OSError`` for bytes it cannot decode has none) nor
    zipfile's. The one ``errno`` bytes can cause — ``lseek``'s ``EINVAL`` for a position a
    header names before the file's start — is said without one by the file a decoder
    reads (:class:`DelegatedReads`: :class:`SeekBeforeStart`).

    Such an error is curaflow's own: the check raises it as it came (the ``fetch``
    activity retries it, or ends the cell ``storage_full`` for a full disk) and never
    judges the page or the animation by it — not ``undecodable`` /
    ``unusable_animation`` (the work refused for ``unavailable_ttl_ms``), nor a body
    cut short (``download_failed``, the source's). Until 2026-12-05 a transient ``EIO``
    while a whole page was read refused the work for the week; until 2026-12-07 every
    ``EINVAL`` was taken for a seek's: the disk's on a read made a whole page
    ``undecodable`` (the work refused for the week), a kept page described without its
    size, the frames zip "cut short" (the source's).
    """
    return isinstance(err, OSError) and err.errno is not None


def machine_cause(err: BaseException) -> OSError | None:
    """The machine's ``OSError`` (:func:`machine_error`) that ``err`` is, or that a library
    turned into an error of its own while handling it (``err``'s ``__cause__`` /
    ``__context__`` chain); None when there is none: then ``err`` is the bytes' verdict.

    A caller judging a decode raises what this returns (the machine's answer as it came:
    the ``fetch`` activity retries it, ``storage_full`` for a full disk) before judging the
    bytes. zipfile does so: an ``EIO`` reading a frames zip's end record is raised as
    ``BadZipFile("File is not a zip file")`` (``ZipFile._RealGetContents``), which until
    2026-12-06 ended the attempt ``download_failed`` — the source's failure, "the frames
    zip cut short?" — for curaflow's own disk.
    """
    seen: set[int] = set()
    at: BaseException | None = err
    while at is not None and id(at) not in seen:
        if machine_error(at):
            assert isinstance(at, OSError)
            return at
        seen.add(id(at))
        at = at.__cause__ or at.__context__
    return None


#: What Pillow raises for bytes it cannot read, past ``Image.open`` too: the errors of the
#: bytes (``OSError`` — ``UnidentifiedImageError``, "image file is truncated" —,
#: ``SyntaxError``, ``ValueError``, ``EOFError``, ``IndexError``) and ``struct.error``, which
#: a plugin raises unpacking a field from fewer bytes than it holds. ``Image.open`` turns a
#: plugin's ``struct.error`` into ``UnidentifiedImageError``; seeking to a later frame and
#: loading it do not: a GIF cut inside its second frame's descriptor raised it out of the
#: page's check as curaflow's own error (``internal_error``, every attempt) until
#: 2026-12-06. A caller judging a decode catches these (after :func:`machine_cause`) and
#: judges the bytes; ``TypeError``, which ``Image.open`` also reads as unidentified, is left
#: out: curaflow's own code raises it for a bug, never to be judged as a page's verdict.
PILLOW_REFUSALS: tuple[type[Exception], ...] = (OSError, SyntaxError, ValueError, EOFError, IndexError, struct.error)

T = TypeVar("T")
#: Files smaller than this are read whole rather than mapped (a map costs ~10 µs more).
_MAP_MIN_BYTES = 256 * 1024


def viewed(file: Path | IO[bytes], read: Callable[[memoryview], T], empty: T) -> T:
    """``read`` of the bytes of ``file`` (a path, or a file open for reading): mapped, not
    copied, or read whole under :data:`_MAP_MIN_BYTES`; an in-memory file's buffer as it
    is; ``empty`` for an empty file. ``file``'s position is not kept.

    Raises:
        OSError: the machine refused the read or the map (:func:`machine_error`).
    """
    if isinstance(file, io.BytesIO):
        with file.getbuffer() as view:
            return read(view) if len(view) else empty
    with open(file, "rb") if isinstance(file, Path) else contextlib.nullcontext(file) as fh:
        size = os.fstat(fh.fileno()).st_size
        if size == 0:
            return empty
        if size < _MAP_MIN_BYTES:
            fh.seek(0)
            with memoryview(fh.read()) as view:
                return read(view)
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mapped, memoryview(mapped) as view:
            return read(view)


class OverBudget(Exception):
    """Decoding the file would cost more than its budget.

    Attributes:
        why: what is over, naming the setting.
        recognised: the work's own bytes say so — pixels, frames, bytes, segments or chunks,
            counted from the file the same on every machine (True, the default: the work
            is unavailable for the source's ``unavailable_ttl_ms``); False for the CPU time
            the decode took (:meth:`DecodeMeter.check`), a measure of this machine as
            much as of the bytes — a slower CPU, another build of libjpeg or zlib — so not
            recognised as the work's: held back for ``unrecognised_hold_ms`` and counted
            (:attr:`~curaflow.sources.errors.WorkUnavailable.recognised`; 2026-12-07: the
            costliest work the pixel budget admits, ~8.6 s here, was over the 30 s default
            on a machine a few times slower and lost for the week).
    """

    def __init__(self, why: str, *, recognised: bool = True) -> None:
        super().__init__(why)
        self.why = why
        self.recognised = recognised


class DecodeStopped(Exception):
    """The decode was stopped by its attempt: ``why`` is ``cancelled`` or ``deadline``.
    Nobody's failure: the attempt ends as its cancel or the job's deadline says."""

    def __init__(self, why: str) -> None:
        super().__init__(f"decoding stopped: {why}")
        self.why = why


@dataclass(frozen=True)
class DecodeBudget:
    """What one decode may cost (module doc).

    Attributes:
        frame_max_pixels: pixels of one frame (``outbound.image_max_pixels``).
        max_pixels: pixels summed over every frame (``outbound.decode_max_pixels``).
        max_frames: frames (``outbound.decode_max_frames``).
        max_cpu_s: CPU seconds of the decoding thread (``outbound.decode_max_cpu_ms`` / 1000).
    """

    frame_max_pixels: int = FRAME_MAX_PIXELS
    max_pixels: int = MAX_PIXELS
    max_frames: int = MAX_FRAMES
    max_cpu_s: float = MAX_CPU_S

    @classmethod
    def of(cls, settings: OutboundSettings) -> DecodeBudget:
        """The budget the ``[outbound]`` settings give (``image_max_pixels``,
        ``decode_max_pixels``, ``decode_max_frames``, ``decode_max_cpu_ms``)."""
        return cls(
            frame_max_pixels=settings.image_max_pixels,
            max_pixels=settings.decode_max_pixels,
            max_frames=settings.decode_max_frames,
            max_cpu_s=settings.decode_max_cpu_ms / 1000,
        )

    def meter(self, *, deadline: float | None = None, clock: Callable[[], float] = time.thread_time) -> DecodeMeter:
        """A fresh account of one decode under this budget.

        Args:
            deadline: when the attempt must have stopped (:func:`time.monotonic` seconds;
                None: no deadline).
            clock: the decoding thread's CPU seconds (tests pass their own).
        """
        return DecodeMeter(self, deadline, clock=clock)


@dataclass
class DecodeMeter:
    """One decode's account: charged by the decoding thread, stopped by its attempt.

    Attributes:
        budget: the limits.
        deadline: monotonic seconds by which the decode must stop (None: none).
        clock: the calling thread's CPU seconds (:func:`time.thread_time`).
        frames / pixels: frames decoded so far, and their pixels.
    """

    budget: DecodeBudget
    deadline: float | None = None
    clock: Callable[[], float] = time.thread_time
    frames: int = 0
    pixels: int = 0
    _cpu_s: float = 0.0
    _since: float | None = None
    #: Set by :meth:`stop` (any thread), read by :meth:`check` (the decoding thread): one
    #: attribute written once, as ``threading.Event.is_set`` reads its own flag. An Event
    #: (its condition and lock built for a waiter there never is) cost ~3-6 µs a page's
    #: meter until 2026-12-08 (docs/performance.md, "Twenty-eighth session").
    _stopped: bool = False

    @contextmanager
    def running(self) -> Iterator[DecodeMeter]:
        """Count the CPU time the calling thread spends inside (the decoding thread); Pillow
        defers to the budget meanwhile (:func:`pillow_defers`)."""
        pillow_defers()
        start = self.clock()
        self._since = start
        try:
            yield self
        finally:
            self._cpu_s += self.clock() - start
            self._since = None

    @property
    def cpu_s(self) -> float:
        """CPU seconds charged so far (the thread inside :meth:`running` included)."""
        running = self.clock() - self._since if self._since is not None else 0.0
        return self._cpu_s + running

    def stop(self) -> None:
        """Stop the decode at its next check (from any thread)."""
        self._stopped = True

    def check(self) -> None:
        """Raise if the decode must end now.

        Raises:
            DecodeStopped: stopped by its attempt, or the deadline passed.
            OverBudget: its CPU time is over the budget.
        """
        if self._stopped:
            raise DecodeStopped("cancelled")
        if self.deadline is not None and time.monotonic() >= self.deadline:
            raise DecodeStopped("the job's deadline passed")
        if self.cpu_s > self.budget.max_cpu_s:
            raise OverBudget(
                f"decoding took over {self.budget.max_cpu_s:g} s of CPU (outbound.decode_max_cpu_ms)"
                f" after {self.frames} frame(s)",
                recognised=False,  # this machine's measure, not the bytes' (OverBudget)
            )

    def plan(self, *, frames: int, pixels: int, largest: tuple[int, int] = (0, 0)) -> None:
        """What the headers say the decode will cost, before any pixel is decoded.

        Args:
            frames: frames to decode.
            pixels: pixels summed over every frame (as they will be decoded).
            largest: the largest frame's (width, height) as decoded.

        Raises:
            OverBudget / DecodeStopped: as :meth:`check`, or the plan is over a bound.
        """
        self.check()
        budget = self.budget
        width, height = largest
        if width * height > budget.frame_max_pixels:
            raise OverBudget(
                f"a frame of {width}x{height} is over the {budget.frame_max_pixels} pixels a frame may have"
                " (outbound.image_max_pixels)"
            )
        if frames > budget.max_frames:
            raise OverBudget(f"more than {budget.max_frames} frames to decode (outbound.decode_max_frames)")
        if pixels > budget.max_pixels:
            raise OverBudget(
                f"{frames} frame(s) of {width}x{height} are {pixels} pixels to decode, over the"
                f" {budget.max_pixels} of a decode (outbound.decode_max_pixels)"
            )

    def frame(self, pixels: int) -> None:
        """Charge one frame of ``pixels`` just before it is decoded.

        Raises:
            OverBudget / DecodeStopped: as :meth:`check`, or the frames decoded so far are
                over a bound.
        """
        self.check()
        budget = self.budget
        self.frames += 1
        self.pixels += pixels
        if pixels > budget.frame_max_pixels:
            raise OverBudget(
                f"frame {self.frames} has {pixels} pixels, over the {budget.frame_max_pixels} a frame may have"
                " (outbound.image_max_pixels)"
            )
        if self.frames > budget.max_frames:
            raise OverBudget(f"over {budget.max_frames} frames decoded (outbound.decode_max_frames)")
        if self.pixels > budget.max_pixels:
            raise OverBudget(
                f"{self.frames} frames are over the {budget.max_pixels} pixels of a decode (outbound.decode_max_pixels)"
            )


#: The most bytes of a JPEG that is not Huffman sequential (:func:`small_fed`) its decoder
#: is handed at once (:func:`metered_open`). A progressive scan refines every block of the
#: picture for a few bytes of its own (an end-of-band run: ~30 bytes a scan of a 4000×4000
#: picture, and libjpeg only warns of a scan repeated), ~0.4 ms of CPU a byte at 16 M
#: pixels, ~1 ms at the frame bound: a block of 1 KiB is at most ~1 s between two checks of
#: the meter. An arithmetic-coded scan (sequential too) takes 10 bytes, its header alone
#: (~14 ms at 16 M pixels: ~1.4 s a block). Cost on an ordinary progressive page: 3000×3000
#: of noise (7.9 MB) 0.284 s of CPU in Pillow's 64 KiB blocks, 0.306 s in 1 KiB ones.
PROGRESSIVE_BLOCK_BYTES = 1024
#: The JPEG formats Pillow decodes with libjpeg (an MPO's first picture is a JPEG).
_LIBJPEG_FORMATS = frozenset({"JPEG", "MPO"})
#: Frame markers (the byte after ``FF`` of ``SOFn``, ITU T.81 B.1.1.3) of the frames whose
#: decode costs about their bytes: Huffman sequential, baseline (``SOF0``) and extended
#: (``SOF1``) — a scan codes each block of its components in two bits at least.
HUFFMAN_SEQUENTIAL_FRAMES = frozenset({0xC0, 0xC1})
#: Every frame marker: ``C0``–``CF`` but DHT (``C4``), JPG (``C8``) and DAC (``CC``).
_JPEG_FRAMES = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}


def jpeg_frame_marker(fh: IO[bytes], limit: int | None = None) -> int | None:
    """The frame marker of the JPEG in ``fh`` (``0xC0`` for ``SOF0`` …), read from its start
    by its segments' lengths as Pillow walks them (a byte of junk or fill between two
    segments skipped: :func:`jpeg_head_steps`); ``fh``'s position is kept.

    Args:
        limit: most steps (None: :data:`JPEG_MAX_HEAD_STEPS`, the most Pillow is let walk).

    Returns:
        None when no frame comes before the first scan, an EOI, a marker Pillow refuses,
        the end of the file or ``limit`` steps.
    """
    frame = jpeg_frame(fh, limit)
    return frame[0] if frame is not None else None


#: The JPEG codings Pillow's decoder implements — libjpeg-turbo through its 8-bit
#: interface, the one Pillow calls: the frames of :data:`DECODED_JPEG_FRAMES` (Huffman
#: baseline, extended and progressive; arithmetic-coded sequential and progressive) of
#: samples of :data:`DECODED_JPEG_PRECISION` bits. ITU T.81 defines more — samples of 12
#: bits (the extended and progressive processes), lossless (``SOF3``, ``SOF11``),
#: hierarchical (``SOF5``–``SOF7``, ``SOF13``–``SOF15``) — which a file may be whole in and
#: this decoder still refuses (:func:`jpeg_coding_not_decoded`); so does Pillow a frame of
#: other than :data:`DECODED_JPEG_COMPONENTS` components (T.81 allows 1 to 255: Pillow maps
#: 1, 3 and 4 onto its modes, ``L``, ``RGB``/``YCbCr``, ``CMYK``).
DECODED_JPEG_FRAMES = frozenset({0xC0, 0xC1, 0xC2, 0xC9, 0xCA})
DECODED_JPEG_PRECISION = 8
DECODED_JPEG_COMPONENTS = frozenset({1, 3, 4})


def jpeg_frame(fh: IO[bytes], limit: int | None = None) -> tuple[int, int | None, int | None, int | None] | None:
    """The frame marker of the JPEG in ``fh``, its frame header's length (bytes), sample
    precision (bits) and number of components (the three None when the file ends inside
    the frame header), walked as :func:`jpeg_frame_marker`; ``fh``'s position is kept.
    None when no frame is found (:func:`jpeg_frame_marker`)."""
    limit = JPEG_MAX_HEAD_STEPS if limit is None else limit
    at = fh.tell()
    try:
        fh.seek(0)
        if fh.read(2) != b"\xff\xd8":
            return None
        byte, steps = fh.read(1), 0
        while byte and steps <= limit:
            steps += 1
            if byte != b"\xff":  # junk between segments
                byte = fh.read(1)
                continue
            byte = fh.read(1)
            if not byte or byte == b"\xff":  # the end, or fill: the marker is the next byte
                continue
            marker = byte[0]
            if marker in _JPEG_FRAMES:
                # Its length (2 bytes), sample precision (1), height and width (2 each),
                # components (1): ITU T.81 B.2.2.
                header = fh.read(8)
                if len(header) < 8:
                    return marker, None, None, None
                return marker, int.from_bytes(header[:2], "big"), header[2], header[7]
            if marker in (0xDA, 0xD9) or 0x02 <= marker < 0xC0:
                return None
            if marker != 0x00 and marker not in _JPEG_BARE:
                length = int.from_bytes(fh.read(2), "big")
                fh.seek(max(length, 2) - 2, io.SEEK_CUR)
            byte = fh.read(1)
        return None
    finally:
        fh.seek(at)


def coding_not_decoded(fh: IO[bytes], check: Callable[[], None] | None = None) -> bool:
    """Whether the image in ``fh`` (a page, or an ugoira frame) declares a coding Pillow's
    decoder does not implement, whole otherwise: a JPEG whose frame header says so
    (:func:`jpeg_coding_not_decoded`), a PNG whose only fault is a critical chunk libpng
    does not know (:func:`png_coding_not_decoded`). ``fh``'s position is kept.

    Owner of "a whole image that does not decode here is no verdict on the work"
    (2026-12-07): such a file refuses to decode however whole it is — what refuses is
    curaflow's decoder (libjpeg-turbo's 8-bit interface, libpng's four critical chunks), a
    fact of the machine's build and of the decoders' age as much as of the bytes (another
    build reads it), as a decode over its CPU time is (:class:`OverBudget` ``recognised``).
    A page or an ugoira frame so declared is held back briefly and counted, never the
    work's; until 2026-12-07 it was ``undecodable`` (or ``unusable_animation``),
    recognised: the week, and a lasting ``unavailable`` its target's frontier passed for
    good. False for any other file, and for one whose bytes are wrong whatever decodes
    them (a frame header cut, a wrong CRC, a structure libpng refuses whatever chunks it
    knows): that is the file's, as before.

    Args:
        fh: the file, open for reading (a file of the disk is mapped, an in-memory one read
            as it is: :func:`viewed`).
        check: called every 4 096 chunks of a PNG (a decode meter's ``check``: it raises
            to stop).

    Raises:
        whatever ``check`` raises; OSError: the machine refused the read.
    """
    at = fh.tell()
    try:
        fh.seek(0)
        head = fh.read(len(PNG_SIGNATURE))
        if head.startswith(b"\xff\xd8\xff"):
            return jpeg_coding_not_decoded(fh)
        if head == PNG_SIGNATURE:
            return viewed(fh, lambda view: png_coding_not_decoded(view, check), False)
        return False
    finally:
        fh.seek(at)


def jpeg_coding_not_decoded(fh: IO[bytes]) -> bool:
    """Whether the JPEG in ``fh`` declares, in its frame header (:func:`jpeg_frame`), a coding
    Pillow's decoder does not implement: a frame marker outside :data:`DECODED_JPEG_FRAMES`,
    samples of another precision than :data:`DECODED_JPEG_PRECISION` or a number of
    components outside :data:`DECODED_JPEG_COMPONENTS` (a 12-bit JPEG, a lossless or a
    hierarchical one, one of two components). ``fh``'s position is kept.

    The JPEG part of :func:`coding_not_decoded` (the owner, 2026-12-07). False when no
    frame is found, or its header is cut or not as long as its components make it (ITU
    T.81 B.2.2: ``8 + 3 × Nf`` bytes) — a JPEG so broken is the file's, as before — or the
    coding is one the decoder implements."""
    frame = jpeg_frame(fh)
    if frame is None:
        return False
    marker, length, precision, components = frame
    if length is None or precision is None or components is None or length != 8 + 3 * components:
        return False  # a frame header cut, or whose length is not its components': broken, the file's
    return (
        marker not in DECODED_JPEG_FRAMES
        or precision != DECODED_JPEG_PRECISION
        or components not in DECODED_JPEG_COMPONENTS
    )


def small_fed(fh: IO[bytes], image: Image.Image) -> bool:
    """Whether ``image`` (``Image.open`` of ``fh``) is a JPEG whose frame may cost more than
    its bytes promise, to be fed :data:`PROGRESSIVE_BLOCK_BYTES` at a time: any frame that
    is not Huffman sequential (:data:`HUFFMAN_SEQUENTIAL_FRAMES`) — progressive, lossless,
    arithmetic-coded — or one whose frame marker is not found (:func:`jpeg_frame_marker`).
    Until 2026-12-07 only a progressive one was: a sequential arithmetic-coded page
    repeating a component's scan (10 bytes a pass over every block, its data read as
    zeros) went in Pillow's 64 KiB blocks, ~90 s of CPU between two checks of the meter."""
    if image.format not in _LIBJPEG_FORMATS:
        return False
    return bool(image.info.get("progressive")) or jpeg_frame_marker(fh) not in HUFFMAN_SEQUENTIAL_FRAMES


class SeekBeforeStart(OSError):
    """A decoder's seek to a position before the start of the file it reads: an offset the
    bytes named (a header's, a zip's record's), said without an ``errno`` — the bytes'
    verdict, never the machine's (:func:`machine_error`). The kernel answers such a seek
    ``EINVAL`` (lseek(2)), which a disk may also answer a read it cannot serve."""


class DelegatedReads:
    """A file a decoder reads (Pillow's ``Image.open``, ``zipfile``'s archive and members),
    wrapped: ``read``, ``seek`` and ``tell`` go to ``fh``, the view says it is readable and
    seekable, and any other attribute is ``fh``'s; a seek before the file's start is the
    bytes' (:class:`SeekBeforeStart`). A subclass adds what happens around a
    read: :class:`MeteredReads` checks a decode's meter first,
    ``curaflow.sources.animation``'s member reader names a zip's broken stream.

    Args:
        fh: the file read (binary).

    Raises:
        whatever ``fh`` raises.
    """

    def __init__(self, fh: IO[bytes]) -> None:
        self._fh = fh

    def read(self, size: int = -1) -> bytes:
        """Up to ``size`` bytes of ``fh`` (all the rest for -1)."""
        return self._fh.read(size)

    def seek(self, offset: int, whence: int = 0) -> int:
        """``fh.seek``: the new position (bytes from the start).

        Raises:
            SeekBeforeStart: the position would be before the file's start (``lseek``'s
                ``EINVAL``: the offset the bytes named, never the disk's answer).
            OSError: the machine refused the seek otherwise."""
        try:
            return self._fh.seek(offset, whence)
        except OSError as err:
            if err.errno != errno.EINVAL:
                raise
        # Raised outside the handler: the kernel's EINVAL is not its context, so no
        # machine_cause finds it there.
        raise SeekBeforeStart(f"a seek to {offset} (whence {whence}) before the file's start")

    def tell(self) -> int:
        """``fh.tell``: the position (bytes from the start)."""
        return self._fh.tell()

    def readable(self) -> bool:
        """True: the view is read."""
        return True

    def seekable(self) -> bool:
        """True: decoders seek the view (a zip member seeks by reading again)."""
        return True

    def __getattr__(self, name: str) -> Any:
        return getattr(self._fh, name)


class MeteredReads(DelegatedReads):
    """A file a decode reads, ``meter`` checked before each read (:func:`metered_open`):
    the decoder is fed by ``ImageFile.load`` a block at a time, so the budget's CPU time,
    the attempt's deadline and its cancel stop a frame between two blocks.

    Raises (from :meth:`read`):
        OverBudget / DecodeStopped: as :meth:`DecodeMeter.check`.
    """

    def __init__(self, fh: IO[bytes], meter: DecodeMeter) -> None:
        super().__init__(fh)
        self._meter = meter

    def read(self, size: int = -1) -> bytes:
        """:meth:`DecodeMeter.check`, then up to ``size`` bytes of the file."""
        self._meter.check()
        return super().read(size)


def metered_open(fh: IO[bytes], meter: DecodeMeter) -> Image.Image:
    """``Image.open`` of ``fh`` for a decode charged to ``meter``: every read of the file
    checks the meter first (:class:`MeteredReads`), and the decoder of a JPEG that is not
    Huffman sequential (progressive, arithmetic-coded: :func:`small_fed`) is fed
    :data:`PROGRESSIVE_BLOCK_BYTES` at a time — so a frame stops inside its decode at its
    CPU budget, its attempt's deadline or cancel.

    A frame's cost is not bounded by its pixels (2026-12-07): a progressive JPEG's scans
    each visit every block of the picture, and a 250 KB page of 8 000 repeated scans of a
    4000×4000 picture took ~100 s of CPU in one ``load()`` — checked only between frames,
    the budget, the deadline and the cancel waited for the whole of it (hours for a 64 MiB
    page), the account's source slot held meanwhile and the thread going on after its
    attempt was cancelled.

    Raises:
        as ``Image.open``, and :class:`OverBudget` / :class:`DecodeStopped` (:meth:`DecodeMeter.check`).
    """
    image = Image.open(MeteredReads(fh, meter))
    if small_fed(fh, image):
        image.decodermaxblock = PROGRESSIVE_BLOCK_BYTES  # type: ignore[attr-defined]
    return image


def gif_layout(data: bytes | memoryview, limit: int, meter: DecodeMeter | None = None) -> tuple[int, tuple[int, int]]:
    """The frames (image descriptors) of a GIF, counted by walking its blocks without
    decoding any (at most ``limit + 1``: counting stops once over ``limit``), and the canvas
    they are decoded on: the logical screen grown to every frame counted that extends past
    it (Pillow grows its canvas so, and fills a frame's extent as it seeks to the frame).

    Args:
        data: the file's bytes (a ``memoryview`` of a mapped file is not copied).
        limit: the most frames wanted.
        meter: checked every 65 536 sub-blocks (a GIF of one-byte sub-blocks is long to walk).

    Returns:
        ``(frames, (width, height))``; ``(0, (0, 0))`` for fewer than the 13 bytes of a
        header and screen.

    The blocks are walked as Pillow reads them: a byte that starts no block (neither an
    extension, an image nor the trailer) is skipped and the walk goes on to the next block,
    so a frame hidden behind stray bytes is counted and grows the canvas. A structure that
    ends early ends the count: the decode itself then finds what is wrong.
    """
    frames, canvas, _ = _gif_walk(data, limit, meter)
    return frames, canvas


def gif_framed(data: bytes | memoryview, meter: DecodeMeter | None = None) -> bool:
    """Whether a GIF is whole by its framing: its blocks, walked by their lengths as
    :func:`gif_layout` walks them (a stray byte between blocks skipped, as Pillow skips
    it), reach its trailer (``0x3B`` where a block starts; bytes after it are no matter).

    A GIF cut short does not: cut inside a block, the walk runs past the end; cut between
    two blocks — after a frame's last sub-block — it ends with no trailer, though Pillow
    decodes every frame before the cut and stops. Its last byte alone is no framing: a cut
    inside a frame's data ends on ``0x3B`` once in 256 (until 2026-12-06 such a page was
    "whole", and not decoding, the work's for the week; one cut at a frame's end was
    verified and delivered with its later frames missing).

    Raises:
        DecodeStopped: ``meter`` was stopped while the blocks were walked.
    """
    return _gif_walk(data, None, meter)[2]


def _gif_walk(
    data: bytes | memoryview, limit: int | None, meter: DecodeMeter | None
) -> tuple[int, tuple[int, int], bool]:
    """The walk of :func:`gif_layout` (``limit`` None: every frame) and whether it reached
    the trailer (:func:`gif_framed`)."""
    size = len(data)
    if size < 13:
        return 0, (0, 0), False
    width, height = int.from_bytes(data[6:8], "little"), int.from_bytes(data[8:10], "little")
    flags = data[10]
    at = 13 + (3 << ((flags & 7) + 1) if flags & 0x80 else 0)
    frames = steps = 0
    while at < size:
        block = data[at]
        if block == 0x21:  # extension: introducer, label, sub-blocks
            at += 2
        elif block == 0x2C:  # image: descriptor, local colour table, LZW code size, sub-blocks
            if at + 10 > size:
                return frames + 1, (width, height), False
            frames += 1
            x0, y0 = int.from_bytes(data[at + 1 : at + 3], "little"), int.from_bytes(data[at + 3 : at + 5], "little")
            w, h = int.from_bytes(data[at + 5 : at + 7], "little"), int.from_bytes(data[at + 7 : at + 9], "little")
            width, height = max(width, x0 + w), max(height, y0 + h)
            if limit is not None and frames > limit:
                return frames, (width, height), False
            local = data[at + 9]
            at += 10 + (3 << ((local & 7) + 1) if local & 0x80 else 0) + 1
        elif block == 0x3B:  # the trailer
            return frames, (width, height), True
        else:
            # A byte that starts no block is skipped by Pillow, which reads on to the next
            # block (GifImagePlugin ``_seek``): the frames behind it are decoded, so counted.
            found = _GIF_BLOCK.search(data, at + 1)
            if found is None:
                return frames, (width, height), False
            at = found.start()
            continue
        while at < size:
            length = data[at]
            at += 1 + length
            steps += 1
            if meter is not None and steps % _WALK_CHECK_EVERY == 0:
                meter.check()
            if length == 0:
                break
    return frames, (width, height), False


def webp_canvas(head: bytes | memoryview) -> tuple[int, int] | None:
    """A WebP's canvas (width, height) from its first 30 bytes, as Pillow reads it before
    libwebp allocates it: the ``VP8X`` canvas, else the ``VP8`` / ``VP8L`` picture's size
    (WebP container spec); None when those bytes say neither."""
    head = bytes(head[:30])
    chunk = head[12:16]
    if chunk == b"VP8X" and len(head) >= 30:
        return int.from_bytes(head[24:27], "little") + 1, int.from_bytes(head[27:30], "little") + 1
    if chunk == b"VP8 " and len(head) >= 30 and head[23:26] == b"\x9d\x01\x2a":
        return int.from_bytes(head[26:28], "little") & 0x3FFF, int.from_bytes(head[28:30], "little") & 0x3FFF
    if chunk == b"VP8L" and len(head) >= 25 and head[20] == 0x2F:
        bits = int.from_bytes(head[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    return None


#: Most steps of Pillow's walk of a JPEG's segments before its first scan
#: (:func:`jpeg_head_steps`): an ordinary file has 10–30 segments, an ICC profile split in
#: 255 ``APP2`` adds 255, a 64 MiB XMP packet in 64 KiB ``APP1`` ~1 000. At the bound
#: Pillow keeps ~8 MB of ``APPn`` segments and walks them in ~0.1 s of CPU.
JPEG_MAX_HEAD_STEPS = 65_536
#: A run of bytes Pillow skips one at a time between two JPEG segments: junk, or fill bytes.
_JPEG_JUNK = re.compile(rb"[^\xff]+")
_JPEG_FILL = re.compile(rb"\xff+")
#: JPEG markers without a length (ITU T.81 B.1.1.3: TEM, RSTn, SOI, EOI).
_JPEG_BARE = frozenset({0x01, *range(0xD0, 0xDA)})


def jpeg_head_steps(data: bytes | memoryview, limit: int) -> int:
    """How many steps Pillow's ``JpegImageFile._open`` takes through the segments of the
    JPEG in ``data`` before its first scan (counting stops past ``limit``). Pillow walks
    them in Python as it opens the file, one step a segment (an ``APPn`` or ``COM`` one
    also kept in ``applist``) and one a byte of junk or fill between them; libjpeg reads
    the rest in C. The walk follows each segment's length as Pillow does; it ends at the
    first scan, a marker Pillow refuses, or the end of ``data``."""
    size = len(data)
    at, steps = 2, 0
    while at < size and steps <= limit:
        run = _JPEG_JUNK.match(data, at) if data[at] != 0xFF else _JPEG_FILL.match(data, at + 1)
        if run is not None:  # skipped a byte at a time (a fill run: up to the marker's byte)
            steps += run.end() - run.start()
            at = run.end() if data[at] != 0xFF else run.end() - 1
            continue
        if at + 1 >= size:
            break
        marker = data[at + 1]
        steps += 1
        if marker == 0xDA or (0x02 <= marker < 0xC0):  # the first scan; what Pillow refuses
            break
        if marker == 0x00 or marker in _JPEG_BARE:
            at += 2
            continue
        length = int.from_bytes(data[at + 2 : at + 4], "big")
        at += 2 + max(length, 2)
    return steps


#: In a JPEG's entropy-coded data, a marker: 0xFF and a byte that is no stuffed zero, no
#: restart marker and no fill byte (ITU T.81 B.1.1.2, B.1.1.5).
_JPEG_SCAN_MARKER = re.compile(rb"\xff[^\x00\xd0-\xd7\xff]")
#: Segments walked between two calls of a walk's ``check`` (:func:`jpeg_framed`).
_JPEG_CHECK_EVERY = 4096


def jpeg_framed(data: bytes | memoryview, check: Callable[[], None] | None = None) -> bool:
    """Whether the JPEG in ``data`` reaches its EOI by its own structure: its segments walked
    by their lengths from its SOI (a byte of junk or fill between them skipped, as Pillow
    skips it: :func:`jpeg_head_steps`), each scan's entropy-coded data to the next marker,
    up to an EOI. An EOI inside a segment — an EXIF thumbnail's, a whole JPEG in its
    ``APP1`` — is not the file's: a JPEG cut right after it ends on ``FF D9`` too (until
    2026-12-06 such a page, not decoding, was the work's for the week).

    Args:
        check: called every 4 096 segments (a decode meter's ``check``: it raises to stop).

    Returns:
        False too for anything else: no SOI, a segment or a scan running past the end, a
        marker Pillow refuses (``0x02`` … ``0xBF``).

    Raises:
        whatever ``check`` raises.
    """
    size = len(data)
    if bytes(data[:2]) != b"\xff\xd8":
        return False
    at, steps = 2, 0
    while at < size:
        steps += 1
        if check is not None and steps % _JPEG_CHECK_EVERY == 0:
            check()
        if data[at] != 0xFF:  # junk between segments, skipped
            run = _JPEG_JUNK.match(data, at)
            at = run.end() if run is not None else at + 1
            continue
        fill = _JPEG_FILL.match(data, at + 1)
        if fill is not None:  # fill bytes: the marker is the byte after the last 0xFF
            at = fill.end() - 1
        if at + 1 >= size:
            return False
        marker = data[at + 1]
        if marker == 0xD9:
            return True
        if 0x02 <= marker < 0xC0 or marker == 0x00:
            return False
        if marker in _JPEG_BARE:
            at += 2
            continue
        if at + 4 > size:
            return False
        length = int.from_bytes(data[at + 2 : at + 4], "big")
        at += 2 + length
        if length < 2 or at > size:
            return False
        if marker == 0xDA:  # a scan's header: its entropy-coded data runs to the next marker
            found = _JPEG_SCAN_MARKER.search(data, at)
            if found is None:
                return False
            at = found.start()
    return False


def png_framed(data: bytes | memoryview, check: Callable[[], None] | None = None) -> bool:
    """Whether the PNG in ``data`` reaches its ``IEND`` by its own structure, at its end: its
    chunks walked by their lengths (:func:`png_chunks`), the last the file's last bytes. An
    ``IEND`` inside a chunk — a whole PNG a chunk carries — is not the file's: a PNG cut
    right after it ends on ``IEND`` too (until 2026-12-06 such a page, not decoding, was
    the work's for the week).

    Raises:
        whatever ``check`` raises.
    """
    chunks = png_chunks(data, check)
    return isinstance(chunks, list) and bool(chunks) and chunks[-1].end == len(data)


def png_chunk_count(data: bytes | memoryview, limit: int) -> int:
    """How many chunks the PNG in ``data`` has up to its ``IEND`` (counting stops past
    ``limit``), walked by their lengths: Pillow reads each in Python, those before the
    pixels as it opens the file and those after as it finishes loading them. The walk
    ends at ``IEND`` or where ``data`` ends."""
    view = memoryview(data)
    at, count = len(PNG_SIGNATURE), 0
    while at + 12 <= len(view) and count <= limit:
        length, kind = _CHUNK_HEAD.unpack_from(view, at)
        count += 1
        if kind == b"IEND":
            break
        at += 12 + length
    return count


def opening_layout(data: bytes | memoryview, meter: DecodeMeter) -> tuple[int, tuple[int, int]] | None:
    """What Pillow allocates for the image in ``data`` before a frame is charged, read from
    the bytes before Pillow opens it: a GIF's frames and canvas (:func:`gif_layout`: Pillow
    fills a frame's extent as it opens the file or seeks to the frame), a WebP's canvas
    (libwebp allocates it, twice, as Pillow opens the file; its frames are counted once
    open); a JPEG's segments before its first scan and a PNG's chunks, which Pillow walks
    one by one in Python (:func:`jpeg_head_steps`, :func:`png_chunk_count`: 4 MB of empty
    ``APP1`` segments held ~130 MB and 1 s of CPU as it opened the file). The caller plans
    it (:meth:`DecodeMeter.plan`) before ``Image.open``.

    Returns:
        ``(frames, canvas)`` of a GIF, ``(1, canvas)`` of a WebP, None for another format.

    Raises:
        OverBudget: a JPEG over :data:`JPEG_MAX_HEAD_STEPS` steps before its first scan, a
            PNG over :data:`PNG_MAX_CHUNKS` chunks.
        DecodeStopped: ``meter`` was stopped while a GIF's blocks were walked.
    """
    if bytes(data[:6]) in (b"GIF87a", b"GIF89a"):
        return gif_layout(data, meter.budget.max_frames, meter)
    if bytes(data[:4]) == b"RIFF" and bytes(data[8:12]) == b"WEBP":
        canvas = webp_canvas(data)
        return None if canvas is None else (1, canvas)
    if bytes(data[:3]) == b"\xff\xd8\xff" and jpeg_head_steps(data, JPEG_MAX_HEAD_STEPS) > JPEG_MAX_HEAD_STEPS:
        raise OverBudget(f"a JPEG of more than {JPEG_MAX_HEAD_STEPS} segments or skipped bytes before its first scan")
    if bytes(data[:8]) == PNG_SIGNATURE and png_chunk_count(data, PNG_MAX_CHUNKS) > PNG_MAX_CHUNKS:
        raise OverBudget(f"a PNG of more than {PNG_MAX_CHUNKS} chunks")
    return None


#: The first bytes of every PNG file (PNG spec 5.2).
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
#: The first bytes of each image format curaflow takes (PNG spec 5.2; JPEG's SOI and a
#: marker, ITU T.81 B.1.1.2 — an MPO starts as a JPEG; GIF's header); a WebP is a RIFF
#: container of form ``WEBP`` (:func:`signed_format`).
IMAGE_SIGNATURES = ((PNG_SIGNATURE, "PNG"), (b"\xff\xd8\xff", "JPEG"), (b"GIF87a", "GIF"), (b"GIF89a", "GIF"))


def signed_format(head: bytes) -> str | None:
    """The image format (``PNG``, ``JPEG``, ``GIF``, ``WEBP``) a file's first bytes
    (``head``, at least 12 of them when the file has them) sign, or None: bytes signing
    none of them are no image curaflow takes, whatever else they are (an HTML or JSON
    page, a format never seen)."""
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "WEBP"
    return next((fmt for signature, fmt in IMAGE_SIGNATURES if head.startswith(signature)), None)


#: Most chunks a PNG may have for wrong CRCs of its ancillary chunks to be forgiven: a
#: 64 MiB image written in libpng's 8 KiB ``IDAT`` chunks has 8 192; a file of millions of
#: empty chunks is not walked (its verdict stands).
PNG_MAX_CHUNKS = 65_536
#: An APNG's frames: a wrong CRC there loses a frame of the animation, never forgiven. Their
#: chunks (``acTL``, ``fcTL``, ``fdAT``) are ancillary — their type's first letter lower case:
#: a reader of PNG alone shows the first picture.
_APNG_FRAME_CHUNKS = frozenset({b"fcTL", b"fdAT"})
#: The critical chunks PNG defines (PNG spec 4.3, 11.2; its third edition, 2025, adds none)
#: and libpng knows; any other critical chunk (its type's first letter upper case) is an
#: error there ("unhandled critical chunk"): :func:`png_critical_not_known`.
_PNG_CRITICAL = frozenset({b"IHDR", b"PLTE", b"IDAT", b"IEND"})
_ASCII_LETTERS = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
#: A chunk's length and type (PNG spec 5.3).
_CHUNK_HEAD = struct.Struct(">I4s")


def png_critical_not_known(kind: bytes) -> bool:
    """Whether a chunk of type ``kind`` is critical (its first letter upper case: PNG spec
    5.4) and not one PNG defines (:data:`_PNG_CRITICAL`): what libpng, and so a browser,
    stops at — Apple's ``CgBI``, a chunk a later edition of the spec or a writer defines.
    Pillow skips it as any chunk it does not know."""
    return not kind[0] & 0x20 and kind not in _PNG_CRITICAL


class PngChunk(NamedTuple):
    """One chunk of a PNG walked by :func:`png_chunks`: its bytes are ``data[start:end]``
    (length, type, data, CRC); ``crc_ok`` whether its CRC matches (None: not computed)."""

    start: int
    end: int
    kind: bytes
    crc_ok: bool | None


def _crc_forgiven(chunk: PngChunk) -> bool:
    """Whether ``chunk``'s CRC is right, or wrong on an ancillary chunk libpng drops with a
    warning (``PNG_CRC_DEFAULT``) — not an APNG frame's (:data:`_APNG_FRAME_CHUNKS`)."""
    return bool(chunk.crc_ok) or (bool(chunk.kind[0] & 0x20) and chunk.kind not in _APNG_FRAME_CHUNKS)


def png_chunks(
    data: bytes | memoryview, check: Callable[[], None] | None = None, *, crcs: bool = False
) -> list[PngChunk] | str | None:
    """The chunks of a PNG up to its ``IEND``, walked by their lengths as libpng reads them.

    Args:
        data: the file's bytes (a ``memoryview`` of a mapped file is not copied).
        check: called every 4 096 chunks (a decode meter's ``check``: it raises to stop).
        crcs: compute each chunk's CRC (``PngChunk.crc_ok``).

    Returns:
        the chunks; or a ``str``, why libpng refuses the file's structure whatever its
        CRCs say and whatever chunks it knows (libpng 1.6 ``png_read_info`` /
        ``png_read_end``, PNG spec 5.3, 5.6): a chunk before ``IHDR``, a second ``IHDR``, a
        chunk type that is not four ASCII letters, ``IDAT`` chunks that are not
        consecutive; or None when the walk says nothing of that — not a PNG, cut inside a
        chunk or before ``IEND``, a length over 2^31 − 1, more than
        :data:`PNG_MAX_CHUNKS` chunks. A critical chunk libpng does not know
        (:func:`png_critical_not_known`) is listed, before ``IHDR`` too (where Apple's
        ``CgBI`` is): what a decoder knowing it reads there is not for this walk to say
        (until 2026-12-07 it was a structure refused: :func:`png_coding_not_decoded`).

    Raises:
        whatever ``check`` raises.
    """
    if bytes(data[: len(PNG_SIGNATURE)]) != PNG_SIGNATURE:
        return None
    view = memoryview(data)
    chunks: list[PngChunk] = []
    at = len(PNG_SIGNATURE)
    header = False  # an IHDR walked
    pixels = "before"  # where the walk is against the IDAT run: before, in, after
    for count in range(PNG_MAX_CHUNKS):
        if check is not None and count % 4096 == 0:
            check()
        if at + 12 > len(view):
            return None
        length, kind = _CHUNK_HEAD.unpack_from(view, at)
        end = at + 12 + length
        if not _ASCII_LETTERS.issuperset(kind):
            return f"chunk type {kind!r} is not four ASCII letters"
        if kind == b"IHDR":
            if header:
                return "a second IHDR"
            header = True
        elif not header and not png_critical_not_known(kind):
            return f"{kind.decode()} before IHDR"
        if kind == b"IDAT":
            if pixels == "after":
                return "IDAT chunks not consecutive"
            pixels = "in"
        elif pixels == "in":
            pixels = "after"
        if length > 0x7FFFFFFF or end > len(view):
            return None
        crc_ok = zlib.crc32(view[at + 4 : end - 4]) == int.from_bytes(view[end - 4 : end], "big") if crcs else None
        chunks.append(PngChunk(at, end, kind, crc_ok))
        at = end
        if kind == b"IEND":
            return chunks
    return None


def png_libpng_refuses(data: bytes | memoryview, check: Callable[[], None] | None = None) -> str | None:
    """Why libpng refuses a PNG whatever its CRCs say and whatever chunks it knows, or None:
    the structure :func:`png_chunks` walks (its ``str``), or an ``IHDR`` naming a
    compression, filter or interlace method PNG does not define (PNG spec 11.2.2: 0, 0, and
    0 or 1; libpng's ``png_check_IHDR`` refuses any other) — 2026-12-07: Pillow reads the
    pixels as deflate whatever the compression byte says, and such a page was verified and
    delivered, a file no browser or chat preview shows, the work never sent again —, or an
    ``IHDR`` that is not 13 bytes long (PNG spec 11.2.2; libpng's ``png_handle_IHDR``:
    "invalid"; 2026-12-07: Pillow reads the first 13 of a longer one and verified it). A
    critical chunk libpng does not know is not among these (:func:`png_coding_not_decoded`).

    The methods are read from the walk's ``IHDR`` (after a critical chunk libpng does not
    know, where Apple's ``CgBI`` puts it); when the walk ends without its ``IEND`` (for a
    PNG Pillow verified: more than :data:`PNG_MAX_CHUNKS` chunks), from a first chunk that
    is a whole ``IHDR``."""
    walked = png_chunks(data, check)
    if isinstance(walked, str):
        return walked
    view = memoryview(data)
    at = len(PNG_SIGNATURE)
    if walked is not None:
        ihdr = next((chunk for chunk in walked if chunk.kind == b"IHDR"), None)  # one: else a str
        if ihdr is not None:
            at = ihdr.start
            if ihdr.end - ihdr.start != 12 + 13:
                return f"IHDR of {ihdr.end - ihdr.start - 12} bytes (PNG defines 13)"
    if len(view) < at + 25 or bytes(view[at : at + 8]) != b"\x00\x00\x00\x0dIHDR":
        return None
    compression, filter_method, interlace = bytes(view[at + 18 : at + 21])
    if compression != 0 or filter_method != 0 or interlace > 1:
        return (
            f"IHDR names compression method {compression}, filter method {filter_method}, "
            f"interlace method {interlace} (PNG defines 0, 0, and 0 or 1)"
        )
    return None


def png_coding_not_decoded(data: bytes | memoryview, check: Callable[[], None] | None = None) -> bool:
    """Whether the PNG in ``data`` is whole and its only fault a critical chunk libpng does
    not know (:func:`png_critical_not_known`): walked to its ``IEND`` (:func:`png_chunks`),
    a structure and an ``IHDR`` libpng reads (:func:`png_libpng_refuses` None), every CRC
    right but an ancillary chunk's libpng drops (:func:`png_without_bad_ancillary`).

    The PNG part of :func:`coding_not_decoded` (the owner, 2026-12-07). A decoder stops at a
    critical chunk it does not know (PNG spec 5.4, 13.1: it "cannot safely interpret" the
    image) — libpng with "unhandled critical chunk" —, and a chunk of a later edition, or
    Apple's ``CgBI`` (its pixels a raw deflate stream of premultiplied BGRA), is what a
    decoder knowing it reads: the file is not shown here, which says nothing of the work.
    Pillow skips such a chunk: it decodes the file when the pixels are what PNG defines
    (libpng, and so a browser, would not) and refuses it when they are not (``CgBI``'s).
    Either way the page is held briefly, never delivered; until 2026-12-07 the first was
    the work's for the week (a structure libpng refuses) and the second ``download_failed``
    in every attempt (the walk of its framing refused the chunk).

    Cost: one walk of the chunks by their lengths (no CRC) for a PNG with no such chunk.

    Raises:
        whatever ``check`` raises.
    """
    walked = png_chunks(data, check)
    if not isinstance(walked, list) or not any(png_critical_not_known(chunk.kind) for chunk in walked):
        return False
    if png_libpng_refuses(data, check) is not None:
        return False  # broken whatever chunks the decoder knows: the file's
    walked = png_chunks(data, check, crcs=True)
    return isinstance(walked, list) and all(_crc_forgiven(chunk) for chunk in walked)


def png_without_bad_ancillary(data: bytes, check: Callable[[], None] | None = None) -> bytes | None:
    """``data`` (a PNG) without its ancillary chunks whose CRC is wrong, or None when there
    is none to drop or the file is not one libpng would then read: not walked whole by
    :func:`png_chunks` (not a PNG, a structure libpng refuses, cut inside a chunk, no
    ``IEND``, more than :data:`PNG_MAX_CHUNKS` chunks), or a wrong CRC on a critical chunk
    (``IHDR``, ``PLTE``, ``IDAT``, ``IEND``, one libpng does not know) or on an APNG frame's
    (``fcTL``, ``fdAT``). What the copy still holds (an ``IHDR`` naming an undefined
    method, a critical chunk libpng does not know) is judged as the file's would be
    (``artifacts.images.check_image`` checks the copy as it checks a page).

    An ancillary chunk (its type's first letter lower case: a text, a colour profile, a
    time) with a wrong CRC is discarded with a warning by libpng's default
    (``png_set_crc_action``: ``PNG_CRC_DEFAULT``), which is what browsers show; a critical
    chunk's is an error there too (PNG spec 5.3–5.4). Pillow refuses the file for either.

    Args:
        data: the file's bytes.
        check: called every 4 096 chunks (a decode meter's ``check``: it raises to stop).

    Raises:
        whatever ``check`` raises.
    """
    chunks = png_chunks(data, check, crcs=True)
    if not isinstance(chunks, list):
        return None
    dropped = [c for c in chunks if not c.crc_ok]
    if not dropped or not all(_crc_forgiven(c) for c in dropped):
        return None
    view = memoryview(data)
    kept = bytearray()
    since = 0
    for chunk in dropped:
        kept += view[since : chunk.start]
        since = chunk.end
    kept += view[since : chunks[-1].end]
    return bytes(kept)
