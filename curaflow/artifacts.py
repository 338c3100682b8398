"""The artifact store: fetched work files on local disk (a shared volume in production).

Layout: ``<artifacts_dir>/<job>/<target>/<work_id>_p<N>.<ext>``. A file is recorded
complete only after its full length is on disk: the body is streamed to a temporary
file, its length is checked against ``Content-Length`` when the server gives one (an
unknown length is accepted once the stream ended cleanly), it is fsynced and renamed.
A truncated body is a ``download_failed`` error and leaves no file behind.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx
from PIL import Image

from curaflow.domain.models import Artifact, ArtifactFile, Work
from curaflow.domain.reasons import TerminalReason
from curaflow.sources.errors import SourceError
from curaflow.sources.pixiv import PixivClient

_UNSAFE = re.compile(r"[^A-Za-z0-9@._-]")
MIME_BY_EXT = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
}

ProgressHook = Callable[[int, int], Awaitable[None]]


def safe_name(value: str) -> str:
    """A filesystem-safe rendering of an id (unsafe characters become ``_``)."""
    return _UNSAFE.sub("_", value)[:200]


class ArtifactStore:
    """Downloads work pages into ``root`` and deletes them when no longer needed.

    Args:
        root: the artifacts directory (created on demand).
    """

    def __init__(self, root: Path) -> None:
        self.root = root

    def folder(self, job_id: str, target_id: str) -> Path:
        """The folder holding one cell's artifact."""
        return self.root / safe_name(job_id) / safe_name(target_id)

    async def fetch(
        self,
        client: PixivClient,
        work: Work,
        job_id: str,
        target_id: str,
        *,
        on_page: ProgressHook | None = None,
    ) -> Artifact:
        """Download every page of ``work``; pages already complete on disk are kept.

        Args:
            on_page: awaited with ``(pages_done, pages_total)`` after each page.

        Returns:
            The complete :class:`~curaflow.domain.models.Artifact`.

        Raises:
            SourceError: ``download_failed`` / ``download_timeout`` / ``rate_limited``.
            WorkUnavailable: the image answers 403/404.
        """
        folder = self.folder(job_id, target_id)
        folder.mkdir(parents=True, exist_ok=True)
        files: list[ArtifactFile] = []
        for page in work.pages:
            suffix = Path(page.url.split("?", 1)[0]).suffix.lower() or ".jpg"
            dest = folder / f"{work.work_id}_p{page.index}{suffix}"
            if not dest.exists():
                await self._download(client, page.url, dest)
            files.append(describe(dest, page.index))
            if on_page is not None:
                await on_page(len(files), len(work.pages))
        return Artifact(work_id=work.work_id, files=files)

    async def _download(self, client: PixivClient, url: str, dest: Path) -> None:
        response = await client.stream_image(url)
        fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".part", dir=dest.parent)
        try:
            expected = response.headers.get("content-length")
            received = 0
            with os.fdopen(fd, "wb") as fh:
                try:
                    async for chunk in response.aiter_bytes(65536):
                        fh.write(chunk)
                        received += len(chunk)
                except httpx.TimeoutException as err:
                    raise SourceError(
                        TerminalReason.DOWNLOAD_TIMEOUT, f"image body timeout after {received} bytes"
                    ) from err
                except httpx.HTTPError as err:
                    raise SourceError(
                        TerminalReason.DOWNLOAD_FAILED,
                        f"image body broken after {received} bytes: {type(err).__name__}",
                    ) from err
                fh.flush()
                os.fsync(fh.fileno())
            if expected is not None and expected.isdigit() and int(expected) != received:
                raise SourceError(TerminalReason.DOWNLOAD_FAILED, f"image truncated: {received} of {expected} bytes")
            if received == 0:
                raise SourceError(TerminalReason.DOWNLOAD_FAILED, "image body empty")
            os.replace(tmp, dest)
        finally:
            await response.aclose()
            Path(tmp).unlink(missing_ok=True)

    def delete(self, job_id: str, target_id: str) -> None:
        """Remove one cell's artifact folder (storage mode ``cache``)."""
        shutil.rmtree(self.folder(job_id, target_id), ignore_errors=True)


def describe(path: Path, page: int) -> ArtifactFile:
    """Size, hash, MIME type and pixel size of a complete file."""
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1024 * 1024), b""):
            digest.update(block)
            size += len(block)
    width = height = None
    try:
        with Image.open(path) as image:
            width, height = image.size
    except (OSError, ValueError):
        pass
    return ArtifactFile(
        path=str(path),
        bytes=size,
        mime=MIME_BY_EXT.get(path.suffix.lower(), "application/octet-stream"),
        width=width,
        height=height,
        sha256=digest.hexdigest(),
        page=page,
    )
