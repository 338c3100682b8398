"""The state directory is the owner's alone on a multi-user host (0700; its files 0600).

A real embedded stack (``curaflow dev``'s: Temporal dev server with ``temporal.db``,
PostgreSQL, a worker process, ``stack.json``, the logs) started on a state directory an
older version left world-readable: everything curaflow keeps there comes out private.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

import asyncpg
import pytest

from curaflow.config import load_settings
from curaflow.devstack.stack import EmbeddedStack
from curaflow.paths import private_dir, secure_state_dir, write_private
from tests.support import eventually

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_helpers_create_private_and_tighten_what_exists(tmp_path: Path) -> None:
    old = tmp_path / "old"
    old.mkdir(mode=0o755)
    (old / "stack.json").write_text("{}")
    (old / "stack.json").chmod(0o644)
    (old / "logs").mkdir(mode=0o755)
    (old / "logs" / "worker-1.log").write_text("")
    (old / "logs" / "worker-1.log").chmod(0o664)
    (old / "executable").write_text("")
    (old / "executable").chmod(0o755)
    secure_state_dir(old)
    assert mode(old) == mode(old / "logs") == 0o700
    assert mode(old / "stack.json") == mode(old / "logs" / "worker-1.log") == 0o600
    assert mode(old / "executable") == 0o700  # the owner's bits are kept
    write_private(tmp_path / "new" / "file", "x")
    assert (mode(tmp_path / "new"), mode(tmp_path / "new" / "file")) == (0o700, 0o600)
    assert mode(private_dir(tmp_path / "a" / "b")) == 0o700


async def test_an_embedded_stack_keeps_its_state_private_and_tightens_an_old_one(tmp_path: Path) -> None:
    state = tmp_path / "state"
    settings = load_settings(state_dir=str(state))
    async with EmbeddedStack(settings, workers=1, persist=True, publish=True):
        kept = private_files(state)
    # What an older version left: the directories 0755, the files 0644.
    for path in [state, state / "logs", state / "stack.lock", *state.glob("temporal.db*"), *(state / "logs").iterdir()]:
        path.chmod(0o755 if path.is_dir() else 0o644)

    async with EmbeddedStack(settings, workers=1, persist=True, publish=True):
        assert mode(state / "logs") == mode(state / "pg") == 0o700
        # A way through for PostgreSQL's own user when it is another (run as root).
        assert mode(state) == (0o711 if (state / "pg").stat().st_uid != os.geteuid() else 0o700)
        files = private_files(state)
        assert {"stack.json", "stack.lock", "temporal.db", "logs/temporal.log", "logs/worker-1.log"} <= set(files), (
            files
        )
        wide = {name: oct(bits) for name, bits in files.items() if bits != 0o600}
        assert wide == {}, wide
    assert kept and all(bits == 0o600 for bits in kept.values()), kept  # and so on a first start


async def test_the_embedded_postgresql_outlives_its_first_checkpoint(tmp_path: Path) -> None:
    """Run as root, pgserver runs PostgreSQL as its own ``pgserver`` user and opens the
    folders above its data directory to it; a worker made the state directory 0700 again,
    and the next checkpoint (every 5 min; forced here) could not reach ``global/pg_control``
    by its absolute path: PostgreSQL panicked and shut down, and every job with it."""
    state = tmp_path / "state"
    settings = load_settings(state_dir=str(state))
    async with EmbeddedStack(settings, workers=1, persist=True, publish=True) as stack:
        # The worker has secured the directory (pgserver had left it 0755).
        await eventually(lambda: mode(state) & 0o066 == 0, timeout_s=60, what="the state directory secured")
        assert stack.settings is not None
        url = stack.settings.database.url
        conn = await asyncpg.connect(url)
        try:
            await conn.execute("CHECKPOINT")
        finally:
            await conn.close()
        conn = await asyncpg.connect(url)
        try:
            assert await conn.fetchval("SELECT 1") == 1
        finally:
            await conn.close()
        # Still the owner's alone: at most a way through for PostgreSQL's own user, no listing.
        assert mode(state) in (0o700, 0o711)
        if os.geteuid() != 0:
            assert mode(state) == 0o700


def private_files(state: Path) -> dict[str, int]:
    """Mode of every file curaflow keeps at the top of ``state`` and in its logs."""
    files = [*state.glob("temporal.db*"), *(state / "logs").glob("*.log"), state / "stack.json", state / "stack.lock"]
    modes = {}
    for p in files:
        with contextlib.suppress(FileNotFoundError):  # SQLite's journal comes and goes while Temporal writes
            modes[str(p.relative_to(state))] = mode(p)
    return modes
