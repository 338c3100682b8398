"""Serve the replay server on its own: ``python -m curaflow.sources.pixiv.replay --port 8300``.

Point ``pixiv.api_url`` (and ``pixiv.auth_url``) at it to share one replay server among
several workers, as the benchmark does.
"""

from __future__ import annotations

import argparse
import sys

import uvicorn

from curaflow.observability.supervision import EXIT_CANNOT_START
from curaflow.process.httpserver import CannotListen, bind_socket
from curaflow.sources.pixiv.replay import DEFAULT_PORT
from curaflow.sources.pixiv.replay.app import create_replay_app


def main() -> None:
    """Parse ``--host``/``--port`` and serve until interrupted.

    The port is bound before anything is said (``curaflow api``'s rule): a taken one is one
    line naming ``--port`` and exit status 2 (:data:`EXIT_CANNOT_START`), the banner only
    once the server holds its port (until 2026-12-07 the banner, then uvicorn's
    ``[Errno 98]``, exit 3).
    """
    parser = argparse.ArgumentParser(
        prog="python -m curaflow.sources.pixiv.replay",
        description="Serve the recorded Pixiv app-api responses (and its login and token endpoint) until Ctrl-C.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default: %(default)s)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help="port to listen on (default: %(default)s)")
    args = parser.parse_args()
    try:
        sock = bind_socket(args.host, args.port)
    except CannotListen as err:
        print(f"{err}: pick another with --port{_usual_holder(args.port)}", file=sys.stderr, flush=True)
        sys.exit(EXIT_CANNOT_START)
    port = sock.getsockname()[1]  # the one picked for --port 0
    host = f"[{args.host}]" if ":" in args.host else args.host
    print(f"Pixiv replay on http://{host}:{port} (Ctrl-C stops it)", flush=True)
    config = uvicorn.Config(create_replay_app(), host=args.host, port=port, log_level="warning", access_log=False)
    uvicorn.Server(config).run(sockets=[sock])


def _usual_holder(port: int) -> str:
    """What usually holds ``port``, said after the advice: ``curaflow dev`` serves its own
    replay on :data:`~curaflow.sources.pixiv.replay.DEFAULT_PORT` (replay mode), nothing else here."""
    if port != DEFAULT_PORT:
        return ""
    return f" (`curaflow dev` serves its own replay on {port} by default, in replay mode: its workers need no other)"


if __name__ == "__main__":
    main()
