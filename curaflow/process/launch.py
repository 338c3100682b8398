"""How a service process (``curaflow worker`` / ``api`` / ``dev``, ``python -m
curaflow.process.worker``, ``python worker.py``) treats a stop request while it is still
loading its modules.

Python's defaults there are a ``KeyboardInterrupt`` traceback for SIGINT and death by
the signal for SIGTERM (status -15, no clean-up) — during the second or so the imports
take, before the process installs its own handlers. A service asked to stop while nothing
ran yet leaves with status 0 and no traceback (docs/operations.md, "Exit status"), as it
does later while it connects.

A stop request is also remembered (:func:`stop_requested`): its ``SystemExit`` may be
raised where Python only prints "Exception ignored" — the signal landing while an import
runs a weakref callback (importlib's module locks) or a ``__del__`` — and the process would
go on starting, deaf to the next signal (both ignored from the first on). Each process asks
where it takes the signals over (the worker's event loop, ``curaflow dev``'s, the API's
uvicorn) and leaves then (2026-12-07: a worker so signalled started and ran on).

Nor is such an ignored exit printed: Python hands every exception it ignores (a weakref
callback's, a ``__del__``'s, an ``atexit`` callback's) to :data:`sys.unraisablehook`, and
the hook installed here drops this module's own stop (:class:`StopWhileLoading`, whose
request is kept), handing any other on as before. Until 2026-12-07 "Exception ignored in:
… SystemExit: 0" and its traceback were printed when the signal landed there (a worker
stopped by SIGINT while loading, now and then): what the user sees of a stop while the
modules load is the same wherever the signal lands — nothing, status 0.
"""

from __future__ import annotations

import signal
import sys
from types import FrameType
from typing import Any

#: A stop was asked while the modules loaded (:func:`stop_requested`).
_requested = False


class StopWhileLoading(SystemExit):
    """The stop :func:`stop_quietly_until_started`'s handler raises (status 0): told apart
    from any other ``SystemExit`` where Python ignores it (module doc)."""


def _unraisable(unraisable: Any) -> None:
    """:data:`sys.unraisablehook`: this module's stop is dropped silently (its request is
    kept: :func:`stop_requested`); anything else goes to the hook there was before."""
    if isinstance(unraisable.exc_value, StopWhileLoading):
        return
    _previous_hook(unraisable)


_previous_hook = sys.unraisablehook


def _leave(signum: int, frame: FrameType | None) -> None:
    global _requested
    _requested = True  # kept should the SystemExit below be raised where Python ignores it
    # A second signal while the interpreter shuts down (threading's, atexit's) must not
    # kill it (-15) nor raise again inside that shutdown: from here both are ignored.
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)
    raise StopWhileLoading(0)


def stop_quietly_until_started() -> None:
    """Make SIGINT and SIGTERM raise ``SystemExit(0)`` (:class:`StopWhileLoading`) until the process installs its own
    handlers (the worker's event loop, uvicorn's, ``curaflow dev``'s): ``finally`` blocks
    still run, so a child already started is still stopped. Call it first, before the
    heavy imports. Such a stop that Python ignores is never printed (module doc)."""
    global _previous_hook
    if sys.unraisablehook is not _unraisable:
        _previous_hook = sys.unraisablehook
        sys.unraisablehook = _unraisable
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _leave)


def stop_requested() -> bool:
    """Whether SIGINT or SIGTERM arrived while the process loaded its modules
    (:func:`stop_quietly_until_started`'s handler ran). Asked where the process takes the
    signals over: True means a stop whose ``SystemExit`` Python ignored (module doc) — the
    process leaves as that stop would have left it (status 0)."""
    return _requested
