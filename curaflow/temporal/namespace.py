"""Make a Temporal namespace ready for curaflow: the namespace, its search attributes and
(``curaflow temporal-setup``, the embedded dev server) the Nexus endpoint of the jobs' service.

Run by every worker at start (:func:`curaflow.process.worker.run_worker`) and by the compose
stack's one-shot ``temporal-setup`` service (``curaflow temporal-setup``): the same code
on both paths, so ``TEMPORAL_NAMESPACE`` other than ``default`` works and a namespace
that cannot be prepared stops the process with a message instead of a worker that
silently polls nothing.

Idempotent: a namespace that exists is left as it is (its retention included: a
configured ``temporal.namespace_retention_days`` that differs from the namespace's is a
``temporal.retention_differs`` warning, never a change); a search attribute that exists
with the right type is left alone. Every write is verified by
reading back. It fails loudly (:class:`TemporalSetupError`, a ``RuntimeError``) when

* the namespace cannot be described or registered (permission denied, invalid name…);
* a search attribute exists with another type (``JobStatus`` as ``Text``): curaflow's
  filters would silently match nothing, so it is refused, never overwritten;
* the namespace or an attribute is still missing when ``timeout_s`` ends (the server
  unavailable, a namespace that never became visible).

Transient answers (Temporal's outage statuses — ``UNAVAILABLE``, ``DEADLINE_EXCEEDED``,
``RESOURCE_EXHAUSTED``, ``ABORTED`` — and a just-registered namespace not yet visible) are
retried with a short backoff until ``timeout_s``.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from dataclasses import dataclass, field
from datetime import timedelta

from google.protobuf.duration_pb2 import Duration
from temporalio.api.common.v1 import Payload
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.nexus.v1 import EndpointSpec, EndpointTarget
from temporalio.api.operatorservice.v1 import (
    AddSearchAttributesRequest,
    CreateNexusEndpointRequest,
    ListNexusEndpointsRequest,
    ListSearchAttributesRequest,
)
from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest, RegisterNamespaceRequest
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from curaflow.observability.logs import get_logger
from curaflow.temporal.answers import OUTAGE_STATUSES
from curaflow.temporal.connection import SEARCH_ATTRIBUTES

log = get_logger("curaflow.temporal.namespace")

#: What the setup waits out: Temporal's outage statuses (:data:`~curaflow.temporal.answers.OUTAGE_STATUSES`:
#: unavailable, a deadline, its rate limit — until 2026-12-07 ``RESOURCE_EXHAUSTED`` at start-up
#: exited the worker 2, "cannot start") and ``NOT_FOUND`` (a namespace just registered, not yet visible).
TRANSIENT = OUTAGE_STATUSES | {RPCStatusCode.NOT_FOUND}


class TemporalSetupError(RuntimeError):
    """The namespace or its search attributes could not be made ready; the message says why."""


@dataclass
class SetupReport:
    """What :func:`prepare_namespace` found and did.

    Attributes:
        namespace: the namespace.
        created_namespace: True when this call registered it.
        added_attributes: search attributes this call added.
        attributes: every curaflow search attribute, name → type name, as verified.
        retention: the namespace's retention of closed executions, as the server has it.
        warnings: what an operator should know (a retention other than the configured one,
            a Nexus endpoint that targets elsewhere or could not be created).
        nexus_endpoint / created_endpoint: the Nexus endpoint of the jobs' service, when
            one was asked for, and whether this call created it.
    """

    namespace: str
    created_namespace: bool = False
    nexus_endpoint: str | None = None
    created_endpoint: bool = False
    retention: timedelta | None = None
    warnings: list[str] = field(default_factory=list)
    added_attributes: list[str] = field(default_factory=list)
    attributes: dict[str, str] = field(default_factory=dict)


def _type_name(value: int) -> str:
    """``KeywordList`` for ``INDEXED_VALUE_TYPE_KEYWORD_LIST`` (the CLI's spelling)."""
    name = IndexedValueType.Name(IndexedValueType.ValueType(value)).removeprefix("INDEXED_VALUE_TYPE_")
    return name.title().replace("_", "")


async def _retrying(what: str, deadline: float, call):  # type: ignore[no-untyped-def]
    """Await ``call()`` until it succeeds, retrying transient RPC errors until ``deadline``."""
    delay = 0.2
    while True:
        try:
            return await call()
        except RPCError as err:
            if err.status not in TRANSIENT or time.monotonic() + delay > deadline:
                raise TemporalSetupError(
                    f"{what}: {err.status.name if err.status else 'error'}: {err.message}"
                ) from err
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)


