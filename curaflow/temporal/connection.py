"""Temporal client helpers: connect, register search attributes, start a job's workflow.

All clients use the pydantic data converter (DESIGN.md decision 11). A job's workflow is
started under the rule of :mod:`curaflow.temporal.job_runs`: conflict policy
``USE_EXISTING`` and reuse policy ``REJECT_DUPLICATE``, so the same job id always means
the same job and the same run (decision 1), starting twice is harmless, and an execution
that held no job (a refused Task, a stale input) never blocks the id.
"""

from __future__ import annotations

import functools
import types
import typing
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import TypeAdapter
from temporalio import nexus
from temporalio.api.common.v1 import Payload
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.failure.v1 import Failure
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest, ListSearchAttributesRequest
from temporalio.client import Client, WorkflowHandle
from temporalio.common import RawValue, WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.contrib.pydantic import PydanticJSONPlainPayloadConverter, PydanticPayloadConverter
from temporalio.converter import DataConverter, DefaultFailureConverter, PayloadConverter
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError

from curaflow.domain.execution import CUSTOM_SEARCH_ATTRIBUTES, JOB_TASK_TIMEOUT, execution_timeout, job_workflow
from curaflow.domain.messages import JobInput
from curaflow.domain.presentation import job_search_attributes, job_static_details, job_summary
from curaflow.observability.secrets import hold, redacted
from curaflow.protocol.json_text import AmbiguousObject, json_text_refusal
from curaflow.temporal.job_runs import JOB_ID_CONFLICT_POLICY, JobRunClosed, start_run
from curaflow.temporal.refusals import as_failure

if TYPE_CHECKING:
    from curaflow.temporal.profile import TemporalConnection


class ConfiguredTemporal(Protocol):
    """What :func:`connect_configured` reads of the settings (``curaflow.config.TemporalSettings``:
    the configured address and the resolved connection)."""

    address: str | None

    @property
    def connection(self) -> TemporalConnection:
        """TLS, API key, gRPC metadata and namespace (:mod:`curaflow.temporal.profile`)."""
        ...


def describe_service(address: str | None, namespace: str) -> str:
    """``HOST:PORT (namespace N)``: a Temporal service as messages name it."""
    return f"{address} (namespace {namespace})"


def temporal_refusal(err: RPCError, where: str) -> str:
    """One line for a request Temporal refused: ``Temporal at HOST:PORT (namespace N)
    refused the request: NOT_FOUND: Namespace x is not found.``"""
    status = err.status.name if err.status is not None else "error"
    return f"Temporal at {where} refused the request: {status}: {err.message}".replace("\n", " ")


class TemporalConnectError(RuntimeError):
    """A Temporal client could not connect; ``str()`` names the address and TLS options."""


#: Custom search attributes of every job (name → type), filterable in the Temporal UI:
#: :data:`curaflow.domain.execution.CUSTOM_SEARCH_ATTRIBUTES` as the operator service names them.
SEARCH_ATTRIBUTES: dict[str, IndexedValueType.ValueType] = {
    key.name: IndexedValueType.ValueType(int(key.indexed_value_type)) for key in CUSTOM_SEARCH_ATTRIBUTES
}
DEV_SERVER_FLAGS = {
    IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD: "Keyword",
    IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD_LIST: "KeywordList",
}


#: The encoding of JSON payloads (every SDK's, the CLI's ``--input``).
JSON_PLAIN = b"json/plain"


#: Type adapters shared by every :class:`InputPayloadConverter` of the process, for the
#: type hints :func:`process_wide` admits (at most this many).
SHARED_ADAPTERS = 256
_shared_adapters: Callable[[Any], TypeAdapter[Any]] = functools.lru_cache(maxsize=SHARED_ADAPTERS)(TypeAdapter)
#: The packages whose types are the same objects for the whole process — never re-imported
#: by the workflow sandbox (it passes ``curaflow`` through: ``curaflow.process.worker.sandbox_runner``).
PROCESS_WIDE_PACKAGES = frozenset({"builtins", "typing", "curaflow"})


