"""Tracing (OpenTelemetry): the process's tracer provider and what every Temporal client adds.

* :func:`setup_tracing` installs a global OpenTelemetry tracer provider exporting OTLP
  over HTTP (``observability.otlp_endpoint``, else ``OTEL_EXPORTER_OTLP_ENDPOINT``);
  once it ran, :func:`client_interceptors` returns Temporal's ``TracingInterceptor`` so
  every client of the process (API, CLI, worker) propagates the trace context through
  workflow starts, workflows and activities, and :func:`instrument_app` adds the
  FastAPI instrumentation. We use the stable ``TracingInterceptor`` rather than the
  experimental ``OpenTelemetryPlugin`` of SDK 1.35: its spans are visible immediately
  (a running job's trace shows up before the job ends).

It sits in the bottom layer (DESIGN.md "Layers") because :mod:`curaflow.temporal.connection`
asks it for the client interceptors; it takes plain values, not the settings.
"""

from __future__ import annotations

from typing import Any

from curaflow.observability.logs import get_logger

log = get_logger("curaflow.observability.tracing")
_state: dict[str, Any] = {"tracing": False, "provider": None}


def setup_tracing(service: str, *, enabled: bool, otlp_endpoint: str | None = None, exporter: Any = None) -> bool:
    """Install the process's tracer provider when tracing is enabled.

    Args:
        service: ``service.name`` of the resource (``curaflow-api``, ``curaflow-worker``).
        enabled: ``observability.tracing``.
        otlp_endpoint: ``observability.otlp_endpoint`` (``http://collector:4318``), the
            OTLP/HTTP base URL; None → ``OTEL_EXPORTER_OTLP_ENDPOINT``.
        exporter: a span exporter to use instead of OTLP (tests pass an in-memory one;
            it is attached with a simple, synchronous processor).

    Returns:
        True when tracing is active in this process (idempotent: a second call only
        adds ``exporter``).
    """
    if not enabled and exporter is None:
        return False
    from opentelemetry import trace
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

    provider = _state["provider"]
    if provider is None:
        provider = TracerProvider(resource=Resource.create({"service.name": service}))
        if exporter is None:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            endpoint = otlp_endpoint
            otlp = OTLPSpanExporter(endpoint=f"{endpoint.rstrip('/')}/v1/traces") if endpoint else OTLPSpanExporter()
            provider.add_span_processor(BatchSpanProcessor(otlp))
            log.info("tracing.enabled", service=service, otlp_endpoint=endpoint or "(OTEL_EXPORTER_OTLP_ENDPOINT)")
        trace.set_tracer_provider(provider)
        _state["provider"] = provider
    if exporter is not None:
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    _state["tracing"] = True
    return True


def tracing_enabled() -> bool:
    """True once :func:`setup_tracing` activated tracing in this process."""
    return bool(_state["tracing"])


def client_interceptors() -> list[Any]:
    """Interceptors for every Temporal client of this process (tracing when enabled)."""
    if not tracing_enabled():
        return []
    from temporalio.contrib.opentelemetry import TracingInterceptor

    return [TracingInterceptor()]


def instrument_app(app: Any) -> None:
    """Add the FastAPI OpenTelemetry instrumentation to ``app`` when tracing is enabled."""
    if not tracing_enabled():
        return
    from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

    FastAPIInstrumentor.instrument_app(app, tracer_provider=_state["provider"], excluded_urls="health,metrics")


def flush_tracing() -> None:
    """Export pending spans (at shutdown)."""
    provider = _state["provider"]
    if provider is not None:
        provider.force_flush()
