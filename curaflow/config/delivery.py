"""The ``[delivery]`` section: retry budgets of deliveries and source calls, route refusals."""

from __future__ import annotations

from pydantic import Field

from curaflow.config.base import Section


class DeliverySettings(Section):
    """Retry budget of a delivery and of source calls (Temporal retry policies), and what
    a route's refusals cost (:mod:`curaflow.ledger.route_gates`).

    Attributes:
        max_connections: connection pool size of each route's HTTP client (and of the
            callback pushes'); every route has its own pool, apart from the source's.
        refusal_streak: different works a route may refuse in a row with the same
            answer before curaflow pauses it as broken (and lifts those refusals).
        route_pause_ms: how long such a pause lasts (``curaflow routes resume`` lifts it
            sooner).
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
    route_pause_ms: int = Field(default=3_600_000, ge=1_000)
    route_hold_ms: int = Field(default=3_600_000, ge=0)
