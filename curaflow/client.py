"""A typed async client of the curaflow job API (Workflow Protocol v1), on httpx.

Every call returns the pydantic models of :mod:`curaflow.protocol.models` and every
refusal raises an exception: one class per protocol error code (:data:`ERROR_CLASSES`,
all subclasses of :class:`ProtocolRefusal`), :class:`UnauthorizedError` for the
legacy-shaped authentication refusals (401 / 503), :class:`ApiUnreachable` when the API
cannot be reached and :class:`UnexpectedResponse` for anything else. Consumers branch on
the class (or ``err.code``), never on messages.

Example::

    async with CuraflowClient("http://127.0.0.1:8080", token) as api:
        submission = await api.submit(candidate_search_task("order-42", tags=["風景"]))
        async for event in api.follow(submission.job.job_id, ack=True):
            print(event.type)
        job = await api.get_job(submission.job.job_id)
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel, ValidationError

from curaflow.protocol import models
from curaflow.protocol.connections import CLIENT_KEEP_ALIVE_S
from curaflow.protocol.projection import job_path

M = TypeVar("M", bound=BaseModel)
DEFAULT_WAIT_MS = 25_000


class CuraflowError(Exception):
    """Base of every error this client raises."""


class ApiUnreachable(CuraflowError):
    """The API could not be reached (connection refused, timeout, TLS …)."""


class UnexpectedResponse(CuraflowError):
    """The API answered something that is not a protocol shape.

    Attributes:
        http_status: the answer's status.
        text: the start of the answer's body.
    """

    def __init__(self, http_status: int, text: str) -> None:
        super().__init__(f"unexpected answer {http_status}: {text[:300]}")
        self.http_status = http_status
        self.text = text


class UnauthorizedError(CuraflowError):
    """The API refused the bearer token (401 ``unauthorized``) or has none configured
    (503 ``endpoint disabled: token not configured``): the legacy ``{status, error}`` shape.

    Attributes:
        http_status: 401 or 503.
        text: the ``error`` text.
    """

    def __init__(self, http_status: int, text: str) -> None:
        super().__init__(f"{http_status} {text}")
        self.http_status = http_status
        self.text = text

    @property
    def endpoint_disabled(self) -> bool:
        """True when the API has no token configured (fail closed)."""
        return self.http_status == 503


class ProtocolRefusal(CuraflowError):
    """A protocol ``Error``: raised for a refused request, or built from a job's ``error``.

    Attributes:
        code: the protocol error code (the class tells it too).
        error: the whole ``Error`` model (``message``, ``retryable``, ``detail``).
        http_status: the HTTP status, or None for a job's error.
    """

    code = "internal_error"

    def __init__(self, error: models.Error, http_status: int | None = None) -> None:
        super().__init__(f"{error.code}: {error.message or ''}".rstrip(": "))
        self.error = error
        self.http_status = http_status

    @property
    def retryable(self) -> bool:
        """The error's ``retryable`` flag."""
        return self.error.retryable

    @property
    def detail(self) -> dict[str, Any]:
        """``error.detail`` (empty when absent)."""
        return dict(self.error.detail or {})


class NoCandidateError(ProtocolRefusal):
    """``no_candidate``: the search finished with nothing acceptable."""

    code = "no_candidate"


class SourceError(ProtocolRefusal):
    """``source_error``: an upstream (the source's) network, HTTP, download or metadata failure."""

    code = "source_error"


class AuthError(ProtocolRefusal):
    """``auth_error``: upstream credentials are invalid; an operator must act."""

    code = "auth_error"


class QuotaExceededError(ProtocolRefusal):
    """``quota_exceeded``: rate-limited upstream; back off."""

    code = "quota_exceeded"


class ResourceBusyError(ProtocolRefusal):
    """``resource_busy``: could not start because of contention."""

    code = "resource_busy"


class QueuedTooLongError(ProtocolRefusal):
    """``queued_too_long``: admitted but never started within the queued budget."""

    code = "queued_too_long"


class StalledNoProgressError(ProtocolRefusal):
    """``stalled_no_progress``: started, then no progress (heartbeat) within the stall budget."""

    code = "stalled_no_progress"


