"""The ``webhook`` route: one signed HTTP POST per delivery (Standard Webhooks 1.0).

Request: ``POST <url>`` with a JSON body (the work, the delivery's identity and the
artifact files inlined as base64) and the headers ``webhook-id`` (the delivery's
idempotency key, stable across retries; characters outside printable ASCII, and ``%``,
are percent-encoded as UTF-8), ``webhook-timestamp`` (Unix seconds) and
``webhook-signature`` (``v1,<base64 HMAC-SHA256>`` over ``<id>.<timestamp>.<body>``),
signed with the ``standardwebhooks`` library. Receivers verify with the same library.

Receiver contract (the answer decides the cell, :func:`classify`; the work is blamed
only when the receiver says the work is the problem):

=====================  =======================================================
2xx                     delivered — unless the JSON body reports ``status``
                        ``rejected`` (the work refused for good), ``failed`` /
                        ``error`` (the receiver's own failure: ``route_refused``,
                        the work held back, never refused) or ``pending`` /
                        ``queued`` (retried with the same key)
409                     the receiver already had it: duplicate
415, 422                the receiver refuses this work (its type, its content):
                        ``delivery_rejected``, never retried
429, 5xx                retried with backoff (``Retry-After`` honoured; a 429
                        without it waits the backoff of
                        :func:`curaflow.domain.ratelimit.retry_delay_ms`); a gateway
                        error (502, 504) may have reached the receiver: retried
                        with the same ``webhook-id`` and remembered as possibly
                        delivered
any other answer        the receiver refuses the request itself (401, 403, 404,
(400, 401, 403, 404,    410, 413 — its credentials, its address, its size limit —,
410, 413, any other     a status it never documented, a redirect, never followed):
4xx, any 3xx)           ``route_refused`` (the route's failure: the work is not used
                        up), never retried
connect error, connect  retried (the request never left: not ambiguous)
or pool timeout
timeout after sending   retried with the same ``webhook-id`` (receivers dedupe)
a status other than     that status: the body plays no part in it
2xx whose body broke    (:func:`~curaflow.routes.base.refusal_answered`)
(cut, undecodable,
endless)
=====================  =======================================================
"""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import httpx
from pydantic import Field, SecretStr, field_validator
from standardwebhooks.webhooks import Webhook

from curaflow.domain.ratelimit import parse_retry_after
from curaflow.domain.reasons import TerminalReason
from curaflow.outbound import ROUTE_ANSWER_KEEP_BYTES, Destinations, Limits, Outbound, as_outbound, configured
from curaflow.routes.base import (
    SEND_AGAIN_STATUSES,
    DeliveryReceipt,
    DeliveryRequest,
    RouteError,
    RouteSettings,
    header_value,
    read_pages,
    refusal_answered,
    remote_id_of,
)
from curaflow.routes.registry import RouteContext, register_route


class WebhookRouteConfig(RouteSettings):
    """HTTP POST signed per Standard Webhooks (``webhook-id`` = delivery idempotency key).

    Attributes:
        secret: ``whsec_<base64>`` signing secret (or any string, used as raw bytes).
        timeout_ms: total time of one request (connect, send, the answer); the
            answer is read up to 256 KiB
            (:data:`~curaflow.outbound.ROUTE_ANSWER_KEEP_BYTES`).
        include_files: inline each artifact file in the JSON body, base64-encoded
            (``files[].data_base64``); without it the body only describes the files.
    """

    kind: Literal["webhook"] = "webhook"
    url: str
    secret: SecretStr
    timeout_ms: int = Field(default=30_000, ge=100)
    include_files: bool = True

    @field_validator("secret")
    @classmethod
    def _secret_shape(cls, value: SecretStr) -> SecretStr:
        from standardwebhooks.webhooks import Webhook

        try:
            Webhook(value.get_secret_value())
        # Whatever the library raises means the secret cannot sign: its classes are not all
        # ValueErrors (an empty secret raised EmptyWebhookSecretError, an Exception: a
        # traceback instead of a configuration error, until 2026-12-06).
        except Exception:  # noqa: BLE001 - any refusal of the library is this refusal
            raise ValueError("webhook secret must be 'whsec_' followed by base64") from None
        return value

    def destinations(self) -> Destinations:
        """The receiver's origin (``url``)."""
        return configured(self.url)


