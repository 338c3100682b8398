"""Whether a background loop's failure is a refusal of the process's configuration — the one
reading a running service process (worker, ``curaflow api``, ``curaflow dev``) hands its
:class:`~curaflow.observability.supervision.Supervisor`, which then exits 2, not 3
(docs/operations.md, "Exit status"), and says which setting to change.

The supervisor sits in the bottom layer and knows neither Temporal nor PostgreSQL; this
module, in the process's layer, puts the two services' own readings together (2026-12-07).
"""

from __future__ import annotations

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