class DeadlineExceededError(ProtocolRefusal):
    """``deadline_exceeded``: the job ran past its deadline."""

    code = "deadline_exceeded"


class CancelledByConsumerError(ProtocolRefusal):
    """``cancelled_by_consumer``: the consumer cancelled the job."""

    code = "cancelled_by_consumer"


class IdempotencyConflictError(ProtocolRefusal):
    """``idempotency_conflict`` (409): the key was used with different params, or differs from
    another key only in case."""

    code = "idempotency_conflict"


class UnsupportedProtocolVersionError(ProtocolRefusal):
    """``unsupported_protocol_version``: protocol_version is not "1" (400)."""

    code = "unsupported_protocol_version"


class InvalidParamsError(ProtocolRefusal):
    """``invalid_params``: a bad request (400); an unknown job or target (404); an ambiguous
    target (409); a body over the size limit (413)."""

    code = "invalid_params"


class DeliveryFailedError(ProtocolRefusal):
    """``delivery_failed``: the result was produced but handing it to a route failed."""

    code = "delivery_failed"


class DeliveryRejectedError(ProtocolRefusal):
    """``delivery_rejected``: a route rejected the content."""

    code = "delivery_rejected"


class DeliveryAbandonedError(ProtocolRefusal):
    """``delivery_abandoned``: no delivery attempt was left."""

    code = "delivery_abandoned"


class InternalError(ProtocolRefusal):
    """``internal_error``: unclassifiable (500 on a request)."""

    code = "internal_error"


#: protocol error code → its exception class.
ERROR_CLASSES: dict[str, type[ProtocolRefusal]] = {
    "no_candidate": NoCandidateError,
    "source_error": SourceError,
    "auth_error": AuthError,
    "quota_exceeded": QuotaExceededError,
    "resource_busy": ResourceBusyError,
    "queued_too_long": QueuedTooLongError,
    "stalled_no_progress": StalledNoProgressError,
    "deadline_exceeded": DeadlineExceededError,
    "cancelled_by_consumer": CancelledByConsumerError,
    "idempotency_conflict": IdempotencyConflictError,
    "unsupported_protocol_version": UnsupportedProtocolVersionError,
    "invalid_params": InvalidParamsError,
    "delivery_failed": DeliveryFailedError,
    "delivery_rejected": DeliveryRejectedError,
    "delivery_abandoned": DeliveryAbandonedError,
    "internal_error": InternalError,
}


def refusal_for(error: models.Error, http_status: int | None = None) -> ProtocolRefusal:
    """The exception of ``error``'s code (an unknown code gives a plain :class:`ProtocolRefusal`)."""
    cls = ERROR_CLASSES.get(error.code, ProtocolRefusal)
    return cls(error, http_status)


def job_error(job: models.Job) -> ProtocolRefusal | None:
    """The exception describing a failed / cancelled / expired job's ``error``, else None."""
    return refusal_for(job.error) if job.error is not None else None


@dataclass
class Submission:
    """Answer of :meth:`CuraflowClient.submit`.

    Attributes:
        job: the job (the first admission's body on a replay).
        replayed: False for a first admission (202), True for a replay (200).
    """

    job: models.Job
    replayed: bool


def candidate_search_task(
    idempotency_key: str,
    *,
    tags: list[str] | None = None,
    target_id: str | None = None,
    expand: bool | None = None,
    exclude_work_ids: list[str] | None = None,
    correlation_id: str | None = None,
    callback_url: str | None = None,
    deadline_ms: int | None = None,
    labels: dict[str, str] | None = None,
) -> models.Task:
    """Build a ``candidate_search`` Task.

    With ``target_id`` and no ``tags`` the target runs as configured (protocol v1.1). The
    Task is built as given, not checked here: the API applies the rules of
    :class:`~curaflow.protocol.models.Task` and refuses with the protocol's error
    (:class:`InvalidParamsError` …), whoever built the request.
    """
    query = models.TaskQuery.model_construct(tags=list(tags), expand=expand) if tags else None
    constraints = (
        models.TaskConstraints.model_construct(
            exclude=[models.TaskExclude.model_construct(kind="work", id=w) for w in exclude_work_ids]
        )
        if exclude_work_ids
        else None
    )
    params = models.CandidateSearchParams.model_construct(target_id=target_id, query=query, constraints=constraints)
    return models.Task.model_construct(
        protocol_version="1",
        job_type="candidate_search",
        idempotency_key=idempotency_key,
        correlation_id=correlation_id,
        callback_url=callback_url,
        deadline_ms=deadline_ms,
        labels=labels,
        params=params,
    )


