"""What a chaos scenario records: each job it submitted (:class:`Tracked`), each fault
(:class:`Fault`) and its result with the audit's checks (:class:`ScenarioResult`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class Tracked:
    """A job the scenario submitted.

    Attributes:
        admitted_ms: when the admission was acknowledged (202/200, or the Temporal start returned).
        attempts: submissions until it was (retries after a 5xx or no answer).
        cancel: how it was cancelled (``http``, ``signal``, ``temporal``), if it was.
        cancel_ms / cancel_answer: when the cancel was sent, and what came back.
    """

    job_id: str
    key: str
    target_id: str
    via: str
    admitted_ms: int = 0
    attempts: int = 0
    probe: bool = False
    cancel: str | None = None
    moment: str | None = None
    cancel_ms: int | None = None
    cancel_answer: str | None = None


@dataclass
class Fault:
    """One fault: injected at ``down_ms``, the service back at ``up_ms`` (epoch ms).

    Attributes:
        ready_s: from ``up_ms`` until every process answered ``/ready`` 200.
        probe: the job submitted as soon as the service was back.
        first_job_s: from ``up_ms`` until that job was terminal.
        owners_s: from ``up_ms`` until every account had one source-queue owner and every
            other worker was its standby (``pg_hang``).
        owners: the workers' source-queue entries then (worker → account → detail).
    """

    kind: str
    down_ms: int
    up_ms: int = 0
    ready_s: float | None = None
    probe: str | None = None
    first_job_s: float | None = None
    owners_s: float | None = None
    owners: dict[str, dict[str, str]] = field(default_factory=dict)


@dataclass
class ScenarioResult:
    """Everything one scenario measured (the table's column and the JSON's entry)."""

    name: str
    plan: dict[str, Any]
    seconds: float = 0.0
    faults: list[Fault] = field(default_factory=list)
    kills: int = 0
    kill_ready_s: list[float] = field(default_factory=list)
    submitted: int = 0
    via_temporal: int = 0
    refused: int = 0
    terminal: int = 0
    stuck: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    statuses: dict[str, int] = field(default_factory=dict)
    job_seconds: dict[str, Any] = field(default_factory=dict)
    slowest: list[dict[str, Any]] = field(default_factory=list)
    after_fault: int = 0
    after_fault_not_succeeded: list[dict[str, Any]] = field(default_factory=list)
    not_succeeded: list[dict[str, Any]] = field(default_factory=list)
    cancels: dict[str, int] = field(default_factory=dict)
    cancel_moments: dict[str, int] = field(default_factory=dict)
    cancel_outcomes: dict[str, int] = field(default_factory=dict)
    cancelled_landed: dict[str, int] = field(default_factory=dict)
    unexpected_status: list[dict[str, Any]] = field(default_factory=list)
    late_steps: list[dict[str, Any]] = field(default_factory=list)
    audit: dict[str, Any] = field(default_factory=dict)
    exits: list[dict[str, Any]] = field(default_factory=list)
    stuck_details: list[dict[str, Any]] = field(default_factory=list)
    edges: dict[str, Any] = field(default_factory=dict)
    edge_findings: dict[str, list[Any]] = field(default_factory=dict)
    owner_findings: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None

    def checks(self) -> dict[str, int]:
        """Every figure that must be 0 for the scenario to pass."""
        a = self.audit
        return {
            "lost": len(self.lost),
            "stuck": len(self.stuck),
            "cross_job_duplicates": int(a.get("cross_job_duplicates", 0)),
            "missing_at_route": int(a.get("missing_at_route", 0)),
            "phantoms": int(a.get("phantoms", 0)),
            "understated": int(a.get("understated", 0)),
            "sends_after_cancel": int(a.get("sends_after_cancel", 0)),
            "late_steps": len(self.late_steps),
            "after_fault_not_succeeded": len(self.after_fault_not_succeeded),
            "unexpected_status": len(self.unexpected_status),
            **{check: len(found) for check, found in self.edge_findings.items()},
            "owners": len(self.owner_findings),
            "errors": 1 if self.error else 0,
        }

    @property
    def ok(self) -> bool:
        return not any(self.checks().values())

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["checks"] = self.checks()
        data["ok"] = self.ok
        return data
