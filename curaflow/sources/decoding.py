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
frames are counted by walking its blocks: :func:`gif_frames`) — and refuses a file over
the budget before any pixel is decoded. :meth:`DecodeMeter.frame` is charged before each
frame is decoded, so a file whose headers lied, or whose frames cost more CPU than their
pixels promise, stops at the next frame. A single frame is never interrupted: its cost is
bounded by ``frame_max_pixels``.

**Never outliving its attempt.** The decode runs in a thread of the attempt; the attempt
stops it (:meth:`DecodeMeter.stop`, when it is cancelled — the cancel reaches it through
the heartbeat) and the job's deadline bounds it (``deadline``, monotonic): the thread
raises :class:`DecodeStopped` at its next check. Why a thread and not a process: the
cost of a page of an ordinary work stays a few milliseconds (no process start, no copy of
the file), the headers' plan refuses every bomb seen before its first frame, and a
frame's own cost is bounded by the frame bound; a process would add a hard memory limit
for a single frame, which the frame bound already gives.

Exceeding the budget is the work's failure (:class:`OverBudget`: the work is
unavailable, :class:`~curaflow.sources.errors.UnavailableKind` ``over_budget``); a stop is
nobody's (:class:`DecodeStopped`: the attempt ends as its cancel or deadline says).
"""

from __future__ import annotations

import threading
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from curaflow.outbound.settings import OutboundSettings

_DEFAULTS = OutboundSettings()
#: Defaults of the budget: its settings' (``outbound.*``, :class:`~curaflow.outbound.settings.OutboundSettings`).
FRAME_MAX_PIXELS = _DEFAULTS.image_max_pixels
MAX_PIXELS = _DEFAULTS.decode_max_pixels
MAX_FRAMES = _DEFAULTS.decode_max_frames
MAX_CPU_S = _DEFAULTS.decode_max_cpu_ms / 1000
#: How many GIF sub-blocks are walked between two checks of the meter.
_WALK_CHECK_EVERY = 65_536


class OverBudget(Exception):
    """Decoding the file would cost more than its budget: the work's failure.

    Attributes:
        why: what is over, naming the setting.
    """

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


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
    _stop: threading.Event = field(default_factory=threading.Event)

    @contextmanager
    def running(self) -> Iterator[DecodeMeter]:
        """Count the CPU time the calling thread spends inside (the decoding thread)."""
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
        self._stop.set()

    def check(self) -> None:
        """Raise if the decode must end now.

        Raises:
            DecodeStopped: stopped by its attempt, or the deadline passed.
            OverBudget: its CPU time is over the budget.
        """
        if self._stop.is_set():
            raise DecodeStopped("cancelled")
        if self.deadline is not None and time.monotonic() >= self.deadline:
            raise DecodeStopped("the job's deadline passed")
        if self.cpu_s > self.budget.max_cpu_s:
            raise OverBudget(
                f"decoding took over {self.budget.max_cpu_s:g} s of CPU (outbound.decode_max_cpu_ms)"
                f" after {self.frames} frame(s)"
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


def gif_frames(data: bytes | memoryview, limit: int, meter: DecodeMeter | None = None) -> int:
    """The frames (image descriptors) of a GIF, counted by walking its blocks without
    decoding any (at most ``limit + 1``: counting stops once over ``limit``).

    Args:
        data: the file's bytes (a ``memoryview`` of a mapped file is not copied).
        limit: the most frames wanted.
        meter: checked every 65 536 sub-blocks (a GIF of one-byte sub-blocks is long to walk).

    A structure that ends early or holds an unknown block ends the count: the decode
    itself then finds what is wrong.
    """
    size = len(data)
    if size < 13:
        return 0
    flags = data[10]
    at = 13 + (3 << ((flags & 7) + 1) if flags & 0x80 else 0)
    frames = steps = 0
    while at < size:
        block = data[at]
        if block == 0x21:  # extension: introducer, label, sub-blocks
            at += 2
        elif block == 0x2C:  # image: descriptor, local colour table, LZW code size, sub-blocks
            frames += 1
            if frames > limit or at + 10 > size:
                return frames
            local = data[at + 9]
            at += 10 + (3 << ((local & 7) + 1) if local & 0x80 else 0) + 1
        else:  # the trailer, or not a GIF block
            return frames
        while at < size:
            length = data[at]
            at += 1 + length
            steps += 1
            if meter is not None and steps % _WALK_CHECK_EVERY == 0:
                meter.check()
            if length == 0:
                break
    return frames


#: The first bytes of every PNG file (PNG spec 5.2).
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
#: Most chunks a PNG may have for wrong CRCs of its ancillary chunks to be forgiven: a
#: 64 MiB image written in libpng's 8 KiB ``IDAT`` chunks has 8 192; a file of millions of
#: empty chunks is not walked (its verdict stands).
PNG_MAX_CHUNKS = 65_536
#: An APNG's frames: a wrong CRC there loses a frame of the animation, never forgiven.
_APNG_FRAME_CHUNKS = frozenset({b"fcTL", b"fdAT"})


def png_without_bad_ancillary(data: bytes, check: Callable[[], None] | None = None) -> bytes | None:
    """``data`` (a PNG) without its ancillary chunks whose CRC is wrong, or None when there
    is none to drop or the file is not one libpng would then read: not a PNG, ``IHDR`` not
    first, a chunk type that is not four ASCII letters, a chunk between two ``IDAT``
    chunks, cut inside a chunk, no ``IEND``, more than :data:`PNG_MAX_CHUNKS` chunks, or a
    wrong CRC on a critical chunk (``IHDR``, ``PLTE``, ``IDAT``, ``IEND``) or on an APNG
    frame's (``fcTL``, ``fdAT``).

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
    if not data.startswith(PNG_SIGNATURE):
        return None
    view = memoryview(data)
    dropped: list[tuple[int, int]] = []
    at = len(PNG_SIGNATURE)
    pixels = "before"  # where the walk is against the IDAT run: before, in, after
    for count in range(PNG_MAX_CHUNKS):
        if check is not None and count % 4096 == 0:
            check()
        if at + 12 > len(data):
            return None
        length = int.from_bytes(view[at : at + 4], "big")
        end = at + 12 + length
        kind = bytes(view[at + 4 : at + 8])
        if length > 0x7FFFFFFF or end > len(data) or not kind.isalpha() or (count == 0) != (kind == b"IHDR"):
            return None
        if kind == b"IDAT":
            if pixels == "after":
                return None
            pixels = "in"
        elif pixels == "in":
            pixels = "after"
        if zlib.crc32(view[at + 4 : end - 4]) != int.from_bytes(view[end - 4 : end], "big"):
            if not kind[0] & 0x20 or kind in _APNG_FRAME_CHUNKS:
                return None
            dropped.append((at, end))
        at = end
        if kind == b"IEND":
            if not dropped:
                return None
            kept = bytearray()
            since = 0
            for start, stop in dropped:
                kept += view[since:start]
                since = stop
            kept += view[since:at]
            return bytes(kept)
    return None
