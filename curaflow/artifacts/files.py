"""A page's file on disk: the temporary file it is streamed into, completed only once whole
(fsynced, decode-checked, renamed), and the description of a complete file. Blocking:
run in a thread."""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import tempfile
import threading
from pathlib import Path

from PIL import Image

from curaflow.artifacts.images import Refused, Verified, check_image
from curaflow.artifacts.names import mime_of
from curaflow.domain.models import ArtifactFile
from curaflow.paths import sync_file
from curaflow.sources.corroboration import not_the_listed_picture
from curaflow.sources.decoding import DecodeMeter, DelegatedReads, machine_cause, pillow_defers
from curaflow.sources.errors import HEAD_BYTES, UnavailableKind

#: Bytes collected from the response before one write in a thread (fewer thread hops
#: than one per 64 KiB chunk; bounded memory per download).
WRITE_BATCH = 1024 * 1024
#: The most page bytes one fetch keeps in memory for the ledger's copy (:meth:`ArtifactStore.fetch`).
HELD_BYTES = 8 * WRITE_BATCH


def _prepare(folder: Path, dests: list[Path], scratch: tuple[Path, ...] = ()) -> set[Path]:
    """Create the cell's folder, remove the part files an earlier attempt left in it and
    the store's own ``scratch`` files of this fetch; the pages already complete on disk
    (blocking).

    A part file (``.<page>.<random>.part``, :class:`_PartFile`; ``.<name>.part`` of a
    frames zip or a GIF) outlives its attempt only when the process died (SIGKILL, the
    OOM killer): each death left its own, up to ``outbound.download_max_bytes`` each, in a
    folder a persistent store keeps for good (until 2026-12-05). ``scratch``: the files the
    store writes under names of their own and removes itself, never part of the artifact —
    an animated work's frames zip (``<work_id>_ugoira.zip``, removed once its GIF is
    encoded): one whose removal failed (a disk's error, the process's death) after its GIF
    was written stayed beside the GIF for good until 2026-12-07, as the GIF kept by every
    later attempt was never encoded again (``tests/unit/test_disk_fault_sweep.py``, failed
    first). Nothing else in the folder is touched. The attempt that calls this holds the
    cell's lease: no other live attempt writes the folder.
    """
    folder.mkdir(parents=True, exist_ok=True)
    for leftover in (*folder.glob(".*.part"), *scratch):
        leftover.unlink(missing_ok=True)
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

    def _complete(
        self, chunks: list[bytes], page: int, listed: tuple[object, object] | None, meter: DecodeMeter
    ) -> ArtifactFile | Refused | str:
        """Write the last ``chunks``, fsync, decode-check under ``meter``; if whole and the
        listed picture (:func:`listed_picture_refused`), rename to ``dest`` and describe it,
        else return why it is not (call with the lock held)."""
        self._write(chunks)
        assert self._fh is not None and self._tmp is not None
        self._fh.flush()
        sync_file(self._fh.fileno())  # a disk that cannot sync a file: as durable as it makes it
        self._fh.close()
        checked = check_image(self._tmp, meter=meter)
        if not isinstance(checked, Verified):
            return checked
        if (other := listed_picture_refused(checked.width, checked.height, listed)) is not None:
            return other
        os.replace(self._tmp, self.dest)
        self.completed = True
        return describe(self.dest, page, sha256=self._digest.hexdigest(), size=self._size, pixels=checked)

    def finish(
        self, chunks: list[bytes], page: int, listed: tuple[object, object] | None = None, *, meter: DecodeMeter
    ) -> ArtifactFile | Refused | str:
        """Write the last ``chunks`` and complete the file (fsync, decode check under
        ``meter``, the picture against ``listed`` — the page's size as its source lists it,
        :func:`listed_picture_refused` —, rename to ``dest``; returns its description), or
        discard it and return why it is not whole or not the page: the whole fate of the
        file in one thread hop, so a caller cancelled meanwhile has nothing to clean up (and
        never races the thread).

        Raises:
            DecodeStopped: ``meter`` was stopped (the file is discarded)."""
        with self._lock:
            try:
                return self._complete(chunks, page, listed, meter)
            finally:
                if not self.completed:
                    self._discard()

    def discard(self) -> None:
        """Close and remove the temporary file, if any (waits for a write under way)."""
        with self._lock:
            self._discard()

    @property
    def settled(self) -> bool:
        """True once the file was completed or discarded: renamed, or removed — nothing of
        it left on disk, so a caller may skip its own :meth:`discard` (no thread hop).

        False while a discard in a thread is still removing it: a caller whose await of
        that thread was cancelled discards again, which waits for the first (the lock),
        and does not end with the file still there (until 2026-12-05 the flag was set
        before the removal, and one cancel of a fetch landing then ended it with the part
        file on disk and its removal running on)."""
        return self.completed or self._discarded

    def _discard(self) -> None:
        try:
            if self._fh is not None:
                with contextlib.suppress(OSError):  # a buffered write failing again (disk full)
                    self._fh.close()
        finally:
            try:
                if self._tmp is not None:
                    self._tmp.unlink(missing_ok=True)
            finally:
                self._discarded = True  # under the lock: a later write fails without a file


