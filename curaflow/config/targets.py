"""The ``[[targets]]`` entries: what to find and where to send it."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from curaflow.config.base import ID_PATTERN, Section
from curaflow.domain.messages import TargetFilters, TargetQuery


class TargetConfig(Section):
    """A configured target: what to find and where to send it.

    Attributes:
        id: ``[A-Za-z0-9_-]{1,64}``.
        routes: names of entries of ``[routes]``.
        accept_jobs: may serve protocol ``candidate_search`` jobs (an eligible target).
    """

    id: str
    account: str = "default"
    work_type: Literal["illustration"] = "illustration"
    query: TargetQuery = Field(default_factory=TargetQuery)
    filters: TargetFilters = Field(default_factory=TargetFilters)
    limit: int = Field(default=1, ge=1, le=100)
    scan_limit: int = Field(default=30, ge=1, le=100)
    storage_mode: Literal["persistent", "cache"] = "persistent"
    routes: list[str] = Field(default_factory=list)
    accept_jobs: bool = True

    @field_validator("id")
    @classmethod
    def _id_shape(cls, value: str) -> str:
        if not ID_PATTERN.match(value):
            raise ValueError("target id must match [A-Za-z0-9_-]{1,64}")
        return value
