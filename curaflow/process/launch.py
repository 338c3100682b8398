"""How a service process (``curaflow worker`` / ``api`` / ``dev``, ``python -m
curaflow.process.worker``, ``python worker.py``) treats a stop request while it is still
loading its modules.

Python's defaults there are a ``KeyboardInterrupt`` traceback for SIGINT and death by
the signal for SIGTERM (status -15, no clean-up) — during the second or so the imports
take, before the process installs its own handlers. A service asked to stop while nothing
ran yet leaves with status 0 and no traceback (docs/operations.md, "Exit status"), as it
does later while it connects.
"""

from __future__ import annotations

import signal
from types import FrameType


def _leave(signum: int, frame: FrameType | None) -> None:
    # A second signal while the interpreter shuts down (threading's, atexit's) must not
    # kill it (-15) nor raise again inside that shutdown: from here both are ignored.
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)
    raise SystemExit(0)


def stop_quietly_until_started() -> None:
    """Make SIGINT and SIGTERM raise ``SystemExit(0)`` until the process installs its own
    handlers (the worker's event loop, uvicorn's, ``curaflow dev``'s): ``finally`` blocks
    still run, so a child already started is still stopped. Call it first, before the
    heavy imports."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _leave)
