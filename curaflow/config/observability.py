"""The ``[observability]`` section: logs, metrics and tracing."""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator

from curaflow.config.base import Section

#: The log levels a process takes (``logging``'s names; ``observability.log_level``).
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
#: The longest ``observability.ledger_gauges_interval_ms`` (1 min). ``CuraflowLedgerGaugesStale``
#: pages on a reading older than 2 minutes for 2 minutes, and a healthy process's reading
#: ages to its interval plus two reads' time before the next one lands: at most a minute
#: keeps it young enough that one failed read does not page either. Until 2026-12-07 any
#: interval up to a year loaded, and the only process reading every 5 minutes paged
#: "curaflow cannot read its ledger" every 5 minutes while its ledger answered every read
#: (``curaflow.config.checks.OWN_CEILINGS``).
MAX_LEDGER_GAUGES_INTERVAL_MS = 60_000


class ObservabilitySettings(Section):
    """Logs, metrics and tracing.

    Attributes:
        log_level: one of :data:`LOG_LEVELS`, in any case (kept upper case); another word
            is refused at load (until 2026-12-06 a worker failed on it only as it started).
        metrics_port: a worker serves curaflow's Prometheus metrics on this port
            (``/metrics``); None → not served. The API serves them on its own port.
        temporal_metrics_port: a worker's Temporal SDK runtime serves its own Prometheus
            metrics (``temporal_*``) on this port; None → not exported.
        metrics_host: bind address of both metrics endpoints.
        otlp_endpoint: OTLP/HTTP base URL of the trace collector (``http://otel:4318``);
            None → ``OTEL_EXPORTER_OTLP_ENDPOINT`` or the exporter's default.
        tracing: enable OpenTelemetry tracing (FastAPI + Temporal interceptor).
        ledger_gauges_interval_ms: how often each process re-reads the ledger gauges
            (:mod:`curaflow.ledger.gauges`), 100 ms … :data:`MAX_LEDGER_GAUGES_INTERVAL_MS`.
        ledger_gauges_window_ms: the window of ``curaflow_deliveries`` (24 h); the lookback of
            ``curaflow_deliveries_last_seconds`` and ``curaflow_schedule_missed_last_seconds``,
            never less than 2 h (the alerts' windows: :data:`curaflow.ledger.gauges.LAST_LOOKBACK_MS`).
        ledger_statement_metrics: a worker counts every ledger statement and transaction
            by the step that sent it (``curaflow_ledger_statements_total`` /
            ``curaflow_ledger_transactions_total``, :mod:`curaflow.ledger.statements`);
            a few microseconds per statement, so off by default (``curaflow bench`` turns
            it on).
    """

    log_level: str = "INFO"
    log_json: bool = True
    metrics_port: int | None = Field(default=None, ge=1, le=65535)
    temporal_metrics_port: int | None = Field(default=None, ge=1, le=65535)
    metrics_host: str = "0.0.0.0"
    otlp_endpoint: str | None = None
    tracing: bool = False
    ledger_gauges_interval_ms: int = Field(default=15_000, ge=100)
    ledger_gauges_window_ms: int = Field(default=86_400_000, ge=60_000)
    ledger_statement_metrics: bool = False

    @field_validator("log_level", mode="before")
    @classmethod
    def _known_level(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        if value.strip().upper() not in LOG_LEVELS:
            raise ValueError(f"log level {value!r}: one of {', '.join(LOG_LEVELS)}")
        return value.strip().upper()