def process_wide(hint: object) -> bool:
    """Whether a payload's type hint is one object for the whole process, so its
    ``TypeAdapter`` may be shared by every converter: ``Any`` (an untyped position), a
    type of :data:`PROCESS_WIDE_PACKAGES`, or a union of such types (``finish``'s
    ``JobState | FinishedElsewhere``: its adapter was built again by every run's converter,
    ~0.25 ms a job, until 2026-12-07). A type of a workflow's own module is not: the
    sandbox re-imports that module for every run, and a process-wide cache would hold each
    run's copy."""
    if hint is Any:
        return True
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return all(process_wide(member) for member in typing.get_args(hint))
    module = getattr(hint, "__module__", None) if isinstance(hint, type) else None
    return isinstance(module, str) and module.split(".", 1)[0] in PROCESS_WIDE_PACKAGES


class InputPayloadConverter(PydanticPayloadConverter):
    """The pydantic payload converter, except that an *untyped* payload it cannot decode
    stays a :class:`~temporalio.common.RawValue` instead of failing.

    Untyped positions are those of a handler without type hints — ``JobWorkflow``'s
    ``*args`` input: any SDK or the ``temporal`` CLI may start it with no argument, two, or
    a payload in an encoding nobody here knows (``--input-meta encoding=…``). Failing the
    decode there would fail the workflow task for ever (the SDK's "Failed decoding
    arguments"); kept raw, the workflow refuses it as ``invalid_params`` and ends
    (DESIGN.md decision 14). Typed positions (every activity and every other handler)
    decode exactly as :data:`temporalio.contrib.pydantic.pydantic_data_converter` does.

    Kept raw is only what says the payload is not readable: an encoding no converter here
    reads, the SDK's decode error (``RuntimeError``: a ``binary/null`` with data, a
    protobuf payload naming no known type) and pydantic's ``ValidationError`` (JSON that
    does not parse). Any other exception is a bug and is raised — it fails the workflow
    task instead of refusing the client's input (until 2026-12-06 every exception was
    kept raw, so a bug refused each Task as "request body must be a JSON object").

    An untyped ``json/plain`` object is also read as ``POST /jobs`` reads its body
    (:func:`curaflow.protocol.json_text.parse_json`): one whose text has no one meaning —
    a member twice, ``NaN`` / ``Infinity``, ``1e400`` — comes back as an
    :class:`~curaflow.protocol.json_text.AmbiguousObject` (the pydantic reading, with the
    refusal), which the workflow's Task inputs refuse (``workflows.job.ONE_MEANING``), and
    so do the push run's and the trampoline's start
    (:func:`curaflow.domain.workflow_input.read_one_input`, since 2026-12-07);
    before 2026-12-07 it was the pydantic reading alone, and a Task ``POST /jobs``
    refuses was admitted under its last member or with a limit of ``inf``.

    A Nexus operation's input (typed: the operations of :mod:`curaflow.temporal.nexus_service`)
    is its caller's JSON text as much as a start's: decoded inside an operation
    (``temporalio.nexus.in_operation()``, set by the SDK before it decodes the input), a
    ``json/plain`` payload whose text ``POST /jobs`` refuses — a member twice, ``NaN``,
    ``1e400``, not UTF-8, not JSON — raises that refusal (:func:`refuse_unreadable_text`),
    which the SDK answers as a non-retryable ``BAD_REQUEST`` handler error caused by it:
    the caller reads the protocol code with :func:`curaflow.temporal.refusals.refusal_of`,
    nothing is admitted or cancelled. Before 2026-12-07 the SDK's decoder took one reading
    of it: ``start_job`` admitted and ran ``"limit":1,"limit":2`` with limit 2, and a
    ``cancel_job`` of ``{"job_id":"a","job_id":"b"}`` cancelled job ``b``.
    """

    def __init__(self) -> None:
        """The SDK's converters; the ``json/plain`` one takes the type adapters of
        :func:`process_wide` hints from one cache of the process.

        The SDK builds a payload converter for every workflow run and every workflow
        activation, each with an empty cache of type adapters: a job's untyped input
        (``JobWorkflow``'s ``*args``, read as ``Any``) built ``TypeAdapter(Any)`` once a
        job, ~0.19 ms of the worker's CPU (2026-12-07, docs/performance.md). Hints of other
        modules stay in the converter's own cache, as before."""
        super().__init__()
        plain = self.converters.get(JSON_PLAIN)
        own = getattr(plain, "_type_adapter", None)
        if isinstance(plain, PydanticJSONPlainPayloadConverter) and callable(own):
            plain._type_adapter = _shared_first(own)  # type: ignore[assignment]

    def from_payloads(self, payloads: Sequence[Payload], type_hints: list[type] | None = None) -> list[Any]:
        """See :meth:`temporalio.converter.PayloadConverter.from_payloads`; untyped
        payloads that do not decode come back as ``RawValue``.

        Raises:
            temporalio.exceptions.ApplicationError: inside a Nexus operation, the refusal
                of a ``json/plain`` input whose text has no one meaning
                (:func:`refuse_unreadable_text`).
        """
        if type_hints is not None:
            if nexus.in_operation():
                refuse_unreadable_text(payloads)
            return super().from_payloads(payloads, type_hints)
        values: list[Any] = []
        for payload in payloads:
            if payload.metadata.get("encoding") not in self.converters:
                values.append(RawValue(payload))
                continue
            try:
                [value] = super().from_payloads([payload])
            except (RuntimeError, ValueError):  # the SDK's decode error, pydantic's ValidationError
                value = RawValue(payload)
            if isinstance(value, dict) and payload.metadata.get("encoding") == JSON_PLAIN:
                refused = json_text_refusal(payload.data)
                if refused is not None:
                    value = AmbiguousObject(value, refused)
            values.append(value)
        return values


