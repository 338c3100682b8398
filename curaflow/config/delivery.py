"""The ``[delivery]`` section: retry budgets of deliveries and source calls, route refusals
and route-wide rate limits."""

from __future__ import annotations

from pydantic import Field, field_validator

from curaflow.config.base import Section

#: ``delivery.route_rate_limit_cap_ms``'s default, floor and ceiling (ms): see
#: :class:`DeliverySettings`.
ROUTE_RATE_LIMIT_CAP_MS = 3_600_000
ROUTE_RATE_LIMIT_CAP_FLOOR_MS = 60_000
ROUTE_RATE_LIMIT_CAP_CEILING_MS = 86_400_000
#: ``delivery.route_pause_ms``'s default, floor and ceiling (ms): see :class:`DeliverySettings`.
ROUTE_PAUSE_MS = 3_600_000
ROUTE_PAUSE_FLOOR_MS = 1_000
ROUTE_PAUSE_CEILING_MS = 86_400_000


class DeliverySettings(Section):
    """Retry budget of a delivery and of source calls (Temporal retry policies), and what
    a route's refusals cost (:mod:`curaflow.ledger.route_gates`).

    Attributes:
        retry_initial_interval_ms / retry_max_interval_ms: backoff of every step's
            Temporal retry policy (doubling, capped). Temporal refuses a policy whose
            maximum interval is below its initial one, so the first above the second is
            refused at load (:data:`curaflow.config.checks.ORDERED_SETTINGS`).
        max_connections: connection pool size of each route's HTTP client (and of the
            callback pushes'); every route has its own pool, apart from the source's.
        refusal_streak: different works a route may refuse in a row with the same
            answer before curaflow pauses it as broken (and lifts those refusals).
        route_pause_ms: how long such a pause lasts (``curaflow routes resume`` lifts it
            sooner). Default 1 h, at least 1 s, at most 24 h: the ceiling of
            ``route_rate_limit_cap_ms`` and of a work's hold (``route_hold_ms``) — the
            longest curaflow keeps anything from a route on its own. The pause rests a
            route someone has to fix; once it ends, deliveries try the route again and a
            route still broken is paused again after ``refusal_streak`` refusals. A
            value beyond a day is a typo (a day with a zero too many is ten days) that
            held the route, silently, until someone resumed it: refused at load.
        route_rate_limit_cap_ms: the longest a route-wide rate limit (Discord's
            ``"global": true``, a 429 that is not the platform's own answer: a proxy's,
            Cloudflare's) holds the route and the send that met it, whatever delay it
            stated (:func:`curaflow.ledger.route_gates.rate_limited`), and the longest a
            route's cooldown read from the ledger still holds (one written before the
            cap, or under a larger one, is brought back to it by the claim that reads it:
            :func:`curaflow.ledger.deliveries.claim_send`); past it a send costs one
            attempt, answered again if the limit still runs. A receiver's 5xx stating a
            ``Retry-After`` (unavailable: every send of the route meets it) is waited at
            most this long too (2026-12-07; before, as stated, up to a week). A
            limit of one send (a Telegram flood wait) is waited as stated. Default 1 h,
            at least 1 min (a shorter cap would ask again into a limit stated longer,
            each early 429 prolonging it: Discord counts them toward its invalid-request
            limit), at most 24 h (beyond, a route-wide limit outlasts the jobs it holds).
        route_hold_ms: how long a work is held back from a route after the route
            refused the request (twice as long for each hold in a row, at most 24 h);
            0: never held.
    """

    max_attempts: int = Field(default=12, ge=1)
    retry_initial_interval_ms: int = Field(default=2_000, ge=10)
    retry_max_interval_ms: int = Field(default=300_000, ge=10)
    source_max_attempts: int = Field(default=10, ge=1)
    max_connections: int = Field(default=100, ge=1)
    refusal_streak: int = Field(default=3, ge=2)
    route_pause_ms: int = ROUTE_PAUSE_MS
    route_rate_limit_cap_ms: int = ROUTE_RATE_LIMIT_CAP_MS
    route_hold_ms: int = Field(default=3_600_000, ge=0)

    @field_validator("route_pause_ms")
    @classmethod
    def _pause_between_floor_and_ceiling(cls, value: int) -> int:
        if not ROUTE_PAUSE_FLOOR_MS <= value <= ROUTE_PAUSE_CEILING_MS:
            raise ValueError(
                f"{value} is not between {ROUTE_PAUSE_FLOOR_MS} (1 s) and {ROUTE_PAUSE_CEILING_MS} (24 h) "
                "milliseconds: how long a route that keeps refusing stays paused (beyond a day, longer than "
                "curaflow keeps anything from a route on its own; `curaflow routes resume` lifts it sooner)"
            )
        return value

    @field_validator("route_rate_limit_cap_ms")
    @classmethod
    def _cap_between_floor_and_ceiling(cls, value: int) -> int:
        if not ROUTE_RATE_LIMIT_CAP_FLOOR_MS <= value <= ROUTE_RATE_LIMIT_CAP_CEILING_MS:
            raise ValueError(
                f"{value} is not between {ROUTE_RATE_LIMIT_CAP_FLOOR_MS} (1 min) and "
                f"{ROUTE_RATE_LIMIT_CAP_CEILING_MS} (24 h) milliseconds: the longest a route-wide rate limit "
                "holds a route (below a minute, sends ask again into a limit stated longer; beyond a day, "
                "it outlasts the jobs it holds)"
            )
        return value
