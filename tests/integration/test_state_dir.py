"""The state directory is the owner's alone on a multi-user host (0700; its files 0600).

A real embedded stack (``curaflow dev``'s: Temporal dev server with ``temporal.db``,
PostgreSQL, a worker process, ``stack.json``, the logs) started on a state directory an
older version left world-readable: everything curaflow keeps there comes out private.
"""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from curaflow.config import load_settings
from curaflow.devstack.stack import EmbeddedStack
from curaflow.paths import private_dir, secure_state_dir, write_private

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
    for path in [state, state / "logs", *state.glob("temporal.db*"), *(state / "logs").iterdir()]:
        path.chmod(0o755 if path.is_dir() else 0o644)

    async with EmbeddedStack(settings, workers=1, persist=True, publish=True):
        assert mode(state) == mode(state / "logs") == mode(state / "pg") == 0o700
        files = private_files(state)
        assert {"stack.json", "temporal.db", "logs/temporal.log", "logs/worker-1.log"} <= set(files), files
        wide = {name: oct(bits) for name, bits in files.items() if bits != 0o600}
        assert wide == {}, wide
    assert kept and all(bits == 0o600 for bits in kept.values()), kept  # and so on a first start


def private_files(state: Path) -> dict[str, int]:
    """Mode of every file curaflow keeps at the top of ``state`` and in its logs."""
    files = [*state.glob("temporal.db*"), *(state / "logs").glob("*.log"), state / "stack.json"]
    return {str(p.relative_to(state)): mode(p) for p in files if p.exists()}