def _shared_first(own: Callable[[Any], TypeAdapter[Any]]) -> Callable[[Any], TypeAdapter[Any]]:
    """A converter's type adapter lookup: the process's cache for a :func:`process_wide`
    hint, ``own`` (the converter's cache) for any other. Raises ``TypeError`` for an
    unhashable hint, as the SDK's cache does (it then builds an adapter uncached)."""

    def adapter(hint: Any) -> TypeAdapter[Any]:
        return _shared_adapters(hint) if process_wide(hint) else own(hint)

    return adapter


def refuse_unreadable_text(payloads: Sequence[Payload]) -> None:
    """Refuse a ``json/plain`` payload whose text ``POST /jobs`` would refuse as a body
    (:func:`curaflow.protocol.json_text.parse_json`: a member twice, ``NaN`` /
    ``Infinity``, ``1e400``, not UTF-8, not JSON). Other encodings are left to the
    decoder.

    Raises:
        temporalio.exceptions.ApplicationError: the refusal, non-retryable, ``type``
            ``invalid_params`` (:func:`curaflow.temporal.refusals.as_failure`).
    """
    for payload in payloads:
        if payload.metadata.get("encoding") == JSON_PLAIN and (refused := json_text_refusal(payload.data)):
            raise as_failure(refused)


class SecretsMaskedFailureConverter(DefaultFailureConverter):
    """Temporal's failure converter, every message and stack trace of the failure and of
    each of its causes without the secrets this process holds
    (:func:`curaflow.observability.secrets.redacted`).

    What an activity (or a workflow) raises reaches Temporal's history with the chain of
    exceptions it was raised from, each cause's message whole — a library's exception
    quoting the URL it requested, a route kind's token in its query string, under
    curaflow's words that named only its type (2026-12-07,
    ``tests/unit/test_secrets_unwritten.py``, failed first). Reading a failure back
    (``from_failure``) is Temporal's own.
    """

    def to_failure(self, exception: BaseException, payload_converter: PayloadConverter, failure: Failure) -> None:
        """See Temporal's :meth:`DefaultFailureConverter.to_failure`; then masks the secrets,
        and fits an expected failure into :data:`FAILURE_BYTES` (:func:`fit_failure`)."""
        super().to_failure(exception, payload_converter, failure)
        each: Failure | None = failure
        while each is not None and each.ByteSize():
            each.message = redacted(each.message)
            each.stack_trace = redacted(each.stack_trace)
            each = each.cause if each.HasField("cause") else None
        if isinstance(exception, ApplicationError):
            fit_failure(failure)


#: The most an expected failure (an ``ApplicationError``) takes once encoded, bytes: Temporal
#: keeps a retrying activity's last failure — what its UI and ``describe`` show of the
#: attempt, and `curaflow run`'s retry line — only up to
#: ``limit.mutableStateActivityFailureSizeLimitError`` (4 KiB by default, a warning past
#: 2 KiB), and shows a larger one as "Failure exceeds size limit.". A search that could not
#: reach Pixiv encoded 4.8 KB with its causes' stack traces (httpx's, httpcore's, the
#: socket's) until 2026-12-07 (``tests/unit/test_failure_size.py``).
FAILURE_BYTES = 2048

#: The longest message of a failure or of one of its causes once :func:`fit_failure` cuts
#: (characters; a cut one ends with "…").
FAILURE_MESSAGE_CHARS = 1000

#: What stands for the stack traces :func:`fit_failure` left out.
TRACE_LEFT_OUT = "(stack traces left out to fit Temporal's failure size limit; the worker's log has them)"


