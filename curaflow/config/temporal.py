"""The ``[temporal]`` section: where the Temporal service is and how workers use it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import Field, PrivateAttr, field_validator, model_validator

from curaflow.config.base import Section, SettingsProblem
from curaflow.domain.text import setting_path

if TYPE_CHECKING:
    from curaflow.temporal.profile import TemporalConnection


class TemporalSettings(Section):
    """Where the Temporal service is. ``address`` None → the embedded dev server.

    The connection is the SDK's environment configuration (:mod:`curaflow.temporal.profile`):
    ``TEMPORAL_*`` variables over these keys over a ``temporal.toml`` profile. After loading,
    ``address`` and ``namespace`` hold the resolved values and :attr:`connection` the TLS,
    API key and gRPC metadata every client of the process uses.

    Attributes:
        profile: the ``temporal.toml`` profile to read when ``TEMPORAL_PROFILE`` is not set.
        config_file: the ``temporal.toml`` file when ``TEMPORAL_CONFIG_FILE`` is not set
            (else the SDK's default location, when it exists).
        graceful_shutdown_ms: on SIGTERM, how long a worker lets its running activities
            (a send in flight) finish before the SDK cancels them; the ledger pool closes
            only after they all ended. Keep it below the supervisor's stop timeout
            (compose: ``stop_grace_period`` 60 s).
        namespace: the Temporal namespace; workers (and ``curaflow temporal-setup``)
            register it when it does not exist and add curaflow's search attributes.
        namespace_retention_days: retention of closed executions in a namespace curaflow
            registers (an existing namespace keeps its own).
        setup_timeout_ms: how long a worker waits for Temporal to accept the namespace
            and search attributes before it exits with an error.
        sticky_schedule_to_start_ms: how long a workflow task waits on a worker's sticky
            queue before any worker may take it; after a worker dies, its jobs' workflows
            stall this long, so keep it short.
        workflow_sandbox: run workflows in the SDK's sandbox (import isolation and its
            checks for non-deterministic calls) on this worker. The sandbox checks workflow
            *code*, and curaflow's workflow code is fixed at release: the suite runs every
            workflow behaviour and every recorded history in the sandbox
            (``tests/workflow``, the replay tests), so a production worker skips it by
            default — it is the largest single cost of the worker per job (about 10–17 ms
            of CPU: each execution re-imports its workflow module and each workflow task
            passes through the sandbox's import hooks; docs/performance.md). ``true``
            brings it back (a worker running changed workflow code).
        max_cached_workflows: job executions a worker keeps in memory between their
            workflow tasks; the rest are replayed from history when they next wake. This
            bounds a worker's memory whatever the number of jobs in flight (docs/performance.md:
            about 0.25 MiB per cached job).
        nexus_endpoint: the Nexus endpoint of the jobs' service (callers in other
            namespaces reach ``start_job`` / ``cancel_job`` through it), created by
            ``curaflow temporal-setup`` and ``curaflow dev`` targeting this namespace and
            ``task_queue``; empty: none is created (docs/temporal.md "From another namespace").
        deployment_name / build_id: both set → Temporal Worker Versioning: the main and
            route task queues' workers poll as Worker Deployment Version
            ``<deployment_name>.<build_id>`` and every workflow they start is PINNED to it
            (finishes on the workers of the build that started it). The source-queue
            owner stays unversioned, so its activities serve every version. Neither set
            (default) → unversioned workers (``workflow.patched`` alone). One set without
            the other is refused. docs/operations.md "Upgrading".
    """

    address: str | None = None
    namespace: str = "default"
    namespace_retention_days: int = Field(default=7, ge=1, le=3650)
    setup_timeout_ms: int = Field(default=60_000, ge=1_000)
    task_queue: str = "curaflow"
    nexus_endpoint: str = Field(default="curaflow-jobs", pattern=r"^$|^[A-Za-z_][A-Za-z0-9_-]*$")
    sticky_schedule_to_start_ms: int = Field(default=5_000, ge=100)
    max_cached_workflows: int = Field(default=1000, ge=0)
    workflow_sandbox: bool = False
    profile: str | None = None
    config_file: Path | None = None
    graceful_shutdown_ms: int = Field(default=30_000, ge=0)
    deployment_name: str | None = Field(default=None, min_length=1)
    build_id: str | None = Field(default=None, min_length=1)

    _connection: Any = PrivateAttr(default=None)

    @field_validator("config_file", mode="before")
    @classmethod
    def _path_given(cls, value: Any) -> Any:
        return setting_path(value)

    @model_validator(mode="after")
    def _versioning_complete(self) -> TemporalSettings:
        if (self.deployment_name is None) != (self.build_id is None):
            raise SettingsProblem(
                "temporal.deployment_name and temporal.build_id go together (Worker Versioning)",
                [("deployment_name",), ("build_id",)],
            )
        return self

    @model_validator(mode="after")
    def _resolve_connection(self) -> TemporalSettings:
        from curaflow.temporal.profile import resolve_connection

        connection = resolve_connection(
            self.address,
            self.namespace if "namespace" in self.model_fields_set else None,
            profile=self.profile,
            config_file=self.config_file,
        )
        self.address, self.namespace = connection.address, connection.namespace
        self._connection = connection
        return self

    @property
    def connection(self) -> TemporalConnection:
        """The resolved :class:`curaflow.temporal.profile.TemporalConnection`, at the
        current ``address`` (a copy of the settings may point at another server)."""
        from dataclasses import replace

        return replace(self._connection, address=self.address, namespace=self.namespace)
