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
and read chunk by chunk through a cursor, so memory stays bounded whatever the page size.
Pages of one chunk are written together, :data:`BATCH_BYTES` at most per statement: a
work of small pages costs the fetch one statement whatever its page count, and none of
their files is read again when the fetch still holds their bytes (the ``held`` pages of
:meth:`curaflow.artifacts.ArtifactStore.fetch`); a page of several chunks is one
transaction. File work runs in threads, off the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
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


def copy_pages_sql(job: str, target: str, work: str, pages: str, bodies: str) -> str:
    """Two common table expressions (``put_pages``, ``purge_pages``) that write pages of one
    chunk each, and no chunk after them, for a statement to carry (``WITH … <statement>``).

    Args:
        job / target / work: SQL of the key (parameters such as ``$1``).
        pages / bodies: SQL of the page numbers (``int[]``) and their bytes (``bytea[]``).
    """
    return f"""put_pages AS (
                   INSERT INTO artifact_chunks (job_id, target_id, work_id, page, seq, body)
                   SELECT {job}, {target}, {work}, p.page, 0, p.body
                   FROM unnest({pages}::int[], {bodies}::bytea[]) AS p(page, body)
                   ON CONFLICT (job_id, target_id, work_id, page, seq) DO UPDATE SET body = EXCLUDED.body),
               purge_pages AS (
                   DELETE FROM artifact_chunks
                   WHERE job_id = {job} AND target_id = {target} AND work_id = {work}
                     AND page = ANY({pages}::int[]) AND seq > 0)"""


#: Pages of one chunk each, together ($4 pages, $5 their bodies), and no chunk after them.
_PUT_PAGES = f"WITH {copy_pages_sql('$1', '$2', '$3', '$4', '$5')} SELECT 1"


def held_pages(artifact: Artifact, held: dict[int, bytes] | None) -> tuple[list[int], list[bytes]] | None:
    """``(page numbers, bytes)`` of ``artifact`` when the caller holds every page, each of one
    chunk, at most :data:`BATCH_BYTES` together — the copy one statement can carry
    (:func:`copy_pages_sql`); None otherwise (:func:`store_artifact` copies it)."""
    bodies = [(held or {}).get(f.page) for f in artifact.files]
    if not bodies or any(b is None or len(b) > CHUNK_BYTES for b in bodies):
        return None
    if any(len(b or b"") != f.bytes for b, f in zip(bodies, artifact.files, strict=True)):
        return None
    if sum(len(b or b"") for b in bodies) > BATCH_BYTES:
        return None
    return [f.page for f in artifact.files], [b or b"" for b in bodies]


#: The most bytes of one-chunk pages written by one statement.
BATCH_BYTES = 8 * CHUNK_BYTES


def _read_small(path: str) -> bytes:
    """A file's bytes, at most one chunk and one byte more (blocking: one thread hop)."""
    with open(path, "rb") as fh:
        return fh.read(CHUNK_BYTES + 1)


async def store_artifact(
    ledger: asyncpg.Pool | asyncpg.Connection,
    job_id: str,
    target_id: str,
    artifact: Artifact,
    *,
    held: dict[int, bytes] | None = None,
) -> int:
    """Copy every file of ``artifact`` (complete on local disk) into the ledger.

    Idempotent: a retried fetch writes the pages again over the same rows. Pages of one
    chunk (the common case) go together, one statement per :data:`BATCH_BYTES`; a longer
    page is one transaction (a savepoint in the caller's), so a page is stored whole or
    as it was before.

    Args:
        ledger: the pool, or a connection (in the caller's transaction).
        held: page → the bytes of that page, for pages the caller still holds (they are
            not read from disk again); a body whose length is not the file's recorded
            size is ignored.

    Returns:
        The bytes written.

    Raises:
        OSError: a file cannot be read.
        asyncpg.PostgresError / OSError: the ledger is unreachable (the fetch is retried).
    """
    written = 0
    pages: list[int] = []
    bodies: list[bytes] = []
    batched = 0

    async def flush() -> None:
        nonlocal batched
        if pages:
            await ledger.execute(_PUT_PAGES, job_id, target_id, artifact.work_id, pages, bodies)
        pages.clear()
        bodies.clear()
        batched = 0

    for file in artifact.files:
        body = (held or {}).get(file.page)
        if body is None or len(body) != file.bytes:
            body = await asyncio.to_thread(_read_small, file.path) if file.bytes <= CHUNK_BYTES else None
        if body is None or len(body) > CHUNK_BYTES:
            written += await _store_page(ledger, (job_id, target_id, artifact.work_id, file.page), file.path)
            continue
        if batched + len(body) > BATCH_BYTES:
            await flush()
        pages.append(file.page)
        bodies.append(body)
        batched += len(body)
        written += len(body)
    await flush()
    return written


async def _store_page(ledger: asyncpg.Pool | asyncpg.Connection, key: tuple[str, str, str, int], path: str) -> int:
    """One page of several chunks, in one transaction; returns its bytes."""
    fh = await asyncio.to_thread(open, path, "rb")
    try:
        async with contextlib.AsyncExitStack() as stack:
            conn = await stack.enter_async_context(ledger.acquire()) if isinstance(ledger, asyncpg.Pool) else ledger
            await stack.enter_async_context(conn.transaction())
            chunk = await asyncio.to_thread(fh.read, CHUNK_BYTES)
            after = await asyncio.to_thread(fh.read, CHUNK_BYTES) if len(chunk) == CHUNK_BYTES else b""
            written = len(chunk)
            seq = 0
            while after:
                await conn.execute(_PUT, *key, seq, chunk)
                seq += 1
                chunk, after = after, await asyncio.to_thread(fh.read, CHUNK_BYTES)
                written += len(chunk)
            await conn.execute(_PUT_LAST, *key, seq, chunk)
            return written
    finally:
        await asyncio.to_thread(fh.close)


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