def shown_url(url: str) -> str:
    """``url`` as an error may say it: without its user information (a user and a password
    a proxy's HTTP Basic asks for), which the exception a caller logs must never carry
    (2026-12-07: ``cannot reach http://user:password@…``, ``tests/unit/test_client_url_unsaid.py``).
    A text httpx cannot read as a URL is named "the API's URL"."""
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError, ValueError):
        return "the API's URL"
    return str(parsed.copy_with(userinfo=b"")) if parsed.userinfo else url


class CuraflowClient:
    """Async client of one curaflow API.

    Args:
        base_url: e.g. ``http://127.0.0.1:8080``.
        token: the bearer token (``CURAFLOW_API_TOKEN``); None sends no header.
        timeout_s: timeout of ordinary requests, seconds (long polls add their wait).
        headers: extra headers on every request (e.g. ``X-Schedule-Attempt-Id``).
        http: an ``httpx.AsyncClient`` to use (not closed by :meth:`aclose`).
    """

    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        *,
        timeout_s: float = 30.0,
        headers: Mapping[str, str] | None = None,
        http: httpx.AsyncClient | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s
        self._headers = dict(headers or {})
        if token:
            self._headers["Authorization"] = f"Bearer {token}"
        self._own_http = http is None
        # An idle connection let go well before the API closes it (CLIENT_KEEP_ALIVE_S):
        # a request sent as the server closes one reads a connection error, unanswered.
        self._http = http or httpx.AsyncClient(
            timeout=timeout_s, limits=httpx.Limits(keepalive_expiry=CLIENT_KEEP_ALIVE_S)
        )

    async def __aenter__(self) -> CuraflowClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the HTTP client (when this client created it)."""
        if self._own_http:
            await self._http.aclose()

    # ---- plumbing ---------------------------------------------------------------------

    async def _call(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Mapping[str, Any] | None = None,
        timeout_s: float | None = None,
    ) -> httpx.Response:
        try:
            response = await self._http.request(
                method,
                self.base_url + path,
                json=json,
                params={k: v for k, v in (params or {}).items() if v is not None},
                headers=self._headers,
                timeout=timeout_s or self.timeout_s,
            )
        except httpx.HTTPError as err:
            raise ApiUnreachable(f"cannot reach {shown_url(self.base_url)}: {type(err).__name__}: {err}") from err
        if response.status_code < 400:
            return response
        try:
            body = response.json()
        except ValueError:
            body = None
        if isinstance(body, dict):
            if response.status_code in (401, 503) and body.get("status") == "error":
                raise UnauthorizedError(response.status_code, str(body.get("error", "")))
            error = body.get("error")
            if isinstance(error, dict):
                try:
                    raise refusal_for(models.Error.model_validate(error), response.status_code)
                except ValidationError:
                    pass
        raise UnexpectedResponse(response.status_code, response.text)

    @staticmethod
    def _parse(model: type[M], response: httpx.Response) -> M:
        try:
            return model.model_validate(response.json())
        except (ValueError, ValidationError) as err:
            raise UnexpectedResponse(response.status_code, response.text) from err

    # ---- the API ----------------------------------------------------------------------

    async def health(self) -> models.Health:
        """``GET /health`` (no authentication needed)."""
        return self._parse(models.Health, await self._call("GET", "/health"))

    async def capabilities(self) -> models.Capabilities:
        """``GET /capabilities``: job types, features and the live budgets."""
        return self._parse(models.Capabilities, await self._call("GET", "/capabilities"))

    async def submit(self, task: models.Task | Mapping[str, Any]) -> Submission:
        """``POST /jobs``: admit a Task (see :func:`candidate_search_task`).

        Raises:
            InvalidParamsError, UnsupportedProtocolVersionError, IdempotencyConflictError
            (and the other :class:`CuraflowError` s).
        """
        body = task.model_dump(mode="json", exclude_none=True) if isinstance(task, BaseModel) else dict(task)
        response = await self._call("POST", "/jobs", json=body)
        envelope = self._parse(models.JobEnvelope, response)
        return Submission(job=envelope.job, replayed=response.status_code == 200)

    async def get_job(self, job_id: str) -> models.Job:
        """``GET /jobs/{job_id}``.

        Raises:
            InvalidParamsError: (404) unknown job.
        """
        return self._parse(models.Job, await self._call("GET", job_path(job_id)))

    async def find_job(self, idempotency_key: str) -> models.Job | None:
        """``GET /jobs?idempotency_key=``: the job owning the key (exact match), or None."""
        page = self._parse(
            models.JobPage, await self._call("GET", "/jobs", params={"idempotency_key": idempotency_key})
        )
        return page.jobs[0] if page.jobs else None

    async def cancel(self, job_id: str) -> models.Job:
        """``POST /jobs/{job_id}/cancel``: the job after the cancel (a terminal job unchanged)."""
        return self._parse(models.Job, await self._call("POST", job_path(job_id) + "/cancel"))

    async def events(
        self,
        job_id: str,
        *,
        after: str | None = None,
        unacked: bool = False,
        limit: int | None = None,
        wait_ms: int | None = None,
    ) -> models.EventPage:
        """``GET /jobs/{job_id}/events``: one page of events.

        Args:
            after: exclusive cursor (an event id of this job).
            unacked: start after the later of ``after`` and the durable ack cursor.
            limit: page size (1..500, server default 200).
            wait_ms: long poll up to this long (0..30000) when no event is available.
        """
        params = {"after": after, "unacked": "1" if unacked else None, "limit": limit, "wait_ms": wait_ms}
        timeout = self.timeout_s + (wait_ms or 0) / 1000
        response = await self._call("GET", job_path(job_id) + "/events", params=params, timeout_s=timeout)
        return self._parse(models.EventPage, response)

    async def ack(self, job_id: str, ack_through: str) -> models.AckResult:
        """``POST /jobs/{job_id}/events/ack``: move the durable cursor forward to ``ack_through``."""
        response = await self._call("POST", job_path(job_id) + "/events/ack", json={"ack_through": ack_through})
        return self._parse(models.AckResult, response)

    async def follow(
        self,
        job_id: str,
        *,
        after: str | None = None,
        unacked: bool = False,
        ack: bool = False,
        wait_ms: int = DEFAULT_WAIT_MS,
        limit: int | None = None,
    ) -> AsyncIterator[models.Event]:
        """Yield the job's events (long polling) until its terminal event, inclusive.

        Args:
            after / unacked: where to start (default: from the first event).
            ack: acknowledge each page once its events were consumed.
            wait_ms: long-poll wait per request.
        """
        cursor = after
        from_ack = unacked
        while True:
            page = await self.events(job_id, after=cursor, unacked=from_ack, limit=limit, wait_ms=wait_ms)
            from_ack = False
            for event in page.events:
                yield event
            if page.events:
                cursor = page.events[-1].event_id
                if ack:
                    await self.ack(job_id, cursor)
                if page.events[-1].type in models.TERMINAL_EVENT_TYPES.values():
                    return
            elif (await self.get_job(job_id)).terminal:
                return  # the terminal event was before the cursor

    async def wait(self, job_id: str, *, wait_ms: int = DEFAULT_WAIT_MS) -> models.Job:
        """Follow the job to its terminal event and return the job as it ended."""
        last: models.Event | None = None
        async for event in self.follow(job_id, wait_ms=wait_ms):
            last = event
        if last is not None and last.payload is not None and last.payload.job is not None:
            return last.payload.job
        return await self.get_job(job_id)
