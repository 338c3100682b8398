"""A watchdog that ends a process when the embedded stack's process dies, however it dies.

``python -m curaflow.devstack.watchdog PARENT TARGET CREATED GRACE_S``: runs in a session
of its own (so a signal to the stack's process group — Ctrl-C, ``kill -- -PGID`` — does
not reach it) and is told by the kernel when PARENT dies (``PR_SET_PDEATHSIG``, set by
:func:`curaflow.devstack.processes.tie_to_this_process`). It then sends TARGET SIGINT
(PostgreSQL's fast shutdown: sessions rolled back and closed, a checkpoint, no recovery
at the next start) and SIGKILL after GRACE_S seconds.

Why a watchdog and not the signal on the target itself: the embedded PostgreSQL is
started by ``pg_ctl`` (``pgserver``), which detaches the postmaster — it is no child of
the stack, so the kernel's parent-death signal cannot be set on it. The parent-death
signal also fires when the *thread* that started the child exits, so the watchdog acts
only once its parent is really gone (its parent pid changed). TARGET is identified by
pid and creation time (a reused pid is never signalled).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time

import psutil

#: How often the watchdog checks its parent when no signal woke it, seconds.
POLL_S = 0.5


def same_process(pid: int, created: float) -> psutil.Process | None:
    """The process ``pid`` if it is the one created at ``created`` (epoch s), else None."""
    try:
        proc = psutil.Process(pid)
        return proc if abs(proc.create_time() - created) < 1.0 else None
    except psutil.Error:
        return None


def stop(pid: int, created: float, grace_s: float) -> None:
    """SIGINT the target, SIGKILL it after ``grace_s`` seconds."""
    proc = same_process(pid, created)
    if proc is None:
        return
    with contextlib.suppress(psutil.Error):
        proc.send_signal(signal.SIGINT)
        proc.wait(grace_s)
        return
    with contextlib.suppress(psutil.Error):
        proc.kill()


def main(argv: list[str]) -> int:
    """Wait until the parent is gone, then stop the target (see the module doc)."""
    parent, target, created, grace_s = int(argv[0]), int(argv[1]), float(argv[2]), float(argv[3])
    woken = [False]
    signal.signal(signal.SIGTERM, lambda *_: woken.__setitem__(0, True))
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while os.getppid() == parent:
        if same_process(target, created) is None:
            return 0  # stopped by the stack itself: nothing left to watch
        time.sleep(POLL_S)
    stop(target, created, grace_s)
    return 0


if __name__ == "__main__":  # pragma: no cover - a separate process
    sys.exit(main(sys.argv[1:]))
