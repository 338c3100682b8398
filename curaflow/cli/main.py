"""The ``curaflow`` console entry point; the commands are :mod:`curaflow.cli.app`'s.

This module imports nothing heavy: a service command (``worker``, ``api``, ``dev``) asked
to stop while the command line's modules load leaves with status 0
(:func:`curaflow.process.launch.stop_quietly_until_started`).
"""

from __future__ import annotations

import os
import sys

#: The commands that run a service until SIGINT/SIGTERM (docs/operations.md, "Exit status").
SERVICE_COMMANDS = ("worker", "api", "dev")


def main() -> None:
    """The console entry point: run the command, then leave without interpreter teardown.

    The Temporal client's native threads can outlive the event loop; tearing the
    interpreter down under them aborts the process ("PyGILState_Release: thread state
    must be current", exit -6) after the command already succeeded (temporalio/sdk-python
    issue 300). Every command closes what it opened before it returns, so its exit status
    is kept and the teardown skipped (output flushed first).
    """
    if len(sys.argv) > 1 and sys.argv[1] in SERVICE_COMMANDS:
        from curaflow.process.launch import stop_quietly_until_started

        stop_quietly_until_started()
    code = 0
    try:
        from curaflow.cli.app import app  # about a second of imports

        app()
    except SystemExit as done:
        if isinstance(done.code, str):
            print(done.code, file=sys.stderr)
        code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":  # pragma: no cover
    main()
