"""Whether a background loop's failure is a refusal of the process's configuration — the one
reading a running service process (worker, ``curaflow api``, ``curaflow dev``) hands its
:class:`~curaflow.observability.supervision.Supervisor`, which then exits 2, not 3
(docs/operations.md, "Exit status").

The supervisor sits in the bottom layer and knows neither Temporal nor PostgreSQL; this
module, in the process's layer, puts the two services' own readings together (2026-12-07).
"""

from __future__ import annotations

from curaflow.ledger.db import refused_login
from curaflow.temporal.answers import refused_configuration


def configuration_refused(error: BaseException) -> bool:
    """Whether ``error`` is a refusal no restart changes: Temporal's of this process's access
    or namespace (:func:`curaflow.temporal.answers.refused_configuration`: ``PERMISSION_DENIED``,
    ``UNAUTHENTICATED``, ``UNIMPLEMENTED``, a namespace's ``NOT_FOUND``) or PostgreSQL's of
    its login or database (:func:`curaflow.ledger.db.refused_login`: SQLSTATE class 28,
    ``3D000``)."""
    return refused_configuration(error) or refused_login(error)
