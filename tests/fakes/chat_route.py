"""The ``chat`` route kind (test-only): posts a work to a room of the fake chat service of
``tests/fakes/chat.py``.

Everything a new route kind needs, in one module outside curaflow: its config model
(:class:`ChatRouteConfig`, which declares the route's one destination), its
implementation (:class:`ChatRoute`: one JSON post per delivery, the delivery's
idempotency key as the service's ``Idempotency-Key``, the answer classified) and its
registration (the last line). A stack names this module in ``route_modules`` and
configures a route as ``[routes.<name>] kind = "chat"``.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any, Literal

import httpx
from pydantic import Field, SecretStr

from curaflow.domain.reasons import TerminalReason
from curaflow.outbound import ROUTE_ANSWER_KEEP_BYTES, Destinations, Limits, Outbound, configured
from curaflow.routes.base import DeliveryReceipt, DeliveryRequest, RouteError, RouteSettings, header_value
from curaflow.routes.caption import build_caption
from curaflow.routes.registry import RouteContext, register_route

#: The one answer by which the service blames the work itself (its content); every other
#: refusal — its token, its room, a status never seen — is the route's.
WORK_STATUSES = (422,)


class ChatRouteConfig(RouteSettings):
    """``[routes.<name>]`` of kind ``chat``.

    Attributes:
        url: the service's base URL (the route's only destination).
        room: the room to post into.
        token: the service's bearer token.
        timeout_ms: total time of one request.
    """

    kind: Literal["chat"] = "chat"
    url: str
    room: str
    token: SecretStr
    timeout_ms: int = Field(default=10_000, ge=100)

    def destinations(self) -> Destinations:
        """The service's origin."""
        return configured(self.url)


class ChatRoute:
    """One room of the chat service (the :class:`~curaflow.routes.base.Route` protocol)."""

    kind = "chat"
    resend_safe = True  # the service answers a key it already posted with that post

    def __init__(self, name: str, config: ChatRouteConfig, out: Outbound) -> None:
        self.name = name
        self._url = f"{config.url.rstrip('/')}/api/rooms/{config.room}/posts"
        self._token = config.token.get_secret_value()
        self._out = out
        self._limits = Limits(time_s=config.timeout_ms / 1000, keep_bytes=ROUTE_ANSWER_KEEP_BYTES)

    async def deliver(self, request: DeliveryRequest) -> DeliveryReceipt:
        """Post the work's pages with its caption.

        Raises:
            RouteError: ``delivery_failed`` (retried; ambiguous once the request may
                have left; a 429 rate-limited, without a stated delay), ``delivery_rejected``
                (422: the work), ``route_refused`` (any other answer).
        """
        body = {
            "text": build_caption(request.work, 1000),
            "images": [
                {
                    "name": Path(f.path).name,
                    "type": f.mime,
                    "data": base64.b64encode(Path(f.path).read_bytes()).decode(),
                }
                for f in sorted(request.artifact.files, key=lambda f: f.page)
            ],
        }
        headers = {
            "authorization": f"Bearer {self._token}",
            "content-type": "application/json",
            "idempotency-key": header_value(request.idempotency_key),
        }
        try:
            response = await self._out.request(
                "POST", self._url, content=json.dumps(body).encode(), headers=headers, limits=self._limits
            )
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as err:
            raise RouteError(TerminalReason.DELIVERY_FAILED, f"chat: {type(err).__name__}; not sent") from err
        except httpx.HTTPError as err:
            raise RouteError(TerminalReason.DELIVERY_FAILED, f"chat: {type(err).__name__}", ambiguous=True) from err
        status = response.status_code
        if status in (200, 201):
            post = _post(response)
            return DeliveryReceipt(remote_id=post.get("id"), remote_status=str(status))
        answer = f"HTTP {status}"
        if status == 429 or 500 <= status < 600:
            raise RouteError(TerminalReason.DELIVERY_FAILED, f"chat answered {answer}", rate_limited=status == 429)
        if status in WORK_STATUSES:
            raise RouteError(TerminalReason.DELIVERY_REJECTED, f"chat answered {answer}", permanent=True, answer=answer)
        raise RouteError(TerminalReason.ROUTE_REFUSED, f"chat answered {answer}", permanent=True, answer=answer)


def _post(response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        return {}
    post = body.get("post") if isinstance(body, dict) else None
    return {"id": str(post["id"])} if isinstance(post, dict) and "id" in post else {}


def build_chat_route(name: str, config: ChatRouteConfig, context: RouteContext) -> ChatRoute:
    return ChatRoute(name, config, context.http)


register_route("chat", ChatRouteConfig, build_chat_route)
