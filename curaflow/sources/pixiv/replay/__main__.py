"""Serve the replay server on its own: ``python -m curaflow.sources.pixiv.replay --port 8300``.

Point ``pixiv.api_url`` (and ``pixiv.auth_url``) at it to share one replay server among
several workers, as the benchmark does.
"""

from __future__ import annotations

import argparse

import uvicorn

from curaflow.sources.pixiv.replay.app import create_replay_app


def main() -> None:
    """Parse ``--host``/``--port`` and serve until interrupted."""
    parser = argparse.ArgumentParser(
        prog="python -m curaflow.sources.pixiv.replay",
        description="Serve the recorded Pixiv app-api responses (and its login and token endpoint) until Ctrl-C.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default: %(default)s)")
    parser.add_argument("--port", type=int, default=8300, help="port to listen on (default: %(default)s)")
    args = parser.parse_args()
    print(f"Pixiv replay on http://{args.host}:{args.port} (Ctrl-C stops it)", flush=True)
    uvicorn.run(create_replay_app(), host=args.host, port=args.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