def listed_picture_refused(width: int, height: int, listed: tuple[object, object] | None) -> Refused | None:
    """A page decoded at ``width`` × ``height`` refused when it cannot be the picture its
    source lists at ``listed`` (width, height; None: not listed) —
    :func:`~curaflow.sources.corroboration.not_the_listed_picture`, the rule's owner: an
    answer of the image host's never seen as the work's (``not_an_image``, not recognised:
    held back briefly, the cell moving on), never delivered; None when it may be."""
    if listed is None:
        return None
    why = not_the_listed_picture(width, height, *listed)
    return None if why is None else Refused(why, UnavailableKind.NOT_AN_IMAGE, recognised=False)


def describe(
    path: Path, page: int, *, sha256: str | None = None, size: int | None = None, pixels: Verified | None = None
) -> ArtifactFile:
    """Size, hash, MIME type and pixel size of a complete file (blocking).

    Its MIME type is what its first bytes are (:func:`~curaflow.artifacts.names.mime_of`:
    the image format they sign), never its name's extension (the page URL's).

    ``width`` / ``height`` are None when Pillow cannot open the file as an image (its
    headers only: Pillow's own size guard defers to the decode budget, which
    :func:`~curaflow.artifacts.images.check_image` applied, and its warnings are ignored:
    :func:`~curaflow.sources.decoding.pillow_defers`).

    Args:
        sha256 / size: the file's digest (hex) and length in bytes when the caller
            computed them while writing; else the file is read to compute them.
        pixels: the size :func:`~curaflow.artifacts.images.check_image` read when it
            verified the file; else Pillow opens it again for its size.

    Raises:
        OSError: the machine refused a read (:func:`~curaflow.sources.decoding.machine_cause`):
            curaflow's, retried — never a file described without its size. Until 2026-12-06
            an ``EIO`` or ``EMFILE`` as Pillow opened a page kept from an earlier attempt, or
            the animation's GIF, recorded it with no width and height for good (Telegram
            then sent it as a document, the manifest said ``null``).
    """
    if sha256 is None or size is None:
        digest = hashlib.sha256()
        size = 0
        head = b""
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1024 * 1024), b""):
                head = head or block[:HEAD_BYTES]
                digest.update(block)
                size += len(block)
        sha256 = digest.hexdigest()
    else:
        with open(path, "rb") as fh:
            head = fh.read(HEAD_BYTES)
    width = height = None
    if pixels is not None:
        width, height = pixels.width, pixels.height
    else:
        pillow_defers()
        try:
            # Read through DelegatedReads: a seek a header names before the file's start is
            # the bytes' (not an image), any other errno the machine's.
            with open(path, "rb") as fh, Image.open(DelegatedReads(fh)) as image:  # type: ignore[arg-type]
                width, height = image.size
        except (OSError, ValueError) as err:
            if (machine := machine_cause(err)) is not None:
                raise machine from None  # the disk's answer, not the file's: curaflow's, retried
            # not an image
    return ArtifactFile(
        path=str(path),
        bytes=size,
        mime=mime_of(head, path.suffix),
        width=width,
        height=height,
        sha256=sha256,
        page=page,
    )