async def ensure_namespace(client: Client, retention: timedelta, deadline: float) -> bool:
    """See :func:`describe_or_register`; returns only whether this call registered it."""
    created, _ = await describe_or_register(client, retention, deadline)
    return created


async def describe_or_register(client: Client, retention: timedelta, deadline: float) -> tuple[bool, timedelta | None]:
    """Register the client's namespace unless it exists, then wait until it is visible.

    Args:
        retention: the workflow execution retention of a namespace this call creates.
        deadline: ``time.monotonic()`` value after which it gives up.

    Returns:
        ``(created, retention)``: True when this call registered the namespace, and the
        namespace's retention as the server describes it.

    Raises:
        TemporalSetupError: it cannot be described or registered, or never became visible.
    """
    namespace = client.namespace
    service = client.workflow_service
    created = False
    delay = 0.2
    while True:  # exists? (waiting out a server that is not up yet)
        try:
            described = await service.describe_namespace(DescribeNamespaceRequest(namespace=namespace))
            return False, _retention_of(described)
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                break
            if err.status not in TRANSIENT or time.monotonic() + delay > deadline:
                raise TemporalSetupError(
                    f"cannot describe namespace {namespace!r}: {err.status.name if err.status else 'error'}: "
                    f"{err.message}"
                ) from err
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)
    request = RegisterNamespaceRequest(
        namespace=namespace,
        description="curaflow candidate-search jobs",
        workflow_execution_retention_period=Duration(seconds=int(retention.total_seconds())),
    )
    try:
        await _retrying(
            f"cannot register namespace {namespace!r}",
            deadline,
            lambda: service.register_namespace(request),
        )
        created = True
        log.info("temporal.namespace_registered", namespace=namespace, retention_days=retention.days)
    except TemporalSetupError as err:
        cause = err.__cause__
        if not (isinstance(cause, RPCError) and cause.status == RPCStatusCode.ALREADY_EXISTS):
            raise  # another process registering it at the same time is fine; anything else is not
    described = await _retrying(
        f"namespace {namespace!r} was registered but never became visible",
        deadline,
        lambda: service.describe_namespace(DescribeNamespaceRequest(namespace=namespace)),
    )
    return created, _retention_of(described)


def _retention_of(described: object) -> timedelta | None:
    """The retention of a ``DescribeNamespaceResponse`` (None when it has none)."""
    config = getattr(described, "config", None)
    if config is None or not config.HasField("workflow_execution_retention_ttl"):
        return None
    return timedelta(seconds=config.workflow_execution_retention_ttl.ToTimedelta().total_seconds())


async def ensure_search_attributes(client: Client, deadline: float) -> tuple[list[str], dict[str, str]]:
    """Add curaflow's missing search attributes to the client's namespace and verify all of them.

    Returns:
        ``(added, verified)``: the names this call added, and every curaflow attribute
        with its type name as the server lists it.

    Raises:
        TemporalSetupError: an attribute exists with another type, the server refused
            to add one, or they are not all listed by ``deadline``.
    """
    namespace = client.namespace
    operator = client.operator_service

    async def listed() -> dict[str, int]:
        answer = await _retrying(
            f"cannot list the search attributes of namespace {namespace!r}",
            deadline,
            lambda: operator.list_search_attributes(ListSearchAttributesRequest(namespace=namespace)),
        )
        return dict(answer.custom_attributes)

    current = await listed()
    wrong = {n: current[n] for n, t in SEARCH_ATTRIBUTES.items() if n in current and current[n] != t}
    if wrong:
        described = ", ".join(
            f"{n} is {_type_name(v)} (curaflow needs {_type_name(SEARCH_ATTRIBUTES[n])})" for n, v in wrong.items()
        )
        raise TemporalSetupError(
            f"search attributes of namespace {namespace!r} have the wrong type: {described}; "
            "remove them (temporal operator search-attribute remove) or use another namespace"
        )
    missing = {n: t for n, t in SEARCH_ATTRIBUTES.items() if n not in current}
    if missing:
        try:
            await _retrying(
                f"cannot add search attributes {sorted(missing)} to namespace {namespace!r}",
                deadline,
                lambda: operator.add_search_attributes(
                    AddSearchAttributesRequest(search_attributes=missing, namespace=namespace)
                ),
            )
        except TemporalSetupError as err:
            cause = err.__cause__
            if not (isinstance(cause, RPCError) and cause.status == RPCStatusCode.ALREADY_EXISTS):
                raise  # added concurrently by another process: verified below
        log.info("temporal.search_attributes_added", namespace=namespace, names=sorted(missing))
    while True:
        current = await listed()
        absent = [n for n in SEARCH_ATTRIBUTES if n not in current]
        if not absent:
            break
        if time.monotonic() > deadline:
            raise TemporalSetupError(f"search attributes {absent} never appeared in namespace {namespace!r}")
        await asyncio.sleep(0.5)
    wrong = {n: current[n] for n, t in SEARCH_ATTRIBUTES.items() if current[n] != t}
    if wrong:
        raise TemporalSetupError(f"search attributes of namespace {namespace!r} have the wrong type: {sorted(wrong)}")
    return sorted(missing), {n: _type_name(current[n]) for n in SEARCH_ATTRIBUTES}


