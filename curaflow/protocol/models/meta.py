"""What the producer says of itself: capabilities (its job types and live budgets), health
and readiness."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from curaflow.protocol.models.base import AnswerShape


class JobTypeDeclaration(AnswerShape):
    """``$defs/JobTypeDeclaration``: one job type and the live budgets (ms)."""

    name: str
    params_schema: str
    result_schema: str
    features: list[str] = Field(default_factory=list)
    #: curaflow's extension member: features outside v1's closed ``features`` enum
    #: (``target_selector``); empty from a producer that does not send it.
    extended_features: list[str] = Field(default_factory=list)
    queued_timeout_ms: int
    stall_timeout_ms: int
    heartbeat_interval_ms: int
    default_deadline_ms: int


class Capabilities(AnswerShape):
    """``$defs/Capabilities``: built from the live config on every call."""

    protocol_versions: list[str]
    job_types: list[JobTypeDeclaration]
    server_time: int


class Health(AnswerShape):
    """``GET /health`` answer."""

    status: Literal["ok"] = "ok"
    service: str = "curaflow"
    version: str
    commit: str = "dev"


class ReadinessCheck(AnswerShape):
    """``$defs/ReadinessCheck``: one named check of ``GET /ready``."""

    ok: bool
    detail: str | None = None
    elapsed_ms: float | None = None


class Readiness(AnswerShape):
    """``GET /ready`` answer (``$defs/Readiness``): 200 when every check is ok, else 503."""

    status: Literal["ready", "not_ready"]
    service: str
    checks: dict[str, ReadinessCheck]
