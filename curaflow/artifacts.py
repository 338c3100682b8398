"""The artifact store: fetched work files on the local disk of the process that fetched them.

Other processes deliver them from the ledger's copy (:mod:`curaflow.ledger.artifacts`):
no volume is shared between worker processes.

Layout: ``<artifacts_dir>/<job>/<target>/<work_id>_p<N>.<ext>``; every path is checked
to stay under the artifacts directory (:func:`curaflow.paths.inside`). A file is
recorded complete only once it is whole: the body is streamed to a temporary file, its
length is checked against ``Content-Length`` when the server gives one, and then the
image is **decoded fully**: Pillow's ``verify()`` and a full
``load()`` (every frame of an animation), run in a thread so the event loop keeps
heartbeating. Framing alone cannot prove a body whole — a close-delimited body cut
short, or a ``Content-Length`` that is itself too small, both end "cleanly". Only then
is the file (fsynced first) renamed. All file work runs in threads, so a slow disk never holds up heartbeats. A short
or undecodable body is a ``download_failed`` error (retried) and leaves no file behind.

**Only verified images are ever complete** (the format is told from the bytes, never
from the URL): a body that is not a PNG, JPEG, GIF or WebP, one over its decode budget
(:mod:`curaflow.sources.decoding`: pixels of a frame, pixels summed over every frame,
frames, CPU time — the headers of every frame are read before any pixel is decoded, so
the check's memory is bounded by ``outbound.image_max_pixels``), or one whole by its own
framing that does not decode, makes the *work* unavailable
(:class:`~curaflow.sources.errors.WorkUnavailable`, with its
:class:`~curaflow.sources.errors.UnavailableKind`: the cell moves on to another
candidate, and the account's jobs skip the work for ``pixiv.unavailable_ttl_ms``). Such
a page is never delivered, whole or "on its length". Every decode runs in a thread under
a fresh meter of the store's budget, stopped when its attempt is cancelled and by the
job's deadline (:meth:`ArtifactStore._decoding`): it never outlives its attempt. The
download itself runs through the source (:meth:`~curaflow.sources.base.Source.download`;
Pixiv's through the outbound layer: one total time limit for the page and
``outbound.download_max_bytes``). An animated work
(:meth:`~curaflow.sources.base.Source.animation`) becomes one GIF under the same budget.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import io
import math
import mmap
import os
import re
import shutil
import socket
import tempfile
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from PIL import Image, ImageSequence, UnidentifiedImageError

from curaflow.domain.models import Artifact, ArtifactFile, Work
from curaflow.domain.reasons import TerminalReason
from curaflow.outbound import time_left
from curaflow.paths import inside
from curaflow.sources.animation import MAX_ZIP_BYTES, Animation, AnimationBroken, UnusableAnimation, encode_gif
from curaflow.sources.base import FileSource
from curaflow.sources.decoding import FRAME_MAX_PIXELS, DecodeBudget, DecodeMeter, DecodeStopped, OverBudget, gif_frames
from curaflow.sources.errors import SourceError, UnavailableKind, WorkUnavailable

T = TypeVar("T")

_UNSAFE = re.compile(r"[^A-Za-z0-9@._-]")
MIME_BY_EXT = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
}

ProgressHook = Callable[[int, int], Awaitable[None]]


_SUFFIX = re.compile(r"\.[a-z0-9]{1,5}")


def safe_name(value: str) -> str:
    """A filesystem-safe rendering of an id (unsafe characters become ``_``; never ``.`` or ``..``)."""
    name = _UNSAFE.sub("_", value)[:200]
    return name.replace(".", "_") if set(name) <= {"."} else name


def page_suffix(url: str) -> str:
    """The file extension of a page URL (``.png``), lower case; ``.jpg`` when it has none
    or one that is not a plain short extension."""
    suffix = Path(url.split("?", 1)[0]).suffix.lower()
    return suffix if _SUFFIX.fullmatch(suffix) else ".jpg"


#: Pixel formats a page may have (what Pillow identifies from the bytes, whatever the URL says).
IMAGE_FORMATS = {"PNG": ".png", "JPEG": ".jpg", "GIF": ".gif", "WEBP": ".webp"}
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
    """

    why: str
    kind: UnavailableKind = UnavailableKind.NOT_AN_IMAGE