#: Statuses by which a receiver says the work itself is the problem: its type (415
#: Unsupported Media Type), its content (422 Unprocessable Content).
WORK_STATUSES = (415, 422)

#: A 2xx ``status`` by which a receiver refuses the work itself: the only word that names
#: the act (DESIGN.md "Safe defaults at the edges": a 2xx saying ``rejected``).
REJECTED_WORDS = {"rejected"}
#: A 2xx ``status`` saying only that something failed: no work is named — JSend's
#: ``error`` is the server's own failure, ``failed`` says no why — so it is the route's
#: (``route_refused``: the work held back, the refusal streak), never the work refused
#: for good (until 2026-12-05 both refused the work for good on the route).
FAILED_WORDS = {"failed", "error"}
PENDING_WORDS = {"pending", "queued"}


def build_body(request: DeliveryRequest, include_files: bool) -> dict[str, Any]:
    """The JSON body of a delivery (schema_version 1).

    Raises:
        RouteError: a page could not be read (:func:`~curaflow.routes.base.read_pages`:
            nothing sent, retried).
    """
    work = request.work
    files = []
    for f in request.artifact.files:
        entry: dict[str, Any] = {
            "name": Path(f.path).name,
            "page": f.page,
            "mime": f.mime,
            "bytes": f.bytes,
            "sha256": f.sha256,
            "width": f.width,
            "height": f.height,
        }
        if f.frame_delays_ms:  # an animation: each frame's delay, ms, in order
            entry["frame_delays_ms"] = f.frame_delays_ms
        if include_files:
            entry["data_base64"] = base64.b64encode(read_pages([f])[0]).decode()
        files.append(entry)
    return {
        "type": "curaflow.delivery",
        "schema_version": 1,
        "idempotency_key": request.idempotency_key,
        "job_id": request.job_id,
        "target_id": request.target_id,
        "route": request.route,
        "work": {
            "work_id": work.work_id,
            "work_type": work.work_type,
            "title": work.title,
            "url": work.url,
            "author": work.author,
            "tags": work.tags,
            "create_date": work.create_date,
            "page_count": work.page_count,
        },
        "files": files,
    }