def fit_failure(failure: Failure) -> None:
    """Fit an encoded failure into :data:`FAILURE_BYTES`, in place, leaving out first what
    an operator needs least: its causes' stack traces, then each message past
    :data:`FAILURE_MESSAGE_CHARS`, then its own stack trace, then its causes from the
    deepest. Its type, retry flags, delay and details (what the workflow reads) are never
    touched. A failure that fits is left as it is.

    Owner of the size of what curaflow hands Temporal as a failure (2026-12-07); only
    expected failures come here (:class:`SecretsMaskedFailureConverter`): a bug's trace is
    what finds it, and its last attempt's event in the history keeps it whole.
    """
    chain: list[Failure] = []
    each: Failure | None = failure
    while each is not None:
        chain.append(each)
        each = each.cause if each.HasField("cause") else None
    if failure.ByteSize() <= FAILURE_BYTES:
        return
    for cause in chain[1:]:
        cause.stack_trace = ""
    failure.stack_trace = f"{failure.stack_trace.rstrip()}\n{TRACE_LEFT_OUT}" if failure.stack_trace else TRACE_LEFT_OUT
    for one in chain:
        if failure.ByteSize() <= FAILURE_BYTES:
            return
        if len(one.message) > FAILURE_MESSAGE_CHARS:
            one.message = one.message[:FAILURE_MESSAGE_CHARS] + "…"
    if failure.ByteSize() > FAILURE_BYTES:
        failure.stack_trace = TRACE_LEFT_OUT
    for parent in reversed(chain[:-1]):
        if failure.ByteSize() <= FAILURE_BYTES:
            return
        parent.ClearField("cause")


#: The data converter of every curaflow client and worker: pydantic (DESIGN.md decision
#: 11) with :class:`InputPayloadConverter`, and failures without the process's secrets
#: (:class:`SecretsMaskedFailureConverter`).
DATA_CONVERTER = DataConverter(
    payload_converter_class=InputPayloadConverter, failure_converter_class=SecretsMaskedFailureConverter
)


def dev_server_search_attribute_args() -> list[str]:
    """``--search-attribute Name=Type`` arguments for ``temporal server start-dev``."""
    args: list[str] = []
    for name, kind in SEARCH_ATTRIBUTES.items():
        args += ["--search-attribute", f"{name}={DEV_SERVER_FLAGS[kind]}"]
    return args


async def connect(
    address: str, namespace: str = "default", *, runtime: Any = None, connection: TemporalConnection | None = None
) -> Client:
    """Connect a Temporal client with the pydantic data converter.

    The client carries the process's tracing interceptor when tracing is enabled
    (:func:`curaflow.observability.tracing.setup_tracing`).

    Args:
        address: ``host:port`` of the frontend.
        namespace: used when ``connection`` is None.
        runtime: a Temporal ``Runtime`` (worker processes exporting SDK metrics); None →
            the default runtime.
        connection: TLS, API key, gRPC metadata and namespace (the process's resolved
            environment configuration, ``settings.temporal.connection``); None → plain.

    Raises:
        TemporalConnectError: the server is unreachable or refused the connection (TLS
            handshake, a client certificate required, an API key refused); the message
            names the address and the TLS options, never a secret.
    """
    from curaflow.observability.tracing import client_interceptors

    options = connection.connect_kwargs() if connection is not None else {"namespace": namespace}
    hold(options.get("api_key"))  # masked wherever a library's words quote it
    try:
        return await Client.connect(
            address,
            data_converter=DATA_CONVERTER,
            interceptors=client_interceptors(),
            runtime=runtime,
            **options,
        )
    except RuntimeError as err:
        described = connection.describe() if connection is not None else "tls=off"
        hint = refusal_hint(str(err), described)
        raise TemporalConnectError(
            f"cannot reach Temporal at {address} ({described}): {err}" + (f" — {hint}" if hint else "")
        ) from err


#: What a refused TLS connection most likely means, by what the SDK's error says.
_RESET = ("connectionreset", "connection reset", "connection closed", "broken pipe", "unexpected eof", "handshake")
_UNTRUSTED = ("unknownissuer", "unknown issuer", "invalidcertificate", "certificate verify", "badcertificate")


