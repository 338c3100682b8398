"""Whether a background loop's failure is a refusal of the process's configuration — the one
reading a running service process (worker, ``curaflow api``, ``curaflow dev``) hands its
:class:`~curaflow.observability.supervision.Supervisor`, which then exits 2, not 3
(docs/operations.md, "Exit status"), and says which setting to change.

The supervisor sits in the bottom layer and knows neither Temporal nor PostgreSQL; this
module, in the process's layer, puts the two services' own readings together (2026-12-07).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from temporalio.service import RPCError, RPCStatusCode

from curaflow.ledger.db import refused_login
from curaflow.temporal.answers import refused_configuration

#: The settings a refusal of Temporal's namespace is fixed in.
NAMESPACE_SETTING = "TEMPORAL_NAMESPACE / temporal.namespace"
#: The settings Temporal's refusal of this process's access is fixed in (its credentials,
#: read by ``temporalio.envconfig``, or the permissions they are granted on the server).
ACCESS_SETTING = "TEMPORAL_API_KEY, TEMPORAL_TLS_* or the temporal.toml profile (or the permissions they carry)"
#: The settings PostgreSQL's refusal of the login or the database is fixed in.
LEDGER_SETTING = "DATABASE_URL / database.url"


def refused_setting(error: BaseException) -> str | None:
    """The setting to change when ``error`` is a refusal no restart changes — Temporal's of
    this process's namespace (``NOT_FOUND`` with ``NamespaceNotFoundFailure``:
    :data:`NAMESPACE_SETTING`) or access (``PERMISSION_DENIED``, ``UNAUTHENTICATED``,
    ``UNIMPLEMENTED``: :data:`ACCESS_SETTING`) (:func:`curaflow.temporal.answers.refused_configuration`),
    PostgreSQL's of its login or database (SQLSTATE class 28, ``3D000``:
    :data:`LEDGER_SETTING`, :func:`curaflow.ledger.db.refused_login`); None for anything
    else (an outage, a refusal of one request, a bug). A namespace that exists but is not
    active on this cluster (``NamespaceNotActiveFailure``: a standby of a replicated
    namespace) is no refusal of the configuration: a failover makes it active where the
    process is, and Temporal asks for workers on every cluster (docs/operations.md)."""
    if refused_login(error):
        return LEDGER_SETTING
    if not refused_configuration(error):
        return None
    assert isinstance(error, RPCError)
    return NAMESPACE_SETTING if error.status == RPCStatusCode.NOT_FOUND else ACCESS_SETTING


def embedded_ledger_setting(pgdata: Path) -> str:
    """What a user of ``curaflow dev`` changes when its own PostgreSQL (data directory
    ``pgdata``, ``<state_dir>/pg``) refuses its login or database: that server's role or
    database — ``curaflow dev`` reads no ``DATABASE_URL`` and makes neither again at start
    (pgserver initialises a data directory only when it has none) — or, to start over, the
    data directory deleted, the ledger with it (what was delivered is forgotten)."""
    return (
        f"the PostgreSQL of {pgdata} (give its role postgres LOGIN again, create its database "
        f"postgres again), or delete {pgdata} to start over with an empty ledger"
    )


def embedded_refused_setting(pgdata: Path) -> Callable[[BaseException], str | None]:
    """:func:`refused_setting` for ``curaflow dev``, whose PostgreSQL is its own in
    ``pgdata``: a refusal of its login or database names :func:`embedded_ledger_setting`,
    not ``DATABASE_URL / database.url`` (a setting dev does not read; until 2026-12-08 its
    reason named it)."""
    ledger = embedded_ledger_setting(pgdata)

    def setting(error: BaseException) -> str | None:
        return ledger if refused_login(error) else refused_setting(error)

    return setting