def _days(value: timedelta, *, cli: bool = False) -> str:
    """``7 days`` (``168h`` for the CLI's ``--retention``)."""
    if cli:
        return f"{int(value.total_seconds() // 3600)}h"
    days = value.total_seconds() / 86400
    return f"{days:g} day{'s' if days != 1 else ''}"


async def ensure_nexus_endpoint(
    client: Client, name: str, *, task_queue: str, deadline: float
) -> tuple[bool, str | None]:
    """Create the Nexus endpoint ``name`` of the jobs' service unless it exists.

    The endpoint targets the client's namespace and ``task_queue`` (curaflow's main task
    queue, where every worker registers the service: :mod:`curaflow.jobs.nexus`); a
    caller in any namespace of the cluster reaches it by that name. Endpoints belong to
    the cluster, not to a namespace. An endpoint of that name that targets elsewhere is
    left as it is (never changed) and reported.

    Args:
        name: the endpoint's name (``temporal.nexus_endpoint``).
        task_queue: the target task queue.
        deadline: ``time.monotonic()`` value after which transient failures are not waited out.

    Returns:
        ``(created, warning)``: whether this call created it, and what an operator should
        know (it targets elsewhere, or it could not be created — Temporal Cloud creates
        endpoints through its own control plane, not the operator API).
    """
    operator = client.operator_service
    target = (client.namespace, task_queue)
    try:
        listed = await _retrying(
            f"cannot list Nexus endpoints ({name!r})",
            deadline,
            lambda: operator.list_nexus_endpoints(ListNexusEndpointsRequest(name=name)),
        )
    except TemporalSetupError as err:
        return False, f"Nexus endpoint {name!r} not checked: {err}"
    for endpoint in listed.endpoints:
        worker = endpoint.spec.target.worker
        if (worker.namespace, worker.task_queue) != target:
            return False, (
                f"Nexus endpoint {name!r} targets namespace {worker.namespace!r} task queue "
                f"{worker.task_queue!r}, not {target[0]!r} / {target[1]!r}: callers through it do not reach "
                f"these workers; fix it with `temporal operator nexus endpoint update --name {name} "
                f"--target-namespace {target[0]} --target-task-queue {target[1]}` or set temporal.nexus_endpoint"
            )
        return False, None
    request = CreateNexusEndpointRequest(
        spec=EndpointSpec(
            name=name,
            description=Payload(
                metadata={"encoding": b"json/plain"},
                data=json.dumps("curaflow jobs: start_job (a Task → its outcome), cancel_job").encode(),
            ),
            target=EndpointTarget(worker=EndpointTarget.Worker(namespace=target[0], task_queue=target[1])),
        )
    )
    try:
        await _retrying(
            f"cannot create Nexus endpoint {name!r}", deadline, lambda: operator.create_nexus_endpoint(request)
        )
    except TemporalSetupError as err:
        cause = err.__cause__
        if isinstance(cause, RPCError) and cause.status == RPCStatusCode.ALREADY_EXISTS:
            return False, None  # created concurrently by another process
        return (
            False,
            f"{err} (create it by hand: `temporal operator nexus endpoint create --name {name} "
            f"--target-namespace {target[0]} --target-task-queue {target[1]}`)",
        )
    log.info("temporal.nexus_endpoint_created", endpoint=name, namespace=target[0], task_queue=target[1])
    return True, None


#: The variable through which the embedded stack (``curaflow dev``, ``curaflow run``) tells
#: each worker process it starts the address of its own Temporal dev server
#: (:meth:`curaflow.devstack.stack.EmbeddedStack.worker_env`): :func:`embedded_server`.
EMBEDDED_SERVER_ENV = "CURAFLOW_EMBEDDED_TEMPORAL_ADDRESS"