class WebhookRoute:
    """Signed webhook delivery (see the module doc).

    Args:
        name: route name.
        url: the receiver URL.
        secret: ``whsec_<base64>`` signing secret.
        http: the route's outbound client (:class:`~curaflow.outbound.Outbound`; a
            plain ``httpx.AsyncClient`` is wrapped, limited to the route's URL).
        timeout_s: total time of one request, seconds (connect, send, answer;
            :class:`~curaflow.outbound.Limits`); the answer is read up to
            :data:`~curaflow.outbound.ROUTE_ANSWER_KEEP_BYTES`.
        include_files: inline the artifact bytes.
    """

    kind = "webhook"
    resend_safe = True

    def __init__(
        self,
        name: str,
        url: str,
        secret: str,
        http: httpx.AsyncClient | Outbound,
        *,
        timeout_s: float = 30.0,
        include_files: bool = True,
    ) -> None:
        self.name = name
        self.url = url
        self._signer = Webhook(secret)
        self._out = as_outbound(http, configured(url))
        self.timeout_s = timeout_s
        self.include_files = include_files

    async def deliver(self, request: DeliveryRequest) -> DeliveryReceipt:
        """POST the signed delivery and classify the answer.

        Raises:
            RouteError: see the receiver contract in the module doc.
        """
        body = json.dumps(build_body(request, self.include_files), ensure_ascii=False)
        now = datetime.now(UTC)
        message_id = header_value(request.idempotency_key)
        headers = {
            "content-type": "application/json",
            "webhook-id": message_id,
            "webhook-timestamp": str(int(now.timestamp())),
            "webhook-signature": self._signer.sign(message_id, now, body),
        }
        try:
            response = await self._out.request(
                "POST",
                self.url,
                content=body.encode(),
                headers=headers,
                limits=Limits(time_s=self.timeout_s, keep_bytes=ROUTE_ANSWER_KEEP_BYTES),
            )
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as err:
            # Nothing left: no connection (or no TLS session) to send it on.
            raise RouteError(TerminalReason.DELIVERY_FAILED, f"webhook: {type(err).__name__}; not sent") from err
        except httpx.HTTPError as err:
            refused = refusal_answered(err)  # a refusal whose body broke: its status is the answer
            if refused is None:
                what = "timeout" if isinstance(err, httpx.TimeoutException) else "transport"
                raise RouteError(
                    TerminalReason.DELIVERY_FAILED, f"webhook {what}: {type(err).__name__}", ambiguous=True
                ) from err
            response = refused
        status = response.status_code
        if status == 409:
            return DeliveryReceipt(duplicate=True, remote_status="409")
        if 200 <= status < 300:
            word, remote_id = self._business_status(response)
            if word in REJECTED_WORDS:
                raise RouteError(
                    TerminalReason.DELIVERY_REJECTED,
                    f"webhook answered {status} with status {word!r}",
                    permanent=True,
                    answer=f"HTTP 2xx status {word}",
                )
            if word in FAILED_WORDS:
                raise RouteError(
                    TerminalReason.ROUTE_REFUSED,
                    f"webhook answered {status} with status {word!r}: the receiver failed the request without "
                    "naming the work (its own error); fix the receiver, or answer 'rejected' / 422 for a work "
                    "it refuses",
                    permanent=True,
                    answer=f"HTTP 2xx status {word}",
                )
            if word in PENDING_WORDS:
                raise RouteError(TerminalReason.DELIVERY_FAILED, f"webhook answered {status} with status {word!r}")
            return DeliveryReceipt(remote_id=remote_id, remote_status=str(status))
        raise classify(status, response.headers.get("retry-after"))

    @staticmethod
    def _business_status(response: httpx.Response) -> tuple[str | None, str | None]:
        if "json" not in response.headers.get("content-type", ""):
            return None, None
        try:
            data = response.json()
        except (ValueError, RecursionError):  # not JSON; nested deeper than the parser recurses
            return None, None
        if not isinstance(data, dict):
            return None, None
        word = data.get("status")
        remote = data.get("id") or data.get("remote_id")
        return (str(word).lower() if isinstance(word, str) else None), remote_id_of(remote)


def classify(status: int, retry_after: str | None) -> RouteError:
    """The failure a receiver's answer other than 2xx and 409 means (the module's
    receiver contract): 429 → rate limited (its stated delay, or none); 5xx and HTTP's
    own "send it again" (:data:`~curaflow.routes.base.SEND_AGAIN_STATUSES`: 408, 425) →
    retried (502 / 504 ambiguous); :data:`WORK_STATUSES` → ``delivery_rejected`` (the work);
    anything else → ``route_refused`` (the route: the work is not used up)."""
    if status == 429 or 500 <= status < 600 or status in SEND_AGAIN_STATUSES:
        return RouteError(
            TerminalReason.DELIVERY_FAILED,
            f"webhook answered HTTP {status}",
            retry_after_s=parse_retry_after(retry_after),
            rate_limited=status == 429,
            ambiguous=status in (502, 504),
        )
    if status in WORK_STATUSES:
        return RouteError(
            TerminalReason.DELIVERY_REJECTED,
            f"webhook answered HTTP {status}: the receiver refuses this work",
            permanent=True,
            answer=f"HTTP {status}",
        )
    return RouteError(
        TerminalReason.ROUTE_REFUSED,
        f"webhook answered HTTP {status}: the receiver refused the request (its address, credentials or limits, "
        "or an answer curaflow does not know; a redirect is never followed); fix the route",
        permanent=True,
        answer=f"HTTP {status}",
    )


def build_webhook_route(name: str, config: WebhookRouteConfig, context: RouteContext) -> WebhookRoute:
    """The ``webhook`` route ``name`` on the route's own client."""
    return WebhookRoute(
        name,
        config.url,
        config.secret.get_secret_value(),
        context.http,
        timeout_s=config.timeout_ms / 1000,
        include_files=config.include_files,
    )


register_route("webhook", WebhookRouteConfig, build_webhook_route)
