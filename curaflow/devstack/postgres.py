"""Embedded PostgreSQL for the ledger (the ``pgserver`` package; no download, no Docker).

The data directory lives in the state directory, so the ledger — and with it "never
deliver a work twice to one route" — survives between runs. The server listens on a
unix socket only; the URL carries the socket directory (``?host=/dir``).
"""

from __future__ import annotations

import logging
import warnings
from pathlib import Path
from typing import Any


class EmbeddedPostgres:
    """A PostgreSQL server on ``pgdata`` for this process's lifetime (or until :meth:`stop`).

    Args:
        pgdata: data directory (created and initialised on first use).
    """

    def __init__(self, pgdata: Path) -> None:
        self.pgdata = pgdata
        self._server: Any = None

    def start(self) -> str:
        """Start (or join) the server; returns its ``postgresql://`` URL.

        Raises:
            RuntimeError: the ``[embedded]`` extra (pgserver) is not installed.
        """
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                import pgserver
            except ImportError:
                raise RuntimeError(
                    "the embedded PostgreSQL (pgserver) is not installed: pip install 'curaflow[embedded]' "
                    "(or set DATABASE_URL and TEMPORAL_ADDRESS)"
                ) from None

        logging.getLogger("pgserver").setLevel(logging.WARNING)
        self.pgdata.parent.mkdir(parents=True, exist_ok=True)
        self._server = pgserver.get_server(self.pgdata, cleanup_mode="stop")
        return str(self._server.get_uri())

    def stop(self) -> None:
        """Release this process's handle; the server stops when no other process holds one."""
        if self._server is not None:
            self._server.cleanup()
            self._server = None