def embedded_server(address: str | None) -> bool:
    """Whether ``address`` (the process's ``temporal.address``) is the embedded stack's dev
    server: the stack that started this process named it so (:data:`EMBEDDED_SERVER_ENV`).
    A process given another address — the variable inherited by a worker pointed elsewhere —
    is not on it."""
    return bool(address) and os.environ.get(EMBEDDED_SERVER_ENV, "").strip() == address


def retention_differs(namespace: str, actual: timedelta, configured: timedelta, *, address: str, embedded: bool) -> str:
    """The warning of a namespace keeping closed executions ``actual``, not the
    ``configured`` retention, with a fix that works where it is read.

    The one owner of the message, for ``curaflow temporal-setup``, the embedded stack and
    every worker (through :func:`prepare_namespace`). On a server curaflow does not own
    (``address``): the ``temporal operator`` command that changes it there, or the
    configuration of ``actual``. On the embedded dev server (``embedded``: the stack's own
    setup, and its workers — :func:`embedded_server`): the setting alone — the dev server
    registers its namespace keeping 1 day, and ``curaflow run``'s stops with the command,
    before its output is read (until 2026-12-07 the command named that stopped server's
    address: a newcomer's finding; the stack's workers logged it until later that day).
    ``temporal.namespace_retention_days`` is whole days: ``actual`` in other units is not
    offered as its value.
    """
    if not embedded:
        return (
            f"namespace {namespace!r} keeps closed executions {_days(actual)}, not the configured "
            f"{_days(configured)} (temporal.namespace_retention_days): curaflow never changes an existing "
            f"namespace; change it with `temporal operator namespace update --address {address} "
            f"--namespace {namespace} --retention {_days(configured, cli=True)}` or configure {_days(actual)}"
        )
    days = actual.total_seconds() / 86400
    value = f"{days:g}" if days.is_integer() and days >= 1 else "<days>"
    return (
        f"namespace {namespace!r} of the embedded Temporal dev server keeps closed executions {_days(actual)}, "
        f"not the configured {_days(configured)}: expected (the dev server registers it so; curaflow never "
        f"changes an existing namespace); to silence this, set temporal.namespace_retention_days = {value} "
        f"(or CURAFLOW_TEMPORAL__NAMESPACE_RETENTION_DAYS={value})"
    )


async def prepare_namespace(
    client: Client,
    *,
    retention: timedelta = timedelta(days=7),
    timeout_s: float = 60.0,
    nexus_endpoint: str | None = None,
    task_queue: str = "curaflow",
    embedded: bool = False,
) -> SetupReport:
    """Make the client's namespace ready for curaflow (see the module doc).

    Args:
        client: connected to the namespace to prepare.
        retention: retention of a namespace this call registers.
        timeout_s: how long transient failures are waited out.
        nexus_endpoint: also make sure the Nexus endpoint of that name targets this
            namespace and ``task_queue`` (:func:`ensure_nexus_endpoint`; a problem with it
            is a warning: jobs run without it). None: leave endpoints alone (workers).
        task_queue: curaflow's main task queue.
        embedded: the namespace is on the embedded Temporal dev server of this command
            (``curaflow dev``, ``curaflow run``): a retention other than ``retention`` is
            said with the setting that silences it, never a ``temporal operator`` command
            (:func:`retention_differs`).

    Raises:
        TemporalSetupError: with a message naming the namespace and what failed.
    """
    deadline = time.monotonic() + timeout_s
    created, actual = await describe_or_register(client, retention, deadline)
    added, verified = await ensure_search_attributes(client, deadline)
    report = SetupReport(
        namespace=client.namespace,
        created_namespace=created,
        added_attributes=added,
        attributes=verified,
        retention=actual,
    )
    if nexus_endpoint:
        report.nexus_endpoint = nexus_endpoint
        report.created_endpoint, problem = await ensure_nexus_endpoint(
            client, nexus_endpoint, task_queue=task_queue, deadline=deadline
        )
        if problem is not None:
            report.warnings.append(problem)
            log.warning("temporal.nexus_endpoint", endpoint=nexus_endpoint, message=problem)
    if actual is not None and actual != retention:
        message = retention_differs(
            client.namespace,
            actual,
            retention,
            address=client.service_client.config.target_host,
            embedded=embedded,
        )
        report.warnings.append(message)
        log.warning(
            "temporal.retention_differs",
            namespace=client.namespace,
            retention_s=int(actual.total_seconds()),
            configured_s=int(retention.total_seconds()),
            message=message,
        )
    log.info(
        "temporal.namespace_ready",
        namespace=report.namespace,
        created=report.created_namespace,
        added_search_attributes=report.added_attributes,
    )
    return report