def decoded_pixels(image: Image.Image) -> int:
    """Pixels the full decode of one frame of ``image`` holds at once (a JPEG decodes at
    1/8 scale through ``draft``; an animated GIF, APNG or WebP frame on its whole canvas)."""
    w, h = image.size
    if image.format == "JPEG":
        return max(1, -(-w // 8)) * max(1, -(-h // 8))
    return w * h


def frame_count(image: Image.Image, path: Path, meter: DecodeMeter) -> int:
    """How many frames decoding ``image`` (opened from ``path``) decodes, from its headers
    (no pixel decoded): a GIF's by walking its blocks (at most one over the budget's frame
    bound), an APNG's from its ``acTL``, an animated WebP's from its container, else 1."""
    if image.format == "GIF":
        with open(path, "rb") as fh:
            if os.fstat(fh.fileno()).st_size == 0:
                return 0
            with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mapped, memoryview(mapped) as view:
                return gif_frames(view, meter.budget.max_frames, meter)
    return max(1, int(getattr(image, "n_frames", 1)))


#: The last bytes of a whole file of each format (PNG's IEND chunk, JPEG's EOI, GIF's trailer).
_ENDINGS = {"PNG": b"\x00\x00\x00\x00IEND\xaeB`\x82", "JPEG": b"\xff\xd9", "GIF": b";"}


def whole_by_framing(path: Path, fmt: str) -> bool:
    """True when ``path`` ends as a whole file of ``fmt`` ends (PNG: the IEND chunk; JPEG:
    EOI, trailing zero bytes allowed; GIF: the trailer; WebP: the RIFF length is the
    file's): a transfer cut short does not, so a page whole by its framing that does not
    decode is what the image host holds (the work's), and any other is maybe the
    transfer's (retried)."""
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
    return (tail.rstrip(b"\x00") if fmt == "JPEG" else tail).endswith(ending)


def verify_image(
    path: Path,
    suffix: str | None = None,
    *,
    max_pixels: int | None = None,
    budget: DecodeBudget | None = None,
    meter: DecodeMeter | None = None,
) -> str | Refused | None:
    """Decode ``path`` fully, within its decode budget; None when it is a whole image.

    Args:
        path: the file.
        suffix: unused, kept for callers that pass the destination's extension (the
            format is told from the bytes, never from the name).
        max_pixels: the largest frame decoded (:func:`decoded_pixels`); overrides the
            budget's ``frame_max_pixels``.
        budget: the decode budget (default :class:`~curaflow.sources.decoding.DecodeBudget`()).
        meter: the decode's account (default: a fresh one of ``budget``); the caller's,
            to stop the decode from another thread.

    Returns:
        None: a whole PNG, JPEG, GIF or WebP; a :class:`Refused` when the bytes are not
        one of those images (``not_an_image``), the decode is over its budget
        (``over_budget``: refused from the headers before anything is decoded — every
        frame of an animation counted — or at the frame that crossed it), or the file is
        whole by its framing and does not decode (``undecodable``); a ``str`` when the
        image is broken or short and not whole by its framing (another download may
        succeed).

    Raises:
        DecodeStopped: ``meter`` was stopped, or its deadline passed.

    Header first (``Image.open`` reads no pixel data) and the frames counted, then Pillow
    ``verify()`` (structure, PNG CRCs), then a full ``load()`` of every frame, each
    charged to the meter before it is decoded. Blocking: call it in a thread.
    """
    del suffix
    if meter is None:
        budget = budget or DecodeBudget()
        if max_pixels is not None:
            budget = dataclasses.replace(budget, frame_max_pixels=max_pixels)
        meter = budget.meter()
    fmt: str | None = None
    try:
        with meter.running():
            with Image.open(path) as image:
                fmt = image.format
                if fmt not in IMAGE_FORMATS:
                    return Refused(f"not an image Pillow verifies (format {fmt})")
                frames = frame_count(image, path, meter)
                w, h = image.size
                largest = (max(1, -(-w // 8)), max(1, -(-h // 8))) if fmt == "JPEG" else (w, h)
                meter.plan(frames=frames, pixels=frames * decoded_pixels(image), largest=largest)
                image.verify()
            with Image.open(path) as image:
                if image.format == "JPEG":
                    image.draft(image.mode, (max(1, image.width // 8), max(1, image.height // 8)))
                for frame in ImageSequence.Iterator(image):
                    meter.frame(frame.width * frame.height)
                    frame.load()
                meter.check()
    except OverBudget as err:
        return Refused(err.why, UnavailableKind.OVER_BUDGET)
    except Image.DecompressionBombError as err:
        return Refused(f"too large to verify: {err}", UnavailableKind.OVER_BUDGET)
    except UnidentifiedImageError:
        return Refused("not an image")
    except (OSError, SyntaxError, ValueError, EOFError, IndexError) as err:
        if fmt is not None and whole_by_framing(path, fmt):
            return Refused(
                f"whole {fmt} that does not decode: {type(err).__name__}: {err}", UnavailableKind.UNDECODABLE
            )
        return f"{type(err).__name__}: {err}"
    return None


#: The root's folder of per-attempt copies of artifacts fetched by another process (never
#: a job's folder: every job id holds an ``@``, DESIGN.md decision 1).
TRANSFER_DIR = ".transfer"

#: Age after which a transfer folder is an abandoned one (seconds): longer than any
#: attempt lives (a job's deadline is 30 min by default, an attempt's grace 5 min).
TRANSFER_MAX_AGE_S = 24 * 3600.0


#: The file in an artifacts directory that names it (:meth:`ArtifactStore.identity`).
STORE_ID_FILE = ".store-id"


class ArtifactStore:
    """Downloads work pages into ``root`` and deletes them when no longer needed.

    Args:
        root: the artifacts directory (created on demand).
        max_pixels: the largest frame verified (``outbound.image_max_pixels``); the
            budget's ``frame_max_pixels`` when ``budget`` is not given.
        budget: what one decode may cost (:class:`~curaflow.sources.decoding.DecodeBudget`,
            from ``outbound.*``).
    """

    def __init__(self, root: Path, *, max_pixels: int = IMAGE_MAX_PIXELS, budget: DecodeBudget | None = None) -> None:
        self.root = root
        self._identity: tuple[str, str] | None = None
        self.budget = budget if budget is not None else DecodeBudget(frame_max_pixels=max_pixels)
        self.max_pixels = self.budget.frame_max_pixels

    async def _decoding(self, decode: Callable[..., T], *args: Any) -> T:
        """Run the blocking ``decode(*args, meter=...)`` in a thread under a fresh meter of
        the budget.

        The decode never outlives its attempt: the meter's deadline is the job's (what
        :func:`~curaflow.outbound.time_left` says the attempt has left), and a cancel of
        the awaiting task stops it at its next frame (the cancel reaches an activity
        through its heartbeat). Whoever awaits the thread afterwards (a discard waiting
        for the file's lock) waits one frame at most.
        """
        left = time_left(math.inf)
        meter = self.budget.meter(deadline=None if math.isinf(left) else time.monotonic() + left)
        try:
            return await asyncio.to_thread(decode, *args, meter=meter)
        except asyncio.CancelledError:
            meter.stop()
            raise

    def identity(self) -> tuple[str, str]:
        """``(store_id, label)`` of this artifacts directory: the id kept in the directory
        itself (:data:`STORE_ID_FILE`, created on first use), so it names the disk and not a
        process or a container; the label is ``host:path``, for an operator. The ledger
        records which store holds which cell's files with it (retention frees every host).
        Blocking on first call (one small file); cached.
        """
        if self._identity is None:
            self.root.mkdir(parents=True, exist_ok=True)
            path = self.root / STORE_ID_FILE
            try:
                with open(path, "x", encoding="ascii") as fh:
                    fh.write(uuid.uuid4().hex + "\n")
            except FileExistsError:
                pass
            store_id = path.read_text(encoding="ascii").strip()
            if not store_id:  # an interrupted first write: a new id, written whole
                store_id = uuid.uuid4().hex
                tmp = path.with_suffix(".tmp")
                tmp.write_text(store_id + "\n", encoding="ascii")
                os.replace(tmp, path)
            self._identity = (store_id, f"{socket.gethostname()}:{self.root.resolve()}")
        return self._identity

    def folder(self, job_id: str, target_id: str) -> Path:
        """The folder holding one cell's artifact (under the root, always)."""
        return inside(self.root, safe_name(job_id), safe_name(target_id))

    async def fetch(
        self,
        source: FileSource,
        work: Work,
        job_id: str,
        target_id: str,
        *,
        on_page: ProgressHook | None = None,
        held: dict[int, bytes] | None = None,
    ) -> Artifact:
        """Download every page of ``work`` from ``source``; pages already complete on disk are kept.

        Args:
            source: the work's source (its :meth:`~curaflow.sources.base.Source.download`
                and :meth:`~curaflow.sources.base.Source.animation`).
            on_page: awaited with ``(pages_done, pages_total)`` after each page.
            held: filled with the bytes of each page this call downloaded that fits in one
                write batch (:data:`WRITE_BATCH`: it was in memory whole anyway), while
                they total at most :data:`HELD_BYTES` — so the ledger's copy of a small
                work is made without reading its files again
                (:func:`curaflow.ledger.artifacts.store_artifact`).

        Returns:
            The complete :class:`~curaflow.domain.models.Artifact`.

        Raises:
            SourceError: ``download_failed`` (a body cut short, or broken and not whole by
                its framing: retried) / ``download_timeout`` (also the job's deadline
                passing while a page decodes) / ``rate_limited``.
            WorkUnavailable: the image answers 403/404, or a page or the animation is the
                work's failure (:class:`~curaflow.sources.errors.UnavailableKind`: not an
                image, over the decode budget, undecodable, an unusable animation, too
                large).
            PathEscape: a file name built from the work would leave the artifacts
                directory (a work id that was never validated).
        """
        folder = self.folder(job_id, target_id)
        # Every path is checked before the source is asked anything.
        dests = [inside(folder, f"{work.work_id}_p{page.index}{page_suffix(page.url)}") for page in work.pages]
        inside(folder, f"{work.work_id}_ugoira.gif")
        animation = await source.animation(work)
        if animation is not None:
            return await self._fetch_animation(source, work, animation, folder, on_page)
        if not work.pages:  # nothing to deliver is never an artifact
            raise WorkUnavailable(work.work_id, "the work lists no page and no animation", UnavailableKind.NO_FILE)
        kept = await asyncio.to_thread(_prepare, folder, dests)
        files: list[ArtifactFile] = []
        for page, dest in zip(work.pages, dests, strict=True):
            if dest in kept:
                files.append(await asyncio.to_thread(describe, dest, page.index))
            else:
                files.append(await self._download(source, page.url, dest, page.index, held))
            if on_page is not None:
                await on_page(len(files), len(work.pages))
        return Artifact(work_id=work.work_id, files=files)

    async def _download(
        self, source: FileSource, url: str, dest: Path, page: int, held: dict[int, bytes] | None = None
    ) -> ArtifactFile:
        """Stream one page to a temporary file next to ``dest``; complete it (module doc).

        The event loop only moves bytes: the file work runs in threads, batched so a page
        that fits in one :data:`WRITE_BATCH` costs a single thread hop (create, write,
        fsync, decode check, rename, hash — :class:`_PartFile`), so heartbeats and
        workflow tasks are never held up by the disk. Such a page's bytes go into
        ``held`` once complete (:meth:`fetch`).
        """
        part = _PartFile(dest)
        received = 0
        try:
            async with source.download(url) as body:
                expected = body.expected_bytes
                pending: list[bytes] = []
                batched = 0
                async for chunk in body.chunks():
                    pending.append(chunk)
                    batched += len(chunk)
                    received += len(chunk)
                    if batched >= WRITE_BATCH:
                        await asyncio.to_thread(part.write, pending)
                        pending, batched = [], 0
            # The connection is done with; the decode check is not the image host's time.
            if expected is not None and expected != received:
                raise SourceError(TerminalReason.DOWNLOAD_FAILED, f"image truncated: {received} of {expected} bytes")
            if received == 0:
                raise SourceError(TerminalReason.DOWNLOAD_FAILED, "image body empty")
            try:
                done = await self._decoding(part.finish, pending, page)
            except DecodeStopped as err:
                raise SourceError(TerminalReason.DOWNLOAD_TIMEOUT, f"page {page}: {err}") from None
            if isinstance(done, Refused):
                raise WorkUnavailable(dest.name.split("_", 1)[0], f"page {page}: {done.why}", done.kind)
            if isinstance(done, str):
                raise SourceError(TerminalReason.DOWNLOAD_FAILED, f"image incomplete after {received} bytes: {done}")
            if held is not None and received == batched and sum(map(len, held.values())) + received <= HELD_BYTES:
                held[page] = b"".join(pending)  # never written in a batch before: the whole page
            return done
        finally:
            if not part.settled:  # also when cancelled before ``finish`` left the executor's queue
                await asyncio.to_thread(part.discard)

    async def _fetch_animation(
        self, source: FileSource, work: Work, meta: Animation, folder: Path, on_page: ProgressHook | None
    ) -> Artifact:
        """An animated work as one looping animated GIF with its frame delays
        (:mod:`curaflow.sources.animation`): the frames, the frames zip (bounded, streamed
        to disk and removed once encoded), the GIF (kept when a retried attempt finds it).
        The GIF is named ``<work_id>_ugoira.gif``, the name delivered files have always had."""
        dest = inside(folder, f"{work.work_id}_ugoira.gif")
        if not (await asyncio.to_thread(_prepare, folder, [dest])):
            if not meta.frames:
                raise WorkUnavailable(work.work_id, "animation: no frames", UnavailableKind.UNUSABLE_ANIMATION)
            try:  # more frames than a decode may have: refused before the zip is fetched
                self.budget.meter().plan(frames=len(meta.frames), pixels=0)
            except OverBudget as err:
                raise WorkUnavailable(work.work_id, f"animation: {err.why}", UnavailableKind.OVER_BUDGET) from None
            zip_path = inside(folder, f"{work.work_id}_ugoira.zip")
            try:
                await self._download_zip(source, meta.zip_url, zip_path, work.work_id)
                try:
                    await self._decoding(encode_gif, zip_path, meta, dest)
                except UnusableAnimation as err:
                    raise WorkUnavailable(
                        work.work_id, f"animation: {err}", UnavailableKind.UNUSABLE_ANIMATION
                    ) from None
                except OverBudget as err:
                    raise WorkUnavailable(work.work_id, f"animation: {err.why}", UnavailableKind.OVER_BUDGET) from None
                except AnimationBroken as err:
                    raise SourceError(TerminalReason.DOWNLOAD_FAILED, f"animation of {work.work_id}: {err}") from None
                except DecodeStopped as err:
                    raise SourceError(TerminalReason.DOWNLOAD_TIMEOUT, f"animation of {work.work_id}: {err}") from None
            finally:
                await asyncio.to_thread(zip_path.unlink, True)
        described = await asyncio.to_thread(describe, dest, 0)
        if on_page is not None:
            await on_page(1, 1)
        return Artifact(work_id=work.work_id, files=[described.model_copy(update={"frame_delays_ms": meta.delays_ms})])

    async def _download_zip(self, source: FileSource, url: str, dest: Path, work_id: str) -> None:
        """Stream a frames zip to ``dest`` (at most :data:`~curaflow.sources.animation.MAX_ZIP_BYTES`).

        Raises:
            SourceError: ``download_failed`` (short: retryable) / ``download_timeout``.
            WorkUnavailable: the zip answers 403/404, its URL is not one the source may
                request, or it is over the limit (``too_large``: the work's).
        """
        tmp = dest.with_name(f".{dest.name}.part")
        received = 0
        try:
            async with source.download(url) as body:
                expected = body.expected_bytes
                if expected is not None and expected > MAX_ZIP_BYTES:
                    raise WorkUnavailable(
                        work_id,
                        f"frames zip is {expected} bytes, over the limit of {MAX_ZIP_BYTES}",
                        UnavailableKind.TOO_LARGE,
                    )
                out = await asyncio.to_thread(open, tmp, "wb")
                try:
                    pending: list[bytes] = []
                    batched = 0
                    async for chunk in body.chunks():
                        received += len(chunk)
                        if received > MAX_ZIP_BYTES:
                            raise WorkUnavailable(
                                work_id,
                                f"frames zip over the limit of {MAX_ZIP_BYTES} bytes",
                                UnavailableKind.TOO_LARGE,
                            )
                        pending.append(chunk)
                        batched += len(chunk)
                        if batched >= WRITE_BATCH:
                            await asyncio.to_thread(out.writelines, pending)
                            pending, batched = [], 0
                    await asyncio.to_thread(out.writelines, pending)
                finally:
                    await asyncio.to_thread(out.close)
            if (expected is not None and expected != received) or received == 0:
                raise SourceError(TerminalReason.DOWNLOAD_FAILED, f"frames zip truncated: {received} bytes")
            await asyncio.to_thread(os.replace, tmp, dest)
        finally:
            await asyncio.to_thread(tmp.unlink, True)

    def delete(self, job_id: str, target_id: str) -> None:
        """Remove one cell's artifact folder, and its job's folder once empty (storage mode
        ``cache``, retention). Blocking."""
        folder = self.folder(job_id, target_id)
        shutil.rmtree(folder, ignore_errors=True)
        with contextlib.suppress(OSError):  # not empty (another target's folder), or gone
            folder.parent.rmdir()

    @staticmethod
    def holds(artifact: Artifact) -> bool:
        """True when every file of ``artifact`` is on this process's disk at its recorded
        path with its recorded size (this process, or one sharing its volume, fetched it).

        Files are only ever completed by a rename, so a file of the right size is whole.
        Blocking (one ``stat`` per file): call it in a thread.
        """
        for file in artifact.files:
            try:
                if os.stat(file.path).st_size != file.bytes:
                    return False
            except OSError:
                return False
        return True

    def transfer_folder(self) -> Path:
        """A new empty folder under the root for one deliver attempt's copy of an artifact
        held elsewhere (:func:`curaflow.ledger.artifacts.restore_artifact`); the attempt
        removes it (:meth:`discard_transfer`). Blocking: call it in a thread."""
        parent = self.root / TRANSFER_DIR
        parent.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(dir=parent))

    def discard_transfer(self, folder: Path) -> None:
        """Remove a :meth:`transfer_folder` (blocking)."""
        shutil.rmtree(inside(self.root / TRANSFER_DIR, folder.name), ignore_errors=True)

    def sweep_transfers(self, older_than_s: float = TRANSFER_MAX_AGE_S) -> int:
        """Remove the transfer folders older than ``older_than_s`` (seconds since their
        last change): those of attempts whose process died before removing them. Run at
        worker start (blocking); returns how many were removed."""
        parent = self.root / TRANSFER_DIR
        if not parent.is_dir():
            return 0
        cutoff = time.time() - older_than_s
        removed = 0
        for folder in parent.iterdir():
            with contextlib.suppress(OSError):
                if folder.stat().st_mtime < cutoff:
                    shutil.rmtree(folder, ignore_errors=True)
                    removed += 1
        return removed


#: Bytes collected from the response before one write in a thread (fewer thread hops
#: than one per 64 KiB chunk; bounded memory per download).
WRITE_BATCH = 1024 * 1024
#: The most page bytes one fetch keeps in memory for the ledger's copy (:meth:`ArtifactStore.fetch`).
HELD_BYTES = 8 * WRITE_BATCH


def _prepare(folder: Path, dests: list[Path]) -> set[Path]:
    """Create the cell's folder; the pages already complete on disk (blocking)."""
    folder.mkdir(parents=True, exist_ok=True)
    return {dest for dest in dests if dest.exists()}


class _PartFile:
    """The temporary file a page is streamed into, next to ``dest`` (blocking methods:
    call them in a thread).

    Created on the first write; hashed as it is written (the complete file is not read
    again). :meth:`finish` writes the rest, fsyncs, decode-checks and renames it to
    ``dest``; :meth:`discard` removes what a failed download left.
    """

    def __init__(self, dest: Path) -> None:
        self.dest = dest
        self.completed = False
        self._discarded = False
        # A write in a thread can outlive its cancelled caller: the caller's discard then
        # waits for it, and a write that starts after a discard fails without a file.
        self._lock = threading.Lock()
        self._fh: io.BufferedWriter | None = None
        self._tmp: Path | None = None
        self._digest = hashlib.sha256()
        self._size = 0

    def write(self, chunks: list[bytes]) -> None:
        """Append ``chunks`` (creates the temporary file on the first call)."""
        with self._lock:
            self._write(chunks)

    def _write(self, chunks: list[bytes]) -> None:
        if self._discarded:
            raise OSError(f"{self.dest.name}: the download was discarded")
        if self._fh is None:
            fd, tmp = tempfile.mkstemp(prefix=f".{self.dest.name}.", suffix=".part", dir=self.dest.parent)
            self._tmp = Path(tmp)
            self._fh = os.fdopen(fd, "wb")
        for chunk in chunks:
            self._fh.write(chunk)
            self._digest.update(chunk)
            self._size += len(chunk)

    def _complete(self, chunks: list[bytes], page: int, meter: DecodeMeter) -> ArtifactFile | Refused | str:
        """Write the last ``chunks``, fsync, decode-check under ``meter``; if whole, rename
        to ``dest`` and describe it, else return why it is not (call with the lock held)."""
        self._write(chunks)
        assert self._fh is not None and self._tmp is not None
        self._fh.flush()
        os.fsync(self._fh.fileno())
        self._fh.close()
        problem = verify_image(self._tmp, meter=meter)
        if problem is not None:
            return problem
        os.replace(self._tmp, self.dest)
        self.completed = True
        return describe(self.dest, page, sha256=self._digest.hexdigest(), size=self._size)

    def finish(self, chunks: list[bytes], page: int, *, meter: DecodeMeter) -> ArtifactFile | Refused | str:
        """Write the last ``chunks`` and complete the file (fsync, decode check under
        ``meter``, rename to ``dest``; returns its description), or discard it and return
        why it is not whole: the whole fate of the file in one thread hop, so a caller
        cancelled meanwhile has nothing to clean up (and never races the thread).

        Raises:
            DecodeStopped: ``meter`` was stopped (the file is discarded)."""
        with self._lock:
            try:
                return self._complete(chunks, page, meter)
            finally:
                if not self.completed:
                    self._discard()

    def discard(self) -> None:
        """Close and remove the temporary file, if any (waits for a write under way)."""
        with self._lock:
            self._discard()

    @property
    def settled(self) -> bool:
        """True once the file was completed or discarded (nothing left to clean up)."""
        return self.completed or self._discarded

    def _discard(self) -> None:
        self._discarded = True
        try:
            if self._fh is not None:
                with contextlib.suppress(OSError):  # a buffered write failing again (disk full)
                    self._fh.close()
        finally:
            if self._tmp is not None:
                self._tmp.unlink(missing_ok=True)


def describe(path: Path, page: int, *, sha256: str | None = None, size: int | None = None) -> ArtifactFile:
    """Size, hash, MIME type and pixel size of a complete file (blocking).

    ``width`` / ``height`` are None when Pillow cannot open the file as an image — not an
    image, or one over twice ``PIL.Image.MAX_IMAGE_PIXELS`` (a decompression bomb, which
    :func:`verify_image` accepts on its length).

    Args:
        sha256 / size: the file's digest (hex) and length in bytes when the caller
            computed them while writing; else the file is read to compute them.
    """
    if sha256 is None or size is None:
        digest = hashlib.sha256()
        size = 0
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1024 * 1024), b""):
                digest.update(block)
                size += len(block)
        sha256 = digest.hexdigest()
    width = height = None
    try:
        with Image.open(path) as image:
            width, height = image.size
    except (OSError, ValueError, Image.DecompressionBombError):
        pass  # not an image, or one too large for Pillow to open (accepted on its length)
    return ArtifactFile(
        path=str(path),
        bytes=size,
        mime=MIME_BY_EXT.get(path.suffix.lower(), "application/octet-stream"),
        width=width,
        height=height,
        sha256=sha256,
        page=page,
    )
