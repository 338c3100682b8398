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

    An exception no command caught is printed as Python prints it — its traceback — with
    every secret the process holds masked (:func:`curaflow.observability.console.print_text`:
    a library's words quote the URL or the header it was given; until 2026-12-07 they were
    printed whole), and the status is 1.
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
            from curaflow.observability.console import print_text

            print_text(done.code, err=True)
        code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    except Exception:  # noqa: BLE001 - a bug: its traceback shows where, as Python's would, masked
        import traceback

        from curaflow.observability.console import print_text

        print_text(traceback.format_exc(), err=True, end="")
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":  # pragma: no cover
    main()