def refusal_hint(error: str, described: str) -> str | None:
    """A sentence saying what a refused connection most likely means (None when nothing
    useful can be said). A server that requires a client certificate resets the
    connection during the TLS handshake, which the SDK reports as ``ConnectionReset`` or, when
    the reset lands after the transport connected, as a cancelled call on a "connection closed".

    Args:
        error: the SDK's error text.
        described: :meth:`~curaflow.temporal.profile.TemporalConnection.describe`'s words.
    """
    text = error.lower().replace(" ", "")
    spaced = error.lower()
    if "tls=on" in described and any(word.replace(" ", "") in text for word in _UNTRUSTED):
        return (
            "the server's certificate is not signed by a CA this client trusts "
            "(TEMPORAL_TLS_SERVER_CA_CERT_PATH, or server_ca_cert in the profile)"
        )
    if "tls=on" in described and any(word.replace(" ", "") in text or word in spaced for word in _RESET):
        if "mtls=off" in described:
            return (
                "the server closed the connection during the TLS handshake: it probably requires a client "
                "certificate (TEMPORAL_TLS_CLIENT_CERT_PATH and TEMPORAL_TLS_CLIENT_KEY_PATH, or the profile's)"
            )
        return (
            "the server closed the connection during the TLS handshake: it probably does not accept this "
            "client certificate (signed by another CA than the one it trusts?)"
        )
    if "tls=off" in described and any(word in spaced for word in _RESET):
        return "the server closed the connection: does it expect TLS (TEMPORAL_TLS=true)?"
    return None


async def connect_configured(temporal: ConfiguredTemporal, *, runtime: Any = None) -> Client:
    """Connect to the Temporal service of the settings (``temporal.address``, with the TLS,
    API key and namespace of the environment configuration, :mod:`curaflow.temporal.profile`).

    Raises:
        TemporalConnectError: no address is configured, or :func:`connect` failed.
    """
    if not temporal.address:
        raise TemporalConnectError("no Temporal address: set TEMPORAL_ADDRESS (or temporal.address, or a profile)")
    return await connect(temporal.address, runtime=runtime, connection=temporal.connection)


async def ensure_search_attributes(client: Client) -> list[str]:
    """Register any missing custom search attribute on the client's namespace.

    Returns:
        The names this call added.
    """
    namespace = client.namespace
    listed = await client.operator_service.list_search_attributes(ListSearchAttributesRequest(namespace=namespace))
    missing = {n: t for n, t in SEARCH_ATTRIBUTES.items() if n not in listed.custom_attributes}
    if missing:
        try:
            await client.operator_service.add_search_attributes(
                AddSearchAttributesRequest(search_attributes=missing, namespace=namespace)
            )
        except RPCError as err:
            if "already exists" not in str(err).lower():
                raise
    return sorted(missing)


def job_start_options(inp: JobInput, task_queue: str) -> dict[str, Any]:
    """The options of a start of an admitted job's workflow (every start but the policies,
    which :func:`curaflow.temporal.job_runs.start_run` gives): its id, queue, timeouts,
    search attributes, summary and details."""
    return {
        "id": inp.job_id,
        "task_queue": task_queue,
        "id_conflict_policy": JOB_ID_CONFLICT_POLICY,
        "execution_timeout": execution_timeout(inp.created_at_ms, inp.deadline_at_ms),
        "task_timeout": JOB_TASK_TIMEOUT,
        "search_attributes": job_search_attributes(inp),
        "static_summary": job_summary(inp),
        "static_details": job_static_details(inp),
    }


async def start_job_workflow(client: Client, inp: JobInput, task_queue: str) -> WorkflowHandle[object, object]:
    """Start the job's workflow, or attach to its run (open, or closed: then nothing starts).

    Args:
        inp: the workflow argument (``job_id`` is the workflow id; ``job_type`` names the
            workflow type, :func:`curaflow.domain.execution.job_workflow`).
        task_queue: the main task queue.

    Returns:
        The handle of the job's run (the one started, attached to, or closed).

    Raises:
        curaflow.domain.execution.UnknownJobType: a job type curaflow does not run.
    """

    async def start(reuse: WorkflowIDReusePolicy, conflict: WorkflowIDConflictPolicy) -> WorkflowHandle[object, object]:
        options = {**job_start_options(inp, task_queue), "id_conflict_policy": conflict}
        return await client.start_workflow(job_workflow(inp.job_type), inp, id_reuse_policy=reuse, **options)

    try:
        return await start_run(client, inp.job_id, start)
    except JobRunClosed as closed:
        return client.get_workflow_handle(inp.job_id, run_id=closed.run_id)
