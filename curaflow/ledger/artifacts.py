"""A fetched artifact's bytes in the ledger (table ``artifact_chunks``, migration 0037).

Scale-out needs nothing shared but Temporal and PostgreSQL: the worker process that
fetched a work keeps its files in its own artifacts directory, and also copies them
here (:func:`store_artifact`) before the cell is recorded ``artifact_ready``. A deliver
attempt on a process that does not hold the files — another host, a private volume, the
fetcher gone — writes them from here into a folder of its own (:func:`restore_artifact`),
checked against the size and SHA-256 recorded with the artifact. The rows are deleted
with the job's finish (:func:`curaflow.ledger.finish.finish_job`): the ledger's copy is
the transport between processes, not an archive (the artifacts directory is).

Pages are split into chunks of :data:`CHUNK_BYTES`; a page is written whole or not at all
(one statement, or one transaction for a page of several chunks) and read chunk by chunk
through a cursor, so memory stays bounded whatever the page size. A one-page work costs
the fetch one statement. File work runs in threads, off the event loop.
"""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path
from typing import BinaryIO

import asyncpg

from curaflow.domain.models import Artifact
from curaflow.paths import inside

#: Bytes per ``artifact_chunks`` row (and per read or write of a file).
CHUNK_BYTES = 1024 * 1024


class ArtifactNotInLedger(Exception):
    """A page of the artifact is not in the ledger, or not as it was recorded (size, hash).

    The cell's artifact was fetched by a process that did not copy it (a version before
    migration 0037), or its job already finished.
    """


#: One chunk, written over whatever an earlier attempt left at its place.
_PUT = """INSERT INTO artifact_chunks (job_id, target_id, work_id, page, seq, body)
          VALUES ($1, $2, $3, $4, $5, $6)
          ON CONFLICT (job_id, target_id, work_id, page, seq) DO UPDATE SET body = EXCLUDED.body"""
#: The last chunk of a page, and no chunk after it (an earlier attempt's longer copy).
_PUT_LAST = f"""WITH put AS ({_PUT})
               DELETE FROM artifact_chunks
               WHERE job_id = $1 AND target_id = $2 AND work_id = $3 AND page = $4 AND seq > $5"""


async def store_artifact(pool: asyncpg.Pool, job_id: str, target_id: str, artifact: Artifact) -> int:
    """Copy every file of ``artifact`` (complete on local disk) into the ledger.

    Idempotent: a retried fetch writes the pages again over the same rows. A page of one
    chunk (the common case) is one statement; a longer page is one transaction, so a
    page is stored whole or as it was before.

    Returns:
        The bytes written.

    Raises:
        OSError: a file cannot be read.
        asyncpg.PostgresError / OSError: the ledger is unreachable (the fetch is retried).
    """
    written = 0
    for file in artifact.files:
        key = (job_id, target_id, artifact.work_id, file.page)
        fh = await asyncio.to_thread(open, file.path, "rb")
        try:
            chunk = await asyncio.to_thread(fh.read, CHUNK_BYTES)
            after = await asyncio.to_thread(fh.read, CHUNK_BYTES) if len(chunk) == CHUNK_BYTES else b""
            written += len(chunk)
            if not after:
                await pool.execute(_PUT_LAST, *key, 0, chunk)
                continue
            async with pool.acquire() as conn, conn.transaction():
                seq = 0
                while after:
                    await conn.execute(_PUT, *key, seq, chunk)
                    seq += 1
                    chunk, after = after, await asyncio.to_thread(fh.read, CHUNK_BYTES)
                    written += len(chunk)
                await conn.execute(_PUT_LAST, *key, seq, chunk)
        finally:
            await asyncio.to_thread(fh.close)
    return written


def _write(fh: BinaryIO, digest: hashlib._Hash, body: bytes) -> None:
    fh.write(body)
    digest.update(body)


async def restore_artifact(
    pool: asyncpg.Pool, job_id: str, target_id: str, artifact: Artifact, folder: Path
) -> Artifact:
    """Write the files of ``artifact`` from the ledger into ``folder`` (which exists).

    Each file keeps its name (routes name what they send after it) and is checked
    against the recorded size and SHA-256.

    Returns:
        ``artifact`` with every file's ``path`` in ``folder``.

    Raises:
        ArtifactNotInLedger: a page is missing or differs from the recorded one (the
            partial file is left in ``folder``, which the caller removes).
        asyncpg.PostgresError / OSError: the ledger or the disk failed.
    """
    files = []
    for file in artifact.files:
        dest = inside(folder, Path(file.path).name)
        digest = hashlib.sha256()
        size = 0
        fh = await asyncio.to_thread(open, dest, "wb")
        try:
            async with pool.acquire() as conn, conn.transaction():
                async for row in conn.cursor(
                    """SELECT body FROM artifact_chunks
                       WHERE job_id = $1 AND target_id = $2 AND work_id = $3 AND page = $4 ORDER BY seq""",
                    job_id,
                    target_id,
                    artifact.work_id,
                    file.page,
                    prefetch=2,
                ):
                    body: bytes = row["body"]
                    await asyncio.to_thread(_write, fh, digest, body)
                    size += len(body)
        finally:
            await asyncio.to_thread(fh.close)
        if size != file.bytes or (file.sha256 is not None and digest.hexdigest() != file.sha256):
            raise ArtifactNotInLedger(
                f"page {file.page} of work {artifact.work_id}: {size} bytes in the ledger, {file.bytes} recorded"
                + ("" if size != file.bytes else " (hash differs)")
            )
        files.append(file.model_copy(update={"path": str(dest)}))
    return artifact.model_copy(update={"files": files})
