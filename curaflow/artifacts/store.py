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
is the file (fsynced first) renamed. All file work runs in threads, so a slow disk never holds up heartbeats,
and a page's completion runs while the next page downloads (:meth:`ArtifactStore.fetch`). A short
or undecodable body is a ``download_failed`` error (retried) and leaves no file behind.

**Only verified images are ever complete** (the format is told from the bytes, never
from the URL): a body that is not a PNG, JPEG, GIF or WebP, one over its decode budget
(:mod:`curaflow.sources.decoding`: pixels of a frame, pixels summed over every frame,
frames, CPU time — the headers of every frame are read before any pixel is decoded, so
the check's memory is bounded by ``outbound.image_max_pixels``), or one whole by its own
framing that does not decode, or a whole image of another aspect ratio than the size the
source lists for the page (:func:`~curaflow.sources.corroboration.not_the_listed_picture`:
not the work's picture, a placeholder the host answered), makes the *work* unavailable
(:class:`~curaflow.sources.errors.WorkUnavailable`, with its
:class:`~curaflow.sources.errors.UnavailableKind`: the cell moves on to another
candidate, and the account's jobs skip the work for its ``unavailable_ttl_ms``). Such
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
import errno
import fcntl
import math
import os
import shutil
import socket
import stat
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

from curaflow.artifacts.files import HELD_BYTES, WRITE_BATCH, _PartFile, _prepare, describe, listed_picture_refused
from curaflow.artifacts.images import IMAGE_MAX_PIXELS, Refused
from curaflow.artifacts.names import page_suffix, safe_name
from curaflow.domain.models import Artifact, ArtifactFile, Work
from curaflow.domain.reasons import TerminalReason
from curaflow.outbound import time_left
from curaflow.paths import inside, sync_file
from curaflow.sources.animation import (
    MAX_ZIP_BYTES,
    Animation,
    AnimationBroken,
    UnusableAnimation,
    begins_as_zip,
    encode_gif,
)
from curaflow.sources.base import FileSource
from curaflow.sources.corroboration import sized
from curaflow.sources.decoding import DecodeBudget, DecodeStopped, OverBudget
from curaflow.sources.errors import HEAD_BYTES, SourceError, UnavailableKind, WorkUnavailable

T = TypeVar("T")

ProgressHook = Callable[[int, int], Awaitable[None]]


#: The root's folder of per-attempt copies of artifacts fetched by another process (never
#: a job's folder: every job id holds an ``@``, DESIGN.md decision 1).
TRANSFER_DIR = ".transfer"

#: Age after which a transfer folder is an abandoned one (seconds): longer than any
#: attempt lives (a job's deadline is 30 min by default, an attempt's grace 5 min).
TRANSFER_MAX_AGE_S = 24 * 3600.0


class _Received(NamedTuple):
    """A page streamed into its part file (:meth:`ArtifactStore._receive`), not complete yet.

    Attributes:
        pending: the bytes not written yet (the last batch).
        received: the page's bytes.
        whole: every byte is in ``pending`` (the page fit in one write batch).
    """

    part: _PartFile
    pending: list[bytes]
    received: int
    whole: bool

    async def discard(self) -> None:
        """Remove the part file (a page received and never completed): nothing to do once
        it is settled (gone: :attr:`_PartFile.settled`); else in a thread, which waits for a
        removal or a completion already under way in another (the part's lock) — so a
        caller whose earlier discard was cancelled mid-thread and that discards again ends
        only once the file is gone (:func:`_settle`)."""
        if not self.part.settled:
            await asyncio.to_thread(self.part.discard)


async def _settle(
    receiving: asyncio.Task[_Received] | None,
    completing: asyncio.Task[ArtifactFile] | None,
    completed: _Received | None,
) -> None:
    """What a fetch leaves when it stops early (a failure, a cancel): its download and its
    page's completion stopped, and their part files removed — a page received but never
    completed, and the one whose completion was stopped before it ran its own cleanup.

    A cancel of the caller meanwhile waits for this cleanup and is raised after it; a
    second one stops it (what is left then is the children's own cleanup)."""
    tasks = [t for t in (receiving, completing) if t is not None]
    for task in tasks:
        task.cancel()
    try:
        await _stopped(tasks, receiving, completed)
    except asyncio.CancelledError:
        await _stopped(tasks, receiving, completed)
        raise


async def _stopped(
    tasks: list[asyncio.Task[Any]], receiving: asyncio.Task[_Received] | None, completed: _Received | None
) -> None:
    """Wait for the stopped ``tasks`` and remove what they received (:func:`_settle`; idempotent)."""
    if tasks:
        await asyncio.wait(tasks)
    for task in tasks:
        if not task.cancelled():
            task.exception()  # retrieved: it was raised already, or it is the later failure
    if receiving is not None and not receiving.cancelled() and receiving.exception() is None:
        await receiving.result().discard()
    if completed is not None:
        await completed.discard()


#: The file in an artifacts directory that names it (:meth:`ArtifactStore.identity`).
STORE_ID_FILE = ".store-id"


def _kept(path: Path, page: int, listed: tuple[object, object]) -> ArtifactFile:
    """The description of a page an earlier attempt completed (blocking), judged against
    the size its source lists as a page downloaded now is
    (:func:`~curaflow.artifacts.files.listed_picture_refused`): one completed before that
    rule (2026-12-07), or under another listing, that is not the listed picture is removed.

    Raises:
        WorkUnavailable: ``not_an_image``, not recognised — the page is not the picture listed.
    """
    file = describe(path, page)
    if file.width is not None and file.height is not None:
        refused = listed_picture_refused(file.width, file.height, listed)
        if refused is not None:
            path.unlink(missing_ok=True)
            raise WorkUnavailable(path.name.split("_", 1)[0], f"page {page}: {refused.why}", refused.kind)
    return file


def _read_id(path: Path) -> str:
    """The id in ``path``, or ``""`` when there is none (no file, or an empty one)."""
    try:
        return path.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        return ""


def _store_id(root: Path) -> str:
    """The id of the artifacts directory ``root`` (:meth:`ArtifactStore.identity`),
    created on first use (blocking).

    The file is only ever written whole (a temporary file, fsynced, renamed over it), and
    created under an exclusive ``flock`` of the directory, read again once the lock is
    held: processes starting together on one directory (``curaflow dev --workers N``, a
    volume mounted twice by mistake) all answer the one id the file keeps. Until
    2026-12-05 the file was created empty and written after: a process starting meanwhile
    read it empty and wrote an id of its own (two ids for one directory, the holdings
    recorded under the lost one never released), or failed renaming the shared temporary
    file. A file system that refuses the lock (``ENOLCK``: some network file systems)
    creates it unlocked, as before.
    """
    path = root / STORE_ID_FILE
    store_id = _read_id(path)  # the common case: named already, never rewritten
    if store_id:
        return store_id
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_EX)  # released with the descriptor
        store_id = _read_id(path)
        if not store_id:  # none yet, or an empty file an older version's interrupted write left
            store_id = uuid.uuid4().hex
            tmp = root / f"{STORE_ID_FILE}.{os.getpid()}.tmp"
            try:
                with open(tmp, "w", encoding="ascii") as fh:
                    fh.write(store_id + "\n")
                    fh.flush()
                    sync_file(fh.fileno())  # a disk that cannot sync a file: as durable as it makes it
                os.replace(tmp, path)
            finally:
                tmp.unlink(missing_ok=True)
        return store_id
    finally:
        os.close(fd)


def over_file_size_limit(work_id: str, err: OSError) -> WorkUnavailable:
    """A file of the work over the size this machine's artifacts disk or process takes
    (``err``: ``EFBIG`` — a ``ulimit -f``, a FAT disk's 4 GiB, a FUSE disk's per-file limit)
    — the rule's one owner: this machine's limit, not the work's verdict and no failure of
    the step. The work is unavailable *here*, ``too_large`` not recognised (held back for
    the account's ``unrecognised_hold_ms``, never the week), and the cell binds its next
    candidate, as for a decode over this machine's CPU time.

    Until 2026-12-07 the error went out as it came: every attempt downloaded the page
    again through the account's gate and failed alike, the cell ended ``internal_error``,
    and nothing was remembered — the target's next job bound the same work first again
    and failed on it again, for good."""
    return WorkUnavailable(
        work_id,
        f"a file of the work is larger than this machine's artifacts disk or process takes (EFBIG: "
        f"{err.strerror or 'File too large'}): this machine's limit, not the work's",
        UnavailableKind.TOO_LARGE,
        recognised=False,
    )


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
        the awaiting task stops it at its next check — the next frame, or the next block
        of the file a frame is decoded from (:func:`~curaflow.sources.decoding.metered_open`)
        — (the cancel reaches an activity through its heartbeat). Whoever awaits the thread
        afterwards (a discard waiting for the file's lock) waits that long at most.
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
            self._identity = (_store_id(self.root), f"{socket.gethostname()}:{self.root.resolve()}")
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
        """Download every page of ``work`` from ``source``; pages already complete on disk are
        kept, part files a killed attempt left are removed (:func:`~curaflow.artifacts.files._prepare`).

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
            WorkUnavailable: the image answers 403/404 (as the source raised it: a 404's
                ``corroborate`` is settled by the ``fetch`` activity), or a page or the
                animation is the work's failure
                (:class:`~curaflow.sources.errors.UnavailableKind`: not an image, over the
                decode budget, undecodable, an unusable animation, too large).
            PathEscape: a file name built from the work would leave the artifacts
                directory (a work id that was never validated).
            OSError: the artifacts directory's disk or the process refused a write or a
                read (a full disk, an I/O error, too many open files): curaflow's, never a
                verdict on the work (:func:`~curaflow.sources.decoding.machine_error`); a
                file over the size this machine takes (``EFBIG``) is
                :func:`over_file_size_limit`'s ``WorkUnavailable`` instead.
        """
        folder = self.folder(job_id, target_id)
        # Every path is checked before the source is asked anything.
        dests = [inside(folder, f"{work.work_id}_p{page.index}{page_suffix(page.url)}") for page in work.pages]
        inside(folder, f"{work.work_id}_ugoira.gif")
        try:
            return await self._fetch_files(source, work, folder, dests, on_page, held)
        except OSError as err:
            if err.errno != errno.EFBIG:
                raise
            raise over_file_size_limit(work.work_id, err) from err

    async def _fetch_files(
        self,
        source: FileSource,
        work: Work,
        folder: Path,
        dests: list[Path],
        on_page: ProgressHook | None,
        held: dict[int, bytes] | None,
    ) -> Artifact:
        """The work's pages, or its animation (:meth:`fetch`: its paths ``dests`` checked)."""
        animation = await source.animation(work)
        if animation is not None:
            return await self._fetch_animation(source, work, animation, folder, on_page)
        if not work.pages:  # nothing to deliver is never an artifact; what the source listed, held briefly
            raise WorkUnavailable(work.work_id, "the work lists no page and no animation", UnavailableKind.NO_FILE)
        kept = await asyncio.to_thread(_prepare, folder, dests)
        files: list[ArtifactFile] = []

        async def done(file: ArtifactFile) -> None:
            files.append(file)
            if on_page is not None:
                await on_page(len(files), len(work.pages))

        # A page's completion (fsync, decode check, rename: a thread hop of milliseconds)
        # runs while the next page downloads; pages complete in order, one at a time. The
        # first failure in page order is the one raised: an earlier page's failure stops the
        # download under way at once, and nothing received is left behind.
        completing: asyncio.Task[ArtifactFile] | None = None
        completed: _Received | None = None  # what ``completing`` completes
        receiving: asyncio.Task[_Received] | None = None
        try:
            for page, dest in zip(work.pages, dests, strict=True):
                if dest in kept:
                    if completing is not None:
                        file = await completing
                        completing = completed = None
                        await done(file)
                    await done(await asyncio.to_thread(_kept, dest, page.index, (page.width, page.height)))
                    continue
                receiving = asyncio.create_task(self._receive(source, page.url, dest, page.index))
                if completing is not None:
                    await asyncio.wait((completing, receiving), return_when=asyncio.FIRST_COMPLETED)
                    file = await completing  # its failure first, whatever the download does
                    completing = completed = None
                    await done(file)
                try:
                    received = await receiving
                except WorkUnavailable as err:  # over its limit: the work's only if the page may be
                    head = work.pages[0]  # a page of no listed size is taken to be the first page's
                    raise sized(err, page.width, page.height, first=(head.width, head.height)) from None
                receiving = None
                completing = asyncio.create_task(self._complete(received, page.index, held, (page.width, page.height)))
                completed = received
            if completing is not None:
                file = await completing
                completing = completed = None
                await done(file)
        finally:
            await _settle(receiving, completing, completed)
        return Artifact(work_id=work.work_id, files=files)

    async def _receive(self, source: FileSource, url: str, dest: Path, page: int) -> _Received:
        """Stream one page into a temporary file next to ``dest`` (the part :meth:`_complete`
        completes), the last batch of bytes kept in memory; the part is discarded if this
        fails.

        The event loop only moves bytes: the file work runs in threads, batched so a page
        that fits in one :data:`WRITE_BATCH` costs a single thread hop at its completion
        (create, write, fsync, decode check, rename, hash — :class:`_PartFile`), so
        heartbeats and workflow tasks are never held up by the disk.

        Raises:
            SourceError: ``download_failed`` (a body cut short or empty), or the source's.
        """
        part = _PartFile(dest)
        received = 0
        head = b""  # the body's first bytes: does a body over its limit begin as an image?
        try:
            async with source.download(url) as body:
                expected = body.expected_bytes
                pending: list[bytes] = []
                batched = 0
                async for chunk in body.chunks():
                    if len(head) < HEAD_BYTES:
                        head += chunk[: HEAD_BYTES - len(head)]
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
            return _Received(part, pending, received, received == batched)
        except BaseException as err:
            if isinstance(err, WorkUnavailable) and err.head is None:
                err.head = head  # what it began as (corroboration.sized)
            if not part.settled:  # also when cancelled while a batch was being written
                await asyncio.to_thread(part.discard)
            raise

    async def _complete(
        self, got: _Received, page: int, held: dict[int, bytes] | None, listed: tuple[object, object] | None = None
    ) -> ArtifactFile:
        """Complete a received page (module doc): its file, or the page's failure (the
        part discarded). Such a page's bytes go into ``held`` when it was in memory whole
        (:meth:`fetch`). ``listed``: the page's size as its source lists it (width,
        height), against which its picture is checked
        (:func:`~curaflow.artifacts.files.listed_picture_refused`).

        Raises:
            SourceError: ``download_failed`` (broken and not whole by its framing) /
                ``download_timeout`` (the decode was stopped by the job's deadline).
            WorkUnavailable: the page is the work's failure (not an image, over the decode
                budget, undecodable), or not the picture listed (``not_an_image``, not
                recognised).
        """
        part = got.part
        try:
            try:
                done = await self._decoding(part.finish, got.pending, page, listed)
            except DecodeStopped as err:
                raise SourceError(TerminalReason.DOWNLOAD_TIMEOUT, f"page {page}: {err}") from None
            if isinstance(done, Refused):
                raise WorkUnavailable(
                    part.dest.name.split("_", 1)[0], f"page {page}: {done.why}", done.kind, recognised=done.recognised
                )
            if isinstance(done, str):
                raise SourceError(
                    TerminalReason.DOWNLOAD_FAILED, f"image incomplete after {got.received} bytes: {done}"
                )
            if held is not None and got.whole and sum(map(len, held.values())) + got.received <= HELD_BYTES:
                held[page] = b"".join(got.pending)  # never written in a batch before: the whole page
            return done
        finally:
            await got.discard()  # also when cancelled before ``finish`` left the executor's queue

    async def _fetch_animation(
        self, source: FileSource, work: Work, meta: Animation, folder: Path, on_page: ProgressHook | None
    ) -> Artifact:
        """An animated work as one looping animated GIF with its frame delays
        (:mod:`curaflow.sources.animation`): the frames, the frames zip (bounded, streamed
        to disk and removed once encoded), the GIF (kept when a retried attempt finds it).
        The GIF is named ``<work_id>_ugoira.gif``, the name delivered files have always had;
        a frames zip an earlier attempt could not remove is removed before anything else
        (:func:`~curaflow.artifacts.files._prepare`'s ``scratch``), also when its GIF is kept."""
        dest = inside(folder, f"{work.work_id}_ugoira.gif")
        zip_path = inside(folder, f"{work.work_id}_ugoira.zip")
        if not (await asyncio.to_thread(_prepare, folder, [dest], (zip_path,))):
            if not meta.frames:
                # What a source describes as an animation without frames: not recognised as
                # the work's (Pixiv's own metadata parser says the same, held briefly).
                raise WorkUnavailable(work.work_id, "animation: no frames", UnavailableKind.UNUSABLE_ANIMATION)
            try:  # more frames than a decode may have: refused before the zip is fetched
                self.budget.meter().plan(frames=len(meta.frames), pixels=0)
            except OverBudget as err:
                # What the metadata says, not the work's own bytes (a count never seen —
                # 10**5 frames — would come so for every animated work): held briefly. The
                # zip's own frames over the budget (encode_gif, below) are the work's.
                raise WorkUnavailable(work.work_id, f"animation: {err.why}", UnavailableKind.OVER_BUDGET) from None
            try:
                try:
                    await self._download_zip(source, meta.zip_url, zip_path, work.work_id)
                except WorkUnavailable as err:  # over its limit: the work's only if its frames may be
                    raise sized(err, work.width, work.height, len(meta.frames), begins_as=begins_as_zip) from None
                try:
                    await self._decoding(encode_gif, zip_path, meta, dest)
                except UnusableAnimation as err:
                    raise WorkUnavailable(
                        work.work_id,
                        f"animation: {err}",
                        UnavailableKind.UNUSABLE_ANIMATION,
                        recognised=err.recognised,
                    ) from None
                except OverBudget as err:  # its frames' pixels: the work's; its CPU time: held briefly
                    raise WorkUnavailable(
                        work.work_id, f"animation: {err.why}", UnavailableKind.OVER_BUDGET, recognised=err.recognised
                    ) from None
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
                request, or its bytes go over the limit (``too_large``, settled by
                :func:`~curaflow.sources.corroboration.sized`; never its announced length
                alone: such a body is read, to one chunk past the limit at most).
        """
        tmp = dest.with_name(f".{dest.name}.part")
        received = 0
        head = b""  # the body's first bytes: does a body over its limit begin as a zip?
        try:
            async with source.download(url) as body:
                # An announced length over the limit is read, not believed: ``too_large``
                # is a verdict on the work, and only the zip's own bytes may say it
                # (2026-12-07; a zip ending short of its length is cut short, below).
                expected = body.expected_bytes
                out = await asyncio.to_thread(open, tmp, "wb")
                try:
                    pending: list[bytes] = []
                    batched = 0
                    async for chunk in body.chunks():
                        received += len(chunk)
                        if len(head) < HEAD_BYTES:
                            head += chunk[: HEAD_BYTES - len(head)]
                        if received > MAX_ZIP_BYTES:
                            raise WorkUnavailable(
                                work_id,
                                f"frames zip over the limit of {MAX_ZIP_BYTES} bytes",
                                UnavailableKind.TOO_LARGE,
                                limit_bytes=MAX_ZIP_BYTES,
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
        except WorkUnavailable as err:
            if err.head is None:
                err.head = head  # what it began as (corroboration.sized)
            raise
        finally:
            await asyncio.to_thread(tmp.unlink, True)

    def remove(self, job_id: str, target_id: str) -> None:
        """Remove one cell's artifact folder for good, and its job's folder once empty, or
        say why not: the one removal of a cell's folder — retention
        (:func:`curaflow.ledger.holdings.release`), a ``cache`` delivery, the fetch releasing
        a work it will not deliver (each through :func:`curaflow.ledger.holdings.remove_folders`).
        Blocking.

        A folder that stays is an error, never a silent success: the ledger forgets a folder
        only once it is gone (a file it cannot remove, a read-only disk). A cell's folder
        that is a symbolic link inside the root is unlinked, never followed; one that leads
        out of the root is left as it is (an operator moved it there: nothing outside the
        root is touched). A folder already gone is no error. Until 2026-12-07 the fetch's
        release used ``delete``, which ignored what the disk refused and raised
        ``LinkEscape`` for a folder leading out of the root.

        Raises:
            OSError: the folder, or something in it, could not be removed.
            curaflow.paths.PathEscape: the folder leads outside the root (left as it is).
        """
        folder = self.folder(job_id, target_id)
        try:
            if folder.is_symlink():
                folder.unlink()
            else:
                shutil.rmtree(folder)
        except FileNotFoundError:  # gone, or a file in it removed meanwhile: checked below
            if os.path.lexists(folder):
                raise
        with contextlib.suppress(OSError):  # not empty (another target's folder), or gone
            folder.parent.rmdir()

    @staticmethod
    def holds(artifact: Artifact) -> bool:
        """True when every file of ``artifact`` is on this process's disk at its recorded
        path with its recorded size, and opens for reading (this process, or one sharing
        its volume, fetched it); else a delivery sends the ledger's copy.

        Files are only ever completed by a rename, so a regular file of the right size is
        whole. Judged by what was opened, not by a look at the name: until 2026-12-07 a
        ``stat`` alone said "held" for a page curaflow's disk would not open (``EACCES``
        of an operator's ``chmod``, ``EPERM``): the route read it on every attempt and
        failed alike (nothing sent, retried) until the attempts ran out — the cell
        ``delivery_abandoned``, owner the route, for curaflow's own disk, the ledger
        holding the whole copy all along. Blocking (an open, an ``fstat`` and a close per
        file, never blocking on what is no regular file): call it in a thread.
        """
        for file in artifact.files:
            try:
                fd = os.open(file.path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
            except OSError:
                return False
            try:
                info = os.fstat(fd)
            except OSError:
                return False
            finally:
                with contextlib.suppress(OSError):  # a read-only descriptor: nothing to lose
                    os.close(fd)
            if not stat.S_ISREG(info.st_mode) or info.st_size != file.bytes:
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
        worker start and by every retention pass of the worker
        (:func:`curaflow.ledger.retention.prune_tick`: a worker that was not started again
        after such a death swept them never, until 2026-12-05). Blocking; returns how many
        were removed."""
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
